// libFuzzer target: the native client pipeline (pipeline.cc) reading arbitrary replies. The
// input is cut into payloads (a length byte, then that many bytes) that the fake network hands
// back after each send, some of them patched into well-formed replies to requests in flight
// (right seq and key, any status) so the BUSY, stray and wrong-key paths run. Invariants: every
// request gets exactly one outcome, a status is a real one or -1, attempts stay within
// 1..retries+1 (BUSY retries included), and nothing reads outside a payload (ASan).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "pipeline.h"
#include "wire.h"

using namespace exo;
using namespace exo::client;

namespace {

class FuzzNet : public FrameIO {
 public:
  FuzzNet(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  void send(std::span<const std::span<const uint8_t>> frames) override {
    for (auto f : frames) {
      wire::FrameView v;
      if (wire::parse(f, v) != wire::ParseError::kNone) std::abort();  // the client built a bad frame
      last_ = {v.seq, std::string(v.key.begin(), v.key.end()), v.client_id, v.opcode};
    }
  }
  void recv(std::vector<std::span<const uint8_t>>& out, double) override {
    out.clear();
    bufs_.clear();
    for (int n = 0; n < 4 && pos_ < size_; ++n) {
      const size_t len = data_[pos_++];
      const size_t take = std::min(len, size_ - pos_);
      std::vector<uint8_t> p(data_ + pos_, data_ + pos_ + take);
      pos_ += take;
      // an odd length byte: make it a well-formed reply to the last request sent
      if ((len & 1) && p.size() >= 1) {
        std::vector<uint8_t> r(wire::kHdrLen + last_.key.size());
        auto* h = reinterpret_cast<wire::ExoHeader*>(r.data());
        h->magic.set(wire::kMagic);
        h->version = wire::kVersion;
        h->opcode = last_.opcode | wire::kReplyBit;
        h->status = p[0] % 6;  // 5 is not a status: the client must take it as an outcome anyway
        h->key_len.set(static_cast<uint16_t>(last_.key.size()));
        h->client_id.set(last_.client_id);
        h->seq.set(last_.seq);
        std::copy(last_.key.begin(), last_.key.end(), r.begin() + wire::kHdrLen);
        p = std::move(r);
      }
      bufs_.push_back(std::move(p));
    }
    for (auto& b : bufs_) out.emplace_back(b);
  }

 private:
  struct Last {
    uint32_t seq = 0;
    std::string key;
    uint32_t client_id = 0;
    uint8_t opcode = 0;
  };
  const uint8_t* data_;
  size_t size_, pos_ = 0;
  Last last_;
  std::vector<std::vector<uint8_t>> bufs_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzNet net(data, size);
  Endpoint ep;
  ep.mac = {2, 0, 0, 0, 0, 1};
  ep.ip = 0x0A000001;
  ep.port = 40000;
  ep.service_ip = 0x0A0000FE;
  Pipeline p(net, ep, 7);
  std::vector<Op> ops{{wire::kGet, "a", ""}, {wire::kPut, "bb", "v"}, {wire::kDelete, "c", ""}};
  const int retries = 2;
  Options opt{2, 0.0, retries};  // timeout 0: every round is a deadline
  // A BUSY past the last retry is retried within the budget; 1 ms keeps that path fuzzed while
  // each input stays fast. Every retry past `retries` needs a BUSY reply from the input, so
  // the input's length bounds them.
  opt.busy_budget_s = 0.001;
  auto out = p.execute(ops, opt);
  if (out.size() != ops.size()) std::abort();
  for (const auto& o : out) {
    if (o.status < -1 || o.status > 5) std::abort();
    if (o.attempts < 1 || o.attempts > retries + 1 + static_cast<int>(size)) std::abort();  // BUSY retries count too
  }
  return 0;
}
