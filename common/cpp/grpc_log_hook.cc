#include "grpc_log_hook.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "log.h"
#include "ms_clock.h"

namespace exo {
namespace {

constexpr std::string_view kHandshakeFailed = "Handshake failed with fatal error ";

// Process-wide state of the hook. Never destroyed: gRPC threads may still log while the
// process exits, after static destructors have run.
struct HookState {
  std::atomic<uint64_t> refused{0};
  std::mutex sinks_mu;
  std::vector<std::atomic<uint64_t>*> sinks;
  LogThrottle throttle;
  // The lowest severity gRPC itself would print (GRPC_VERBOSITY); -1: none (NONE).
  std::atomic<int> forward_from{GPR_LOG_SEVERITY_ERROR};
};

HookState& state() {
  static HookState* s = new HookState();
  return *s;
}

std::string_view trimmed(const char* message) {
  std::string_view m = message ? message : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == '\r' || m.back() == ' ')) m.remove_suffix(1);
  return m;
}

std::string_view base_name(const char* file) {
  std::string_view f = file ? file : "?";
  if (const size_t slash = f.rfind('/'); slash != std::string_view::npos) f.remove_prefix(slash + 1);
  return f;
}

void count_refusal(std::string_view message) {
  HookState& s = state();
  s.refused.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(s.sinks_mu);
    for (std::atomic<uint64_t>* c : s.sinks) c->fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t unlogged = 0;
  if (!s.throttle.admit(steady_ms(), &unlogged)) return;
  const std::string m(message);
  if (unlogged == 0)
    LOG_WARN("refused: TLS handshake (gRPC: %s)", m.c_str());
  else
    LOG_WARN("refused: TLS handshake (gRPC: %s) (and %llu more refused handshakes not logged since "
             "the last message)",
             m.c_str(), static_cast<unsigned long long>(unlogged));
}

void hook(gpr_log_func_args* args) {
  if (args == nullptr) return;
  const std::string_view message = trimmed(args->message);
  if (is_tls_handshake_refusal(args->severity, message)) {
    count_refusal(message);
    return;
  }
  const int from = state().forward_from.load(std::memory_order_relaxed);
  if (from < 0 || static_cast<int>(args->severity) < from) return;
  const std::string m(message), file(base_name(args->file));
  switch (args->severity) {
    case GPR_LOG_SEVERITY_DEBUG: LOG_DEBUG("gRPC: %s (%s:%d)", m.c_str(), file.c_str(), args->line); break;
    case GPR_LOG_SEVERITY_INFO: LOG_INFO("gRPC: %s (%s:%d)", m.c_str(), file.c_str(), args->line); break;
    default: LOG_ERROR("gRPC: %s (%s:%d)", m.c_str(), file.c_str(), args->line); break;
  }
}

}  // namespace

bool is_tls_handshake_refusal(gpr_log_severity severity, std::string_view message) {
  if (severity != GPR_LOG_SEVERITY_ERROR) return false;
  if (message.substr(0, kHandshakeFailed.size()) != kHandshakeFailed) return false;
  // "<SSL_ERROR_...>: error:<code>:<library>::<reason>." -- an alert is the peer's refusal.
  return message.find(" alert ") == std::string_view::npos;
}

void install_grpc_log_hook() {
  static std::once_flag once;
  std::call_once(once, [] {
    // GRPC_VERBOSITY as gRPC reads it (grpc_init does the same, and keeps a value set before it).
    gpr_log_verbosity_init();
    int from = -1;
    for (gpr_log_severity s : {GPR_LOG_SEVERITY_ERROR, GPR_LOG_SEVERITY_INFO, GPR_LOG_SEVERITY_DEBUG})
      if (gpr_should_log(s)) from = static_cast<int>(s);
    state().forward_from.store(from, std::memory_order_relaxed);
    // Handshake failures are ERROR lines: they must reach the hook even under GRPC_VERBOSITY=NONE.
    if (from < 0) gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
    gpr_set_log_function(hook);
  });
}

uint64_t tls_handshakes_refused() { return state().refused.load(std::memory_order_relaxed); }

TlsRefusalSink::TlsRefusalSink(std::atomic<uint64_t>& counter) : counter_(counter) {
  HookState& s = state();
  std::lock_guard lock(s.sinks_mu);
  s.sinks.push_back(&counter_);
}

TlsRefusalSink::~TlsRefusalSink() {
  HookState& s = state();
  std::lock_guard lock(s.sinks_mu);
  s.sinks.erase(std::find(s.sinks.begin(), s.sinks.end(), &counter_));
}

bool LogThrottle::admit(uint64_t now_ms, uint64_t* unlogged) {
  std::lock_guard lock(mu_);
  if (logged_once_ && now_ms - last_ms_ < interval_ms_) {
    ++unlogged_;
    return false;
  }
  *unlogged = unlogged_;
  unlogged_ = 0;
  logged_once_ = true;
  last_ms_ = now_ms;
  return true;
}

}  // namespace exo
