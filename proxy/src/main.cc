// exo-proxy: the memcached-protocol sidecar of a web host. Wiring only:
//   options -> cluster config -> plan -> sockets (cluster raw TX + UDP RX, TCP and unix
//   listeners) -> the epoll loop (event_loop.h) until SIGINT/SIGTERM.
// Exit codes: 0 after a signal, 2 bad options or config, 1 sockets or the loop failed.
// What it answers and refuses: outcomes.h; connections and their bounds: session.h.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "cluster.h"
#include "event_loop.h"
#include "log.h"
#include "metrics_http.h"
#include "mmsg_io.h"
#include "net.h"
#include "options.h"

using namespace exo::proxy;

namespace {

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "exo-proxy: %s\n", msg.c_str());
  return 2;
}

// SIGINT/SIGTERM arrive as a readable descriptor the loop watches, so the loop (not a handler)
// decides when to stop and the unix socket file is removed on the way out.
int stop_signals_fd() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return -1;
  return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

}  // namespace

int main(int argc, char** argv) {
  exo::log_program() = "exo-proxy";
  Options o;
  const CliResult parsed = parse_options(std::vector<std::string>(argv, argv + argc), &o);
  if (!parsed.run) return exo::print_cli_exit(parsed);
  if (!exo::set_log_level(o.log_level))
    return usage_error("--log-level: must be debug, info, warn or error (got '" + o.log_level + "')");
  exo::Cluster cluster;
  try {
    cluster = exo::load_cluster(o.config);
  } catch (const std::exception& e) {
    return usage_error(std::string("--config: ") + e.what());
  }
  Plan plan;
  if (const std::string err = plan_proxy(o, cluster, &plan); !err.empty()) return usage_error(err);
  UnixAccess unix_access{plan.unix_mode, -1};
  if (std::string err; !plan.unix_group.empty() && !lookup_group(plan.unix_group, &unix_access.gid, &err))
    return usage_error(err);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an EPIPE, handled per connection
  const int stop_fd = stop_signals_fd();
  if (stop_fd < 0) {
    std::fprintf(stderr, "exo-proxy: signalfd: %s\n", std::strerror(errno));
    return 1;
  }

  std::string err;
  ClusterSockets cs;
  if (!open_cluster_sockets(plan.iface, plan.endpoint.ip, static_cast<int>(o.rcvbuf), &cs, &err)) {
    std::fprintf(stderr, "exo-proxy: %s\n", err.c_str());
    return 1;
  }
  plan.endpoint.port = cs.port;
  if (std::memcmp(cs.iface_mac, plan.endpoint.mac.data(), 6) != 0)
    LOG_WARN("%s has MAC %s but clients[%s].mac is %s: replies come back to the config's", plan.iface.c_str(),
             exo::format_mac(cs.iface_mac).c_str(), o.client.c_str(), exo::format_mac(plan.endpoint.mac.data()).c_str());
  uint16_t tcp_port = 0;
  const int tcp = plan.tcp ? listen_tcp(plan.listen, &err, &tcp_port) : -1;
  if (plan.tcp && tcp < 0) {
    std::fprintf(stderr, "exo-proxy: %s\n", err.c_str());
    return 1;
  }
  int unix_fd = -1;
  if (!o.unix_path.empty() && (unix_fd = listen_unix(o.unix_path, &err, unix_access)) < 0) {
    std::fprintf(stderr, "exo-proxy: %s\n", err.c_str());
    if (tcp >= 0) close(tcp);
    return 1;
  }

  std::random_device rd;
  const uint32_t client_id = rd();  // random per start, as the Python client: a restarted proxy's
                                    // request ids never collide with its predecessor's
  exo::client::RequestEngine engine(plan.endpoint, client_id, plan.engine);
  exo::client::MmsgIO io(cs.tx, cs.rx);
  int rc = 0;
  {
    EventLoop loop(plan.loop, engine, io, cs.rx);
    if (tcp >= 0) loop.add_listener(tcp);
    if (unix_fd >= 0) loop.add_listener(unix_fd);
    loop.add_stop_fd(stop_fd);
    std::string where = tcp >= 0 ? o.listen + " (port " + std::to_string(tcp_port) + ")" : "";
    if (unix_fd >= 0) {
      char access_text[64];
      std::snprintf(access_text, sizeof access_text, " (mode %04o, gid %lld)", plan.unix_mode,
                    static_cast<long long>(unix_access.gid >= 0 ? unix_access.gid : static_cast<int64_t>(getegid())));
      where += (where.empty() ? "" : " and ") + o.unix_path + access_text + (tcp >= 0 ? "" : " only (--listen none)");
    }
    LOG_INFO("listening on %s; cluster client '%s' on %s, UDP port %u, client_id %u%s", where.c_str(), o.client.c_str(),
             plan.iface.c_str(), cs.port, client_id, plan.metrics.empty() ? "" : ("; /metrics on " + plan.metrics).c_str());
    // /metrics on proxies[].metrics (docs/operations.md, "Metrics"), read from its own thread.
    exo::metrics::MetricsHttpServer metrics;
    if (const std::string e = metrics.start(plan.metrics, {"proxy", {EXO_PROXY_COUNTERS(EXO_COUNTER_DESC)},
                                                           [&loop] { return counter_values(loop.counters()); }});
        !e.empty()) {
      LOG_ERROR("proxies[%s].metrics: %s", plan.name.c_str(), e.c_str());
      rc = 1;
    }
    try {
      if (rc == 0) rc = loop.run();
    } catch (const std::exception& e) {  // nothing in the loop throws by design; say what did
      LOG_ERROR("event loop: %s", e.what());
      rc = 1;
    }
    LOG_INFO("stopping: %zu connections closed, %zu cluster requests dropped", loop.connections(),
             engine.in_flight() + engine.queued());
  }
  if (unix_fd >= 0) unlink(o.unix_path.c_str());
  close(cs.tx);
  close(cs.rx);
  close(stop_fd);
  return rc;
}
