#include "coordinator/delivery.h"

namespace exo::db {

using S = Delivery::State;

Delivery::Delivery(const PendingDecision& d) : d_(d), record_key_(txlog_key(d.txid, d.decision)) {}

ActionList Delivery::on(const Event& e) {
  ActionList out;
  switch (state_) {
    case S::kQueued:
      if (e.kind == On::kAttempt) {
        state_ = S::kSent;
        unreachable_ = false;
        Action& a = out.add(d_.decision == Decision::kCommit ? Act::kSendCommit : Act::kSendAbort);
        a.awaited = true;
        a.txid = d_.txid;
        a.decision = d_.decision;
        a.cache_node = d_.cache_node;
        a.key = d_.key;
        return out;
      }
      if (e.kind == On::kForget) {
        // Best effort: a record that survives is loaded at the next start and delivered to a
        // node that has been Reset meanwhile, which answers it definitively.
        state_ = S::kDropped;
        delete_record(out, false, "deleting the txlog record of a forgotten decision");
        return out;
      }
      break;

    case S::kSent:
      if (e.kind != On::kFinishReplied || e.code > FinishOutcome::kUnreachable) break;
      if (e.code == FinishOutcome::kUnreachable) {
        state_ = S::kQueued;
        unreachable_ = true;
        return out;
      }
      state_ = S::kTidying;
      if (e.code == FinishOutcome::kNotCached) {
        // The cache node holds neither the entry nor a Fetch of it: stop tracking the key.
        Action& u = out.add(Act::kUnmark);
        u.cache_node = d_.cache_node;
        u.key = d_.key;
      }
      // Not synced: a record that comes back after an OS crash is only delivered once more.
      delete_record(out, true, "deleting the txlog record of a delivered decision");
      return out;

    case S::kTidying:
      if (e.kind != On::kTxlogDeleted) break;
      if (!e.code) {
        state_ = S::kQueued;
        return out;
      }
      state_ = S::kDelivered;
      {
        Action& r = out.add(Act::kResolved);
        r.txid = d_.txid;
        r.decision = d_.decision;
        r.cache_node = d_.cache_node;
        r.key = d_.key;
      }
      return out;

    case S::kDelivered:
    case S::kDropped:
      break;
  }
  ++rejected_;
  return ActionList{};
}

void Delivery::delete_record(ActionList& out, bool awaited, const char* what) {
  Action& w = out.add(Act::kStoreWrite);
  w.awaited = awaited;
  w.txid = d_.txid;
  w.ops[0] = StoreOp::del(Cf::kTxlog, bytes_of(record_key_));
  w.n_ops = 1;
  w.durability = Durability::kRelaxed;
  w.what = what;
}

const char* name(Delivery::State s) {
  switch (s) {
    case S::kQueued: return "queued";
    case S::kSent: return "sent";
    case S::kTidying: return "tidying";
    case S::kDelivered: return "delivered";
    case S::kDropped: return "dropped";
  }
  return "?";
}

}  // namespace exo::db
