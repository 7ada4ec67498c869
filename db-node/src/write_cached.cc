// The write of a key a cache node holds: the shell of the coordinator's CachedWrite
// (coordinator/cached_write.h), which decides every step of the two-phase commit with the db
// node as coordinator and the cache node as participant (thesis 3.4.2,
// docs/two-phase-commit.md). Here the steps are only carried out, under the key's stripe lock:
// the RocksDB transaction, the Prepare and Commit RPCs, marks, the resolver, the dedup table,
// counters and the reply.
#include <cstdlib>

#include "coordinator/cached_write.h"
#include "coordinator_shell.h"
#include "log.h"
#include "request_handler.h"

namespace exo::db {

std::optional<size_t> RequestHandler::write_cached(const wire::FrameView& req,
                                                   CachedKeys::Guard& guard,
                                                   const std::string& holder,
                                                   const DedupRecord& rec, uint64_t hash,
                                                   const ChainTable* table, DedupClaim& claim,
                                                   std::span<uint8_t> out) {
  const std::string cache_node = holder;  // an unmark frees the map's copy
  const RequestId id{req.client_id, req.seq};
  const std::string dedup_key = request_key(id), dedup_value = encode_dedup(rec);
  const bool is_delete = req.op() == wire::kDelete;
  const char* what = is_delete ? "DELETE" : "PUT";

  CachedWrite::Request r;
  r.txid = ctx_.txids.next();
  r.is_delete = is_delete;
  r.key = req.key;
  r.value = req.value;
  r.cache_node = cache_node;
  r.dedup_key = bytes_of(dedup_key);
  r.dedup_value = bytes_of(dedup_value);
  r.replicate = table != nullptr;
  CachedWrite w(r);
  std::optional<UncommittedWrite> chained;  // replicating: what went down the chain
  const auto tx = static_cast<unsigned long long>(r.txid);

  std::unique_ptr<StoreTxn> txn;
  std::optional<size_t> answer;  // stays empty if the write is handed back uncached
  const std::string_view key = as_sv(req.key);
  drive(w, Event::arrived(ctx_.resolver.has_pending(key)), [&](const Action& a) -> std::optional<Event> {
    switch (a.kind) {
      case Act::kSettle:
        if (!ctx_.resolver.settle(guard, key)) {
          LOG_DEBUG("write answered BUSY: an earlier decision for the key is undelivered");
          return Event::settled(Settle::kUndelivered);
        }
        // A cached=false answer untracks the key.
        return Event::settled(guard.holder(key) ? Settle::kDelivered : Settle::kUntracked);

      case Act::kTxnPrepare: {
        StoreResult s;
        txn = ctx_.store.begin(a.txid, &s);
        if (!txn) {
          LOG_WARN("%s not applied: %s", what, s.error.c_str());
          return Event::local_prepared(LocalPrepare::kBeginFailed);
        }
        for (const StoreOp& op : a.store_ops()) {
          s = op.is_delete ? txn->del(op.cf, op.key) : txn->put(op.cf, op.key, op.value);
          if (!s.ok()) break;
        }
        if (s.ok()) s = txn->prepare();
        if (!s.ok()) {
          LOG_WARN("%s not applied, local prepare of txid %llu failed: %s", what, tx, s.error.c_str());
          return Event::local_prepared(LocalPrepare::kFailed);
        }
        return Event::local_prepared(LocalPrepare::kOk);
      }

      case Act::kSendPrepare: {
        const PrepareOutcome p =
            ctx_.propagator.prepare(cache_node, bytes_of(a.key), a.txid, a.is_delete, a.value);
        if (p.code == PrepareOutcome::kFailed)
          LOG_WARN("%s answered BUSY, Prepare of txid %llu failed: %s", what, tx, p.error.c_str());
        return Event::prepare_replied(p.code);
      }

      case Act::kTxnCommit: {
        const StoreResult s = txn->commit();
        if (!s.ok() && chained) {
          // The chain has the write (the tail serves it): an ERROR and an Abort would both be
          // lies. The node stops; its chains go on without it (design 3.4).
          LOG_ERROR("commit of txid %llu after the chain acknowledged it failed: %s; stopping", tx,
                    s.error.c_str());
          std::_Exit(1);
        }
        if (!s.ok())
          LOG_WARN("%s not applied, commit of txid %llu failed: %s", what, tx, s.error.c_str());
        return Event::local_committed(s.ok());
      }

      case Act::kReplicate: {
        chained.emplace();
        chained->hash = hash;
        chained->id = id;
        chained->record = rec;
        chained->req = ctx_.chain->make_request(*table, table->slot_of(hash), id, true, is_delete,
                                                req.key, req.value, rec);
        const ForwardOutcome f = ctx_.chain->forward(chained->req);
        if (f.code == ForwardOutcome::kAcked) {
          bump(c_.chain_writes);
          return Event::chain_replied(ChainReply::kAcked);
        }
        LOG_DEBUG("%s of txid %llu not acknowledged by the chain: %s", what, tx, f.error.c_str());
        return Event::chain_replied(ChainReply::kUncertain);
      }

      case Act::kDeferReplication:
        // No reply; the resend waits on the kept claim until the chain runtime completes it.
        chained->txn = std::move(txn);
        chained->cache_node = cache_node;
        chained->txid = r.txid;
        claim.keep();
        ctx_.chain->defer(std::move(*chained));
        // No reply, and not "handed back": an empty answer would send the caller down the
        // uncached path, which then blocked on this transaction's lock and answered ERROR for
        // a write the chain runtime later committed (found by the chaos campaign's kill_db).
        answer = 0;
        return std::nullopt;

      case Act::kTxnRollback:
        if (txn) {
          if (const StoreResult s = txn->rollback(); !s.ok())
            LOG_WARN("rollback of txid %llu failed: %s", tx, s.error.c_str());
        }
        return std::nullopt;

      case Act::kSendCommit: {
        const FinishOutcome f = carry_out_finish(ctx_.propagator, a);
        if (f.code == FinishOutcome::kUnreachable)
          LOG_WARN("Commit of txid %llu on %s failed, left to the resolver: %s", tx,
                   cache_node.c_str(), f.error.c_str());
        else if (f.code == FinishOutcome::kRefused)
          LOG_WARN("Commit of txid %llu: %s", tx, f.error.c_str());
        return Event::finish_replied(f.code);
      }

      case Act::kStoreWrite:
        carry_out_store_write(ctx_.store, a);
        return std::nullopt;

      case Act::kUnmark:
        carry_out_unmark(ctx_.store, guard, a);
        return std::nullopt;

      case Act::kQueueDecision:
        ctx_.resolver.add(
            PendingDecision{a.txid, a.decision, std::string(a.cache_node), std::string(a.key)});
        return std::nullopt;

      case Act::kRecordApplied:
        ctx_.dedup.insert(id, rec);
        return std::nullopt;

      case Act::kCount:
        bump(a.tally == Tally::kCommitsDeferred ? c_.commits_deferred : c_.writes_propagated);
        return std::nullopt;

      case Act::kReply:
        answer = a.status == wire::kOk ? reply(req, out, wire::kOk) : refuse(req, rec, a.status, out);
        return std::nullopt;

      case Act::kGoUncached:
      case Act::kSendAbort:  // a write never aborts in its own path: the resolver does
      case Act::kResolved:
        return std::nullopt;
    }
    return std::nullopt;
  });
  return answer;
}

}  // namespace exo::db
