#include "loadgen/packet_socket.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace exo::loadgen {
namespace {

bool fail(int fd, std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  if (fd >= 0) close(fd);
  return false;
}

// Sets a buffer size, first with the *FORCE variant (root may exceed net.core.*mem_max), then
// the plain one. Reports what the kernel actually granted (it doubles the request).
bool set_buffer(int fd, int force_opt, int opt, int bytes, int* granted) {
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) != 0 &&
      setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes) != 0)
    return false;
  socklen_t len = sizeof *granted;
  return getsockopt(fd, SOL_SOCKET, opt, granted, &len) == 0;
}

sockaddr_ll link_addr(unsigned ifindex, uint16_t protocol) {
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(protocol);
  sll.sll_ifindex = static_cast<int>(ifindex);
  return sll;
}

bool open_guard(uint32_t ip, uint16_t port, PacketSockets* out, std::string* error) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(fd, error, "socket(AF_INET, SOCK_DGRAM) for the port guard");
  sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  sock_fprog prog{1, drop_all};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0)
    return fail(fd, error, "setsockopt(SO_ATTACH_FILTER) on the port guard");
  const int min_buf = 1;  // the kernel rounds up to its minimum
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &min_buf, sizeof min_buf) != 0)
    return fail(fd, error, "setsockopt(SO_RCVBUF) on the port guard");
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(ip);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) {
    if (errno != EADDRNOTAVAIL)
      return fail(fd, error, "--src-port: bind UDP port " + std::to_string(port));
    sin.sin_addr.s_addr = htonl(INADDR_ANY);  // the client IP is not configured here
    if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0)
      return fail(fd, error, "--src-port: bind UDP port " + std::to_string(port));
  }
  socklen_t len = sizeof sin;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0)
    return fail(fd, error, "getsockname on the port guard");
  out->src_port = ntohs(sin.sin_port);
  out->port_guard = std::make_unique<SocketIo>(fd);
  return true;
}

}  // namespace

bool open_packet_sockets(const std::string& iface, uint32_t ip, uint16_t src_port, int sndbuf,
                         int rcvbuf, PacketSockets* out, std::string* error) {
  const unsigned ifindex = if_nametoindex(iface.c_str());
  if (ifindex == 0) return fail(-1, error, "--iface: no interface '" + iface + "' here");

  int tx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);  // protocol 0: send only
  if (tx < 0) return fail(tx, error, "socket(AF_PACKET, SOCK_RAW) (needs root or CAP_NET_RAW)");
  if (!set_buffer(tx, SO_SNDBUFFORCE, SO_SNDBUF, sndbuf, &out->sndbuf))
    return fail(tx, error, "setsockopt(SO_SNDBUF) on the TX socket");
  sockaddr_ll tx_addr = link_addr(ifindex, 0);
  if (bind(tx, reinterpret_cast<sockaddr*>(&tx_addr), sizeof tx_addr) != 0)
    return fail(tx, error, "bind the TX socket to '" + iface + "'");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, iface.c_str(), IFNAMSIZ - 1);
  if (ioctl(tx, SIOCGIFHWADDR, &ifr) != 0)
    return fail(tx, error, "ioctl(SIOCGIFHWADDR) on '" + iface + "'");
  std::memcpy(out->iface_mac, ifr.ifr_hwaddr.sa_data, 6);
  const sockaddr_ll dest = link_addr(ifindex, ETH_P_IP);
  out->tx = std::make_unique<SocketIo>(tx, reinterpret_cast<const sockaddr*>(&dest),
                                       static_cast<socklen_t>(sizeof dest));

  int rx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_IP));
  if (rx < 0) return fail(rx, error, "socket(AF_PACKET, SOCK_RAW) for RX");
  const int one = 1;  // before bind, so none of our own requests is ever queued
  if (setsockopt(rx, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0)
    return fail(rx, error, "setsockopt(PACKET_IGNORE_OUTGOING)");
  if (!set_buffer(rx, SO_RCVBUFFORCE, SO_RCVBUF, rcvbuf, &out->rcvbuf))
    return fail(rx, error, "setsockopt(SO_RCVBUF) on the RX socket");
  sockaddr_ll rx_addr = link_addr(ifindex, ETH_P_IP);
  if (bind(rx, reinterpret_cast<sockaddr*>(&rx_addr), sizeof rx_addr) != 0)
    return fail(rx, error, "bind the RX socket to '" + iface + "'");
  out->rx = std::make_unique<SocketIo>(rx);

  return open_guard(ip, src_port, out, error);
}

}  // namespace exo::loadgen
