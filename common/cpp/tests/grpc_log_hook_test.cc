// The gRPC log hook (grpc_log_hook.h): which gRPC core lines are refused TLS handshakes (the
// exact lines gRPC 1.51 logged in the real handshakes of grpc_security_test.cc, and the near
// misses it must not count), the throttle of repeated refusal lines, sinks, and the real hook
// receiving gpr_log lines: counted, or forwarded in our log format.
#include <gtest/gtest.h>
#include <grpc/support/log.h>

#include <atomic>
#include <string>

#include "grpc_log_hook.h"
#include "log.h"

namespace {

constexpr gpr_log_severity kError = GPR_LOG_SEVERITY_ERROR;

// As ssl_transport_security.cc logs them (gRPC 1.51.1, OpenSSL 3.0, Debian bookworm).
const char* const kRogueClientCert =
    "Handshake failed with fatal error SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed.";
const char* const kPlaintextClient =
    "Handshake failed with fatal error SSL_ERROR_SSL: error:0A00010B:SSL routines::wrong version number.";

TEST(TlsHandshakeRefusal, TheLinesOfRefusedHandshakesCount) {
  EXPECT_TRUE(exo::is_tls_handshake_refusal(kError, kRogueClientCert));
  EXPECT_TRUE(exo::is_tls_handshake_refusal(kError, kPlaintextClient));
  // An HTTP/1 request, an old TLS version, garbage in a handshake record, a client certificate
  // missing under a server that requires one.
  for (const char* reason : {"0A00009C:SSL routines::http request.", "0A000102:SSL routines::unsupported protocol.",
                             "0A0000F4:SSL routines::unexpected message.",
                             "0A0000C7:SSL routines::peer did not return a certificate."})
    EXPECT_TRUE(exo::is_tls_handshake_refusal(
        kError, std::string("Handshake failed with fatal error SSL_ERROR_SSL: error:") + reason))
        << reason;
}

TEST(TlsHandshakeRefusal, NearMissesDoNotCount) {
  // The same text at another severity (gRPC logs it at ERROR only).
  EXPECT_FALSE(exo::is_tls_handshake_refusal(GPR_LOG_SEVERITY_INFO, kRogueClientCert));
  EXPECT_FALSE(exo::is_tls_handshake_refusal(GPR_LOG_SEVERITY_DEBUG, kRogueClientCert));
  // The peer refused us (its alert): counted by the peer, not here.
  EXPECT_FALSE(exo::is_tls_handshake_refusal(
      kError, "Handshake failed with fatal error SSL_ERROR_SSL: error:0A000418:SSL routines::tlsv1 alert unknown ca."));
  EXPECT_FALSE(exo::is_tls_handshake_refusal(
      kError,
      "Handshake failed with fatal error SSL_ERROR_SSL: error:0A00045C:SSL routines::tlsv13 alert certificate required."));
  // security_handshaker.cc's line for the same failure (DEBUG), and other lines of the TLS code.
  EXPECT_FALSE(exo::is_tls_handshake_refusal(
      GPR_LOG_SEVERITY_DEBUG, "Security handshake failed: {\"created\":\"@1\",\"description\":\"Handshake failed\"}"));
  EXPECT_FALSE(exo::is_tls_handshake_refusal(kError, "No match found for server name: db1."));
  EXPECT_FALSE(exo::is_tls_handshake_refusal(kError, "Certificate verify failed with code 20"));
  EXPECT_FALSE(exo::is_tls_handshake_refusal(kError, "x Handshake failed with fatal error SSL_ERROR_SSL: y"));
  EXPECT_FALSE(exo::is_tls_handshake_refusal(kError, ""));
}

TEST(LogThrottle, OneLinePerIntervalNamingTheOthers) {
  exo::LogThrottle t(10'000);
  uint64_t unlogged = 99;
  ASSERT_TRUE(t.admit(5, &unlogged));
  EXPECT_EQ(unlogged, 0u);
  EXPECT_FALSE(t.admit(6, &unlogged));
  EXPECT_FALSE(t.admit(10'004, &unlogged));
  ASSERT_TRUE(t.admit(10'005, &unlogged));
  EXPECT_EQ(unlogged, 2u);
  EXPECT_FALSE(t.admit(10'006, &unlogged));
  ASSERT_TRUE(t.admit(50'000, &unlogged));
  EXPECT_EQ(unlogged, 1u);
}

TEST(GrpcLogHook, RefusedHandshakeLinesAreCountedInTheProcessAndEveryLiveSink) {
  exo::install_grpc_log_hook();
  exo::install_grpc_log_hook();  // once per process: the second call changes nothing
  std::atomic<uint64_t> a{0}, b{0};
  const uint64_t before = exo::tls_handshakes_refused();
  {
    exo::TlsRefusalSink sa(a);
    exo::TlsRefusalSink sb(b);
    gpr_log(GPR_ERROR, "%s", kRogueClientCert);
    gpr_log(GPR_ERROR, "%s", kPlaintextClient);
    gpr_log(GPR_ERROR, "No match found for server name: %s.", "db1");  // forwarded, not counted
  }
  gpr_log(GPR_ERROR, "%s", kRogueClientCert);  // no sink left
  EXPECT_EQ(a.load(), 2u);
  EXPECT_EQ(b.load(), 2u);
  EXPECT_EQ(exo::tls_handshakes_refused() - before, 3u);
}

TEST(GrpcLogHook, OtherLinesGoToOurLogWithTheirSource) {
  exo::install_grpc_log_hook();
  const uint64_t before = exo::tls_handshakes_refused();
  ::testing::internal::CaptureStderr();
  gpr_log(GPR_ERROR, "exo hook test line %d", 42);
  gpr_log(GPR_DEBUG, "below GRPC_VERBOSITY");  // default ERROR: gRPC drops it before the hook
  const std::string err = ::testing::internal::GetCapturedStderr();
  // Under the default GRPC_VERBOSITY (ERROR); another value in the environment changes what
  // gRPC lets through, not the format.
  if (gpr_should_log(GPR_LOG_SEVERITY_ERROR)) {
    EXPECT_NE(err.find(std::string(exo::log_program()) + " tid="), std::string::npos) << err;
    EXPECT_NE(err.find(" error: gRPC: exo hook test line 42 (grpc_log_hook_test.cc:"), std::string::npos) << err;
  }
  if (!gpr_should_log(GPR_LOG_SEVERITY_DEBUG)) {
    EXPECT_EQ(err.find("below GRPC_VERBOSITY"), std::string::npos) << err;
  }
  EXPECT_EQ(exo::tls_handshakes_refused(), before);
}

}  // namespace
