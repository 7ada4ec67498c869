#include "replication/chain_runtime.h"

#include <cstdlib>
#include <algorithm>
#include <random>

#include "keyhash.h"
#include "log.h"
#include "wire.h"

#ifdef EXO_FAULTS  // ---- mutant test build only (common/cpp/fault_switch.h) ----
#include <mutex>

#include "fault_switch.h"
#endif  // ---- EXO_FAULTS ----

namespace exo::db {

bool ChainRuntime::acks_before_forwarding() {
#ifdef EXO_FAULTS
  // --fault ack-at-head: the head answers OK as soon as it applied the write itself and leaves
  // the forward to the resolver's next round, so the tail, which serves GETs, may not have an
  // acknowledged write yet: stale reads the chaos campaign's checker must catch.
  if (!fault::active(fault::kAckAtHead)) return false;
  static std::once_flag once;
  std::call_once(once, [] { LOG_WARN("FAULT ack-at-head: writes are acknowledged before the chain has them"); });
  return true;
#else
  return false;
#endif
}

ChainRuntime::ChainRuntime(const Cluster& cluster, uint32_t self, KvStore& store,
                           CachedKeys& cached, DedupTable& dedup, Resolver& resolver,
                           ChainForwarder& forwarder, Counters& counters, Clock wall_ms)
    : cluster_(cluster), self_(self), store_(store), cached_(cached), dedup_(dedup),
      resolver_(resolver), forwarder_(forwarder), c_(counters), wall_ms_(std::move(wall_ms)),
      view_(ChainTable::from_cluster(cluster)),
      replicates_(cluster.replication.factor > 1),
      incarnation_([] {
        std::random_device rd;
        uint64_t v = 0;
        while (v == 0) v = (uint64_t{rd()} << 32) | rd();  // 0 means "unknown" on the wire
        return v;
      }()),
      active_(!replicates_),
      slot_seq_(new std::atomic<uint64_t>[size_t{1} << cluster.partition_bits]()) {
  if (replicates_) copier_ = std::thread([this] { copier_loop(); });
}

ChainRuntime::~ChainRuntime() {
  {
    std::lock_guard<std::mutex> lk(learn_mu_);
    stopping_ = true;
  }
  learn_cv_.notify_all();
  if (copier_.joinable()) copier_.join();
}

// ---- control ----

bool ChainRuntime::table_from(const exo::ChainTableMsg& m, ChainTable* out,
                              std::string* error) const {
  const size_t n_slots = size_t{1} << cluster_.partition_bits;
  if (static_cast<size_t>(m.slots_size()) != n_slots) {
    *error = "table.slots: " + std::to_string(m.slots_size()) + " slots, not 2^partition_bits = " +
             std::to_string(n_slots);
    return false;
  }
  const auto index_of = [&](const std::string& name) { return db_index(cluster_, name); };
  out->version = m.version();
  out->partition_bits = cluster_.partition_bits;
  out->slots.clear();
  for (int s = 0; s < m.slots_size(); ++s) {
    const exo::SlotChain& sc = m.slots(s);
    const std::string where = "table.slots[" + std::to_string(s) + "]";
    SlotChainInfo info;
    if (sc.nodes_size() == 0) {
      *error = where + ".nodes: empty";
      return false;
    }
    for (int i = 0; i < sc.nodes_size() + sc.learners_size(); ++i) {
      const std::string& name = i < sc.nodes_size() ? sc.nodes(i) : sc.learners(i - sc.nodes_size());
      const std::optional<uint32_t> idx = index_of(name);
      if (!idx) {
        *error = where + ": no db node named '" + name + "'";
        return false;
      }
      if (std::find(info.order.begin(), info.order.end(), *idx) != info.order.end()) {
        *error = where + ": '" + name + "' appears twice";
        return false;
      }
      info.order.push_back(*idx);
    }
    info.members = static_cast<uint32_t>(sc.nodes_size());
    if (!sc.read_server().empty()) {
      const std::optional<uint32_t> r = index_of(sc.read_server());
      if (!r || std::find(info.order.begin(), info.order.begin() + info.members, *r) ==
                    info.order.begin() + info.members) {
        *error = where + ".read_server: '" + sc.read_server() + "' is not a member of the slot";
        return false;
      }
      info.read_server = static_cast<int32_t>(*r);
    }
    out->slots.push_back(std::move(info));
  }
  for (const exo::NodeIncarnation& n : m.members()) {
    if (const std::optional<uint32_t> idx = index_of(n.node())) out->incarnations[*idx] = n.incarnation();
  }
  return true;
}

ChainRuntime::PushOutcome ChainRuntime::set_table(const exo::SetChainsRequest& req) {
  std::lock_guard<std::mutex> push(push_mu_);
  PushOutcome out;
  if (req.incarnation() != incarnation_) {
    out.code = PushOutcome::kWrongIncarnation;
    out.error = "incarnation " + std::to_string(req.incarnation()) + " is not this process's (" +
                std::to_string(incarnation_) + "): it restarted";
    return out;
  }
  const std::shared_ptr<const ChainTable> cur = view_.get();
  if (active() && req.table().version() < cur->version) {
    out.code = PushOutcome::kStale;
    out.error = "table version " + std::to_string(req.table().version()) + " is older than " +
                std::to_string(cur->version);
    return out;
  }
  ChainTable t;
  if (!table_from(req.table(), &t, &out.error)) {
    out.code = PushOutcome::kBadTable;
    return out;
  }
  const std::vector<uint32_t> learner_slots = t.learning(self_);
  // A slot this node starts learning is copied afresh: what it holds of the slot from an
  // earlier membership (a restart) may miss deletes, so it goes first. No live write of the
  // slot can have arrived yet: predecessors pass none until this table is taken below.
  std::vector<uint32_t> fresh;
  {
    std::lock_guard<std::mutex> lk(learn_mu_);
    for (uint32_t s : learner_slots)
      if (!learning_.count(s)) fresh.push_back(s);
  }
  if (!fresh.empty()) {
    std::unordered_set<uint32_t> wipe(fresh.begin(), fresh.end());
    std::vector<std::string> doomed;
    const StoreResult r = store_.scan(Cf::kData, [&](std::string_view k, std::string_view) {
      if (wipe.count(t.slot_of(key_hash(bytes_of(k))))) doomed.emplace_back(k);
    });
    std::vector<StoreOp> ops;
    for (const std::string& k : doomed) ops.push_back(StoreOp::del(Cf::kData, bytes_of(k)));
    const StoreResult w = r.ok() && !ops.empty() ? store_.write(ops) : r;
    if (!w.ok()) {
      out.code = PushOutcome::kBadTable;
      out.error = "clearing the slots to learn failed: " + w.error;
      return out;
    }
    if (!doomed.empty()) LOG_INFO("cleared %zu keys of %zu slots before copying them", doomed.size(), fresh.size());
  }
  {
    // Learner state first, so a live write arriving under the new table is noted before any
    // copy of its slot can start.
    std::lock_guard<std::mutex> lk(learn_mu_);
    std::unordered_map<uint32_t, Learning> next;
    for (uint32_t s : learner_slots) {
      auto it = learning_.find(s);
      if (it != learning_.end()) {
        next.emplace(s, std::move(it->second));
      } else {
        next.emplace(s, Learning{});
        to_copy_.push_back(s);
      }
    }
    learning_ = std::move(next);
  }
  view_.set(std::move(t));
  active_.store(true, std::memory_order_release);
  learn_cv_.notify_all();
  LOG_INFO("chain table version %llu taken (%zu slots to learn)",
           static_cast<unsigned long long>(req.table().version()), learner_slots.size());
  return out;
}

void ChainRuntime::status(exo::ChainStatusReply* rep) const {
  rep->set_node(cluster_.db_nodes[self_].name);
  rep->set_incarnation(incarnation_);
  rep->set_pending(uncommitted_.size());
  if (active() && replicates_) {
    const std::shared_ptr<const ChainTable> t = view_.get();
    exo::ChainTableMsg* m = rep->mutable_table();
    m->set_version(t->version);
    for (const SlotChainInfo& s : t->slots) {
      exo::SlotChain* sc = m->add_slots();
      for (size_t i = 0; i < s.order.size(); ++i) {
        const std::string& name = cluster_.db_nodes[s.order[i]].name;
        if (i < s.members) sc->add_nodes(name);
        else sc->add_learners(name);
      }
      if (s.read_server >= 0) sc->set_read_server(cluster_.db_nodes[s.read_server].name);
    }
    for (const auto& [idx, inc] : t->incarnations) {
      exo::NodeIncarnation* n = m->add_members();
      n->set_node(cluster_.db_nodes[idx].name);
      n->set_incarnation(inc);
    }
  }
  std::lock_guard<std::mutex> lk(learn_mu_);
  for (const auto& [slot, l] : learning_) {
    if (l.copied) rep->add_caught_up(slot);
    else rep->add_learning(slot);
  }
}

bool ChainRuntime::may_copy_to(uint32_t slot, uint32_t caller, uint64_t version,
                               std::string* why) const {
  const std::shared_ptr<const ChainTable> t = view_.get();
  if (!active()) {
    *why = "this node has no chain table yet";
    return false;
  }
  if (slot >= t->slots.size()) {
    *why = "no slot " + std::to_string(slot);
    return false;
  }
  if (t->version < version) {
    // The learner's table is newer: this node may not pass it live writes yet, and a copy
    // without them could miss a write.
    *why = "table version " + std::to_string(t->version) + " is behind the learner's " +
           std::to_string(version);
    return false;
  }
  if (t->role(slot, caller) != ChainRole::kLearner) {
    *why = "the caller is not a learner of slot " + std::to_string(slot);
    return false;
  }
  return true;
}

exo::ReplicateRequest ChainRuntime::make_request(const ChainTable& t, uint32_t slot, RequestId id,
                                                 bool apply_data, bool is_delete, Bytes key,
                                                 Bytes value, const DedupRecord& record) {
  exo::ReplicateRequest r;
  r.set_version(t.version);
  r.set_slot(slot);
  r.set_seq(slot_seq_[slot].fetch_add(1, std::memory_order_relaxed) + 1);
  r.set_client_id(id.client_id);
  r.set_request_seq(id.seq);
  r.set_apply_data(apply_data);
  r.set_is_delete(is_delete);
  r.set_key(key.data(), key.size());
  if (apply_data && !is_delete) r.set_value(value.data(), value.size());
  r.set_dedup_record(encode_dedup(record));
  return r;
}

ForwardOutcome ChainRuntime::forward(const exo::ReplicateRequest& req) {
  return forward_by(req, std::chrono::system_clock::now() + kForwardDeadline);
}

ForwardOutcome ChainRuntime::forward_by(const exo::ReplicateRequest& req,
                                        std::chrono::system_clock::time_point deadline) {
  const std::shared_ptr<const ChainTable> t = view_.get();
  if (req.slot() >= t->slots.size() || t->role(req.slot(), self_) == ChainRole::kNone)
    return ForwardOutcome{ForwardOutcome::kRefused, "this node is no longer in the slot's chain"};
  const std::optional<uint32_t> next = t->successor(req.slot(), self_);
  if (!next) return ForwardOutcome{ForwardOutcome::kAcked, {}};  // the last in the chain
  ForwardOutcome f = forwarder_.replicate(*next, req, deadline);
  if (f.code != ForwardOutcome::kAcked) add_shared(c_.chain_forward_failed);
  return f;
}

std::vector<bool> ChainRuntime::forward_batch(std::span<const exo::ReplicateRequest* const> reqs) {
  std::string err;
  std::vector<bool> acked = forward_batch_by(reqs, std::chrono::system_clock::now() + kForwardDeadline,
                                             /*as_head=*/true, &err);
  if (!err.empty()) LOG_DEBUG("a burst's batch was not acknowledged by the chain: %s", err.c_str());
  return acked;
}

std::vector<bool> ChainRuntime::forward_batch_by(std::span<const exo::ReplicateRequest* const> reqs,
                                                 std::chrono::system_clock::time_point deadline,
                                                 bool as_head, std::string* error) {
  std::vector<bool> acked(reqs.size(), false);
  const std::shared_ptr<const ChainTable> t = view_.get();
  // One batch per next node, each in the order given (a burst has a handful of them at most).
  std::vector<std::pair<uint32_t, std::vector<size_t>>> by_next;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const uint32_t slot = reqs[i]->slot();
    if (slot >= t->slots.size() || t->role(slot, self_) == ChainRole::kNone) {
      *error = "this node is no longer in slot " + std::to_string(slot) + "'s chain";
      continue;
    }
    const std::optional<uint32_t> next = t->successor(slot, self_);
    if (!next) {
      acked[i] = true;  // the last in the chain
      continue;
    }
    auto g = std::find_if(by_next.begin(), by_next.end(), [&](const auto& p) { return p.first == *next; });
    if (g == by_next.end()) g = by_next.insert(by_next.end(), {*next, {}});
    g->second.push_back(i);
  }
  for (const auto& [next, writes] : by_next) {
    exo::ReplicateBatchRequest batch;
    for (size_t i : writes) *batch.add_writes() = *reqs[i];
    const ForwardOutcome f = forwarder_.replicate_batch(next, batch, deadline);
    if (as_head) add_shared(c_.chain_batches);
    if (f.code == ForwardOutcome::kAcked) {
      for (size_t i : writes) acked[i] = true;
      continue;
    }
    add_shared(c_.chain_forward_failed, writes.size());
    *error = f.error;
  }
  return acked;
}

void ChainRuntime::defer_batched(UncommittedWrite w) {
  w.in_batch = true;
  defer(std::move(w));
}

std::optional<UncommittedWrite> ChainRuntime::take(std::string_view key, const RequestId& id) {
  std::optional<UncommittedWrite> w = uncommitted_.take(key, id);
  set_gauge(c_.replication_pending, uncommitted_.size());
  return w;
}

void ChainRuntime::complete(UncommittedWrite& w) {
  if (w.txn) {
    // The write is at the read server already: failing to commit it here cannot be answered
    // with ERROR or undone with an Abort (the cache node would serve the old value while the
    // tail serves the new one). The node stops; its chains go on without it (design 3.4).
    if (const StoreResult s = w.txn->commit(); !s.ok()) {
      LOG_ERROR("commit of txid %llu after the chain acknowledged it failed: %s; stopping",
                static_cast<unsigned long long>(w.txid), s.error.c_str());
      std::_Exit(1);
    }
    w.txn.reset();
    resolver_.add(PendingDecision{w.txid, Decision::kCommit, w.cache_node, w.req.key()});
  }
  dedup_.insert(w.id, w.record);
  add_shared(c_.chain_writes);
}

void ChainRuntime::abandon(UncommittedWrite& w) {
  if (w.txn) {
    if (const StoreResult s = w.txn->rollback(); !s.ok())
      LOG_WARN("rollback of txid %llu failed: %s", static_cast<unsigned long long>(w.txid), s.error.c_str());
    w.txn.reset();
  }
  dedup_.release(w.id);
  add_shared(c_.chain_writes_abandoned);
}

void ChainRuntime::defer(UncommittedWrite w) {
  uncommitted_.put(std::move(w));
  set_gauge(c_.replication_pending, uncommitted_.size());
}

bool ChainRuntime::settle(CachedKeys::Guard&, std::string_view key) {
  std::optional<UncommittedWrite> w = uncommitted_.take(key);
  if (!w) return true;
  const ForwardOutcome f = forward(w->req);
  const bool done = f.code == ForwardOutcome::kAcked;
  const std::shared_ptr<const ChainTable> t = view_.get();
  if (done) {
    complete(*w);
  } else if (t->role(w->req.slot(), self_) == ChainRole::kNone) {
    abandon(*w);
    set_gauge(c_.replication_pending, uncommitted_.size());
    return true;
  } else {
    LOG_DEBUG("write of slot %u seq %llu still uncommitted: %s", w->req.slot(),
              static_cast<unsigned long long>(w->req.seq()), f.error.c_str());
    uncommitted_.put(std::move(*w));
  }
  set_gauge(c_.replication_pending, uncommitted_.size());
  return done;
}

size_t ChainRuntime::resolve_once() {
  size_t done = 0;
  for (const auto& [key, hash] : uncommitted_.keys()) {
    CachedKeys::Guard guard = cached_.lock(hash);
    if (settle(guard, key)) ++done;
  }
  return done;
}

ReplicaOutcome ChainRuntime::apply_from_predecessor(const exo::ReplicateRequest& req,
                                                    std::optional<uint32_t> caller,
                                                    std::chrono::system_clock::time_point deadline) {
  const exo::ReplicateRequest* one[] = {&req};
  return apply_batch_from_predecessor(one, caller, deadline);
}

ReplicaOutcome ChainRuntime::apply_batch_from_predecessor(
    std::span<const exo::ReplicateRequest* const> reqs, std::optional<uint32_t> caller,
    std::chrono::system_clock::time_point deadline) {
  ReplicaOutcome out;
  const std::shared_ptr<const ChainTable> t = view_.get();
  std::vector<DedupRecord> records(reqs.size());
  // Every write checked before any is applied: a refused or malformed batch changes nothing.
  for (size_t i = 0; i < reqs.size(); ++i) {
    const exo::ReplicateRequest& req = *reqs[i];
    if (req.slot() >= t->slots.size() || req.key().empty() || req.key().size() > wire::kMaxKeyLen ||
        t->slot_of(key_hash(bytes_of(req.key()))) != req.slot() ||
        !decode_dedup(req.dedup_record(), &records[i])) {
      out.code = ReplicaOutcome::kBadRequest;
      out.error = "malformed Replicate (write " + std::to_string(i) + ", slot " +
                  std::to_string(req.slot()) + ")";
      return out;
    }
    // Only the node before this one may pass it writes: a stale or forged forward could
    // otherwise put a value here that the head never ordered (design 3.1, "Transport"). A node
    // with no pushed table yet takes nothing (4.1).
    const std::optional<uint32_t> pred = active() ? t->predecessor(req.slot(), self_) : std::nullopt;
    if (!pred || (caller && *caller != *pred)) {
      add_shared(c_.replicate_refused);
      out.code = ReplicaOutcome::kNotPredecessor;
      out.error = "not this node's predecessor for slot " + std::to_string(req.slot()) +
                  " (table version " + std::to_string(t->version) + ")";
      return out;
    }
  }
  bool uncertain = false;
  std::vector<const exo::ReplicateRequest*> onward;  // passed on, in order
  std::vector<size_t> onward_of;                     // onward[j] is reqs[onward_of[j]]
  std::vector<bool> fresh;                           // applied now (else a resend)
  for (size_t i = 0; i < reqs.size(); ++i) {
    const exo::ReplicateRequest& req = *reqs[i];
    const uint64_t hash = key_hash(bytes_of(req.key()));
    const RequestId id{req.client_id(), req.request_seq()};
    const DedupTable::Lookup seen = dedup_.claim(id, wall_ms_());
    if (seen.kind == DedupTable::Lookup::kInFlight) {
      // Applied here before, not acknowledged downstream yet (it is in the uncommitted list),
      // or another copy is being applied right now. One more forward of the list's entry now.
      CachedKeys::Guard guard = cached_.lock(hash);
      if (uncommitted_.has(req.key()) && settle(guard, req.key())) {
        ++out.duplicates;
        continue;
      }
      uncertain = true;
      out.error = "a write is applied here but not acknowledged downstream yet";
      continue;
    }
    if (seen.kind == DedupTable::Lookup::kAnswered) {
      ++out.duplicates;
      add_shared(c_.replicated_duplicates);
    } else {
      DedupClaim claim(dedup_, id);
      const std::string dedup_key = request_key(id);
      StoreOp ops[2];
      size_t n = 0;
      if (req.apply_data())
        ops[n++] = req.is_delete() ? StoreOp::del(Cf::kData, bytes_of(req.key()))
                                   : StoreOp::put(Cf::kData, bytes_of(req.key()), bytes_of(req.value()));
      ops[n++] = StoreOp::put(Cf::kRequests, bytes_of(dedup_key), bytes_of(req.dedup_record()));
      // At most one write of a key is in the chain at a time (the head holds the key's stripe
      // lock and refuses the next write while one is uncommitted), so the lock is only for a
      // learner's copy of the same key (apply_copy), and never held across the forward.
      CachedKeys::Guard guard = cached_.lock(hash);
      if (const StoreResult st = store_.write(std::span<const StoreOp>(ops, n)); !st.ok()) {
        add_shared(c_.errors);
        uncertain = true;
        out.error = "store: " + st.error;
        continue;  // not applied here: not passed on either (the claim is released)
      }
      // Noted only once written: a live write that failed must not make the copy skip the key.
      if (t->role(req.slot(), self_) == ChainRole::kLearner) note_live_write(req.slot(), req.key());
      add_shared(c_.replicated_applied);
      // The record enters the dedup table once the rest of the chain has the write: should this
      // node become the head, a resend must wait for that rather than be answered at once.
      claim.keep();
    }
    // Passed on even when it is a resend: the successor may not have it yet.
    onward.push_back(&req);
    onward_of.push_back(i);
    fresh.push_back(seen.kind == DedupTable::Lookup::kNew);
  }
  std::string err;
  const std::vector<bool> acked =
      forward_batch_by(onward, deadline - std::chrono::milliseconds(20), /*as_head=*/false, &err);
  for (size_t j = 0; j < onward.size(); ++j) {
    const exo::ReplicateRequest& req = *onward[j];
    const RequestId id{req.client_id(), req.request_seq()};
    if (acked[j]) {
      if (fresh[j]) dedup_.insert(id, records[onward_of[j]]);
      continue;
    }
    uncertain = true;
    out.error = err;
    if (!fresh[j]) continue;
    // Applied here, not through: the resolver passes it on (to whoever is the successor by then).
    UncommittedWrite w;
    w.hash = key_hash(bytes_of(req.key()));
    w.id = id;
    w.record = records[onward_of[j]];
    w.req = req;
    CachedKeys::Guard guard = cached_.lock(w.hash);
    defer(std::move(w));
  }
  out.duplicate = !reqs.empty() && out.duplicates == reqs.size();
  out.code = uncertain ? ReplicaOutcome::kUncertain : ReplicaOutcome::kApplied;  // uncertain: the head resends
  return out;
}

void ChainRuntime::note_live_write(uint32_t slot, const std::string& key) {
  std::lock_guard<std::mutex> lk(learn_mu_);
  auto it = learning_.find(slot);
  if (it != learning_.end() && !it->second.copied) it->second.live_keys.insert(key);
}

void ChainRuntime::apply_copy(uint32_t slot, const exo::CopySlotChunk& chunk) {
  uint64_t applied = 0;
  for (int i = 0; i < chunk.keys_size() && i < chunk.values_size(); ++i) {
    const std::string& key = chunk.keys(i);
    CachedKeys::Guard guard = cached_.lock(key_hash(bytes_of(key)));
    {
      std::lock_guard<std::mutex> lk(learn_mu_);
      auto it = learning_.find(slot);
      if (it == learning_.end()) return;  // no longer a learner of the slot: stop
      if (it->second.live_keys.count(key)) continue;  // a live write is newer
    }
    const StoreOp op = StoreOp::put(Cf::kData, bytes_of(key), bytes_of(chunk.values(i)));
    if (const StoreResult s = store_.write(std::span<const StoreOp>(&op, 1)); !s.ok()) {
      LOG_WARN("slot %u copy: a write failed: %s", slot, s.error.c_str());
      add_shared(c_.errors);
      continue;
    }
    ++applied;
  }
  // Outcome records of recent requests (all slots): a resend of an id the chain answered
  // before this node joined must not be applied again should this node become head.
  for (int i = 0; i < chunk.record_keys_size() && i < chunk.record_values_size(); ++i) {
    RequestId id;
    DedupRecord rec;
    if (!parse_request_key(chunk.record_keys(i), &id) || !decode_dedup(chunk.record_values(i), &rec))
      continue;
    if (dedup_.claim(id, wall_ms_()).kind != DedupTable::Lookup::kNew) continue;
    const StoreOp op = StoreOp::put(Cf::kRequests, bytes_of(chunk.record_keys(i)),
                                    bytes_of(chunk.record_values(i)));
    if (const StoreResult s = store_.write(std::span<const StoreOp>(&op, 1), Durability::kRelaxed); !s.ok()) {
      dedup_.release(id);
      continue;
    }
    dedup_.insert(id, rec);
  }
  add_shared(c_.copied_keys, applied);
  std::lock_guard<std::mutex> lk(learn_mu_);
  if (auto it = learning_.find(slot); it != learning_.end()) it->second.keys += applied;
}

void ChainRuntime::copier_loop() {
  std::unique_lock<std::mutex> lk(learn_mu_);
  while (true) {
    learn_cv_.wait(lk, [&] { return stopping_ || !to_copy_.empty(); });
    if (stopping_) return;
    const uint32_t slot = to_copy_.front();
    to_copy_.pop_front();
    if (!learning_.count(slot)) continue;  // the table moved on
    lk.unlock();
    const std::shared_ptr<const ChainTable> t = view_.get();
    const int32_t from = slot < t->slots.size() ? t->slots[slot].read_server : -1;
    std::string err;
    const bool ok = from >= 0 &&
                    forwarder_.copy_slot(static_cast<uint32_t>(from), slot, t->version,
                                         [&](const exo::CopySlotChunk& c) { apply_copy(slot, c); }, &err);
    lk.lock();
    auto it = learning_.find(slot);
    if (it == learning_.end()) continue;
    if (ok) {
      it->second.copied = true;
      it->second.live_keys.clear();
      add_shared(c_.slots_copied);
      LOG_INFO("slot %u copied (%llu keys): caught up", slot, static_cast<unsigned long long>(it->second.keys));
      continue;
    }
    LOG_INFO("slot %u copy failed, retrying: %s", slot, from < 0 ? "no read server" : err.c_str());
    // Retry later; the table may name another read server by then.
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    lk.lock();
    if (learning_.count(slot)) to_copy_.push_back(slot);
  }
}

}  // namespace exo::db
