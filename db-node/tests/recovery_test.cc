// Start-up recovery (recovery.h): with the fake store for every branch, and with a real
// RocksDB (TransactionDB) in a temp dir for what must survive a process dying: a transaction
// left prepared, undelivered decisions, marks and dedup records.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handler_fixture.h"
#include "marks.h"
#include "records.h"
#include "recovery.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

std::string txlog_value(const std::string& node, const std::string& key) {
  std::string v;
  EXPECT_TRUE(encode_txlog_value(node, key, &v));
  return v;
}

// What write_cached does up to the local Prepare, then "dies": the transaction is left
// prepared (its object is destroyed without commit or rollback).
void prepare_and_crash(KvStore& store, uint64_t txid, const std::string& key,
                       const std::string& value) {
  StoreResult err;
  std::unique_ptr<StoreTxn> txn = store.begin(txid, &err);
  ASSERT_TRUE(txn) << err.error;
  const std::string tk = txlog_key(txid, Decision::kCommit), tv = txlog_value("cache0", key);
  ASSERT_TRUE(txn->put(Cf::kData, B(key), B(value)).ok());
  ASSERT_TRUE(txn->put(Cf::kTxlog, B(tk), B(tv)).ok());
  ASSERT_TRUE(txn->prepare().ok());
}

struct Recovered {
  CachedKeys cached;
  DedupTable dedup;
  Counters counters;
  FakePropagator prop{nullptr};
  RecoveryReport report;
  std::unique_ptr<Resolver> resolver;
  StoreResult run(KvStore& store, const Cluster& cluster) {
    resolver = std::make_unique<Resolver>(store, cached, prop, counters);
    return recover(store, cluster, cached, dedup, *resolver, &report);
  }
};

class FakeRecoveryTest : public ::testing::Test {
 protected:
  Cluster cluster = test_cluster();
  FakeStore store;
  Recovered rec;
};

TEST_F(FakeRecoveryTest, APreparedTransactionIsRolledBackAndItsAbortQueued) {
  store.data["k"] = "old";
  prepare_and_crash(store, 7, "k", "new");
  ASSERT_EQ(store.prepared.size(), 1u);
  ASSERT_TRUE(rec.run(store, cluster).ok());
  EXPECT_TRUE(store.prepared.empty());
  EXPECT_EQ(store.data.at("k"), "old");
  EXPECT_EQ(rec.report.prepared_rolled_back, 1u);
  EXPECT_EQ(rec.report.aborts_queued, 1u);
  const auto p = rec.resolver->pending();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].txid, 7u);
  EXPECT_EQ(p[0].decision, Decision::kAbort);
  EXPECT_EQ(p[0].key, "k");
  EXPECT_EQ(p[0].cache_node, "cache0");
  // Durable, for the case the node dies again before delivering it.
  EXPECT_EQ(store.txlog.count(txlog_key(7, Decision::kAbort)), 1u);
  EXPECT_EQ(counter(rec.counters, "txns_recovered"), 1u);
}

TEST_F(FakeRecoveryTest, CommitAndAbortRecordsAreQueued) {
  store.txlog[txlog_key(1, Decision::kCommit)] = txlog_value("cache0", "a");
  store.txlog[txlog_key(2, Decision::kAbort)] = txlog_value("cache0", "b");
  ASSERT_TRUE(rec.run(store, cluster).ok());
  EXPECT_EQ(rec.report.commits_queued, 1u);
  EXPECT_EQ(rec.report.aborts_queued, 1u);
  EXPECT_EQ(rec.resolver->run_once(), 2u);
  EXPECT_EQ(rec.prop.commit_txids, (std::vector<uint64_t>{1}));
  EXPECT_EQ(rec.prop.abort_txids, (std::vector<uint64_t>{2}));
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(FakeRecoveryTest, ACommitRecordOverridesAnAbortRecordOfTheSameTxid) {
  store.txlog[txlog_key(1, Decision::kCommit)] = txlog_value("cache0", "a");
  store.txlog[txlog_key(1, Decision::kAbort)] = txlog_value("cache0", "a");
  ASSERT_TRUE(rec.run(store, cluster).ok());
  const auto p = rec.resolver->pending();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].decision, Decision::kCommit);
  EXPECT_EQ(store.txlog.count(txlog_key(1, Decision::kAbort)), 0u);
}

TEST_F(FakeRecoveryTest, RecordsForUnknownCacheNodesAreDropped) {
  store.txlog[txlog_key(1, Decision::kCommit)] = txlog_value("gone", "a");
  store.txlog["junk"] = "x";
  store.marks["a"] = "gone";
  store.marks["b"] = "cache0";
  ASSERT_TRUE(rec.run(store, cluster).ok());
  EXPECT_EQ(rec.resolver->pending_count(), 0u);
  EXPECT_TRUE(store.txlog.empty());
  EXPECT_EQ(rec.report.txlog_dropped, 1u);
  EXPECT_EQ(rec.report.marks_loaded, 1u);
  EXPECT_EQ(rec.report.marks_dropped, 1u);
  EXPECT_EQ(store.marks.count("a"), 0u);
  EXPECT_EQ(rec.cached.lock_key(B("a")).holder("a"), nullptr);
  ASSERT_NE(rec.cached.lock_key(B("b")).holder("b"), nullptr);
}

TEST_F(FakeRecoveryTest, DedupRecordsAreLoaded) {
  const DedupRecord r{0, 99, 1'700'000'000'000};
  store.requests[request_key(RequestId{1, 2})] = encode_dedup(r);
  store.requests["bad"] = "bad";
  ASSERT_TRUE(rec.run(store, cluster).ok());
  EXPECT_EQ(rec.report.dedup_loaded, 1u);
  EXPECT_EQ(rec.report.dedup_dropped, 1u);
  EXPECT_TRUE(rec.dedup.find(RequestId{1, 2}, r.recorded_ms + 1));
  EXPECT_EQ(store.requests.size(), 1u);
}

TEST_F(FakeRecoveryTest, StoreErrorsStopTheStart) {
  store.fail_scan = true;
  EXPECT_FALSE(rec.run(store, cluster).ok());
  FakeStore s2;
  prepare_and_crash(s2, 7, "k", "v");
  s2.fail_txlog = true;  // the abort record cannot be written: do not roll back and lose it
  Recovered r2;
  EXPECT_FALSE(r2.run(s2, cluster).ok());
  EXPECT_EQ(s2.prepared.size(), 1u);
}

// ---- RocksDB ----

class RocksRecoveryTest : public ::testing::Test {
 protected:
  Cluster cluster = test_cluster();
  TempDir dir;
  std::string path = (dir.path / "db").string();
  std::unique_ptr<RocksStore> open() {
    std::string err;
    auto s = RocksStore::open(path, false, &err);
    EXPECT_TRUE(s) << err;
    return s;
  }
  static std::string get(KvStore& s, const std::string& k) {
    std::string v;
    const StoreResult r = s.get(B(k), &v);
    return r.ok() ? v : r.code == StoreResult::kNotFound ? "<none>" : "<error>";
  }
};

// The crash case the brief singles out: the TransactionDB is destroyed after Prepare() and
// before Commit(). RocksDB keeps the prepared transaction in the WAL and brings it back at
// the next open; it was never acknowledged, so it is rolled back and the cache node (which may
// have prepared) gets an Abort.
TEST_F(RocksRecoveryTest, APreparedTransactionSurvivesCloseAndIsRolledBack) {
  {
    auto s = open();
    ASSERT_TRUE(s->put(B("k"), B("old")).ok());
    prepare_and_crash(*s, 42, "k", "new");
    EXPECT_EQ(get(*s, "k"), "old");  // a prepared write is invisible
    ASSERT_TRUE(s->close().ok());
  }
  {
    auto s = open();
    std::vector<PreparedTxn> prepared;
    ASSERT_TRUE(s->prepared_txns(&prepared).ok());
    ASSERT_EQ(prepared.size(), 1u);
    EXPECT_EQ(prepared[0].txid, 42u);
    ASSERT_EQ(prepared[0].ops.size(), 2u);
    EXPECT_EQ(prepared[0].ops[0].cf, Cf::kData);
    EXPECT_EQ(prepared[0].ops[0].value, "new");
    EXPECT_EQ(prepared[0].ops[1].cf, Cf::kTxlog);

    Recovered rec;
    ASSERT_TRUE(rec.run(*s, cluster).ok());
    EXPECT_EQ(rec.report.prepared_rolled_back, 1u);
    const auto p = rec.resolver->pending();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].txid, 42u);
    EXPECT_EQ(p[0].decision, Decision::kAbort);
    EXPECT_EQ(p[0].key, "k");
    EXPECT_EQ(get(*s, "k"), "old");
    ASSERT_TRUE(s->close().ok());
  }
  {
    // Died again before the Abort was delivered: no prepared transaction any more, but the
    // abort record still queues the Abort.
    auto s = open();
    std::vector<PreparedTxn> prepared;
    ASSERT_TRUE(s->prepared_txns(&prepared).ok());
    EXPECT_TRUE(prepared.empty());
    Recovered rec;
    ASSERT_TRUE(rec.run(*s, cluster).ok());
    EXPECT_EQ(rec.report.aborts_queued, 1u);
    EXPECT_EQ(rec.resolver->run_once(), 1u);
    EXPECT_EQ(rec.prop.abort_txids, (std::vector<uint64_t>{42}));
    ASSERT_TRUE(s->close().ok());
  }
  {
    auto s = open();
    Recovered rec;
    ASSERT_TRUE(rec.run(*s, cluster).ok());
    EXPECT_EQ(rec.resolver->pending_count(), 0u);  // delivered: nothing left
  }
}

// The same with a real kill: a child process prepares and _exit()s without closing anything
// (no destructor runs, as with kill -9; the WAL was written with write(2) before Prepare()
// returned, so the kernel has it).
TEST_F(RocksRecoveryTest, APreparedTransactionSurvivesAProcessKill) {
  {
    auto s = open();
    ASSERT_TRUE(s->put(B("k"), B("old")).ok());
    ASSERT_TRUE(s->close().ok());
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string err;
    auto s = RocksStore::open(path, false, &err);
    if (!s) _exit(2);
    StoreResult e;
    auto txn = s->begin(43, &e);
    const std::string tk = txlog_key(43, Decision::kCommit), tv = txlog_value("cache0", "k");
    if (!txn || !txn->put(Cf::kData, B("k"), B("new")).ok() ||
        !txn->put(Cf::kTxlog, B(tk), B(tv)).ok() || !txn->prepare().ok())
      _exit(3);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto s = open();
  Recovered rec;
  ASSERT_TRUE(rec.run(*s, cluster).ok());
  EXPECT_EQ(rec.report.prepared_rolled_back, 1u);
  ASSERT_EQ(rec.resolver->pending_count(), 1u);
  EXPECT_EQ(rec.resolver->pending()[0].txid, 43u);
  EXPECT_EQ(get(*s, "k"), "old");
}

// A write acknowledged OK whose Commit RPC failed, then the node restarts: the new value is
// there, the Commit is delivered after the restart, and a resend of the request is answered
// from the reloaded dedup record instead of being applied again.
TEST_F(RocksRecoveryTest, ACommittedWriteIsDeliveredAndDeduplicatedAfterRestart) {
  const std::string key = key_owned_by(cluster, 0);
  const auto put = request(wire::kPut, key, "new", 77);
  uint64_t txid = 0;
  {
    auto s = open();
    ASSERT_TRUE(s->put(B(key), B("old")).ok());
    Recovered rec;
    ASSERT_TRUE(rec.run(*s, cluster).ok());
    {
      CachedKeys::Guard g = rec.cached.lock_key(B(key));  // as Fetch does
      ASSERT_TRUE(mark_held(*s, g, key, "cache0").ok());
    }
    rec.prop.commit_result = FinishOutcome::kUnreachable;
    TxIdSource txids{500};
    NodeContext ctx{cluster, 0, *s, rec.cached, rec.prop, txids, rec.dedup, *rec.resolver, nullptr};
    Counters c;
    RequestHandler h(ctx, c);
    std::vector<uint8_t> out(16384);
    const size_t n = h.handle(put, out);
    wire::FrameView r{};
    ASSERT_EQ(wire::parse(std::span<const uint8_t>(out.data(), n), r), wire::ParseError::kNone);
    EXPECT_EQ(r.status, wire::kOk);
    ASSERT_EQ(rec.resolver->pending_count(), 1u);
    txid = rec.resolver->pending()[0].txid;
    ASSERT_TRUE(s->close().ok());
  }
  auto s = open();
  Recovered rec;
  ASSERT_TRUE(rec.run(*s, cluster).ok());
  EXPECT_EQ(get(*s, key), "new");
  EXPECT_EQ(rec.report.commits_queued, 1u);
  EXPECT_EQ(rec.report.marks_loaded, 1u);
  EXPECT_EQ(rec.report.dedup_loaded, 1u);
  ASSERT_NE(rec.cached.lock_key(B(key)).holder(key), nullptr);  // the mark survived
  EXPECT_EQ(rec.resolver->run_once(), 1u);
  EXPECT_EQ(rec.prop.commit_txids, (std::vector<uint64_t>{txid}));

  TxIdSource txids{900};
  NodeContext ctx{cluster, 0, *s, rec.cached, rec.prop, txids, rec.dedup, *rec.resolver, nullptr};
  Counters c;
  RequestHandler h(ctx, c);
  std::vector<uint8_t> out(16384);
  ASSERT_TRUE(s->put(B(key), B("newer")).ok());  // a later write by someone else
  const size_t n = h.handle(put, out);             // the late resend of the first PUT
  wire::FrameView r{};
  ASSERT_EQ(wire::parse(std::span<const uint8_t>(out.data(), n), r), wire::ParseError::kNone);
  EXPECT_EQ(r.status, wire::kOk);
  EXPECT_EQ(get(*s, key), "newer");
  EXPECT_EQ(counter(c, "duplicate_writes"), 1u);
  EXPECT_TRUE(rec.prop.txids.empty());  // not propagated again either
}

}  // namespace
}  // namespace exo::db
