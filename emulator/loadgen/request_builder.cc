#include "loadgen/request_builder.h"

#include <cstring>
#include <span>
#include <string>

#include "loadgen/hot_set_swap.h"
#include "wire.h"

namespace exo::loadgen {
namespace {

std::vector<uint8_t> make_template(const Endpoint& ep, uint32_t client_id, uint8_t op,
                                   const std::string& key, const std::vector<uint8_t>& value) {
  std::vector<uint8_t> frame(wire::kMinFrame + key.size() + value.size());
  const Mac dst = ep.fixed_dst_mac ? ep.dst_mac : request_mac(op == wire::kGet ? kPrefixGet : kPrefixOther, 0);
  const wire::Addr src{ep.mac.data(), ep.ip, ep.src_port};
  wire::Header h;
  h.opcode = op;
  h.client_id = client_id;
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  // A per-key IPv4 dst is patched in by write(); the template's is then 0.
  const uint32_t ip_dst = ep.ip_dst_fixed() ? ep.service_ip : 0;
  const size_t n = wire::build(frame, dst.data(), src, ip_dst, ep.udp_port, h,
                               std::span<const uint8_t>(k, key.size()), value);
  if (n != frame.size()) throw std::invalid_argument("--key-size: frame does not fit");
  return frame;
}

}  // namespace

RequestBuilder::RequestBuilder(const Endpoint& ep, uint32_t client_id, size_t key_size,
                               size_t value_size, size_t mtu)
    : key_size_(key_size), fixed_dst_mac_(ep.fixed_dst_mac), fixed_dst_ip_(ep.ip_dst_fixed()) {
  if (key_size < 5 || key_size > wire::kMaxKeyLen)
    throw std::invalid_argument("--key-size: must be in 5.." + std::to_string(wire::kMaxKeyLen));
  if (wire::kMinFrame + key_size + value_size > wire::kEthLen + mtu)
    throw std::invalid_argument("--value-size: 62 + key-size + value-size = " +
                                std::to_string(wire::kMinFrame + key_size + value_size) +
                                " bytes exceeds the largest frame, 14 + mtu = " +
                                std::to_string(wire::kEthLen + mtu));
  // A recognizable filler: 'v' and the position, so a packet dump shows where a value starts.
  std::vector<uint8_t> value(value_size);
  for (size_t i = 0; i < value_size; ++i) value[i] = i == 0 ? 'v' : static_cast<uint8_t>('0' + i % 10);
  const std::string key = key_name(0, key_size);
  get_ = make_template(ep, client_id, wire::kGet, key, {});
  put_ = make_template(ep, client_id, wire::kPut, key, value);
}

size_t RequestBuilder::write(uint8_t* out, bool put, uint64_t key_id, uint32_t seq) const {
  const std::vector<uint8_t>& tpl = put ? put_ : get_;
  std::memcpy(out, tpl.data(), tpl.size());
  const std::string key = key_name(key_id, key_size_);
  std::memcpy(out + wire::kMinFrame, key.data(), key_size_);
  wire::FrameHeader* h = wire::header_of(out);
  h->exo.seq.set(seq);
  // The template's UDP checksum is 0 (none), like every sender of the project, so nothing
  // patched here needs one; of the patched fields the IPv4 header checksum covers only the
  // IPv4 dst, and is recomputed with it.
  if (fixed_dst_mac_) return tpl.size();  // the template's MAC and IPv4 dst are every request's
  const uint64_t hash =
      key_hash(std::span<const uint8_t>(out + wire::kMinFrame, key_size_));
  const Mac dst = request_mac(put ? kPrefixOther : kPrefixGet, hash);
  std::memcpy(h->eth.dst, dst.data(), dst.size());
  if (fixed_dst_ip_) return tpl.size();
  h->ip.dst.set(request_ip(hash));
  h->ip.checksum.set(0);
  h->ip.checksum.set(wire::ipv4_checksum(out + wire::kEthLen));
  return tpl.size();
}

}  // namespace exo::loadgen
