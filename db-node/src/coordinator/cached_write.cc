#include "coordinator/cached_write.h"

#include "wire.h"

#ifdef EXO_FAULTS  // ---- mutant test build only (common/cpp/fault_switch.h) ----
#include "fault_switch.h"
#endif

namespace exo::db {

using S = CachedWrite::State;

CachedWrite::CachedWrite(const Request& r)
    : r_(r),
      commit_key_(txlog_key(r.txid, Decision::kCommit)),
      abort_key_(txlog_key(r.txid, Decision::kAbort)) {}

ActionList CachedWrite::on(const Event& e) {
  ActionList out;
  switch (state_) {
    case S::kReceived:
      if (e.kind != On::kArrived) break;
      if (!e.code) return prepare_locally();
      // A decision for an earlier write of the key not yet delivered: the cache node may still
      // have that write pending and would refuse our Prepare, and a late Commit must never land
      // after a newer write. One attempt now; if it fails the client retries later.
      state_ = S::kSettling;
      {
        Action& a = out.add(Act::kSettle);
        a.awaited = true;
        a.key = sv_of(r_.key);
      }
      return out;

    case S::kSettling:
      if (e.kind != On::kSettled) break;
      switch (static_cast<Settle>(e.code)) {
        case Settle::kDelivered:
          return prepare_locally();
        case Settle::kUntracked:
          // Answered cached=false: nothing at the cache node can serve the key from a pending
          // write any more, so the write needs no Prepare.
          state_ = S::kUncached;
          out.add(Act::kGoUncached);
          return out;
        case Settle::kUndelivered:
          return refuse(wire::kBusy);
      }
      break;

    case S::kPreparingLocally:
      if (e.kind != On::kLocalPrepared) break;
      switch (static_cast<LocalPrepare>(e.code)) {
        case LocalPrepare::kOk: {
          // The cache node must stop serving the old value before the new one becomes visible
          // here, or a client could read the old value from the cache after its write was acked.
          state_ = S::kPrepareSent;
#ifdef EXO_FAULTS
          // --fault skip-prepare: go on as if the cache node had prepared, sending nothing (and
          // no Commit below), so it keeps serving the value it holds: the known-bad db node.
          if (exo::fault::active(exo::fault::kSkipPrepare))
            return on(Event::prepare_replied(PrepareOutcome::kPrepared));
#endif
          Action& a = out.add(Act::kSendPrepare);
          a.awaited = true;
          a.txid = r_.txid;
          a.cache_node = r_.cache_node;
          a.key = sv_of(r_.key);
          a.is_delete = r_.is_delete;
          a.value = r_.is_delete ? Bytes{} : r_.value;
          return out;
        }
        case LocalPrepare::kBeginFailed:
          return refuse(wire::kError);
        case LocalPrepare::kFailed:
          // The cache node has not been told anything yet: nothing to abort there.
          return refuse(wire::kError, /*rollback=*/true);
      }
      break;

    case S::kPrepareSent:
      if (e.kind != On::kPrepareReplied) break;
      switch (static_cast<PrepareOutcome::Code>(e.code)) {
        case PrepareOutcome::kFailed:
          // Refused, or the RPC failed: the cache node may have prepared all the same (a reply
          // lost or late), so it gets an Abort; until then it forwards the key's GETs here.
          return abandon(wire::kBusy);
        case PrepareOutcome::kPrepared:
        case PrepareOutcome::kNotCached:
          if (!r_.replicate) return commit_locally(e.code == PrepareOutcome::kPrepared);
          // The chain first: the tail must have the write before the decision, because from
          // the Commit on the cache node serves it, and GETs it forwards meanwhile go there.
          state_ = S::kReplicating;
          participant_prepared_ = e.code == PrepareOutcome::kPrepared;
          out.add(Act::kReplicate).awaited = true;
          return out;
      }
      break;

    case S::kReplicating:
      if (e.kind != On::kChainReplied) break;
      if (static_cast<ChainReply>(e.code) == ChainReply::kAcked)
        return commit_locally(participant_prepared_);
      // Maybe applied somewhere in the chain: neither BUSY nor an Abort would be the truth.
      state_ = S::kDeferredReplication;
      out.add(Act::kDeferReplication);
      return out;

    case S::kCommittingPrepared:
    case S::kCommittingNotCached:
      if (e.kind != On::kLocalCommitted) break;
      if (!e.code) {
        // Not visible. A cache node that prepared must hear Abort; one that answered cached=false
        // holds nothing of ours.
        if (state_ == S::kCommittingPrepared) return abandon(wire::kError);
        return refuse(wire::kError, /*rollback=*/true);
      }
      out.add(Act::kRecordApplied);
      if (state_ == S::kCommittingNotCached) {
        // The cache node holds neither the entry nor a Fetch of it in flight (it answers
        // cached=false only then), so stop tracking the key now: its Evict may never come (a
        // lost Fetch reply, a restarted cache node), and every later write would pay a Prepare
        // for nothing. A new Fetch needs the stripe lock, so it cannot slip in between. The
        // commit record is not needed either; if deleting it is lost, start-up sends a harmless
        // Commit.
        state_ = S::kDone;
        Action& u = out.add(Act::kUnmark);
        u.cache_node = r_.cache_node;
        u.key = sv_of(r_.key);
        delete_commit_record(out);
        reply(out, wire::kOk);
        return out;
      }
      // Tell the cache node. The write is durable and acknowledged whatever happens now.
      state_ = S::kCommitSent;
#ifdef EXO_FAULTS
      if (exo::fault::active(exo::fault::kSkipPrepare)) {  // as if it applied the Commit
        for (const Action& a : on(Event::finish_replied(FinishOutcome::kDone))) out.add(a.kind) = a;
        return out;
      }
#endif
      {
        Action& a = out.add(Act::kSendCommit);
        a.awaited = true;
        a.txid = r_.txid;
        a.decision = Decision::kCommit;
        a.cache_node = r_.cache_node;
        a.key = sv_of(r_.key);
      }
      return out;

    case S::kCommitSent:
      if (e.kind != On::kFinishReplied || e.code > FinishOutcome::kUnreachable) break;
      switch (static_cast<FinishOutcome::Code>(e.code)) {
        case FinishOutcome::kUnreachable: {
          // The cache node keeps the key pending and forwards its GETs here until the resolver
          // gets the Commit through (its txlog record stays), so every read already sees the
          // new value: OK is the truth.
          state_ = S::kDeferred;
          out.add(Act::kCount).tally = Tally::kCommitsDeferred;
          Action& q = out.add(Act::kQueueDecision);
          q.txid = r_.txid;
          q.decision = Decision::kCommit;
          q.cache_node = r_.cache_node;
          q.key = sv_of(r_.key);
          reply(out, wire::kOk);
          return out;
        }
        case FinishOutcome::kDone:
          out.add(Act::kCount).tally = Tally::kWritesPropagated;
          break;
        case FinishOutcome::kNotCached: {  // as for Prepare answered cached=false
          Action& u = out.add(Act::kUnmark);
          u.cache_node = r_.cache_node;
          u.key = sv_of(r_.key);
          break;
        }
        case FinishOutcome::kRefused:  // nothing of this txid is pending there (it restarted)
          break;
      }
      state_ = S::kDone;
      // Not synced: if the deletion is lost in an OS crash, start-up delivers the Commit again
      // and the cache node refuses it as already done.
      delete_commit_record(out);
      reply(out, wire::kOk);
      return out;

    case S::kDone:
    case S::kDeferred:
    case S::kAborted:
    case S::kRefused:
    case S::kUncached:
    case S::kDeferredReplication:
      break;
  }
  ++rejected_;
  return ActionList{};
}

ActionList CachedWrite::commit_locally(bool participant_prepared) {
  state_ = participant_prepared ? S::kCommittingPrepared : S::kCommittingNotCached;
  ActionList out;
  Action& a = out.add(Act::kTxnCommit);  // the decision point
  a.awaited = true;
  a.txid = r_.txid;
  return out;
}

ActionList CachedWrite::prepare_locally() {
  // Local transaction, prepared: its WAL record is the redo of the write, the database still
  // holds the old value (the undo), and readers see the old value until the commit. Committed
  // together with the data, the txlog commit record is the durable "Commit" decision for the
  // cache node, until the Commit RPC succeeded.
  if (!encode_txlog_value(r_.cache_node, sv_of(r_.key), &txlog_value_))
    return refuse(wire::kError);  // a cache node name too long for the record
  state_ = S::kPreparingLocally;
  ActionList out;
  Action& a = out.add(Act::kTxnPrepare);
  a.awaited = true;
  a.txid = r_.txid;
  a.ops[0] = r_.is_delete ? StoreOp::del(Cf::kData, r_.key) : StoreOp::put(Cf::kData, r_.key, r_.value);
  a.ops[1] = StoreOp::put(Cf::kRequests, r_.dedup_key, r_.dedup_value);
  a.ops[2] = StoreOp::put(Cf::kTxlog, bytes_of(commit_key_), bytes_of(txlog_value_));
  a.n_ops = 3;
  a.what = "the write's transaction";
  return out;
}

ActionList CachedWrite::abandon(uint8_t status) {
  // The abort record before the rollback: a crash in between leaves the transaction prepared,
  // and start-up rolls it back and writes the same record again. The other order could lose
  // the Abort, and the cache node would keep the key pending for ever.
  state_ = S::kAborted;
  ActionList out;
  Action& w = out.add(Act::kStoreWrite);
  w.ops[0] = StoreOp::put(Cf::kTxlog, bytes_of(abort_key_), bytes_of(txlog_value_));
  w.n_ops = 1;
  w.durability = Durability::kAsConfigured;
  w.txid = r_.txid;
  w.what = "abort record (the Abort is kept in memory only)";
  // Nothing was committed, so nothing is visible; a transaction left prepared in the WAL by a
  // failed rollback is rolled back at the next start.
  out.add(Act::kTxnRollback).txid = r_.txid;
  Action& q = out.add(Act::kQueueDecision);
  q.txid = r_.txid;
  q.decision = Decision::kAbort;
  q.cache_node = r_.cache_node;
  q.key = sv_of(r_.key);
  reply(out, status);
  return out;
}

ActionList CachedWrite::refuse(uint8_t status, bool rollback) {
  state_ = S::kRefused;
  ActionList out;
  if (rollback) out.add(Act::kTxnRollback).txid = r_.txid;
  reply(out, status);
  return out;
}

void CachedWrite::delete_commit_record(ActionList& out) {
  Action& d = out.add(Act::kStoreWrite);
  d.ops[0] = StoreOp::del(Cf::kTxlog, bytes_of(commit_key_));
  d.n_ops = 1;
  d.durability = Durability::kRelaxed;
  d.txid = r_.txid;
  d.what = "deleting the delivered commit record";
}

void CachedWrite::reply(ActionList& out, uint8_t status) { out.add(Act::kReply).status = status; }

const char* name(CachedWrite::State s) {
  switch (s) {
    case S::kReceived: return "received";
    case S::kSettling: return "settling";
    case S::kPreparingLocally: return "preparing-locally";
    case S::kPrepareSent: return "prepare-sent";
    case S::kCommittingPrepared: return "committing-prepared";
    case S::kCommittingNotCached: return "committing-not-cached";
    case S::kCommitSent: return "commit-sent";
    case S::kDone: return "done";
    case S::kDeferred: return "deferred";
    case S::kAborted: return "aborted";
    case S::kRefused: return "refused";
    case S::kUncached: return "uncached";
    case S::kReplicating: return "replicating";
    case S::kDeferredReplication: return "deferred-replication";
  }
  return "?";
}

}  // namespace exo::db
