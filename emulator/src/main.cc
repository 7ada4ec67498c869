// exo-emulator: the wimpy emulator (thesis 4.1.1). Hosts every db node of the cluster whose
// `emulator` is --emulator NAME in one DPDK process: each is a real db node (node_parts.h) over
// a fixed-value store, rate-limited by its own token bucket (emulator.h).
//
//   exo-emulator --config cluster.json --emulator emu0 [--log-level info] [-- extra EAL args]
//
// Exit codes: 0 clean shutdown (SIGINT/SIGTERM), 2 bad config or usage, 1 start-up failure.
#include <sched.h>

#include <CLI/CLI.hpp>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <atomic>
#include <cinttypes>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "cluster.h"
#include "dpdk/eal_args.h"
#include "dpdk/port.h"
#include "dpdk/process.h"
#include "emu_loop.h"
#include "emulator.h"
#include "log.h"
#include "periodic.h"
#include "wire.h"

namespace {

using namespace exo::emu;

std::atomic<bool>& g_quit = exo::dpdk::quit_flag();

// Sleeps up to `d`, waking early on quit.
void nap(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!g_quit.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

void print_nodes(const exo::Cluster& cluster, Emulator& emu) {
  for (size_t s = 0; s < emu.size(); ++s) {
    const exo::DbNodeInfo& d = emu.node_info(s);
    const uint32_t db = emu.node(s).self_index;
    size_t owned = 0;
    for (uint32_t o : cluster.slot_owner) owned += o == db;
    char rate[64] = "unlimited";
    if (emu.rate_limit_rps() > 0)
      std::snprintf(rate, sizeof rate, "%.0f req/s (bucket %.0f)", emu.rate_limit_rps(),
                    emu.bucket_depth());
    std::fprintf(stderr, "exo-emulator: node %s mac %s grpc %s partitions %zu/%zu rate limit %s%s%s\n",
                 d.name.c_str(), exo::format_mac(d.mac.data()).c_str(), d.grpc.c_str(), owned,
                 cluster.slot_owner.size(), rate, d.cache_node.empty() ? "" : " reports to ",
                 d.cache_node.c_str());
  }
}

void print_summary(const EmulatorTotals& t, const EmulatorTotals& prev, double secs) {
  std::fprintf(stderr,
               "exo-emulator: rx %" PRIu64 " frames, served %" PRIu64 " (%.0f/s), rate_limited %" PRIu64
               " (%.0f/s), unrouted %" PRIu64 ", malformed %" PRIu64 ", tx_errors %" PRIu64 "\n",
               t.rx_frames, t.served, (t.served - prev.served) / secs, t.rate_limited,
               (t.rate_limited - prev.rate_limited) / secs, t.unrouted, t.malformed, t.tx_errors);
}

int run(const exo::Cluster& cluster, const std::string& name, std::unique_ptr<Emulator> emu,
        const std::vector<std::string>& extra) {
  cpu_set_t original;
  CPU_ZERO(&original);
  sched_getaffinity(0, sizeof original, &original);

  const exo::DbNodeInfo& first = emu->node_info(0);
  const exo::EmulationConfig& ec = cluster.emulation;
  std::vector<std::string> args = exo::dpdk::build_eal_args(
      "exo-emulator", exo::dpdk::EalSpec{"exo-emu-" + name, ec.lcores, first.iface, ec.eal_args},
      cluster.mtu, extra);
  std::vector<char*> argv;
  std::string joined;
  for (auto& a : args) {
    argv.push_back(a.data());
    joined += " " + a;
  }
  argv.push_back(nullptr);
  LOG_INFO("EAL args:%s", joined.c_str());
  if (rte_eal_init(static_cast<int>(args.size()), argv.data()) < 0) {
    LOG_ERROR("rte_eal_init failed: %s", rte_strerror(rte_errno));
    return 1;
  }
  exo::dpdk::install_quit_signals();  // after EAL init, so ours win

  std::vector<unsigned> lcore_ids;
  unsigned lid;
  RTE_LCORE_FOREACH(lid) lcore_ids.push_back(lid);
  if (lcore_ids.size() != emu->lanes()) {
    LOG_ERROR("EAL gave %zu lcores, emulation.lcores '%s' names %u", lcore_ids.size(),
              ec.lcores.c_str(), emu->lanes());
    rte_eal_cleanup();
    return 1;
  }
  std::vector<EmuLane> lanes(RTE_MAX_LCORE);
  exo::dpdk::Port port;
  try {
    exo::dpdk::PortConfig pc;
    pc.nb_queues = static_cast<uint16_t>(lcore_ids.size());
    pc.mtu = cluster.mtu;
    pc.burst = ec.burst;
    if (ec.eal_args.empty())
      pc.min_data_room = static_cast<uint32_t>(exo::dpdk::af_packet_framesz(cluster.mtu));
    port = exo::dpdk::open_port(pc);
  } catch (const std::exception& e) {
    LOG_ERROR("%s", e.what());
    rte_eal_cleanup();
    return 1;
  }
  for (size_t q = 0; q < lcore_ids.size(); ++q) {
    EmuLane& ln = lanes[lcore_ids[q]];
    ln.lcore_id = lcore_ids[q];
    ln.queue = static_cast<uint16_t>(q);
    ln.scratch.assign(exo::wire::kEthLen + cluster.mtu, 0);
  }

  // The control thread, away from the lcores: gRPC servers, REPORT threads, the resolver and
  // dedup sweep of every node (all started from here so they inherit its CPU set), the 5 s
  // summary; it stops them all once the lcores have returned.
  std::promise<std::string> started;
  std::atomic<bool> lcores_done{false};
  std::thread control([&] {
    exo::dpdk::pin_to_non_lcore_cpus(original, lcore_ids);
    std::string err;
    if (!emu->start(&err)) {
      started.set_value(err);
      return;
    }
    exo::db::PeriodicThread resolving(exo::db::Resolver::kRetryInterval, [&] { emu->resolve_all(); });
    exo::db::PeriodicThread sweeping(std::chrono::seconds(5), [&] { emu->sweep_all(); });
    resolving.start();
    sweeping.start();
    started.set_value("");
    EmulatorTotals prev = emu->totals();
    auto last = std::chrono::steady_clock::now();
    while (!g_quit.load()) {
      nap(std::chrono::seconds(5));
      const auto now = std::chrono::steady_clock::now();
      const EmulatorTotals t = emu->totals();
      print_summary(t, prev, std::chrono::duration<double>(now - last).count());
      prev = t;
      last = now;
    }
    while (!lcores_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sweeping.stop();
    resolving.stop();  // undelivered decisions die with the process (nothing is durable here)
    emu->stop();
  });

  int rc = 0;
  if (std::string err = started.get_future().get(); !err.empty()) {
    LOG_ERROR("%s", err.c_str());
    g_quit = true;
    rc = 1;
  } else {
    print_nodes(cluster, *emu);
    LOG_INFO("%s: %zu db nodes on %s (port %u, mac %s), %zu lcore(s), value %u bytes, udp %u",
             name.c_str(), emu->size(), first.iface.c_str(), port.id,
             exo::format_mac(port.mac.addr_bytes).c_str(), lcore_ids.size(), ec.value_size,
             cluster.udp_port);
    EmuShared shared;
    shared.port = port.id;
    shared.burst = std::min(ec.burst, kMaxBurst);
    shared.idle_sleep_us = ec.idle_sleep_us;
    shared.emu = emu.get();
    shared.quit = &g_quit;
    shared.lanes = lanes.data();
    rte_eal_mp_remote_launch(emu_lcore_main, &shared, CALL_MAIN);  // returns when g_quit is set
    rte_eal_mp_wait_lcore();
    LOG_INFO("shutting down");
  }
  lcores_done = true;
  control.join();
  const EmulatorTotals t = emu->totals();
  emu.reset();
  exo::dpdk::close_port(port);
  rte_eal_cleanup();
  std::fprintf(stderr, "exo-emulator: stopped: rx %" PRIu64 " frames, served %" PRIu64
               ", rate_limited %" PRIu64 ", unrouted %" PRIu64 "\n",
               t.rx_frames, t.served, t.rate_limited, t.unrouted);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after `--` goes to EAL untouched; CLI11 sees only what comes before.
  std::vector<std::string> extra;
  const int our_argc = exo::dpdk::split_eal_extra(argc, argv, &extra);
  CLI::App app{"Exoskeleton wimpy emulator: many rate-limited db nodes in one DPDK process"};
  std::string config_path, name, level = "info";
  app.add_option("--config,--cluster", config_path, "resolved cluster JSON (exo config resolve)")
      ->required();
  app.add_option("--emulator", name, "host every db node whose emulator is NAME")->required();
  app.add_option("--log-level", level, "debug, info, warn or error");
  try {
    app.parse(our_argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  exo::log_program() = "exo-emulator";
  if (!exo::set_log_level(level)) {
    std::fprintf(stderr, "exo-emulator: --log-level: unknown level '%s'\n", level.c_str());
    return 2;
  }
  exo::Cluster cluster;
  try {
    cluster = exo::load_cluster(config_path);
  } catch (const std::exception& e) {  // ClusterError, or anything the JSON library throws
    std::fprintf(stderr, "exo-emulator: bad cluster config: %s\n", e.what());
    return 2;
  }
  const exo::EmulationConfig& ec = cluster.emulation;
  size_t lanes = 0;
  try {
    lanes = exo::dpdk::count_lcores(ec.lcores);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "exo-emulator: %s: emulation.%s\n", config_path.c_str(), e.what());
    return 2;
  }
  if (size_t{ec.value_size} + 1 > exo::wire::max_kv_bytes(cluster.mtu)) {
    std::fprintf(stderr, "exo-emulator: %s: emulation.value_size: %u bytes do not fit a reply at "
                 "mtu %u (at most %zu with a 1-byte key)\n", config_path.c_str(), ec.value_size,
                 cluster.mtu, exo::wire::max_kv_bytes(cluster.mtu) - 1);
    return 2;
  }
  std::string err;
  std::unique_ptr<Emulator> emu = Emulator::build(cluster, name, static_cast<unsigned>(lanes), &err);
  if (!emu) {
    std::fprintf(stderr, "exo-emulator: %s: --emulator %s: %s\n", config_path.c_str(),
                 name.c_str(), err.c_str());
    return 2;
  }
  exo::log_security(*emu->node(0).security, cluster);
  return run(cluster, name, std::move(emu), extra);
}
