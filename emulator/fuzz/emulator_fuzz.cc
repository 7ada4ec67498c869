// libFuzzer target: the wimpy emulator's frame path (demux -> token bucket -> the hosted db
// node's request handler) on arbitrary frames, over two hosted nodes and one foreign one, with
// a rate limit. Input: [lane:1][time step:1][frame...]. Invariants: every frame moves exactly
// one of the emulator's verdicts; a reply fits the MTU, parses as a reply to the same request
// and comes from the MAC and IP of the node that owns the key (or whose MAC the frame was for);
// a rate-limited frame never reaches a handler. Dedup records are swept as time advances, so
// memory stays bounded on long runs.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../tests/wimpy_test_util.h"
#include "emulator.h"
#include "fuzz/frame_fuzz.h"
#include "log.h"

using namespace exo;
using namespace exo::emu;

namespace {

struct World {
  Cluster cluster = testing::emu_cluster("/nonexistent", /*rate=*/1000, /*burst=*/4, 600);
  std::unique_ptr<Emulator> emu;
  uint64_t now_ns = 1'000'000'000;
  World() {
    exo::set_log_level("error");
    std::string err;
    emu = Emulator::build(cluster, "emu0", 2, &err);
    if (!emu) std::abort();
  }
  uint64_t handled() const {  // frames that reached some node's handler
    uint64_t n = 0;
    for (size_t s = 0; s < emu->size(); ++s) {
      const db::CounterValues v = emu->node(s).counters.sum();
      for (size_t i = 0; i < db::kNumCounters; ++i)
        if (std::strcmp(db::kCounterDescs[i].name, "rx_frames") == 0) n += v[i];
    }
    return n;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World w;
  if (size < 2) return 0;
  const unsigned lane = data[0] % 2;
  w.now_ns += uint64_t{data[1]} * 100'000;  // 0..25.5 ms: the bucket fills and drains
  std::vector<uint8_t> frame(data + 2, data + size);
  fuzz::repair_checksums(frame);  // unless marked (frame_fuzz.h): mutations reach the handlers
  std::vector<uint8_t> out(14 + w.cluster.mtu);
  const EmulatorTotals before = w.emu->totals();
  const uint64_t handled_before = w.handled();
  const Emulator::Result r = w.emu->handle(lane, frame, false, out, w.now_ns);
  const EmulatorTotals after = w.emu->totals();
  const uint64_t handled = w.handled() - handled_before;

  if (after.rx_frames != before.rx_frames + 1) std::abort();
  switch (r.kind) {
    case Emulator::Result::kUnrouted:
      if (after.unrouted != before.unrouted + 1 || handled != 0) std::abort();
      break;
    case Emulator::Result::kOwnTx:
      if (after.own_tx != before.own_tx + 1 || handled != 0) std::abort();
      break;
    case Emulator::Result::kRateLimited:
      if (after.rate_limited != before.rate_limited + 1 || handled != 0) std::abort();
      break;
    case Emulator::Result::kNoReply:
    case Emulator::Result::kReply:
      if (handled != 1 || after.rate_limited != before.rate_limited) std::abort();
      break;
  }
  if (r.kind == Emulator::Result::kReply) {
    if (r.len == 0 || r.len > out.size() || r.node >= w.emu->size()) std::abort();
    wire::FrameView rep{}, req{};
    if (wire::parse(std::span<const uint8_t>(out.data(), r.len), rep) != wire::ParseError::kNone)
      std::abort();
    if (wire::parse(frame, req) != wire::ParseError::kNone || !rep.is_reply() ||
        rep.seq != req.seq || rep.client_id != req.client_id)
      std::abort();
    const DbNodeInfo& self = w.emu->node_info(r.node);
    if (std::memcmp(out.data() + 6, self.mac.data(), 6) != 0 || rep.ip_src != self.ip) std::abort();
    // A request is answered by the owner of its key hash.
    if (wire::is_request_mac(frame.data()) &&
        w.cluster.owner_index(hash_from_mac(frame.data())) != w.emu->node(r.node).self_index)
      std::abort();
    w.emu->sent(lane, r.node, true);
  }
  static uint64_t last_sweep_ns = 0;
  if (w.now_ns - last_sweep_ns > 10'000'000'000) {  // every 10 s of fuzz time
    w.emu->sweep_all();
    last_sweep_ns = w.now_ns;
  }
  return 0;
}
