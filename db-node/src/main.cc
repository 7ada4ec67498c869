// exo-db-node: a RocksDB-backed db node of an Exoskeleton cluster.
//
//   exo-db-node --cluster cluster.json --name db0 [--log-level info]
//
// Wiring only: parse args, load the resolved cluster, open the store, recover the 2PC state
// (recovery.h), start the DbNode gRPC service, the resolver and dedup-sweep threads, the
// REPORT thread (when the node has a cache node) and `threads` packet threads, wait for
// SIGINT/SIGTERM, stop everything in reverse.
// Exit codes: 0 clean shutdown, 2 bad config or unknown node name, 1 other start-up failure.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "cluster.h"
#include "log.h"
#include "metrics_http.h"
#include "node_parts.h"
#include "packet_loop.h"
#include "periodic.h"
#include "raw_socket.h"
#include "recovery.h"
#include "store.h"

#ifdef EXO_FAULTS  // ---- mutant test build only ----
#include "fault_switch.h"
#endif

using namespace exo::db;

namespace {

int find_self(const exo::Cluster& c, const std::string& name) {
  for (size_t i = 0; i < c.db_nodes.size(); ++i)
    if (c.db_nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Exoskeleton db node: RocksDB behind AF_PACKET sockets"};
  std::string cluster_path, name, level = "info";
  app.add_option("--cluster", cluster_path, "resolved cluster JSON (exo config resolve)")->required();
  app.add_option("--name", name, "this node's name in cluster.db_nodes")->required();
  app.add_option("--log-level", level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
#ifdef EXO_FAULTS
  std::string fault;
  app.add_option("--fault", fault, "test build only: break the node on purpose (skip-prepare, ack-at-head)");
#endif
  CLI11_PARSE(app, argc, argv);
  exo::log_program() = "exo-db-node";
  exo::set_log_level(level);
#ifdef EXO_FAULTS
  exo::log_program() = "exo-db-node-mutant";
  if (std::string e; !exo::fault::select(fault, {exo::fault::kSkipPrepare, exo::fault::kAckAtHead}, &e)) {
    std::fprintf(stderr, "exo-db-node-mutant: %s\n", e.c_str());
    return 2;
  }
  if (!fault.empty()) LOG_WARN("test build: running with --fault %s (docs/chaos.md)", fault.c_str());
#endif

  // Block the stop signals before any thread exists (gRPC's included), so they are delivered
  // only to sigwait below and no handler has to be async-signal-safe.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  exo::Cluster cluster;
  try {
    cluster = exo::load_cluster(cluster_path);
  } catch (const exo::ClusterError& e) {
    std::fprintf(stderr, "exo-db-node: bad cluster config: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // belt and braces: any other JSON library error
    std::fprintf(stderr, "exo-db-node: bad cluster config: %s: %s\n", cluster_path.c_str(), e.what());
    return 2;
  }
  const int self_index = find_self(cluster, name);
  if (self_index < 0) {
    std::string known;
    for (const auto& d : cluster.db_nodes) known += (known.empty() ? "" : ", ") + d.name;
    std::fprintf(stderr, "exo-db-node: --name: no db node named '%s' in %s db_nodes (have: %s)\n",
                 name.c_str(), cluster_path.c_str(), known.c_str());
    return 2;
  }
  const exo::DbNodeInfo& self = cluster.db_nodes[self_index];
  if (self.threads < 1) {
    std::fprintf(stderr, "exo-db-node: %s: db_nodes[%d].threads: must be >= 1\n",
                 cluster_path.c_str(), self_index);
    return 2;
  }

  std::string err;
  std::unique_ptr<RocksStore> store = RocksStore::open(self.data_dir, self.sync_writes, &err);
  if (!store) {
    std::fprintf(stderr, "exo-db-node: db_nodes[%d].data_dir: %s\n", self_index, err.c_str());
    return 1;
  }

  // Every object of the node around the store (node_parts.h, shared with the wimpy emulator).
  std::unique_ptr<NodeParts> parts =
      NodeParts::build(cluster, static_cast<uint32_t>(self_index), *store, &err);
  if (!parts) {
    std::fprintf(stderr, "exo-db-node: %s: %s\n", cluster_path.c_str(), err.c_str());
    return 2;
  }
  exo::log_security(*parts->security, cluster);
  // Before any thread can write or Fetch: the marks, dedup records and undelivered decisions
  // of the previous run must be in place first (docs/two-phase-commit.md).
  RecoveryReport rec;
  if (const StoreResult r =
          recover(*store, cluster, parts->cached, parts->dedup, parts->resolver, &rec);
      !r.ok()) {
    std::fprintf(stderr, "exo-db-node: recovering %s: %s\n", self.data_dir.c_str(),
                 r.error.c_str());
    return 1;
  }
  LOG_INFO("recovered: %zu prepared transactions rolled back, %zu Commit + %zu Abort decisions "
           "to deliver (%zu dropped), %zu cached-key marks (%zu dropped), %zu dedup records",
           rec.prepared_rolled_back, rec.commits_queued, rec.aborts_queued, rec.txlog_dropped,
           rec.marks_loaded, rec.marks_dropped, rec.dedup_loaded);

  // Sockets before the gRPC server, so a missing interface fails fast and leaves no socket file.
  std::vector<int> fds;
  auto close_fds = [&fds] {
    for (int fd : fds) close(fd);
    fds.clear();
  };
  for (uint32_t i = 0; i < self.threads; ++i) {
    const int fd = open_packet_socket(RawSocketOptions{self.iface}, &err);
    if (fd < 0) {
      std::fprintf(stderr, "exo-db-node: db_nodes[%d].iface: %s\n", self_index, err.c_str());
      close_fds();
      return 1;
    }
    fds.push_back(fd);
  }

  // /metrics on db_nodes[].metrics (docs/operations.md, "Metrics"), before the gRPC server.
  exo::metrics::MetricsHttpServer metrics;
  if (const std::string e = metrics.start(
          self.metrics, {"db", {EXO_DB_COUNTERS(EXO_COUNTER_DESC) EXO_DB_GAUGES(EXO_COUNTER_DESC)},
                         [p = parts.get()] { return p->service.counters(); }});
      !e.empty()) {
    std::fprintf(stderr, "exo-db-node: db_nodes[%d].metrics: %s\n", self_index, e.c_str());
    close_fds();
    return 1;
  }
  // The gRPC server, then the REPORT thread (a REPORT makes the cache node Fetch from us).
  if (!parts->start(&err)) {
    std::fprintf(stderr, "exo-db-node: db_nodes[%d].grpc: %s\n", self_index, err.c_str());
    close_fds();
    return 1;
  }
  NodeParts* p = parts.get();
  PeriodicThread resolving(Resolver::kRetryInterval, [p] { p->resolve_once(); });
  // Every few seconds is plenty: a record lives kTtlMs (60 s); the sweep only bounds memory.
  PeriodicThread sweeping(std::chrono::seconds(5), [p] { p->sweep_once(); });
  resolving.start();
  sweeping.start();

  std::atomic<bool> quit{false};
  std::vector<std::thread> threads;
  for (int fd : fds) {
    const NodeLane lane = parts->add_lane();
    threads.emplace_back([fd, lane, &quit] { run_packet_loop(fd, *lane.handler, *lane.counters, quit); });
  }
  LOG_INFO("%s serving on %s (%s, %u threads, udp %u), grpc %s, data %s, sync_writes=%s",
           self.name.c_str(), self.iface.c_str(), exo::format_mac(self.mac.data()).c_str(),
           self.threads, cluster.udp_port, self.grpc.c_str(), self.data_dir.c_str(),
           self.sync_writes ? "true" : "false");
  if (parts->sink)
    LOG_INFO("hot keys: top_k %u, sample rate %g, %u x %u ms segments; REPORT to %s every %u ms",
             cluster.hot_keys.top_k, cluster.hot_keys.sample_rate, cluster.hot_keys.segments,
             cluster.hot_keys.segment_ms, self.cache_node.c_str(), cluster.hot_keys.report_interval_ms);
  else
    LOG_INFO("hot keys: no cache node, no REPORTs (HotKeys still answers)");

  int sig = 0;
  sigwait(&stop, &sig);
  LOG_INFO("signal %d: shutting down", sig);
  quit = true;
  for (auto& t : threads) t.join();  // each returns within one SO_RCVTIMEO
  close_fds();
  sweeping.stop();
  resolving.stop();  // undelivered decisions stay in the txlog for the next start
  metrics.stop();    // it reads the parts
  parts->stop();     // the REPORT thread, then the server: the reverse of start-up
  parts.reset();     // every StoreTxn and handler gone before RocksDB closes
  const StoreResult closed = store->close();
  if (!closed.ok()) {
    LOG_ERROR("closing RocksDB: %s", closed.error.c_str());
    return 1;
  }
  LOG_INFO("stopped");
  return 0;
}
