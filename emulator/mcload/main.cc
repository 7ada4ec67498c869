// exo-mcload: an open-loop memcached text-protocol load generator over many TCP (or unix socket)
// connections, for exo-proxy and any memcached server (emulator/mcload/README.md). Wiring only:
//   parse options -> plan -> raise the open-file limit -> connect every connection ->
//   the epoll loop (driver.h) -> JSON (report.h, exo-loadgen's format).
// Exit codes: 0 success (also when stopped early by SIGINT/SIGTERM: the JSON is still written),
// 2 bad options, 1 connections, the loop or the output failed.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "loadgen/clock.h"
#include "loadgen/report.h"  // write_file_atomic, progress_line
#include "mcload/connect.h"
#include "mcload/driver.h"
#include "mcload/options.h"
#include "mcload/report.h"

using namespace exo::mcload;

namespace {

std::atomic<int> g_signals{0};
std::atomic<bool> g_stop_send{false};
std::atomic<bool> g_stop_all{false};

// The first SIGINT/SIGTERM ends the send phase, a second one the drain. No SA_RESTART: the
// loop's epoll_pwait2 returns at once.
void on_signal(int) {
  if (g_signals.fetch_add(1, std::memory_order_relaxed) >= 1) g_stop_all.store(true, std::memory_order_relaxed);
  g_stop_send.store(true, std::memory_order_relaxed);
}

bool install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGINT, &sa, nullptr) == 0 && sigaction(SIGTERM, &sa, nullptr) == 0 &&
         signal(SIGPIPE, SIG_IGN) != SIG_ERR;
}

// One descriptor per connection plus a few: raise the soft limit to what is needed (up to the
// hard limit). "" or the error, naming --connections.
std::string ensure_fd_limit(uint32_t connections) {
  const rlim_t need = rlim_t{connections} + 32;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
  if (rl.rlim_cur >= need) return "";
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
    return "--connections: " + std::to_string(connections) + " connections need " + std::to_string(need) +
           " descriptors; the hard limit is " + std::to_string(rl.rlim_max) + " (ulimit -Hn)";
  rl.rlim_cur = need;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    return std::string("--connections: setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
  return "";
}

ProcessCpu process_cpu() {
  rusage ru{};
  ProcessCpu c;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    c.user_s = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec / 1e6;
    c.sys_s = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec / 1e6;
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const ParseResult parsed = parse_options(std::vector<std::string>(argv, argv + argc), &o);
  if (!parsed.run) return exo::print_cli_exit(parsed);
  Plan plan;
  if (const std::string err = plan_run(o, &plan); !err.empty()) {
    std::fprintf(stderr, "exo-mcload: %s\n", err.c_str());
    return 2;
  }
  if (const std::string err = ensure_fd_limit(o.connections); !err.empty()) {
    std::fprintf(stderr, "exo-mcload: %s\n", err.c_str());
    return 2;
  }
  if (prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) != 0)  // wake within ~1 us of the pacing deadline
    std::fprintf(stderr, "exo-mcload: warning: prctl(PR_SET_TIMERSLACK): %s\n", std::strerror(errno));
  if (!install_signal_handlers()) {
    std::fprintf(stderr, "exo-mcload: sigaction: %s\n", std::strerror(errno));
    return 1;
  }
  std::vector<int> fds;
  std::string err;
  if (!connect_all(plan.target, o.connections, o.connect_timeout_ms, &fds, &err)) {
    std::fprintf(stderr, "exo-mcload: %s\n", err.c_str());
    return 1;
  }

  DriverConfig dc;
  dc.rate = o.rate;
  dc.duration_ns = static_cast<uint64_t>(o.duration_s * 1e9);
  dc.drain_ns = uint64_t{o.drain_ms} * 1'000'000;
  dc.max_wait_ns = uint64_t{o.max_wait_ms} * 1'000'000;
  dc.batch = plan.batch;
  dc.catch_up_s = o.catch_up_ms / 1000.0;
  dc.keys = o.keys;
  dc.alpha = o.alpha;
  dc.key_size = o.key_size;
  dc.seed = plan.seed;
  dc.depth = o.depth;
  dc.check_value_size = o.has_expect_value_size;
  dc.value_size = o.expect_value_size;
  const double bin_s = o.bin_ms / 1000.0;
  const auto bins = static_cast<uint64_t>(std::ceil((o.duration_s + o.drain_ms / 1000.0) / bin_s)) + 2;
  const int64_t started_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch()).count();
  exo::loadgen::Series series(exo::loadgen::mono_ns(), bins, uint64_t{o.bin_ms} * 1'000'000ULL);
  DriverStats st;
  {
    Driver driver(dc, std::move(fds), series);  // closes the connections when it goes
    const auto progress = [&](uint64_t t) {
      if (!o.quiet)
        std::fprintf(stderr, "exo-mcload: %s\n",
                     exo::loadgen::progress_line(t, series.sent(), series.answered()).c_str());
    };
    st = driver.run(g_stop_send, g_stop_all, progress);
  }
  if (!st.fatal.empty()) {
    std::fprintf(stderr, "exo-mcload: %s\n", st.fatal.c_str());
    return 1;
  }
  nlohmann::json params = params_json(o, plan);
  params["started_unix_ms"] = started_unix_ms;
  const nlohmann::json report = make_report(params, series, st, process_cpu(), g_signals.load() > 0);
  const std::string text = report.dump(1) + "\n";
  if (o.out.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      std::fprintf(stderr, "exo-mcload: writing the JSON to stdout: %s\n", std::strerror(errno));
      return 1;
    }
  } else if (const std::string e = exo::loadgen::write_file_atomic(o.out, text); !e.empty()) {
    std::fprintf(stderr, "exo-mcload: %s\n", e.c_str());
    return 1;
  }
  const auto& t = report["totals"];
  std::fprintf(stderr, "exo-mcload: done%s: sent %llu in %.2f s (%.0f/s) over %u connections, answered %llu "
               "(hits %llu, misses %llu, errors %llu), loss %.3f%%, p50 %s us, p99 %s us%s%s\n",
               g_signals.load() > 0 ? " (interrupted)" : "", static_cast<unsigned long long>(st.sent),
               t["send_elapsed_s"].get<double>(), t["offered_rps"].get<double>(), st.connections,
               static_cast<unsigned long long>(st.answered), static_cast<unsigned long long>(st.hits),
               static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(t["errors"].get<uint64_t>()),
               100.0 * t["loss"].get<double>(), t["p50_us"].dump().c_str(), t["p99_us"].dump().c_str(),
               st.first_error.empty() ? "" : "; ", st.first_error.c_str());
  return 0;
}
