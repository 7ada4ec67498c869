// libFuzzer target: the db node's control plane on arbitrary request messages. The handlers of
// the DbNode gRPC service (Fetch, Evict, ForgetCacheNode, Stats, HotKeys) are called directly,
// as gRPC's threads call them once a request is decoded (they do not use the ServerContext),
// against the unit tests' FakeNode (in-memory store with failure injection, real CachedKeys and
// Resolver); the input also seeds values, switches store failures on and off and queues
// undelivered 2PC decisions for ForgetCacheNode to drop.
//
// Input: a sequence of [op:1][len:2, big-endian][len bytes]; for an RPC the bytes are its request
// message in protobuf encoding (ParseFromArray; a message that does not parse is skipped).
// Checked after every step: the replies match the requests, every key marked in memory is
// marked on disk for the same cache node, an evicted key is no longer held by the evicting
// node, and a forgotten cache node holds nothing and has no decision pending.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "../tests/test_util.h"
#include "control_service.h"
#include "fuzz/fuzz_util.h"
#include "log.h"

using namespace exo::db;
using namespace exo::db::testing;

namespace {

enum Op : uint8_t {
  kFetch,
  kEvict,
  kForget,
  kStats,
  kHotKeys,
  kFaults,    // [fail_get | fail_marks << 1]
  kSeed,      // [key len:1][key][value]: a value in the store
  kDecision,  // [txid:1][commit?:1][key]: an undelivered decision for cache0
  kNumOps
};

using exo::fuzz::check;

struct World {
  FakeNode node;
  CounterSet counters;
  Counters& control = counters.add_block();
  ControlService svc{node.cluster, "db0", node.store, node.cached, node.resolver, counters, control};

  World() {
    for (const char* k : {"a", "b", "c", "k"}) node.store.data[k] = std::string("v-") + k;
    node.store.data["empty"] = "";
  }

  template <typename Req>
  static std::optional<Req> parse(const std::string& bytes) {
    Req r;
    if (!r.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
    return r;
  }

  std::optional<std::string> holder(const std::string& k) {
    auto g = node.cached.lock_key(B(k));
    const std::string* h = g.holder(k);
    return h ? std::optional<std::string>(*h) : std::nullopt;
  }

  // Every key marked in memory, with its holder.
  std::map<std::string, std::string> marks_in_memory() {
    std::map<std::string, std::string> out;
    for (size_t i = 0; i < CachedKeys::kStripes; ++i) {
      auto g = node.cached.lock_stripe(i);
      for (const auto& c : node.cluster.cache_nodes)
        for (auto& k : g.keys_held_by(c.name)) out[k] = c.name;
    }
    return out;
  }

  void run(uint8_t op, const std::string& bytes) {
    switch (op) {
      case kFetch: {
        auto req = parse<exo::FetchRequest>(bytes);
        if (!req) return;
        const uint64_t before = node.cached.size();
        exo::FetchReply rep;
        const grpc::Status s = svc.Fetch(nullptr, &*req, &rep);
        if (!node.cluster.find_cache(req->cache_node())) {
          check(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT, "Fetch: unknown node accepted");
          check(rep.values_size() == 0 && node.cached.size() == before, "Fetch: unknown node marked");
          return;
        }
        check(s.ok(), "Fetch failed");
        check(rep.values_size() == req->keys_size(), "Fetch: one value per key");
        for (int i = 0; i < rep.values_size(); ++i) {
          const auto& v = rep.values(i);
          check(v.key() == req->keys(i), "Fetch: values out of order");
          if (!v.found()) continue;
          auto it = node.store.data.find(v.key());
          check(it != node.store.data.end() && it->second == v.value(), "Fetch: wrong value");
          auto m = node.store.marks.find(v.key());
          check(m != node.store.marks.end() && m->second == req->cache_node(),
                "Fetch: value handed out without a durable mark");
        }
        return;
      }
      case kEvict: {
        auto req = parse<exo::EvictRequest>(bytes);
        if (!req) return;
        exo::EvictReply rep;
        check(svc.Evict(nullptr, &*req, &rep).ok(), "Evict failed");
        check(rep.evicted() <= static_cast<uint32_t>(req->keys_size()), "Evict: evicted > keys");
        for (const auto& k : req->keys()) {
          const auto h = holder(k);
          check(!h || *h != req->cache_node(), "Evict: key still held by the evicting node");
        }
        return;
      }
      case kForget: {
        auto req = parse<exo::ForgetCacheNodeRequest>(bytes);
        if (!req) return;
        const auto before = marks_in_memory();
        exo::ForgetCacheNodeReply rep;
        const grpc::Status s = svc.ForgetCacheNode(nullptr, &*req, &rep);
        if (!node.cluster.find_cache(req->cache_node())) {
          check(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT, "Forget: unknown node accepted");
          check(marks_in_memory() == before, "Forget: unknown node changed marks");
          return;
        }
        check(s.ok(), "ForgetCacheNode failed");
        size_t held = 0;
        for (const auto& [k, n] : before) held += n == req->cache_node();
        check(rep.keys_dropped() == held, "Forget: keys_dropped != keys held");
        for (const auto& [k, n] : marks_in_memory())
          check(n != req->cache_node(), "Forget: a key is still held by the forgotten node");
        for (const auto& d : node.resolver.pending())
          check(d.cache_node != req->cache_node(), "Forget: a decision is still pending");
        return;
      }
      case kStats: {
        auto req = parse<exo::StatsRequest>(bytes);
        if (!req) return;
        exo::StatsReply rep;
        check(svc.Stats(nullptr, &*req, &rep).ok(), "Stats failed");
        bool gauge = false;
        for (const auto& c : rep.counters())
          if (c.name() == "cached_keys") gauge = c.value() == node.cached.size();
        check(gauge, "Stats: cached_keys gauge");
        return;
      }
      case kHotKeys: {
        auto req = parse<exo::StatsRequest>(bytes);
        if (!req) return;
        exo::ReportRequest rep;
        check(svc.HotKeys(nullptr, &*req, &rep).error_code() == grpc::StatusCode::FAILED_PRECONDITION,
              "HotKeys without a reporter");
        return;
      }
      case kFaults: {
        const uint8_t b = bytes.empty() ? 0 : static_cast<uint8_t>(bytes[0]);
        node.store.fail_get = b & 1;
        node.store.fail_marks = b & 2;
        return;
      }
      case kSeed: {
        if (bytes.empty()) return;
        const size_t klen = std::min<size_t>(static_cast<uint8_t>(bytes[0]), bytes.size() - 1);
        node.store.data[bytes.substr(1, klen)] = bytes.substr(1 + klen);
        return;
      }
      case kDecision: {
        if (bytes.size() < 3) return;
        PendingDecision d;
        d.txid = static_cast<uint8_t>(bytes[0]) + 1;
        d.decision = bytes[1] & 1 ? Decision::kCommit : Decision::kAbort;
        d.cache_node = "cache0";
        d.key = bytes.substr(2);
        node.resolver.add(std::move(d));
        return;
      }
      default:
        return;
    }
  }

  void invariants() {
    const auto marks = marks_in_memory();
    check(marks.size() == node.cached.size(), "CachedKeys count != marks");
    for (const auto& [k, n] : marks) {
      auto it = node.store.marks.find(k);
      check(it != node.store.marks.end() && it->second == n, "a mark in memory is not on disk");
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  exo::fuzz::quiet_logs();
  World w;
  exo::fuzz::for_each_record(data, size, kNumOps, 32, [&](uint8_t op, const std::string& bytes) {
    w.run(op, bytes);
    w.invariants();
  });
  return 0;
}
