#include "loadgen/memcached_udp.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "loadgen/hot_set_swap.h"
#include "wire.h"

namespace exo::loadgen {
namespace {

constexpr std::string_view kValue = "VALUE ";
constexpr std::string_view kEnd = "END\r\n";
constexpr std::string_view kErrorPrefixes[] = {"ERROR", "CLIENT_ERROR", "SERVER_ERROR"};
constexpr size_t kMaxMcKey = 250;  // memcached's KEY_MAX_LENGTH
constexpr unsigned kMaxU32Digits = 10;

// A read cursor over a reply's text: every read checks what is left, so a truncated or hostile
// datagram can never make the parser look past its end.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> b) : b_(b) {}
  size_t left() const { return b_.size() - i_; }
  size_t pos() const { return i_; }
  bool at_end() const { return i_ == b_.size(); }

  bool take(std::string_view lit) {
    if (left() < lit.size() || std::memcmp(b_.data() + i_, lit.data(), lit.size()) != 0) return false;
    i_ += lit.size();
    return true;
  }
  // A memcached key: 1..250 printable bytes up to (not including) a space.
  bool key(std::span<const uint8_t>* out) {
    const size_t start = i_;
    while (i_ < b_.size() && b_[i_] > 0x20 && b_[i_] < 0x7f) ++i_;
    const size_t n = i_ - start;
    if (n == 0 || n > kMaxMcKey) return false;
    *out = b_.subspan(start, n);
    return true;
  }
  // A decimal u32: 1..10 digits, no sign, no overflow.
  bool u32(uint64_t* out) {
    uint64_t v = 0;
    unsigned d = 0;
    while (i_ < b_.size() && b_[i_] >= '0' && b_[i_] <= '9' && d <= kMaxU32Digits) {
      v = v * 10 + (b_[i_++] - '0');
      ++d;
    }
    if (d == 0 || d > kMaxU32Digits || v > UINT32_MAX) return false;
    *out = v;
    return true;
  }
  bool bytes(size_t n, std::span<const uint8_t>* out) {
    if (left() < n) return false;
    *out = b_.subspan(i_, n);
    i_ += n;
    return true;
  }

 private:
  std::span<const uint8_t> b_;
  size_t i_ = 0;
};

// One error line: a known prefix, then end of line or a space and a message, then \r\n as the
// last two bytes and nowhere before.
bool is_error_line(std::span<const uint8_t> text) {
  for (std::string_view prefix : kErrorPrefixes) {
    Cursor c(text);
    if (!c.take(prefix)) continue;
    if (c.take(kMcEol)) return c.at_end();
    if (!c.take(" ")) continue;  // e.g. "ERRORS": not this prefix
    for (size_t i = c.pos(); i + 1 < text.size(); ++i)
      if (text[i] == '\r' && text[i + 1] == '\n') return i + 2 == text.size();
    return false;
  }
  return false;
}

McOutcome parse_value(std::span<const uint8_t> text, McReply* r) {
  Cursor c(text);
  uint64_t flags = 0, len = 0;
  if (!c.take(kValue) || !c.key(&r->key) || !c.take(" ") || !c.u32(&flags) || !c.take(" ") ||
      !c.u32(&len) || !c.take(kMcEol))
    return McOutcome::kMalformed;  // also "VALUE k f n cas": we never ask for gets
  if (!c.bytes(static_cast<size_t>(len), &r->value) || !c.take(kMcEol) || !c.take(kEnd) ||
      !c.at_end())
    return McOutcome::kMalformed;
  return McOutcome::kOk;
}

}  // namespace

MemcachedRequestBuilder::MemcachedRequestBuilder(const Endpoint& ep, size_t key_size)
    : key_size_(key_size) {
  if (key_size < 5 || key_size > kMaxMcKey)
    throw std::invalid_argument("--key-size: must be in 5.." + std::to_string(kMaxMcKey));
  if (!ep.fixed_dst_mac)
    throw std::invalid_argument("--dst-mac: --protocol memcached needs the server's MAC");
  tpl_.assign(mc_get_frame_len(key_size), 0);
  wire::FrameHeader* h = wire::header_of(tpl_.data());  // only eth, ip and udp are touched
  std::memcpy(h->eth.dst, ep.dst_mac.data(), 6);
  std::memcpy(h->eth.src, ep.mac.data(), 6);
  h->eth.ethertype.set(wire::kEtherTypeIpv4);
  const size_t udp_len = tpl_.size() - wire::kEthLen - wire::kIpLen;
  h->ip.version_ihl = wire::kIpv4NoOptions;
  h->ip.total_len.set(static_cast<uint16_t>(wire::kIpLen + udp_len));
  h->ip.frag.set(wire::kIpDontFragment);
  h->ip.ttl = wire::kDefaultTtl;
  h->ip.protocol = wire::kIpProtoUdp;
  h->ip.src.set(ep.ip);
  h->ip.dst.set(ep.service_ip);
  h->ip.checksum.set(wire::ipv4_checksum(tpl_.data() + wire::kEthLen));
  h->udp.src_port.set(ep.src_port);
  h->udp.dst_port.set(ep.udp_port);
  h->udp.length.set(static_cast<uint16_t>(udp_len));
  auto* mh = reinterpret_cast<McUdpHeader*>(tpl_.data() + kMcPayloadOffset);
  mh->total.set(1);  // request id, sequence number and reserved stay 0
  std::memcpy(tpl_.data() + kMcTextOffset, kMcGet.data(), kMcGet.size());
  std::memcpy(tpl_.data() + kMcKeyOffset + key_size, kMcEol.data(), kMcEol.size());
  const std::string key = key_name(0, key_size);
  std::memcpy(tpl_.data() + kMcKeyOffset, key.data(), key_size);
}

size_t MemcachedRequestBuilder::write(uint8_t* out, bool /*put*/, uint64_t key_id, uint32_t seq) const {
  std::memcpy(out, tpl_.data(), tpl_.size());
  const std::string key = key_name(key_id, key_size_);
  std::memcpy(out + kMcKeyOffset, key.data(), key_size_);
  reinterpret_cast<McUdpHeader*>(out + kMcPayloadOffset)->request_id.set(mc_request_id(seq));
  return tpl_.size();
}

bool seq_for_request_id(uint16_t request_id, uint32_t newest, uint64_t booked, uint32_t* seq) {
  // How far back from the newest seq the last one with these low 16 bits lies (0..65535).
  const auto back = static_cast<uint16_t>(static_cast<uint16_t>(newest) - request_id);
  if (back >= booked) return false;
  *seq = newest - back;  // mod 2^32: wraps like the seqs themselves
  return true;
}

McReply parse_mc_reply(std::span<const uint8_t> payload) {
  McReply r;
  if (payload.size() < kMcHeaderLen) return r;
  const auto* h = reinterpret_cast<const McUdpHeader*>(payload.data());
  r.has_id = true;
  r.request_id = h->request_id.get();
  if (h->seq.get() != 0 || h->total.get() != 1) return r;  // part of a multi-datagram reply
  const std::span<const uint8_t> text = payload.subspan(kMcHeaderLen);
  if (Cursor(text).take(kEnd) && text.size() == kEnd.size()) {
    r.outcome = McOutcome::kNotFound;
  } else if (Cursor(text).take(kValue)) {
    r.outcome = parse_value(text, &r);
    if (r.outcome != McOutcome::kOk) r.key = r.value = {};
  } else if (is_error_line(text)) {
    r.outcome = McOutcome::kError;
  }
  return r;
}

McFrame parse_mc_frame(std::span<const uint8_t> f, uint16_t our_port, uint32_t server_ip,
                       uint16_t server_port, std::span<const uint8_t>* payload) {
  if (f.size() < wire::kEthLen + wire::kIpLen) return McFrame::kOther;
  const wire::FrameHeader* h = wire::header_of(f.data());
  if (h->eth.ethertype.get() != wire::kEtherTypeIpv4) return McFrame::kOther;
  if ((h->ip.version_ihl >> 4) != 4 || h->ip.protocol != wire::kIpProtoUdp) return McFrame::kOther;
  const size_t ihl = size_t{h->ip.version_ihl & 0x0fu} * 4;
  constexpr uint16_t kFragOffsetMask = 0x1fff, kMoreFragments = 0x2000;
  const uint16_t frag = h->ip.frag.get();
  if (ihl < wire::kIpLen || (frag & kFragOffsetMask) != 0) return McFrame::kOther;  // no UDP header here
  const size_t udp = wire::kEthLen + ihl;
  if (f.size() < udp + wire::kUdpLen) return McFrame::kOther;
  const auto* uh = reinterpret_cast<const wire::UdpHeader*>(f.data() + udp);
  if (uh->dst_port.get() != our_port || uh->src_port.get() != server_port ||
      h->ip.src.get() != server_ip)
    return McFrame::kOther;
  const size_t ip_total = h->ip.total_len.get();
  const size_t udp_len = uh->length.get();
  if ((frag & kMoreFragments) || ip_total < ihl + wire::kUdpLen ||
      wire::kEthLen + ip_total > f.size() || udp_len < wire::kUdpLen || udp_len > ip_total - ihl)
    return McFrame::kMalformed;
  // The project's one IPv4 header check (wire.h). A Linux server sends no IPv4 options, so a
  // reply with options is not one we can vouch for: malformed, like a wrong checksum.
  if (ihl != wire::kIpLen || !wire::ipv4_checksum_ok(f.data() + wire::kEthLen)) return McFrame::kMalformed;
  *payload = f.subspan(udp + wire::kUdpLen, udp_len - wire::kUdpLen);
  return McFrame::kReply;
}

}  // namespace exo::loadgen
