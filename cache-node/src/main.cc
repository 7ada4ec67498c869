// exo-cache-node: args, cluster config, EAL, port, lcore loops, gRPC control thread, shutdown.
//   exo-cache-node --cluster cluster.json --name cache0 [--log-level info] [-- extra EAL args]
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache_state.h"
#include "cluster.h"
#include "control_service.h"
#include "counters.h"
#include "eal_args.h"
#include "fill/filler.h"
#include "fill/hot_list.h"
#include "grpc_security.h"
#include "heads.h"
#include "lcore_loop.h"
#include "log.h"
#include "metrics_http.h"
#include "peers.h"
#include "dpdk/process.h"
#include "port.h"
#include "rpc_metrics.h"
#include "unix_socket.h"

#ifdef EXO_FAULTS  // ---- mutant test build only ----
#include "fault_switch.h"
#endif

namespace {

using namespace exo::cache;

std::atomic<bool>& g_quit = exo::dpdk::quit_flag();

int run(const exo::Cluster& cluster, const exo::CacheNodeInfo& self,
        const std::vector<std::string>& extra, const std::shared_ptr<const exo::GrpcSecurity>& security) {
  cpu_set_t original;
  CPU_ZERO(&original);
  sched_getaffinity(0, sizeof original, &original);

  std::vector<std::string> args = build_eal_args("exo-cache-node", self, cluster.mtu, extra);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string joined;
  for (const auto& a : args) joined += " " + a;
  LOG_INFO("EAL args:%s", joined.c_str());
  if (rte_eal_init(static_cast<int>(args.size()), argv.data()) < 0) {
    LOG_ERROR("rte_eal_init failed: %s", rte_strerror(rte_errno));
    return 1;
  }
  exo::dpdk::install_quit_signals();  // after EAL init, so ours win

  std::vector<unsigned> lcore_ids;
  unsigned lid;
  RTE_LCORE_FOREACH(lid) lcore_ids.push_back(lid);
  std::vector<LcoreState> lcores(RTE_MAX_LCORE);
  std::vector<std::unique_ptr<exo::TokenBucket>> limiters;  // one per lcore when capped

  int rc = 0;
  Port port;
  bool port_open = false;
  try {
    PortConfig pc;
    pc.nb_queues = static_cast<uint16_t>(lcore_ids.size());
    pc.mtu = cluster.mtu;
    pc.burst = self.burst;
    if (self.eal_args.empty()) pc.min_data_room = static_cast<uint32_t>(af_packet_framesz(cluster.mtu));
    port = open_port(pc);
    port_open = true;
    for (size_t q = 0; q < lcore_ids.size(); ++q) {
      LcoreState& ls = lcores[lcore_ids[q]];
      ls.lcore_id = lcore_ids[q];
      ls.queue = static_cast<uint16_t>(q);
      init_lcore_state(ls, port.id, self.burst);
      if (self.rate_limit_rps > 0) {
        // Each lcore gets an equal share; a burst of 1 ms of traffic (at least one RX burst)
        // so the cap holds at millisecond scale, as a saturated node's queue would.
        const double rate = self.rate_limit_rps / static_cast<double>(lcore_ids.size());
        limiters.push_back(std::make_unique<exo::TokenBucket>(
            rate, std::max<double>(self.burst, rate / 1000.0)));
        ls.limiter = limiters.back().get();
      }
    }
  } catch (const std::exception& e) {
    LOG_ERROR("%s", e.what());
    if (port_open) close_port(port);
    rte_eal_cleanup();
    return 1;
  }
  if (std::memcmp(port.mac.addr_bytes, self.mac.data(), 6) != 0)
    LOG_WARN("port MAC %s differs from configured %s; replies use the configured MAC",
             exo::format_mac(port.mac.addr_bytes).c_str(), exo::format_mac(self.mac.data()).c_str());

  CacheState state(map_capacity_for(self.capacity));
  CpCounters cp;
  // The slots' heads: the config's owners until the controller's SetHeads (heads.h).
  Heads heads(HeadsTable::from_cluster(cluster));
  GrpcPeers peers(cluster, self.name, security, heads);
  HotList hot(cluster.cache_fill.report_ttl_ms);
  Filler filler(FillerOptions::from(cluster, self), state, peers, hot, cp);
  auto sum_dp = [&lcores, &lcore_ids] {
    DpCounters sum;
    for (unsigned id : lcore_ids) sum += lcores[id].counters;
    return sum;
  };

  // gRPC control plane on a normal thread (never an lcore).
  std::promise<std::string> started;
  std::unique_ptr<grpc::Server> server;
  exo::metrics::MetricsHttpServer metrics;  // cache_nodes[].metrics (docs/operations.md, "Metrics")
  ControlService service(cluster, self.name, state, cp, peers, heads, hot, sum_dp);
  std::thread control([&] {
    // Not on the lcores' CPUs (it and the gRPC threads it spawns), unless that leaves none.
    exo::dpdk::pin_to_non_lcore_cpus(original, lcore_ids);
    if (std::string e = exo::prepare_unix_socket(self.grpc); !e.empty()) {
      started.set_value("cache_nodes[].grpc: " + e);
      return;
    }
    if (std::string e = metrics.start(self.metrics, {"cache", {std::begin(kCounterInfo), std::end(kCounterInfo)},
                                                     [&service] { return service.counters(); }});
        !e.empty()) {
      started.set_value("cache_nodes[].metrics: " + e);
      return;
    }
    grpc::ServerBuilder b;
    b.AddListeningPort(self.grpc, security->server_credentials());  // mutual TLS unless insecure_dev_mode
    b.RegisterService(&service);
    exo::metrics::instrument(b);  // health service + RPC latency histograms
    server = b.BuildAndStart();
    if (!server) {
      started.set_value("cannot serve gRPC on " + self.grpc);
      return;
    }
    // After the server (REPORTs and 2PC for fetched keys must reach us), from this thread so the
    // filler threads inherit its CPU set, away from the lcores. Before set_value: main's stop()
    // cannot overtake it.
    filler.start();
    started.set_value("");
    server->Wait();
  });
  if (std::string err = started.get_future().get(); !err.empty()) {
    LOG_ERROR("%s", err.c_str());
    g_quit = true;
    rc = 1;
  } else {
    LOG_INFO("%s: port %u mac %s, %zu lcore(s), capacity %u, gRPC %s, cache_fill %s, rate limit %s",
             self.name.c_str(), port.id, exo::format_mac(self.mac.data()).c_str(),
             lcore_ids.size(), self.capacity, self.grpc.c_str(),
             cluster.cache_fill.enabled ? "on" : "off",
             self.rate_limit_rps > 0 ? (std::to_string(self.rate_limit_rps) + " req/s").c_str() : "none");
    LoopShared shared;
    shared.port = port.id;
    shared.burst = self.burst;
    shared.idle_sleep_us = self.idle_sleep_us;
    shared.self = {self.mac, self.ip, cluster.udp_port, exo::wire::kEthLen + cluster.mtu};
    shared.state = &state;
    shared.quit = &g_quit;
    shared.lcores = lcores.data();
    rte_eal_mp_remote_launch(lcore_main, &shared, CALL_MAIN);  // returns when g_quit is set
    rte_eal_mp_wait_lcore();
    LOG_INFO("shutting down");
    peers.cancel_all();  // a waiting RemoveCacheRules must not hold up the exit
    filler.stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  control.join();
  metrics.stop();
  close_port(port);
  rte_eal_cleanup();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after `--` goes to EAL untouched; CLI11 sees only what comes before.
  std::vector<std::string> extra;
  const int our_argc = exo::dpdk::split_eal_extra(argc, argv, &extra);

  CLI::App app{"Exoskeleton DPDK cache node"};
  std::string cluster_path, name, level = "info";
  app.add_option("--cluster", cluster_path, "resolved cluster JSON (exo config resolve)")->required();
  app.add_option("--name", name, "this node's name in cluster.cache_nodes")->required();
  app.add_option("--log-level", level, "debug, info, warning or error");
#ifdef EXO_FAULTS
  std::string fault;
  app.add_option("--fault", fault, "test build only: break the node on purpose (serve-stale)");
#endif
  try {
    app.parse(our_argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; any usage error is 2 like config errors
  }
  exo::log_program() = "exo-cache-node";
  if (!exo::set_log_level(level)) {
    std::fprintf(stderr, "exo-cache-node: --log-level: unknown level '%s'\n", level.c_str());
    return 2;
  }
#ifdef EXO_FAULTS
  exo::log_program() = "exo-cache-node-mutant";
  if (std::string e; !exo::fault::select(fault, {exo::fault::kServeStale}, &e)) {
    std::fprintf(stderr, "exo-cache-node-mutant: %s\n", e.c_str());
    return 2;
  }
  if (!fault.empty()) LOG_WARN("test build: running with --fault %s (docs/chaos.md)", fault.c_str());
#endif

  exo::Cluster cluster;
  try {
    cluster = exo::load_cluster(cluster_path);
  } catch (const exo::ClusterError& e) {
    std::fprintf(stderr, "exo-cache-node: %s\n", e.what());
    return 2;
  }
  const exo::CacheNodeInfo* self = cluster.find_cache(name);
  if (!self) {
    std::fprintf(stderr, "exo-cache-node: --name: no entry '%s' in %s: cache_nodes\n", name.c_str(),
                 cluster_path.c_str());
    return 2;
  }
  try {
    count_lcores(self->lcores);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exo-cache-node: %s: cache_nodes[%s].%s\n", cluster_path.c_str(),
                 name.c_str(), e.what());
    return 2;
  }
  if (self->capacity == 0) {
    std::fprintf(stderr, "exo-cache-node: %s: cache_nodes[%s].capacity: must be >= 1\n",
                 cluster_path.c_str(), name.c_str());
    return 2;
  }
  // Certificates before EAL: a missing or wrong file is a config error, found in milliseconds.
  std::shared_ptr<const exo::GrpcSecurity> security;
  try {
    security = exo::GrpcSecurity::load(cluster, self->name);
  } catch (const exo::SecurityError& e) {
    std::fprintf(stderr, "exo-cache-node: %s: %s\n", cluster_path.c_str(), e.what());
    return 2;
  }
  exo::log_security(*security, cluster);
  return run(cluster, *self, extra, security);
}
