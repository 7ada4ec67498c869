// libFuzzer target: the cache node's control plane on arbitrary request messages. The handlers of
// the CacheNode gRPC service (Cache, Evict, Prepare, Commit, Abort, DropEntries, Report, Reset,
// ListKeys, Stats) are called directly, as gRPC's threads call them once a request is decoded
// (they do not use the ServerContext), with the filler's rounds in between; outgoing RPCs go to
// the tests' FakePeers, whose failures the input switches on and off, and a message can be run
// from inside the next FETCH (what a concurrent RPC does).
//
// Input: a sequence of [op:1][len:2, big-endian][len bytes]. For an RPC the bytes are its request
// message in protobuf encoding (ParseFromArray; a message that does not parse is skipped).
// Checked after every step: nothing is left fetching, the map within capacity, the replies
// consistent with the requests, a Reset empties the map, and (in FakePeers) no rule is asked
// for a key that is not in the map.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#define EXO_FAKE_PEERS_CHECK(cond, what)                       \
  do {                                                         \
    if (!(cond)) {                                             \
      std::fprintf(stderr, "%s\n", std::string(what).c_str()); \
      std::abort();                                            \
    }                                                          \
  } while (0)
#include "../tests/fake_peers.h"
#include "control_service.h"
#include "fill/filler.h"
#include "fuzz/fuzz_util.h"
#include "log.h"
#include "request_handler.h"
#include "wire.h"

using namespace exo::cache;
using exo::cache::testing::FakePeers;

namespace {

enum Op : uint8_t {
  kCache,
  kEvict,
  kPrepare,
  kCommit,
  kAbort,
  kDropEntries,
  kReport,
  kReset,
  kListAndStats,
  kFillRound,
  kRetire,
  kDuringNextFetch,  // the next step runs inside the next FETCH instead of now
  kFaults,           // [fail_adds | fail_removes << 2 | reject_adds << 4 | unreachable << 6][key]
  kClock,            // [ms:2]
  kGet,              // [key]: a GET through the data plane
  kNumOps
};

constexpr size_t kCapacity = 4;  // filler selection; the map holds twice as many

using exo::fuzz::check;

exo::Cluster make_cluster() {
  exo::Cluster c;
  c.mtu = 1500;
  c.partition_bits = 1;
  c.security.insecure_dev_mode = true;  // handlers are called without a gRPC context
  exo::DbNodeInfo db;
  db.name = "db0";
  c.db_nodes.push_back(db);
  c.slot_owner = {0, 0};
  exo::CacheNodeInfo self;
  self.name = "cache0";
  self.capacity = kCapacity;
  c.cache_nodes.push_back(self);
  return c;
}

struct World {
  exo::Cluster cluster = make_cluster();
  CacheState state{map_capacity_for(kCapacity)};
  CpCounters cp;
  DpCounters dp;
  FakePeers peers;
  Heads heads{HeadsTable::from_cluster(cluster)};
  HotList hot{cluster.cache_fill.report_ttl_ms};
  uint64_t now = 1'000'000;
  ControlService svc{cluster, "cache0", state, cp, peers, heads, hot, [this] { return dp; },
                     [this] { return now; }};
  Filler filler{FillerOptions::from(cluster, cluster.cache_nodes[0]), state, peers, hot, cp,
                [this] { return now; }};
  uint64_t resets = 0;
  std::optional<std::pair<uint8_t, std::string>> fetch_step;  // runs inside the next FETCH
  Keys reset_during_fetch;  // keys of a FETCH a Reset cancelled: none may be inserted by it

  World() {
    peers.state = &state;
    peers.during_fetch = [this](const Keys& keys) {
      auto step = std::exchange(fetch_step, std::nullopt);
      if (!step) return;
      const uint64_t before = resets;
      run(step->first, step->second);
      if (resets != before) reset_during_fetch = keys;
    };
    for (const char* k : {"a", "b", "c", "d", "e", "f", "g", "h", "k"}) peers.data[k] = std::string("v-") + k;
    peers.data["empty"] = "";
    peers.data["big"] = std::string(exo::wire::max_kv_bytes(cluster.mtu), 'x');  // never fits
  }

  template <typename Req>
  static std::optional<Req> parse(const std::string& bytes) {
    Req r;
    if (!r.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
    return r;
  }

  void keys_reply_ok(const exo::KeysRequest& req, const exo::KeysReply& rep) {
    check(rep.done() <= static_cast<uint32_t>(req.keys_size()), "done > keys asked for");
  }

  void run(uint8_t op, const std::string& bytes) {
    switch (op) {
      case kCache:
      case kEvict:
      case kDropEntries: {
        auto req = parse<exo::KeysRequest>(bytes);
        if (!req) return;
        exo::KeysReply rep;
        const grpc::Status s = op == kCache ? svc.Cache(nullptr, &*req, &rep)
                               : op == kEvict ? svc.Evict(nullptr, &*req, &rep)
                                              : svc.DropEntries(nullptr, &*req, &rep);
        check(s.ok(), "keys RPC failed");
        keys_reply_ok(*req, rep);
        return;
      }
      case kPrepare: {
        auto req = parse<exo::PrepareRequest>(bytes);
        if (!req) return;
        exo::TxReply rep;
        check(svc.Prepare(nullptr, &*req, &rep).ok(), "Prepare failed");
        return;
      }
      case kCommit:
      case kAbort: {
        auto req = parse<exo::TxRequest>(bytes);
        if (!req) return;
        exo::TxReply rep;
        check((op == kCommit ? svc.Commit(nullptr, &*req, &rep) : svc.Abort(nullptr, &*req, &rep)).ok(),
              "Commit/Abort failed");
        check(!rep.ok() || rep.error().empty(), "ok with an error");
        return;
      }
      case kReport: {
        auto req = parse<exo::ReportRequest>(bytes);
        if (!req) return;
        exo::ReportReply rep;
        check(svc.Report(nullptr, &*req, &rep).ok(), "Report failed");
        check(rep.accepted() == rep.error().empty(), "Report: accepted iff no error");
        return;
      }
      case kReset: {
        auto req = parse<exo::StatsRequest>(bytes);
        if (!req) return;
        size_t held;
        {
          std::lock_guard lock(state.mu);
          held = state.map.size();
        }
        exo::KeysReply rep;
        check(svc.Reset(nullptr, &*req, &rep).ok(), "Reset failed");
        ++resets;
        check(rep.done() == held, "Reset: done != entries held");
        std::lock_guard lock(state.mu);
        check(state.map.size() == 0 && state.map.pending_count() == 0, "Reset left entries");
        check(state.keys.retiring_count() == 0, "Reset left retiring keys");
        for (const auto& k : state.keys.fetching_keys())
          check(state.keys.state(k) == KeyState::kFetchCancelled, "Reset left a FETCH live");
        return;
      }
      case kListAndStats: {
        auto req = parse<exo::StatsRequest>(bytes);
        if (!req) return;
        exo::CachedKeysReply keys;
        check(svc.ListKeys(nullptr, &*req, &keys).ok(), "ListKeys failed");
        exo::StatsReply st;
        check(svc.Stats(nullptr, &*req, &st).ok(), "Stats failed");
        check(static_cast<size_t>(st.counters_size()) == std::size(kCounterInfo), "Stats: counters");
        std::lock_guard lock(state.mu);
        check(static_cast<size_t>(keys.keys_size()) == state.map.size(), "ListKeys != map");
        return;
      }
      case kFillRound:
        filler.run_round();
        return;
      case kRetire:
        filler.retire_once();
        return;
      case kFaults: {
        if (bytes.empty()) return;
        const uint8_t b = static_cast<uint8_t>(bytes[0]);
        peers.fail_adds = b & 3;
        peers.fail_removes = (b >> 2) & 3;
        peers.reject_adds = (b >> 4) & 3;
        peers.unreachable.clear();
        if (b & 0x40) peers.unreachable.insert(bytes.substr(1));
        return;
      }
      case kClock: {
        uint64_t ms = 0;
        for (size_t i = 0; i < bytes.size() && i < 2; ++i) ms = ms << 8 | static_cast<uint8_t>(bytes[i]);
        now += ms;
        return;
      }
      case kGet: {
        if (bytes.empty() || bytes.size() > exo::wire::kMaxKeyLen) return;
        std::vector<uint8_t> buf(2048);
        const uint64_t hash = LruMap::hash_of(bytes);
        const exo::Mac dst = exo::request_mac(exo::kPrefixGet, hash);
        const exo::Mac client{0x02, 0, 0, 0, 3, 1};
        exo::wire::Header h;
        h.opcode = exo::wire::kGet;
        const size_t len = exo::wire::build(
            buf, dst.data(), {client.data(), 0x0a000301, 40000}, exo::request_ip(hash), 7777, h,
            {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, {});
        check(len > 0, "GET frame not built");
        SelfInfo self;
        self.mac = {0x02, 0, 0, 0, 1, 1};
        FrameRef f{buf.data(), len, buf.size()};
        DpCounters c;
        process_burst(&f, 1, state, self, c);
        check(c.gets == 1 && c.hits + c.forwarded_misses == 1, "GET not counted once");
        bool served;
        {
          std::lock_guard lock(state.mu);
          const LruMap::Entry* e = state.map.find(bytes);
          served = e && !e->pending && bytes.size() + e->value.size() <= exo::wire::max_kv_bytes(cluster.mtu);
        }
        check((f.action == Action::kReply) == served, "GET: hit iff held, not pending and fits");
        return;
      }
      default:
        return;
    }
  }

  void invariants() {
    std::lock_guard lock(state.mu);
    for (const auto& k : reset_during_fetch) check(!state.map.find(k), "a FETCH cancelled by Reset inserted");
    reset_during_fetch.clear();
    check(state.keys.fetching_count() == 0, "a FETCH left fetching");
    if (std::string bad = state.keys.check(); !bad.empty()) check(false, bad.c_str());
    check(state.map.size() <= state.map.capacity(), "map over capacity");
    check(state.map.pending_count() <= state.map.size(), "more pending than entries");
    check(cp.resets.load() == resets, "resets counter");
    for (const auto& k : state.map.keys())
      check(!k.empty() && k.size() <= exo::wire::kMaxKeyLen, "bad key in the map");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  exo::fuzz::quiet_logs();
  World w;
  bool defer_next = false;
  exo::fuzz::for_each_record(data, size, kNumOps, 64, [&](uint8_t op, std::string bytes) {
    if (op == kDuringNextFetch) {
      defer_next = true;
      return;
    }
    if (defer_next) {
      // Runs once, inside the next FETCH (of the Cache RPC or the filler), like a concurrent RPC.
      defer_next = false;
      w.fetch_step.emplace(op, std::move(bytes));
      return;
    }
    w.run(op, bytes);
    w.invariants();
  });
  return 0;
}
