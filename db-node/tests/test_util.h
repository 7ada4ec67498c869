// Shared helpers for the db node tests: temp dirs, an in-code cluster, frame builders, fakes.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cached_keys.h"
#include "cluster.h"
#include "counters.h"
#include "dedup_table.h"
#include "propagator.h"
#include "resolver.h"
#include "store.h"
#include "wire.h"

namespace exo::db::testing {

inline std::span<const uint8_t> B(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/exodb_testXXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// db0 owns slot 0 (hash top bit 0) and db1 slot 1; one cache node "cache0". Plaintext gRPC and no
// caller checks (security.insecure_dev_mode): tests of mutual TLS make their own certificates
// (common/cpp/tests/test_pki.h).
inline Cluster test_cluster() {
  Cluster c;
  c.security.insecure_dev_mode = true;
  c.mtu = 1500;
  c.udp_port = 7777;
  c.service_ip = 0x0a0000fe;
  c.partition_bits = 1;
  CacheNodeInfo cache;
  cache.name = "cache0";
  cache.mac = {0x02, 0, 0, 0, 1, 1};
  cache.ip = 0x0a000101;
  cache.grpc = "unix:/nonexistent/exodb-cache0.sock";
  c.cache_nodes.push_back(cache);
  for (int i = 0; i < 2; ++i) {
    DbNodeInfo d;
    d.name = "db" + std::to_string(i);
    d.mac = {0x02, 0, 0, 0, 2, static_cast<uint8_t>(i + 1)};
    d.ip = 0x0a000201 + i;
    d.iface = d.name + "-eth0";
    d.cache_node = "cache0";
    c.db_nodes.push_back(d);
  }
  c.slot_owner = {0, 1};
  return c;
}

// A key whose hash lands in the slot of db node `owner` (0 or 1).
inline std::string key_owned_by(const Cluster& c, uint32_t owner, const std::string& stem = "k") {
  for (int i = 0;; ++i) {
    std::string k = stem + std::to_string(i);
    if (c.owner_index(key_hash(B(k))) == owner) return k;
  }
}

inline const Mac kClientMac = {0x02, 0, 0, 0, 3, 1};
inline constexpr uint32_t kClientIp = 0x0a000301;
inline constexpr uint16_t kClientPort = 40001;

inline std::vector<uint8_t> request(uint8_t op, const std::string& key, const std::string& value = "",
                                    uint32_t seq = 1, uint8_t flags = 0, uint16_t port = 7777,
                                    uint8_t prefix = 0) {
  if (!prefix) prefix = op == wire::kGet ? kPrefixGet : kPrefixOther;
  const uint64_t hash = key_hash(B(key));
  const Mac dst = request_mac(prefix, hash);
  std::vector<uint8_t> f(wire::kMinFrame + key.size() + value.size());
  wire::Header h;
  h.opcode = op;
  h.flags = flags;
  h.client_id = 0xC0FFEE;
  h.seq = seq;
  const size_t n = wire::build(f, dst.data(), wire::Addr{kClientMac.data(), kClientIp, kClientPort},
                               request_ip(hash), port, h, B(key), B(value));
  f.resize(n);
  return f;
}

// What the switch does to a frame with prefix 0xAE that arrives on a cache node's port: it sets
// the IPv4 DSCP to wire::kForwardedDscp (docs/switch-rules.md, "Ingress hygiene") and the
// header checksum with it. A forwarded GET without it is a client's forgery to a db node.
inline std::vector<uint8_t> from_cache_port(std::vector<uint8_t> f) {
  wire::FrameHeader* h = wire::header_of(f.data());
  h->ip.tos = static_cast<uint8_t>(wire::kForwardedDscp << 2 | (h->ip.tos & 0x03));
  h->ip.checksum.set(0);
  h->ip.checksum.set(wire::ipv4_checksum(f.data() + wire::kEthLen));
  return f;
}

// Records every store and propagation step in one shared log, so tests can assert ordering.
class EventLog {
 public:
  void add(const std::string& e) {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(e);
  }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lk(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> events_;
};

// An in-memory KvStore with the same semantics as RocksStore (atomic batches, transactions
// invisible until commit, a prepared transaction destroyed unfinished is "left in the WAL" for
// prepared_txns(), as after a crash) and failure injection. Data operations and transaction
// steps are recorded in the EventLog: "put k=v", "del k", "txn prepare", "txn commit",
// "txn rollback", with " FAIL" appended when injected to fail.
class FakeStore : public KvStore {
 public:
  explicit FakeStore(EventLog* log = nullptr) : log_(log) {}

  // Failure injection, set before the calls it should affect.
  bool fail_get = false;
  bool fail_put = false, fail_del = false;  // data puts/deletes: fail a batch whole, or a txn op
  bool fail_marks = false;                  // batches writing Cf::kCached
  bool fail_txlog = false;                  // batches writing Cf::kTxlog (not transactions)
  bool fail_requests = false;               // batches writing Cf::kRequests (the dedup sweep)
  bool fail_begin = false, fail_prepare = false, fail_commit = false, fail_rollback = false;
  bool fail_scan = false;
  // Called at the start of every scan, before the column family is read (outside the store's
  // lock): a test's way to land a write between two scans of one caller.
  std::function<void(Cf)> before_scan;

  // Contents, one map per column family (tests read and seed them directly).
  std::map<std::string, std::string> data, marks, requests, txlog;
  // Transactions destroyed while prepared: what a crash leaves in the WAL.
  std::map<uint64_t, std::vector<RecoveredOp>> prepared;
  // Batches written with each durability (for tests of what is synced).
  int synced_writes = 0, relaxed_writes = 0;

  std::map<std::string, std::string>& cf(Cf c) {
    switch (c) {
      case Cf::kData: return data;
      case Cf::kCached: return marks;
      case Cf::kRequests: return requests;
      case Cf::kTxlog: return txlog;
    }
    return data;
  }

  StoreResult get(Bytes key, std::string* value) override {
    std::lock_guard<std::mutex> lk(mu_);
    value->clear();
    if (fail_get) return StoreResult::Error("injected get failure");
    auto it = data.find(str(key));
    if (it == data.end()) return StoreResult::NotFound();
    *value = it->second;
    return StoreResult::Ok();
  }

  // Counts the batched reads (the packet loop reads a burst's GETs with one call).
  int multi_gets = 0;
  void multi_get(std::span<const Bytes> keys, std::vector<std::string>* values,
                 std::vector<StoreResult>* results) override {
    ++multi_gets;
    KvStore::multi_get(keys, values, results);
  }

  StoreResult write(std::span<const StoreOp> ops,
                    Durability d = Durability::kAsConfigured) override {
    std::lock_guard<std::mutex> lk(mu_);
    bool fail = false;
    for (const StoreOp& op : ops) {
      const bool f = fails(op.cf, op.is_delete);
      if (op.cf == Cf::kData) record(describe(op.is_delete, op.key, op.value) + (f ? " FAIL" : ""));
      fail |= f;
    }
    if (fail) return StoreResult::Error("injected write failure");
    for (const StoreOp& op : ops) apply(op.cf, op.is_delete, str(op.key), str(op.value));
    ++(d == Durability::kRelaxed ? relaxed_writes : synced_writes);
    return StoreResult::Ok();
  }

  StoreResult scan(Cf c,
                   const std::function<void(std::string_view, std::string_view)>& fn) override {
    if (before_scan) before_scan(c);
    std::map<std::string, std::string> copy;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (fail_scan) return StoreResult::Error("injected scan failure");
      copy = cf(c);
    }
    for (const auto& [k, v] : copy) fn(k, v);
    return StoreResult::Ok();
  }

  std::unique_ptr<StoreTxn> begin(uint64_t txid, StoreResult* error) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (fail_begin) {
      *error = StoreResult::Error("injected begin failure");
      return nullptr;
    }
    return std::make_unique<Txn>(*this, txid);
  }

  StoreResult prepared_txns(std::vector<PreparedTxn>* out) override {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [txid, ops] : prepared) out->push_back(PreparedTxn{txid, ops});
    return StoreResult::Ok();
  }

  StoreResult rollback_prepared(uint64_t txid) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (fail_rollback) return StoreResult::Error("injected rollback failure");
    if (!prepared.erase(txid)) return StoreResult::Error("no prepared transaction");
    return StoreResult::Ok();
  }

 private:
  class Txn final : public StoreTxn {
   public:
    Txn(FakeStore& s, uint64_t txid) : s_(s), txid_(txid) {}
    ~Txn() override {
      std::lock_guard<std::mutex> lk(s_.mu_);
      if (state_ == kPrepared) s_.prepared[txid_] = ops_;  // as if the process had died
    }
    StoreResult put(Cf c, Bytes key, Bytes value) override { return add(c, false, key, value); }
    StoreResult del(Cf c, Bytes key) override { return add(c, true, key, {}); }
    StoreResult prepare() override {
      std::lock_guard<std::mutex> lk(s_.mu_);
      s_.record(std::string("txn prepare") + (s_.fail_prepare ? " FAIL" : ""));
      if (state_ != kOpen) return StoreResult::Error("not open");
      if (s_.fail_prepare) return StoreResult::Error("injected prepare failure");
      state_ = kPrepared;
      return StoreResult::Ok();
    }
    StoreResult commit() override {
      std::lock_guard<std::mutex> lk(s_.mu_);
      s_.record(std::string("txn commit") + (s_.fail_commit ? " FAIL" : ""));
      if (state_ != kPrepared) return StoreResult::Error("not prepared");
      if (s_.fail_commit) return StoreResult::Error("injected commit failure");
      for (const RecoveredOp& op : ops_) s_.apply(op.cf, op.is_delete, op.key, op.value);
      state_ = kDone;
      return StoreResult::Ok();
    }
    StoreResult rollback() override {
      std::lock_guard<std::mutex> lk(s_.mu_);
      s_.record(std::string("txn rollback") + (s_.fail_rollback ? " FAIL" : ""));
      if (s_.fail_rollback) return StoreResult::Error("injected rollback failure");
      state_ = kDone;
      return StoreResult::Ok();
    }

   private:
    StoreResult add(Cf c, bool is_delete, Bytes key, Bytes value) {
      std::lock_guard<std::mutex> lk(s_.mu_);
      const bool f = c == Cf::kData && (is_delete ? s_.fail_del : s_.fail_put);
      if (c == Cf::kData) s_.record(describe(is_delete, key, value) + (f ? " FAIL" : ""));
      if (f) return StoreResult::Error("injected txn write failure");
      if (state_ != kOpen) return StoreResult::Error("transaction already prepared");
      ops_.push_back(RecoveredOp{c, is_delete, str(key), str(value)});
      return StoreResult::Ok();
    }
    enum State { kOpen, kPrepared, kDone };
    FakeStore& s_;
    uint64_t txid_;
    State state_ = kOpen;
    std::vector<RecoveredOp> ops_;
  };

  bool fails(Cf c, bool is_delete) const {
    switch (c) {
      case Cf::kData: return is_delete ? fail_del : fail_put;
      case Cf::kCached: return fail_marks;
      case Cf::kTxlog: return fail_txlog;
      case Cf::kRequests: return fail_requests;
    }
    return false;
  }
  void apply(Cf c, bool is_delete, const std::string& k, const std::string& v) {
    if (is_delete) cf(c).erase(k);
    else cf(c)[k] = v;
  }
  static std::string describe(bool is_delete, Bytes key, Bytes value) {
    return is_delete ? "del " + str(key) : "put " + str(key) + "=" + str(value);
  }
  static std::string str(Bytes b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void record(const std::string& e) {
    if (log_) log_->add(e);
  }
  std::mutex mu_;
  EventLog* log_;
};

// Records every call in the EventLog ("prepare cache0 k put=v", "commit cache0 k",
// "abort cache0 k") and answers as configured.
class FakePropagator : public Propagator {
 public:
  explicit FakePropagator(EventLog* log) : log_(log) {}
  PrepareOutcome::Code prepare_result = PrepareOutcome::kPrepared;
  FinishOutcome::Code commit_result = FinishOutcome::kDone, abort_result = FinishOutcome::kDone;
  std::vector<uint64_t> txids, commit_txids, abort_txids;
  // For the concurrency test: how many calls for one key overlapped at most.
  std::chrono::microseconds prepare_delay{0};
  std::atomic<int> in_flight{0}, max_in_flight{0};

  PrepareOutcome prepare(const std::string& node, std::span<const uint8_t> key, uint64_t txid,
                         bool is_delete, std::span<const uint8_t> value) override {
    enter();
    if (prepare_delay.count()) std::this_thread::sleep_for(prepare_delay);
    {
      std::lock_guard<std::mutex> lk(mu_);
      record("prepare " + node + " " + str(key) + (is_delete ? " delete" : " put=" + str(value)));
      txids.push_back(txid);
    }
    PrepareOutcome o;
    o.code = prepare_result;
    if (o.code == PrepareOutcome::kFailed) o.error = "injected";
    --in_flight;
    return o;
  }
  FinishOutcome commit(const std::string& node, std::span<const uint8_t> key,
                       uint64_t txid) override {
    return finish("commit ", node, key, txid, commit_result, commit_txids);
  }
  FinishOutcome abort(const std::string& node, std::span<const uint8_t> key,
                      uint64_t txid) override {
    return finish("abort ", node, key, txid, abort_result, abort_txids);
  }

 private:
  void enter() {
    const int now = ++in_flight;
    int prev = max_in_flight.load();
    while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
    }
  }
  FinishOutcome finish(const char* what, const std::string& node, std::span<const uint8_t> key,
                       uint64_t txid, FinishOutcome::Code result, std::vector<uint64_t>& ids) {
    enter();
    FinishOutcome o;
    {
      std::lock_guard<std::mutex> lk(mu_);
      record(what + node + " " + str(key));
      ids.push_back(txid);
      o.code = result;
    }
    if (o.code == FinishOutcome::kRefused || o.code == FinishOutcome::kUnreachable)
      o.error = "injected";
    --in_flight;
    return o;
  }
  static std::string str(std::span<const uint8_t> b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void record(const std::string& e) {
    if (log_) log_->add(e);
  }
  std::mutex mu_;
  EventLog* log_;
};

// The shared objects of a db node over fakes, for handler, control and recovery tests.
struct FakeNode {
  explicit FakeNode(EventLog* log = nullptr) : store(log), prop(log) {}
  Cluster cluster = test_cluster();
  FakeStore store;
  CachedKeys cached;
  FakePropagator prop;
  TxIdSource txids{100};
  DedupTable dedup;
  Counters resolver_counters;
  Resolver resolver{store, cached, prop, resolver_counters};
};

}  // namespace exo::db::testing
