// exo-loadgen: the native open-loop load generator (issue 5). Wiring only:
//   parse options -> load the cluster config -> plan the run -> open the AF_PACKET sockets ->
//   RX thread (receiver.h) + TX loop on this thread (sender.h) -> drain -> JSON (report.h).
// Exit codes: 0 success (also when stopped early by SIGINT/SIGTERM: the JSON is still
// written), 2 bad options or config, 1 sockets or output failed. Usage: emulator/README.md.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "cluster.h"
#include "loadgen/clock.h"
#include "loadgen/memcached_udp.h"
#include "loadgen/options.h"
#include "loadgen/packet_socket.h"
#include "loadgen/print_keys.h"
#include "loadgen/receiver.h"
#include "loadgen/report.h"
#include "loadgen/request_builder.h"
#include "loadgen/sender.h"

using namespace exo::loadgen;

namespace {

std::atomic<int> g_signals{0};
std::atomic<bool> g_stop{false};

void on_signal(int) {
  g_signals.fetch_add(1, std::memory_order_relaxed);
  g_stop.store(true, std::memory_order_relaxed);
}

// SIGINT/SIGTERM set the stop flag; no SA_RESTART, so the TX loop's sleep returns at once.
bool install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGINT, &sa, nullptr) == 0 && sigaction(SIGTERM, &sa, nullptr) == 0;
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "exo-loadgen: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = 0; run_print_keys(std::vector<std::string>(argv, argv + argc), &rc)) return rc;
  Options o;
  const ParseResult parsed = parse_options(std::vector<std::string>(argv, argv + argc), &o);
  if (!parsed.run) return exo::print_cli_exit(parsed);
  exo::Cluster cluster;
  try {
    cluster = exo::load_cluster(o.config);
  } catch (const std::exception& e) {
    return usage_error(std::string("--config: ") + e.what());
  }
  RunPlan plan;
  if (const std::string err = plan_run(o, cluster, &plan); !err.empty()) return usage_error(err);

  // Sleeps end within ~1 us of the deadline instead of the default 50 us slack.
  if (prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) != 0)
    std::fprintf(stderr, "exo-loadgen: warning: prctl(PR_SET_TIMERSLACK): %s\n", std::strerror(errno));
  if (!install_signal_handlers()) {
    std::fprintf(stderr, "exo-loadgen: sigaction: %s\n", std::strerror(errno));
    return 1;
  }

  PacketSockets socks;
  DiscardSink discard;
  FrameSink* sink = &discard;
  if (!o.dry_run) {
    std::string err;
    if (!open_packet_sockets(plan.iface, plan.endpoint.ip, o.src_port, static_cast<int>(o.sndbuf),
                             static_cast<int>(o.rcvbuf), &socks, &err)) {
      std::fprintf(stderr, "exo-loadgen: %s\n", err.c_str());
      return 1;
    }
    plan.endpoint.src_port = socks.src_port;
    sink = socks.tx.get();
    const std::string mac_from = o.src_mac.empty() ? "clients[" + o.client + "].mac" : "--src-mac";
    if (std::memcmp(socks.iface_mac, plan.endpoint.mac.data(), 6) != 0)
      std::fprintf(stderr, "exo-loadgen: warning: %s has MAC %s but the requests' source is %s (%s); "
                   "replies come back to that MAC\n", plan.iface.c_str(),
                   exo::format_mac(socks.iface_mac).c_str(),
                   exo::format_mac(plan.endpoint.mac.data()).c_str(), mac_from.c_str());
  } else {
    plan.endpoint.src_port = o.src_port != 0 ? o.src_port : cluster.udp_port;
  }

  std::unique_ptr<RequestWriter> builder;
  try {
    if (plan.protocol == Protocol::kMemcached)
      builder = std::make_unique<MemcachedRequestBuilder>(plan.endpoint, o.key_size);
    else  // exo and reflect: the same exo requests
      builder = std::make_unique<RequestBuilder>(plan.endpoint, plan.client_id, o.key_size,
                                                 o.value_size, plan.mtu);
  } catch (const std::invalid_argument& e) {
    return usage_error(e.what());
  }
  SendRing ring(plan.window);
  const double drain_s = o.drain_ms / 1000.0;
  const double bin_s = o.bin_ms / 1000.0;
  const auto bins = static_cast<uint64_t>(std::ceil((o.duration_s + drain_s) / bin_s)) + 2;
  const int64_t started_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch()).count();
  Series series(mono_ns(), bins, uint64_t{o.bin_ms} * 1'000'000ULL);
  ReplyHandler handler(plan.endpoint, plan.client_id, ring, series, plan.protocol);

  SenderConfig sc;
  sc.rate = o.rate;
  sc.duration_ns = static_cast<uint64_t>(o.duration_s * 1e9);
  sc.batch = plan.batch;
  sc.catch_up_s = o.catch_up_ms / 1000.0;
  sc.get_ratio = o.get_ratio;
  sc.seed = plan.seed;
  sc.keys = o.keys;
  sc.alpha = o.alpha;
  sc.swap_count = o.swap_count;
  sc.swap_every_ns = static_cast<uint64_t>(o.swap_every_s * 1e9);
  Sender sender(sc, *builder, *sink, ring, series);

  // The RX thread blocks the stop signals, so they always interrupt the TX loop's sleep.
  std::atomic<bool> rx_stop{false};
  std::string rx_error;
  std::thread rx;
  if (socks.rx) {
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    if (const int e = pthread_sigmask(SIG_BLOCK, &block, &old); e != 0) {
      std::fprintf(stderr, "exo-loadgen: pthread_sigmask: %s\n", std::strerror(e));
      return 1;
    }
    ReceiverOptions ro;
    ro.frame_cap = std::max<size_t>(2048, 14 + plan.mtu + 4);
    rx = std::thread([&, ro] { run_receiver(*socks.rx, handler, ro, rx_stop, &rx_error); });
    if (const int e = pthread_sigmask(SIG_SETMASK, &old, nullptr); e != 0)
      std::fprintf(stderr, "exo-loadgen: warning: pthread_sigmask: %s\n", std::strerror(e));
  }

  const auto progress = [&](uint64_t t) {
    if (!o.quiet)
      std::fprintf(stderr, "exo-loadgen: %s\n", progress_line(t, series.sent(), series.answered()).c_str());
  };
  const TxStats tx = sender.run(g_stop, progress);
  const bool interrupted = g_signals.load() > 0;

  // Late replies: wait drain_ms (a second signal cuts it short), then stop the RX thread.
  if (rx.joinable()) {
    const uint64_t deadline = mono_ns() + static_cast<uint64_t>(o.drain_ms) * 1'000'000ULL;
    while (mono_ns() < deadline && g_signals.load() < 2) sleep_until_ns(deadline);
    rx_stop.store(true);
    rx.join();
  }

  nlohmann::json params = params_json(o, plan);
  params["started_unix_ms"] = started_unix_ms;
  const nlohmann::json report =
      make_report(params, series, tx, handler.counters(), interrupted, rx_error);
  const std::string text = report.dump(1) + "\n";
  if (o.out.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      std::fprintf(stderr, "exo-loadgen: writing the JSON to stdout: %s\n", std::strerror(errno));
      return 1;
    }
  } else if (const std::string err = write_file_atomic(o.out, text); !err.empty()) {
    std::fprintf(stderr, "exo-loadgen: %s\n", err.c_str());
    return 1;
  }
  const auto& t = report["totals"];
  std::fprintf(stderr, "exo-loadgen: done%s: sent %llu in %.2f s (%.0f/s), answered %llu, loss %.3f%%, "
               "p50 %s us, p99 %s us, tx_errors %llu\n", interrupted ? " (interrupted)" : "",
               static_cast<unsigned long long>(t["sent"].get<uint64_t>()),
               t["send_elapsed_s"].get<double>(), t["offered_rps"].get<double>(),
               static_cast<unsigned long long>(t["answered"].get<uint64_t>()),
               100.0 * t["loss"].get<double>(), t["p50_us"].dump().c_str(), t["p99_us"].dump().c_str(),
               static_cast<unsigned long long>(t["tx_errors"].get<uint64_t>()));
  return 0;
}
