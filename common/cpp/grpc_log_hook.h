// gRPC core's log lines in our log (log.h format), and the TLS handshakes this process refused
// counted: tls_handshake_refused in counter_list.h.
//
// Why a log hook: a caller without a certificate of the cluster CA, or one that does not speak TLS
// at all, fails in the TLS handshake and never reaches a handler, and gRPC C++ 1.51 (Debian
// bookworm) offers no callback for a failed handshake. Its only trace is the line
// src/core/tsi/ssl_transport_security.cc (ssl_handshaker_do_handshake) logs through gpr_log at
// GPR_LOG_SEVERITY_ERROR, on the server side and on the client side alike, e.g.
//   Handshake failed with fatal error SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed.
//   Handshake failed with fatal error SSL_ERROR_SSL: error:0A00010B:SSL routines::wrong version number.
// (the first: a client certificate of another CA, or as a client a server certificate of
// another CA; the second: a plaintext HTTP/2 client). security_handshaker.cc also logs
// "Security handshake failed: ..." for every failure, but at GPR_LOG_SEVERITY_DEBUG, shown only
// with GRPC_VERBOSITY=debug: not counted, so a failure counts once at any verbosity.
#pragma once

#include <grpc/support/log.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace exo {

// Pure: whether one gRPC core log line is a TLS handshake this process refused. Only
// ERROR lines starting "Handshake failed with fatal error " count, and not those whose OpenSSL
// reason is an alert the PEER sent ("tlsv1 alert unknown ca", "tlsv13 alert certificate
// required", ...): there the peer refused us, and counts it on its side.
bool is_tls_handshake_refusal(gpr_log_severity severity, std::string_view message);

// Installs the gpr_set_log_function hook; the first call in a process does it, later calls do
// nothing (GrpcSecurity::load/plaintext/from_files call it, so every C++ program with a gRPC
// server or channel has it before its first handshake). The hook:
//   - counts refused handshakes (is_tls_handshake_refusal) in tls_handshakes_refused() and in
//     every live TlsRefusalSink, and logs them as warnings, at most one line per 10 s (an
//     attacker would otherwise fill the disk) carrying how many were not logged;
//   - forwards every other line as "gRPC: <message> (<file>:<line>)" at our matching level,
//     when GRPC_VERBOSITY (default ERROR) lets gRPC print it.
// Handshake failures reach the hook even with GRPC_VERBOSITY=NONE (gRPC's verbosity is lowered
// to ERROR then, and nothing else is forwarded), so the count does not depend on it.
void install_grpc_log_hook();

// Refused TLS handshakes of this process since it started (0 before install_grpc_log_hook).
uint64_t tls_handshakes_refused();

// While it lives, each refused handshake the hook counts is also added to `counter` (a program's
// tls_handshake_refused block field, counter_list.h), so it shows in that program's Stats and
// /metrics. The hook cannot tell which server of the process a handshake was for: in an
// exo-emulator every hosted node's counter gets every refusal of the process.
class TlsRefusalSink {
 public:
  explicit TlsRefusalSink(std::atomic<uint64_t>& counter);
  ~TlsRefusalSink();
  TlsRefusalSink(const TlsRefusalSink&) = delete;
  TlsRefusalSink& operator=(const TlsRefusalSink&) = delete;

 private:
  std::atomic<uint64_t>& counter_;
};

// At most one log line per `interval_ms` for a repeated event (refusals an attacker can repeat
// at will); the others are counted and named in the next line that is logged. Thread-safe.
class LogThrottle {
 public:
  explicit LogThrottle(uint64_t interval_ms = 10'000) : interval_ms_(interval_ms) {}
  // Whether to log the event happening at `now_ms` (a steady clock). When true, *unlogged is the
  // number of events not logged since the last line (then reset); when false, it is untouched.
  bool admit(uint64_t now_ms, uint64_t* unlogged);

 private:
  const uint64_t interval_ms_;
  std::mutex mu_;
  bool logged_once_ = false;
  uint64_t last_ms_ = 0;
  uint64_t unlogged_ = 0;
};

}  // namespace exo
