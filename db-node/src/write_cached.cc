// The write of a key a cache node holds: a two-phase commit with the db node as coordinator
// and the cache node as participant (thesis 3.4.2), made durable and recoverable with a
// RocksDB two-phase transaction. Steps and failure cases: docs/two-phase-commit.md.
//
//   (b) transaction: data + dedup record + txlog commit record; Prepare() -> WAL (redo)
//   (c) Prepare RPC  -> the cache node forwards GETs of the key to us from now on
//   (d) Commit()     -> the decision: durable and visible here
//   (e) Commit RPC   -> the cache node serves the new value; the txlog record goes
//
// Replies: OK once (d) succeeded, whatever (e) does (the cache node keeps forwarding GETs until
// the resolver delivers the Commit, so every read sees the write); BUSY or ERROR only when the
// write is definitely not applied.
#include "log.h"
#include "marks.h"
#include "request_handler.h"

namespace exo::db {
namespace {

StoreResult write_one(KvStore& store, StoreOp op, Durability d) {
  return store.write(std::span<const StoreOp>(&op, 1), d);
}

}  // namespace

void RequestHandler::abandon(StoreTxn& txn, uint64_t txid, const std::string& cache_node,
                             std::span<const uint8_t> key, const std::string& txlog_value) {
  // The abort record before the rollback: a crash in between leaves the transaction prepared,
  // and start-up rolls it back and writes the same record again. The other order could lose
  // the Abort, and the cache node would keep the key pending for ever.
  const std::string ak = txlog_key(txid, Decision::kAbort);
  const StoreResult w =
      write_one(ctx_.store, StoreOp::put(Cf::kTxlog, bytes_of(ak), bytes_of(txlog_value)),
                Durability::kAsConfigured);
  if (!w.ok())
    LOG_WARN("abort record of txid %llu not written (the Abort is kept in memory only): %s",
             static_cast<unsigned long long>(txid), w.error.c_str());
  const StoreResult r = txn.rollback();
  if (!r.ok())
    // Nothing was committed, so nothing is visible; a transaction left prepared in the WAL is
    // rolled back at the next start.
    LOG_WARN("rollback of txid %llu failed: %s", static_cast<unsigned long long>(txid),
             r.error.c_str());
  ctx_.resolver.add(PendingDecision{txid, Decision::kAbort, cache_node, std::string(as_sv(key))});
}

size_t RequestHandler::write_cached(const wire::FrameView& req, CachedKeys::Guard& guard,
                                    const std::string& cache_node, const DedupRecord& rec,
                                    std::span<uint8_t> out) {
  const bool is_delete = req.op() == wire::kDelete;
  const RequestId id{req.client_id, req.seq};
  const std::string dedup_key = request_key(id);
  const std::string dedup_value = encode_dedup(rec);
  const char* what = is_delete ? "DELETE" : "PUT";
  const uint64_t txid = ctx_.txids.next();
  const auto tx = static_cast<unsigned long long>(txid);

  // (b) Local transaction, prepared: its WAL record is the redo of the write, the database
  // still holds the old value (the undo), and readers see the old value until Commit().
  std::string txlog_value;
  if (!encode_txlog_value(cache_node, as_sv(req.key), &txlog_value)) {
    LOG_WARN("%s not applied: cache node name '%s' too long for the txlog", what,
             cache_node.c_str());
    return refuse(req, rec, wire::kError, out);
  }
  const std::string commit_key = txlog_key(txid, Decision::kCommit);
  StoreResult r;
  std::unique_ptr<StoreTxn> txn = ctx_.store.begin(txid, &r);
  if (!txn) {
    LOG_WARN("%s not applied: %s", what, r.error.c_str());
    return refuse(req, rec, wire::kError, out);
  }
  r = is_delete ? txn->del(Cf::kData, req.key) : txn->put(Cf::kData, req.key, req.value);
  if (r.ok()) r = txn->put(Cf::kRequests, bytes_of(dedup_key), bytes_of(dedup_value));
  // Committed together with the data, this record is the durable "Commit" decision for the
  // cache node, until the Commit RPC succeeded.
  if (r.ok()) r = txn->put(Cf::kTxlog, bytes_of(commit_key), bytes_of(txlog_value));
  if (r.ok()) r = txn->prepare();
  if (!r.ok()) {
    // The cache node has not been told anything yet: nothing to abort there.
    LOG_WARN("%s not applied, local prepare of txid %llu failed: %s", what, tx, r.error.c_str());
    if (const StoreResult rb = txn->rollback(); !rb.ok())
      LOG_WARN("rollback of txid %llu failed: %s", tx, rb.error.c_str());
    return refuse(req, rec, wire::kError, out);
  }

  // (c) The cache node must stop serving the old value before the new one becomes visible
  // here, or a client could read the old value from the cache after its write was acked.
  const PrepareOutcome prep =
      ctx_.propagator.prepare(cache_node, req.key, txid, is_delete, req.value);
  if (prep.code == PrepareOutcome::kFailed) {
    // Refused, or the RPC failed: the cache node may have prepared all the same (a reply lost
    // or late), so it gets an Abort; until then it forwards the key's GETs here, which is safe.
    LOG_WARN("%s answered BUSY, Prepare of txid %llu failed: %s", what, tx, prep.error.c_str());
    abandon(*txn, txid, cache_node, req.key, txlog_value);
    return refuse(req, rec, wire::kBusy, out);
  }

  // (d) The decision point.
  r = txn->commit();
  if (!r.ok()) {
    LOG_WARN("%s not applied, commit of txid %llu failed: %s", what, tx, r.error.c_str());
    if (prep.code == PrepareOutcome::kPrepared) {
      abandon(*txn, txid, cache_node, req.key, txlog_value);
    } else if (const StoreResult rb = txn->rollback(); !rb.ok()) {
      LOG_WARN("rollback of txid %llu failed: %s", tx, rb.error.c_str());
    }
    return refuse(req, rec, wire::kError, out);
  }
  ctx_.dedup.insert(id, rec);

  std::string why;
  if (prep.code == PrepareOutcome::kNotCached) {
    // The cache node holds neither the entry nor a Fetch of it in flight (it answers
    // cached=false only then), so stop tracking the key now: its Evict may never come (a lost
    // Fetch reply, a restarted cache node), and every later write would pay a Prepare for
    // nothing. A new Fetch needs this stripe lock, so it cannot slip in between. The commit
    // record is not needed either; if deleting it is lost, start-up sends a harmless Commit.
    unmark_held(ctx_.store, guard, as_sv(req.key), cache_node, &why);
    const StoreResult d = write_one(ctx_.store, StoreOp::del(Cf::kTxlog, bytes_of(commit_key)),
                                    Durability::kRelaxed);
    if (!why.empty() || !d.ok())
      LOG_WARN("tidying after txid %llu: %s %s", tx, why.c_str(), d.error.c_str());
    return reply(req, out, wire::kOk);
  }

  // (e) Tell the cache node. The write is durable and acknowledged whatever happens now.
  const FinishOutcome fin = ctx_.propagator.commit(cache_node, req.key, txid);
  if (!fin.definitive()) {
    // The cache node keeps the key pending and forwards its GETs here until the resolver gets
    // the Commit through, so every read already sees the new value: OK is the truth.
    LOG_WARN("Commit of txid %llu on %s failed, left to the resolver: %s", tx, cache_node.c_str(),
             fin.error.c_str());
    bump(c_.commits_deferred);
    ctx_.resolver.add(
        PendingDecision{txid, Decision::kCommit, cache_node, std::string(as_sv(req.key))});
    return reply(req, out, wire::kOk);
  }
  if (fin.code == FinishOutcome::kDone) {
    bump(c_.writes_propagated);
  } else if (fin.code == FinishOutcome::kNotCached) {
    unmark_held(ctx_.store, guard, as_sv(req.key), cache_node, &why);  // as for Prepare above
  } else {
    LOG_WARN("Commit of txid %llu: %s", tx, fin.error.c_str());
  }
  // Not synced: if the deletion is lost in an OS crash, start-up delivers the Commit again and
  // the cache node refuses it as already done.
  const StoreResult d = write_one(ctx_.store, StoreOp::del(Cf::kTxlog, bytes_of(commit_key)),
                                  Durability::kRelaxed);
  if (!why.empty() || !d.ok())
    LOG_WARN("tidying after txid %llu: %s %s", tx, why.c_str(), d.error.c_str());
  return reply(req, out, wire::kOk);
}

}  // namespace exo::db
