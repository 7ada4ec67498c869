#include "dpdk/eal_args.h"

#include <stdexcept>

namespace exo::dpdk {
namespace {

// An lcore id: digits only, at most kMaxLcoreId (so neither std::stoul's out_of_range nor an
// overflowing range count can happen on a config typo such as "0-99999999999").
unsigned parse_uint(const std::string& s, const std::string& whole) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("lcores: bad core list '" + whole + "'");
  unsigned v = 0;
  for (char ch : s) {
    v = v * 10 + static_cast<unsigned>(ch - '0');
    if (v > kMaxLcoreId)
      throw std::invalid_argument("lcores: core id over " + std::to_string(kMaxLcoreId) + " in '" +
                                  whole + "'");
  }
  return v;
}

}  // namespace

size_t count_lcores(const std::string& list) {
  size_t n = 0, pos = 0;
  if (list.empty()) throw std::invalid_argument("lcores: empty core list");
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string part = list.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    if (dash == std::string::npos) {
      parse_uint(part, list);
      n += 1;
    } else {
      const unsigned lo = parse_uint(part.substr(0, dash), list);
      const unsigned hi = parse_uint(part.substr(dash + 1), list);
      if (hi < lo) throw std::invalid_argument("lcores: descending range in '" + list + "'");
      n += hi - lo + 1;
    }
    pos = comma + 1;
  }
  return n;
}

size_t af_packet_framesz(uint32_t mtu) {
  // tpacket2 header + sockaddr_ll + alignment take < 128 bytes of each ring frame.
  const size_t need = 14 + size_t{mtu} + 4 + 128;
  size_t f = 2048;
  while (f < need) f <<= 1;
  return f;
}

std::vector<std::string> build_eal_args(const std::string& prog, const EalSpec& spec, uint32_t mtu,
                                        const std::vector<std::string>& extra) {
  std::vector<std::string> a{prog, "-l", spec.lcores, "--file-prefix", spec.file_prefix,
                             "--log-level=*:warning"};
  if (spec.eal_args.empty()) {
    // Emulation: no NIC, no hugepages; the kernel interface through an AF_PACKET vdev with one
    // queue pair per lcore (PACKET_FANOUT spreads RX over them).
    const size_t q = count_lcores(spec.lcores);
    std::string vdev = "--vdev=net_af_packet0,iface=" + spec.iface + ",qpairs=" + std::to_string(q);
    if (const size_t f = af_packet_framesz(mtu); f != 2048)
      vdev += ",framesz=" + std::to_string(f) + ",blocksz=" + std::to_string(f);
    a.insert(a.end(), {"--no-huge", "-m", "256", "--no-pci", vdev});
  } else {
    a.insert(a.end(), spec.eal_args.begin(), spec.eal_args.end());
  }
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace exo::dpdk
