#include "emulator.h"

#include <algorithm>

#include "log.h"

namespace exo::emu {

std::vector<uint32_t> hosted_nodes(const Cluster& cluster, const std::string& name) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < cluster.db_nodes.size(); ++i)
    if (!name.empty() && cluster.db_nodes[i].emulator == name) out.push_back(static_cast<uint32_t>(i));
  return out;
}

double bucket_depth(double rate_rps, uint32_t burst) {
  return std::max<double>(std::max<uint32_t>(burst, 1), rate_rps / 1000.0);
}

bool Emulator::Limiter::take(uint64_t now_ns) {
  if (!bucket) return true;
  // Lanes of one node contend only when several lcores get its frames at the same instant.
  while (busy.test_and_set(std::memory_order_acquire)) {
  }
  const bool ok = bucket->take(now_ns);
  busy.clear(std::memory_order_release);
  return ok;
}

std::unique_ptr<Emulator> Emulator::build(const Cluster& cluster, const std::string& name,
                                          unsigned lanes, std::string* error,
                                          uint64_t dedup_ttl_ms) {
  const std::vector<uint32_t> hosted = hosted_nodes(cluster, name);
  if (hosted.empty()) {
    std::string names;
    for (const auto& d : cluster.db_nodes)
      if (!d.emulator.empty() && names.find("'" + d.emulator + "'") == std::string::npos)
        names += (names.empty() ? "'" : ", '") + d.emulator + "'";
    *error = "no db node has emulator '" + name + "' (emulators in the config: " +
             (names.empty() ? "none" : names) + ")";
    return nullptr;
  }
  if (lanes == 0) {
    *error = "emulation.lcores: at least one lcore is needed";
    return nullptr;
  }
  const double rate = cluster.emulation.db_rate_limit_rps;
  if (!(rate >= 0)) {
    *error = "emulation.db_rate_limit_rps: must be >= 0";
    return nullptr;
  }
  std::unique_ptr<Emulator> e(new Emulator(cluster, hosted, lanes));
  e->rate_rps_ = rate;
  e->depth_ = exo::emu::bucket_depth(rate, cluster.emulation.burst);
  db::NodePartsOptions opts;
  opts.dedup_ttl_ms = dedup_ttl_ms;
  // One certificate, the emulator's own name, speaks for every node it hosts (docs/security.md).
  try {
    opts.security = GrpcSecurity::load(cluster, name);
  } catch (const SecurityError& e) {
    *error = e.what();
    return nullptr;
  }
  for (uint32_t db : hosted) {
    auto n = std::make_unique<Node>();
    n->parts = db::NodeParts::build(cluster, db, e->store_, error, opts);
    if (!n->parts) return nullptr;
    for (unsigned l = 0; l < lanes; ++l) n->lanes.push_back(n->parts->add_lane());
    if (rate > 0) n->limiter.bucket.emplace(rate, e->depth_, 0);
    // Process-wide figures in every hosted node's Stats (the same values in each: not to be
    // summed over nodes), so an operator polling one node sees what the process drops.
    Emulator* self = e.get();
    n->parts->service.set_extra_stats([self] { return self->process_stats(); });
    e->nodes_.push_back(std::move(n));
  }
  return e;
}

Emulator::Emulator(const Cluster& cluster, const std::vector<uint32_t>& hosted, unsigned lanes)
    : cluster_(cluster),
      lanes_(lanes),
      store_(cluster.emulation.value_size),
      demux_(cluster, hosted),
      lane_counters_(lanes) {}

Emulator::~Emulator() { stop(); }

Emulator::Result Emulator::handle(unsigned lane, std::span<const uint8_t> frame, bool truncated,
                                  std::span<uint8_t> out, uint64_t now_ns) {
  LaneCounters& lc = lane_counters_[lane % lanes_];
  db::bump(lc.rx_frames);
  const Route r = demux_.route(frame);
  if (r.kind == Route::kOwnTx) {
    db::bump(lc.own_tx);
    return {Result::kOwnTx, 0, 0};
  }
  if (r.kind != Route::kNode) {
    db::bump(lc.unrouted);
    return {Result::kUnrouted, 0, 0};
  }
  Node& n = *nodes_[r.node];
  const db::NodeLane& nl = n.lanes[lane % lanes_];
  // A saturated wimpy's RX queue overflows: the frame never reaches its handler.
  if (!n.limiter.take(now_ns)) {
    db::bump(nl.counters->rate_limited);
    return {Result::kRateLimited, r.node, 0};
  }
  if (truncated) {  // as the db node's packet loop does with a frame larger than its buffer
    db::bump(nl.counters->rx_frames);
    db::bump(nl.counters->malformed_dropped);
    return {Result::kNoReply, r.node, 0};
  }
  const size_t len = nl.handler->handle(frame, out);
  if (len == 0) return {Result::kNoReply, r.node, 0};
  return {Result::kReply, r.node, len};
}

void Emulator::sent(unsigned lane, uint32_t node, bool ok) {
  if (node >= nodes_.size()) return;
  db::Counters& c = *nodes_[node]->lanes[lane % lanes_].counters;
  db::bump(ok ? c.requests_served : c.tx_errors);
}

bool Emulator::start(std::string* error) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::string e;
    if (!nodes_[i]->parts->start(&e)) {
      *error = "db_nodes[" + std::to_string(nodes_[i]->parts->self_index) + "] (" +
               node_info(i).name + ").grpc: " + e;
      stop();
      return false;
    }
  }
  return true;
}

void Emulator::stop() {
  // REPORT threads first (each node's stop() does reporter then server), all with a short
  // grace: 32 servers in turn must not hold up the exit.
  for (auto& n : nodes_) n->parts->reporter.stop();
  for (auto& n : nodes_) n->parts->stop(std::chrono::milliseconds(100));
}

void Emulator::resolve_all() {
  for (auto& n : nodes_) n->parts->resolve_once();
}

void Emulator::sweep_all() {
  for (auto& n : nodes_) n->parts->sweep_once();
}

std::vector<std::pair<std::string, uint64_t>> Emulator::process_stats() const {
  std::vector<std::pair<std::string, uint64_t>> out;
#define EXO_X(n, k, h) out.emplace_back(std::string(kEmulatorStatsPrefix) + #n, 0);
  EXO_EMULATOR_COUNTERS(EXO_X)
#undef EXO_X
  for (const LaneCounters& lc : lane_counters_) {
    size_t i = 0;
#define EXO_X(n, k, h) out[i++].second += lc.n.load(std::memory_order_relaxed);
    EXO_EMULATOR_COUNTERS(EXO_X)
#undef EXO_X
  }
  return out;
}

EmulatorTotals Emulator::totals() const {
  EmulatorTotals t;
  for (const LaneCounters& lc : lane_counters_) {
    t.rx_frames += lc.rx_frames.load(std::memory_order_relaxed);
    t.unrouted += lc.unrouted.load(std::memory_order_relaxed);
    t.own_tx += lc.own_tx.load(std::memory_order_relaxed);
  }
  for (const auto& n : nodes_) {
    for (const db::NodeLane& l : n->lanes) {
      const db::Counters& c = *l.counters;
      t.served += c.requests_served.load(std::memory_order_relaxed);
      t.rate_limited += c.rate_limited.load(std::memory_order_relaxed);
      t.gets += c.gets.load(std::memory_order_relaxed);
      t.puts += c.puts.load(std::memory_order_relaxed);
      t.deletes += c.deletes.load(std::memory_order_relaxed);
      t.malformed += c.malformed_dropped.load(std::memory_order_relaxed);
      t.tx_errors += c.tx_errors.load(std::memory_order_relaxed);
    }
  }
  return t;
}

}  // namespace exo::emu
