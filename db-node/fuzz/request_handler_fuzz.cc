// libFuzzer target: the db node's per-frame handler (classification, parse, GET/PUT/DELETE,
// dedup, the two-phase write of a cached key) on arbitrary frames, with the in-memory fakes
// the unit tests use. Every frame is counted exactly once, and a reply always fits the
// MTU-sized output buffer and parses as a reply to the same request. The fake cache node's
// answers vary with the input, so the BUSY/resolver paths run too; time advances one second
// per input and expired dedup records are swept, so memory stays bounded on long runs.
// Checksums are repaired unless marked (frame_fuzz.h), so mutations reach the handler.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "../tests/test_util.h"
#include "fuzz/frame_fuzz.h"
#include "log.h"
#include "request_handler.h"

using namespace exo::db;
using namespace exo::db::testing;

namespace {

struct World {
  FakeNode node;
  uint64_t now_ms = 1'700'000'000'000;
  NodeContext ctx{node.cluster, 0, node.store, node.cached, node.prop, node.txids,
                  node.dedup,   node.resolver, nullptr, [this] { return now_ms; }};
  World() {
    exo::set_log_level("error");  // the injected failures would log a warning per input
    node.store.data["k"] = std::string(1000, 'v');
    node.store.data["big"] = std::string(4000, 'v');  // does not fit a reply at MTU 1500
    auto g = node.cached.lock(exo::key_hash(B("k")));
    g.mark("k", "cache0");
  }
  // Re-marks "k" (a Prepare answered cached=false unmarks it) and picks the fake cache node's
  // answers from one input byte.
  void vary(uint8_t b) {
    {
      auto g = node.cached.lock(exo::key_hash(B("k")));
      if (!g.holder("k")) g.mark("k", "cache0");
    }
    static constexpr PrepareOutcome::Code kPrep[] = {PrepareOutcome::kPrepared,
                                                     PrepareOutcome::kNotCached,
                                                     PrepareOutcome::kFailed};
    static constexpr FinishOutcome::Code kFin[] = {FinishOutcome::kDone, FinishOutcome::kNotCached,
                                                   FinishOutcome::kRefused,
                                                   FinishOutcome::kUnreachable};
    node.prop.prepare_result = kPrep[b % 3];
    node.prop.commit_result = kFin[(b / 3) % 4];
    node.prop.abort_result = kFin[(b / 12) % 4];
    // The fake propagator keeps every txid it saw; drop them now and then.
    if (node.prop.txids.size() > 4096) {
      node.prop.txids.clear();
      node.prop.commit_txids.clear();
      node.prop.abort_txids.clear();
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World w;
  w.now_ms += 1000;
  w.vary(size > 0 ? data[size - 1] : 0);
  if (w.now_ms % 10'000 == 0) {
    std::string err;
    sweep_dedup(w.node.dedup, w.node.store, w.now_ms, &err);
    w.node.resolver.run_once();
  }
  Counters c{};
  RequestHandler h(w.ctx, c);
  std::vector<uint8_t> frame(data, data + size);
  exo::fuzz::repair_checksums(frame);
  std::vector<uint8_t> out(14 + w.node.cluster.mtu);
  const size_t n = h.handle(frame, out);
  if (n > out.size()) std::abort();
  // Exactly one of the frame counters moves per frame: ignored, malformed, served (gets, puts,
  // deletes) or refused (a write for another node's key, an unmarked forwarded GET).
  const CounterValues v = c.snapshot();
  uint64_t rx = 0, sorted = 0;
  for (size_t i = 0; i < kNumCounters; ++i) {
    const std::string_view name = kCounterDescs[i].name;
    if (name == "rx_frames") rx = v[i];
    if (name == "ignored" || name == "malformed_dropped" || name == "gets" || name == "puts" ||
        name == "deletes" || name == "wrong_owner_dropped" || name == "forwarded_unmarked_dropped")
      sorted += v[i];
  }
  if (rx != 1 || sorted != 1) std::abort();
  if (n > 0) {
    exo::wire::FrameView rep{}, req{};
    if (exo::wire::parse(std::span<const uint8_t>(out.data(), n), rep) != exo::wire::ParseError::kNone)
      std::abort();
    if (exo::wire::parse(frame, req) != exo::wire::ParseError::kNone || !rep.is_reply() ||
        rep.seq != req.seq || rep.client_id != req.client_id)
      std::abort();
  }
  return 0;
}
