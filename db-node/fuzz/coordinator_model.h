// A model world for the cached-write coordinator's pure state machines (src/coordinator/:
// CachedWrite, Delivery, DecisionBook, Round, the recovery plan) driven through random event
// sequences against a model of everything around them: a store with a write-ahead log (synced
// and unsynced entries, two-phase transactions, injected failures), a cache node that answers
// Prepare/Commit/Abort as its protocol says (docs/two-phase-commit.md), a network that loses
// requests or replies, and crashes of the db node (kill -9: the whole WAL survives; OS crash:
// the synced part and a prefix of the rest) at any action, recovery included.
//
// Used by fuzz/coordinator_fuzz.cc (random inputs) and tests/coordinator_model_test.cc (the
// checker shown rejecting the skip-prepare mutant). run() plays one input: each byte picks a step
// (a client write, a resolver round, a Fetch, an Evict, a cache node restart or ForgetCacheNode,
// a db node crash, or new fault settings).
//
// Invariants (broken() aborts, or throws BrokenInvariant when throw_on_broken() is set):
//  ack      a write is answered OK only once it is committed locally (durably: commit entries
//           are synced), and the cache node then holds the key pending with its txid, holds its
//           value, or holds no entry for the key;
//  refusal  a BUSY or ERROR write is never committed, locally or at the cache node;
//  once     no txid is committed twice locally, and the cache node applies a Commit only of a
//           txid committed locally, at most once;
//  fresh    between steps, every entry the cache node serves (not pending) has the db node's
//           committed value, and its key is marked as held;
//  durable  after every restart, each key holds its last acknowledged write or a later one;
//  decided  at the end of every input (all faults off, a kill, recovery, resolver rounds):
//           nothing is left prepared or undelivered and the cache node has nothing pending;
//  sane     no machine is ever given an event its state does not expect (rejected() == 0),
//           and no transition overflows its action list.
// One exception, written down in resolver.h: an Abort whose durable record could not be written
// is only in memory; if the node then dies before delivering it, the cache node keeps that key
// pending (its reads are forwarded, so they stay correct) until the entry is dropped or the next
// write's Prepare supersedes it. Such keys are excluded from "decided" (and only those).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/cached_write.h"
#include "coordinator/decision_book.h"
#include "coordinator/delivery.h"
#include "coordinator/recovery_plan.h"
#include "wire.h"

namespace exo::db::model {

struct BrokenInvariant : std::exception {
  std::string invariant, detail;
  BrokenInvariant(std::string i, std::string d) : invariant(std::move(i)), detail(std::move(d)) {}
  const char* what() const noexcept override { return invariant.c_str(); }
};

// Set by tests: report a broken invariant by throwing instead of aborting.
inline bool& throw_on_broken() {
  static bool on = false;
  return on;
}

// Set by a debugging session (coordinator_fuzz -- EXO_MODEL_TRACE=1): every step to stderr.
inline bool& trace() {
  static bool on = std::getenv("EXO_MODEL_TRACE") != nullptr;
  return on;
}
#define MODEL_TRACE(...) \
  do {                   \
    if (trace()) std::fprintf(stderr, __VA_ARGS__); \
  } while (0)

[[noreturn]] inline void broken(const char* invariant, const std::string& detail) {
  if (throw_on_broken()) throw BrokenInvariant(invariant, detail);
  std::fprintf(stderr, "invariant '%s' broken: %s\n", invariant, detail.c_str());
  std::abort();
}
#define MODEL_CHECK(cond, invariant, detail)      \
  do {                                      \
    if (!(cond)) broken(invariant, detail); \
  } while (0)

struct Crash {};           // the db node dies (thrown at any action)
struct RecoveryFailed {};  // start-up met a store error: the node exits and is started again

inline const std::string kNode = "cache0";
inline const char* const kKeys[] = {"a", "b", "c"};
constexpr int kNumCf = 4;

// ---- The store: every change is a WAL entry; a restart replays what survived ----

struct Op {
  Cf cf = Cf::kData;
  bool del = false;
  std::string key, value;
};

struct WalEntry {
  enum Kind { kBatch, kPrepare, kCommit, kRollback } kind = kBatch;
  uint64_t txid = 0;
  std::vector<Op> ops;
  bool synced = false;
};

struct Store {
  std::vector<WalEntry> wal;
  std::map<std::string, std::string> cf[kNumCf];
  std::map<uint64_t, std::vector<Op>> prepared;  // prepared, neither committed nor rolled back
  std::set<uint64_t> committed;                   // every txid ever committed (live, not replay)

  // Injected failures.
  bool fail_begin = false, fail_txn = false, fail_commit = false, fail_rollback = false;
  bool fail_synced = false, fail_relaxed = false;  // plain batches by durability

  void apply(const WalEntry& e) {
    switch (e.kind) {
      case WalEntry::kBatch:
        for (const Op& op : e.ops) put(op);
        break;
      case WalEntry::kPrepare:
        prepared[e.txid] = e.ops;
        break;
      case WalEntry::kCommit:
        for (const Op& op : prepared[e.txid]) put(op);
        prepared.erase(e.txid);
        break;
      case WalEntry::kRollback:
        prepared.erase(e.txid);
        break;
    }
  }
  void put(const Op& op) {
    auto& m = cf[static_cast<int>(op.cf)];
    if (op.del) m.erase(op.key);
    else m[op.key] = op.value;
  }
  void append(WalEntry e) {
    apply(e);
    wal.push_back(std::move(e));
  }
  bool write(std::span<const StoreOp> ops, Durability d) {
    if (d == Durability::kRelaxed ? fail_relaxed : fail_synced) return false;
    WalEntry e;
    for (const StoreOp& op : ops)
      e.ops.push_back(Op{op.cf, op.is_delete, std::string(sv_of(op.key)), std::string(sv_of(op.value))});
    e.synced = d == Durability::kAsConfigured;  // sync_writes: true
    append(std::move(e));
    return true;
  }
  // kill -9 keeps the whole WAL (the kernel has it); an OS crash keeps the synced prefix and
  // `keep` of the unsynced entries after it (a sync flushes everything before it).
  void crash(bool os, size_t keep) {
    size_t synced_end = 0;
    for (size_t i = 0; i < wal.size(); ++i)
      if (wal[i].synced) synced_end = i + 1;
    if (os && wal.size() > synced_end + keep) wal.resize(synced_end + keep);
    for (auto& m : cf) m.clear();
    prepared.clear();
    for (const WalEntry& e : wal) apply(e);
  }
  const std::string* data(const std::string& k) const {
    auto it = cf[0].find(k);
    return it == cf[0].end() ? nullptr : &it->second;
  }
};

// ---- The cache node (the participant) ----

enum class Net : uint8_t { kDeliver, kLoseRequest, kLoseReply };

struct CacheNode {
  struct Pending {
    uint64_t txid;
    bool del;
    std::string value;
  };
  struct Entry {
    std::string value;
    std::optional<Pending> pending;
  };
  std::map<std::string, Entry> entries;
  std::set<uint64_t> installed;  // txids whose Commit was applied (checks "once")
};

// ---- The world: the db node's memory, the store, the cache node, the client's view ----

struct World {
  Store store;
  CacheNode cache;
  std::map<std::string, std::string> marks;  // CachedKeys: key -> cache node
  DecisionBook book;
  uint64_t next_txid = 1000;  // TxIdSource: grows across restarts (it starts from the clock)
  Net net_prepare = Net::kDeliver, net_commit = Net::kDeliver, net_abort = Net::kDeliver;
  int crash_in = -1;     // actions until the db node dies (-1: never)
  bool os_crash = false;
  size_t os_keep = 0;

  // The client's view, by write id (values are "w<id>").
  int next_write = 1;
  std::map<int, std::pair<std::string, bool>> writes;  // id -> (key, is_delete)
  std::map<std::string, int> last_acked;               // key -> id
  std::set<uint64_t> refused_txids;
  std::set<int> refused_writes;
  // Aborts whose record could not be written (memory only), and keys that may stay pending.
  std::map<uint64_t, std::string> memory_only;  // txid -> key
  std::set<std::string> may_stay_pending;

  void tick() {
    if (crash_in == 0) {
      MODEL_TRACE("  CRASH (%s)\n", os_crash ? "os" : "kill");
      crash_in = -1;
      throw Crash{};
    }
    if (crash_in > 0) --crash_in;
  }

  // The sane invariant around every machine.
  template <typename M>
  struct Checked {
    M& m;
    ActionList on(const Event& e) {
      const uint32_t before = m.rejected();
      ActionList l = m.on(e);
      MODEL_CHECK(m.rejected() == before, "sane", std::string("event ") + name(e.kind) + " rejected");
      MODEL_CHECK(!l.overflowed(), "sane", "action list overflowed");
      return l;
    }
    uint32_t rejected() const { return m.rejected(); }
  };

  void unmark(const std::string& key, std::string_view node) {
    auto it = marks.find(key);
    if (it == marks.end() || it->second != node) return;
    const StoreOp op = StoreOp::del(Cf::kCached, bytes_of(key));
    store.write(std::span<const StoreOp>(&op, 1), Durability::kRelaxed);  // may fail: harmless
    marks.erase(it);
  }

  // -- The participant's answers, through the network --
  PrepareOutcome::Code cache_prepare(const Action& a) {
    if (net_prepare == Net::kLoseRequest) return PrepareOutcome::kFailed;
    PrepareOutcome::Code code;
    auto it = cache.entries.find(std::string(a.key));
    if (it == cache.entries.end()) {
      code = PrepareOutcome::kNotCached;
    } else if (it->second.pending && it->second.pending->txid > a.txid) {
      // A newer write is prepared (cache-node/src/key_table/prepared_write.h: an older pending
      // txid is superseded, an equal one re-prepared).
      code = PrepareOutcome::kFailed;
    } else {
      it->second.pending = CacheNode::Pending{a.txid, a.is_delete, std::string(sv_of(a.value))};
      code = PrepareOutcome::kPrepared;
    }
    return net_prepare == Net::kLoseReply ? PrepareOutcome::kFailed : code;
  }
  FinishOutcome::Code cache_finish(const Action& a) {
    const Net net = a.kind == Act::kSendCommit ? net_commit : net_abort;
    if (net == Net::kLoseRequest) return FinishOutcome::kUnreachable;
    FinishOutcome::Code code;
    const std::string key(a.key);
    auto it = cache.entries.find(key);
    if (it == cache.entries.end()) {
      code = FinishOutcome::kNotCached;
    } else if (!it->second.pending || it->second.pending->txid != a.txid) {
      code = FinishOutcome::kRefused;  // "no prepared write" / "txid mismatch"
    } else {
      if (a.kind == Act::kSendCommit) {
        MODEL_CHECK(store.committed.count(a.txid), "once", "cache applied an uncommitted txid");
        MODEL_CHECK(!refused_txids.count(a.txid), "refusal", "cache applied a refused write");
        MODEL_CHECK(cache.installed.insert(a.txid).second, "once", "cache applied a Commit twice");
        const CacheNode::Pending p = *it->second.pending;
        if (p.del) {
          cache.entries.erase(it);
        } else {
          it->second.value = p.value;
          it->second.pending.reset();
        }
      } else {
        it->second.pending.reset();
      }
      code = FinishOutcome::kDone;
    }
    return net == Net::kLoseReply ? FinishOutcome::kUnreachable : code;
  }

  // -- The resolver's shell: one Delivery --
  bool deliver(const PendingDecision& d, bool* unreachable) {
    Delivery m(d);
    Checked<Delivery> c{m};
    drive(c, Event::attempt(), [&](const Action& a) -> std::optional<Event> {
      MODEL_TRACE("  deliver %s txid %llu (%s): %s\n", to_string(d.decision),
                  static_cast<unsigned long long>(d.txid), d.key.c_str(), name(a.kind));
      tick();
      switch (a.kind) {
        case Act::kSendCommit:
        case Act::kSendAbort:
          return Event::finish_replied(cache_finish(a));
        case Act::kUnmark:
          unmark(std::string(a.key), a.cache_node);
          return std::nullopt;
        case Act::kStoreWrite:
          return Event::txlog_deleted(store.write(a.store_ops(), a.durability));
        case Act::kResolved:
          book.remove(a.key, a.txid);
          memory_only.erase(a.txid);
          return std::nullopt;
        default:
          broken("sane", std::string("a Delivery asked for ") + name(a.kind));
      }
    });
    *unreachable = m.unreachable();
    return m.state() == Delivery::State::kDelivered;
  }

  void round() {
    Round r(book.all());
    while (const PendingDecision* d = r.next()) {
      if (!book.contains(d->key, d->txid)) continue;
      bool unreachable = false;
      if (!deliver(*d, &unreachable) && unreachable) r.unreachable(d->cache_node);
    }
  }

  // -- A client write --
  void write(const std::string& key, bool del) {
    const int id = next_write++;
    const std::string value = "w" + std::to_string(id);
    writes[id] = {key, del};
    std::optional<uint8_t> status;
    std::optional<uint64_t> txid;
    if (marks.count(key)) status = write_cached(key, del, value, id, &txid);
    if (!status) status = write_uncached(key, del, value);
    MODEL_TRACE("write %s %s w%d: status %u\n", key.c_str(), del ? "delete" : "put", id, *status);
    if (*status == wire::kOk) {
      last_acked[key] = id;
    } else {
      refused_writes.insert(id);
      if (txid) {
        MODEL_CHECK(!store.committed.count(*txid), "refusal", "refused write committed locally");
        refused_txids.insert(*txid);
      }
    }
  }

  uint8_t write_uncached(const std::string& key, bool del, const std::string& value) {
    tick();
    const StoreOp op = del ? StoreOp::del(Cf::kData, bytes_of(key))
                           : StoreOp::put(Cf::kData, bytes_of(key), bytes_of(value));
    return store.write(std::span<const StoreOp>(&op, 1), Durability::kAsConfigured) ? wire::kOk
                                                                                    : wire::kError;
  }

  std::optional<uint8_t> write_cached(const std::string& key, bool del, const std::string& value,
                                      int id, std::optional<uint64_t>* txid_out) {
    const std::string node = marks.at(key);
    const std::string dedup_key = "id" + std::to_string(id), dedup_value = "rec";
    CachedWrite::Request r;
    r.txid = next_txid++;
    r.is_delete = del;
    r.key = bytes_of(key);
    r.value = del ? Bytes{} : bytes_of(value);
    r.cache_node = node;
    r.dedup_key = bytes_of(dedup_key);
    r.dedup_value = bytes_of(dedup_value);
    *txid_out = r.txid;
    CachedWrite m(r);
    Checked<CachedWrite> c{m};
    bool began = false, prepared = false;
    int commits = 0;
    std::vector<Op> txn;
    std::optional<uint8_t> status;
    drive(c, Event::arrived(book.has(key)), [&](const Action& a) -> std::optional<Event> {
      MODEL_TRACE("  write %s txid %llu: %s\n", key.c_str(), static_cast<unsigned long long>(m.txid()),
                  name(a.kind));
      tick();
      switch (a.kind) {
        case Act::kSettle: {
          for (const PendingDecision& d : book.for_key(key)) {
            bool unreachable = false;
            deliver(d, &unreachable);
          }
          if (book.has(key)) return Event::settled(Settle::kUndelivered);
          return Event::settled(marks.count(key) ? Settle::kDelivered : Settle::kUntracked);
        }
        case Act::kTxnPrepare:
          if (store.fail_begin) return Event::local_prepared(LocalPrepare::kBeginFailed);
          began = true;
          if (store.fail_txn) return Event::local_prepared(LocalPrepare::kFailed);
          for (const StoreOp& op : a.store_ops())
            txn.push_back(Op{op.cf, op.is_delete, std::string(sv_of(op.key)), std::string(sv_of(op.value))});
          store.append(WalEntry{WalEntry::kPrepare, a.txid, txn, true});
          prepared = true;
          return Event::local_prepared(LocalPrepare::kOk);
        case Act::kSendPrepare:
          MODEL_CHECK(prepared, "sane", "Prepare sent before the local prepare");
          return Event::prepare_replied(cache_prepare(a));
        case Act::kTxnCommit:
          MODEL_CHECK(++commits == 1, "once", "a write committed twice");
          if (store.fail_commit) return Event::local_committed(false);
          MODEL_CHECK(store.committed.insert(a.txid).second, "once", "txid committed twice");
          MODEL_CHECK(!refused_txids.count(a.txid), "refusal", "refused txid committed");
          store.append(WalEntry{WalEntry::kCommit, a.txid, {}, true});
          prepared = false;
          return Event::local_committed(true);
        case Act::kTxnRollback:
          MODEL_CHECK(began, "sane", "rollback without a transaction");
          if (prepared && !store.fail_rollback) {
            store.append(WalEntry{WalEntry::kRollback, a.txid, {}, true});
            prepared = false;
          }
          return std::nullopt;  // a failed rollback leaves it prepared until the next start
        case Act::kSendCommit:
          return Event::finish_replied(cache_finish(a));
        case Act::kStoreWrite: {
          const bool ok = store.write(a.store_ops(), a.durability);
          if (!ok && a.durability == Durability::kAsConfigured) memory_only[a.txid] = key;
          return std::nullopt;
        }
        case Act::kUnmark:
          unmark(std::string(a.key), a.cache_node);
          return std::nullopt;
        case Act::kQueueDecision:
          book.add(PendingDecision{a.txid, a.decision, std::string(a.cache_node), std::string(a.key)});
          return std::nullopt;
        case Act::kReply:
          MODEL_CHECK(!status, "sane", "two replies to one write");
          status = a.status;
          if (a.status == wire::kOk) check_ack(key, del, value, m.txid());
          return std::nullopt;
        case Act::kRecordApplied:
        case Act::kCount:
        case Act::kGoUncached:
          return std::nullopt;
        default:
          broken("sane", std::string("a CachedWrite asked for ") + name(a.kind));
      }
    });
    MODEL_CHECK(m.finished(), "sane", std::string("write stopped in ") + name(m.state()));
    MODEL_CHECK(status.has_value() == (m.state() != CachedWrite::State::kUncached), "sane",
          "reply missing or given to a write handed back");
    return status;
  }

  void check_ack(const std::string& key, bool del, const std::string& value, uint64_t txid) {
    MODEL_CHECK(store.committed.count(txid), "ack", "OK before the local commit");
    auto it = cache.entries.find(key);
    if (it == cache.entries.end()) return;  // nothing served from the cache
    if (it->second.pending) {
      MODEL_CHECK(it->second.pending->txid == txid, "ack", "cache holds another txid pending");
      return;
    }
    MODEL_CHECK(!del && it->second.value == value, "ack", "cache serves an older value after OK");
  }

  // -- Cache-side events --
  void fetch(const std::string& key) {
    if (cache.entries.count(key)) return;
    const std::string* v = store.data(key);
    if (!v) return;
    const StoreOp op = StoreOp::put(Cf::kCached, bytes_of(key), bytes_of(kNode));
    if (!store.write(std::span<const StoreOp>(&op, 1), Durability::kAsConfigured)) return;
    marks[key] = kNode;  // durable before the value leaves
    cache.entries[key] = CacheNode::Entry{*v, std::nullopt};
  }
  void evict(const std::string& key, bool rpc_lost) {
    cache.entries.erase(key);
    if (!rpc_lost) unmark(key, kNode);
  }
  void forget() {  // ForgetCacheNode, after the controller withdrew the node; it is Reset before reuse
    std::vector<std::string> held;
    for (const auto& [k, n] : marks)
      if (n == kNode) held.push_back(k);
    for (const std::string& k : held) unmark(k, kNode);
    for (const PendingDecision& d : book.forget(kNode)) {
      Delivery m(d);
      Checked<Delivery> c{m};
      drive(c, Event::forget(), [&](const Action& a) -> std::optional<Event> {
        if (a.kind == Act::kStoreWrite) store.write(a.store_ops(), a.durability);
        return std::nullopt;
      });
      memory_only.erase(d.txid);
    }
    cache.entries.clear();
  }

  // -- The db node dies and starts again --
  void restart() {
    MODEL_TRACE("restart\n");
    // Aborts kept only in memory die with the process (see the top of the file).
    for (const auto& [txid, key] : memory_only) may_stay_pending.insert(key);
    memory_only.clear();
    store.crash(os_crash, os_keep);
    for (int attempt = 0;; ++attempt) {
      marks.clear();
      book = DecisionBook{};
      if (attempt >= 3) {  // the operator fixed the disk
        store.fail_synced = store.fail_relaxed = store.fail_rollback = false;
        crash_in = -1;
      }
      try {
        recover();
        break;
      } catch (const Crash&) {
        store.crash(os_crash, os_keep);
      } catch (const RecoveryFailed&) {
      }
    }
    check_durable();
  }

  void recover() {
    const KnownCacheNode known = [](std::string_view n) { return n == kNode; };
    // Step 1: prepared transactions.
    const std::map<uint64_t, std::vector<Op>> prepared = store.prepared;
    for (const auto& [txid, ops] : prepared) {
      PreparedTxn p;
      p.txid = txid;
      for (const Op& op : ops) p.ops.push_back(RecoveredOp{op.cf, op.del, op.key, op.value});
      const PreparedPlan plan = plan_prepared(p);
      tick();
      if (plan.write_abort) {
        const StoreOp op = StoreOp::put(Cf::kTxlog, bytes_of(plan.abort_key), bytes_of(plan.abort_value));
        if (!store.write(std::span<const StoreOp>(&op, 1), Durability::kAsConfigured))
          throw RecoveryFailed{};
      }
      tick();
      if (store.fail_rollback) throw RecoveryFailed{};
      store.append(WalEntry{WalEntry::kRollback, txid, {}, true});
    }
    // Step 2: decisions.
    std::vector<std::pair<std::string, std::string>> txlog(store.cf[3].begin(), store.cf[3].end());
    const TxlogPlan tp = plan_txlog(txlog, known);
    for (const PendingDecision& d : tp.queue) book.add(d);
    drop(Cf::kTxlog, tp.drop);
    // Step 3: marks.
    std::vector<std::pair<std::string, std::string>> mk(store.cf[1].begin(), store.cf[1].end());
    const MarksPlan mp = plan_marks(mk, known);
    for (const auto& [k, n] : mp.load) marks[k] = n;
    drop(Cf::kCached, mp.drop);
  }
  void drop(Cf cf, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    tick();
    std::vector<StoreOp> ops;
    for (const std::string& k : keys) ops.push_back(StoreOp::del(cf, bytes_of(k)));
    if (!store.write(ops, Durability::kRelaxed)) throw RecoveryFailed{};
  }

  // -- Invariants between steps --
  void check_durable() {
    for (const auto& [key, acked] : last_acked) {
      const std::string* v = store.data(key);
      if (v) {
        const int id = std::atoi(v->c_str() + 1);
        MODEL_CHECK(id >= acked, "durable", "key " + key + " lost its acknowledged write");
        MODEL_CHECK(!refused_writes.count(id), "refusal", "a refused write's value is stored");
      } else if (!writes.at(acked).second) {
        bool later_delete = false;
        for (const auto& [id, w] : writes)
          if (id > acked && w.first == key && w.second && !refused_writes.count(id)) later_delete = true;
        MODEL_CHECK(later_delete, "durable", "key " + key + " lost its acknowledged write");
      }
    }
  }
  void check_fresh() {
    for (const auto& [key, e] : cache.entries) {
      MODEL_CHECK(marks.count(key) && marks.at(key) == kNode, "fresh", "cache holds an unmarked key " + key);
      if (e.pending) continue;
      const std::string* v = store.data(key);
      MODEL_CHECK(v && *v == e.value, "fresh", "cache serves a value the db node does not hold: " + key);
    }
  }
  void check_decided() {
    MODEL_CHECK(store.prepared.empty(), "decided", "a transaction is still prepared");
    MODEL_CHECK(book.size() == 0, "decided", "decisions still undelivered");
    for (const auto& [key, e] : cache.entries)
      MODEL_CHECK(!e.pending || may_stay_pending.count(key), "decided", "cache still pending on " + key);
  }
};

// The input, byte by byte (0 once it is used up).
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t remaining() const { return size_ - at_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
};

inline void set_faults(World& w, Input& in) {
  const uint16_t f = static_cast<uint16_t>(in.byte() | in.byte() << 8);
  const auto net = [](unsigned v) { return static_cast<Net>(v % 3); };
  w.net_prepare = net(f & 3);
  w.net_commit = net((f >> 2) & 3);
  w.net_abort = net((f >> 4) & 3);
  MODEL_TRACE("faults %04x crash byte\n", f);
  Store& s = w.store;
  s.fail_begin = f >> 6 & 1;
  s.fail_txn = f >> 7 & 1;
  s.fail_commit = f >> 8 & 1;
  s.fail_rollback = f >> 9 & 1;
  s.fail_synced = f >> 10 & 1;
  s.fail_relaxed = f >> 11 & 1;
  // A crash after 0-15 actions, or none.
  const uint8_t c = in.byte();
  w.crash_in = c & 0x10 ? c & 0x0f : -1;
  w.os_crash = c & 0x20;
  w.os_keep = c >> 6;
}

inline void step(World& w, Input& in) {
  const uint8_t op = in.byte();
  MODEL_TRACE("step %u (kind %u, key %s, bit7 %u)\n", op, op % 8, kKeys[(op >> 4) % 3], op >> 7);
  const std::string key = kKeys[(op >> 4) % 3];
  switch (op % 8) {
    case 0:
    case 1:
      w.write(key, op & 0x80);
      break;
    case 2:
      w.round();
      break;
    case 3:
      w.fetch(key);
      break;
    case 4:
      w.evict(key, op & 0x80);
      break;
    case 5:
      if (op & 0x80) w.cache.entries.clear();  // the cache node restarts (empty)
      else w.forget();
      break;
    case 6:
      throw Crash{};
    case 7:
      set_faults(w, in);
      break;
  }
}

// Plays one input from a fresh world, then brings it to the end state and checks "decided".
inline void run(const uint8_t* data, size_t size) {
  Input in(data, size);
  World w;
  for (const char* k : kKeys) {  // every key starts with write 0's value, durably
    const std::string v = "w0";
    const StoreOp op = StoreOp::put(Cf::kData, bytes_of(k), bytes_of(v));
    w.store.write(std::span<const StoreOp>(&op, 1), Durability::kAsConfigured);
    w.writes[0] = {k, false};
  }
  for (int steps = 0; in.remaining() > 0 && steps < 200; ++steps) {
    try {
      step(w, in);
    } catch (const Crash&) {
      w.restart();
    }
    w.check_fresh();
  }
  // The end: faults off, then what every crash would come to: recovery and resolver rounds.
  w.net_prepare = w.net_commit = w.net_abort = Net::kDeliver;
  Store& s = w.store;
  s.fail_begin = s.fail_txn = s.fail_commit = s.fail_rollback = s.fail_synced = s.fail_relaxed = false;
  w.crash_in = -1;
  w.os_crash = false;
  w.restart();
  for (int i = 0; i < 3 && w.book.size() > 0; ++i) w.round();
  w.check_fresh();
  w.check_decided();
}

}  // namespace exo::db::model

