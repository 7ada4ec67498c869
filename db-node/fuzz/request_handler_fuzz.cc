// libFuzzer target: the db node's per-frame handler (classification, parse, GET/PUT/DELETE,
// write propagation ordering) on arbitrary frames, with the in-memory fakes the unit tests use.
// Every frame is counted exactly once, and a reply always fits the MTU-sized output buffer and
// parses as a reply to the same request.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "../tests/test_util.h"
#include "request_handler.h"

using namespace exo::db;
using namespace exo::db::testing;

namespace {

struct World {
  exo::Cluster cluster = test_cluster();
  FakeStore store;
  CachedKeys cached;
  FakePropagator prop{nullptr};
  TxIdSource txids{1};
  NodeContext ctx{cluster, 0, store, cached, prop, txids, nullptr};
  World() {
    store.data["k"] = std::string(1000, 'v');
    store.data["big"] = std::string(4000, 'v');  // does not fit a reply at MTU 1500
    auto g = cached.lock(exo::key_hash(B("k")));
    g.mark("k", "cache0");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World w;
  Counters c{};
  RequestHandler h(w.ctx, c);
  std::vector<uint8_t> frame(data, data + size);
  std::vector<uint8_t> out(14 + w.cluster.mtu);
  const size_t n = h.handle(frame, out);
  if (n > out.size()) std::abort();
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
