// Mutual TLS and caller checks for every gRPC server and channel of the C++ programs
// (docs/security.md). One GrpcSecurity per program, from the cluster config's security section
// and the program's own certificate name:
//   - servers listen with server_credentials(): TLS that verifies a client certificate against
//     the cluster CA (ca.crt) when the caller presents one, and lets a caller without one finish
//     the handshake so that the per-call check refuses it and counts it (rpc_refused); a
//     certificate of another CA, or plaintext, still fails the handshake, counted by the gRPC log
//     hook (grpc_log_hook.h: tls_handshake_refused);
//   - channels to peers come from channel(address, peer's certificate name): the program's own
//     certificate, the CA, and the SSL target-name override set to the peer's certificate name
//     (the emulation dials unix sockets, whose "host" names nobody);
//   - handlers call Authorizer::authorize(ctx, method) first: the caller's certificate name
//     (its CN), its role in the cluster (Cluster::role_of) and the method's `allowed_roles` in
//     proto/exoproto/control.proto decide. Refusals are counted (rpc_refused) and logged.
// With security.insecure_dev_mode all of this is off: plaintext and every call allowed.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cluster.h"
#include "grpc_log_hook.h"
#include "tls_files.h"

namespace google::protobuf {
class MethodDescriptor;
}

namespace exo {

// The certificate names peers are known by (the SSL target-name override of a channel to them).
inline constexpr const char* kControllerCertName = "controller";
// A db node's certificate name: its own, or for a node the wimpy emulator hosts the emulator
// process's (one certificate speaks for every node it hosts).
inline const std::string& cert_name_of(const DbNodeInfo& d) { return d.emulator.empty() ? d.name : d.emulator; }
// Whether certificate name `caller` speaks for db node `d` (is it, or the emulator hosting it).
inline bool speaks_for(const std::string& caller, const DbNodeInfo& d) {
  return !caller.empty() && (caller == d.name || (!d.emulator.empty() && caller == d.emulator));
}

class GrpcSecurity {
 public:
  // The program's credentials: plaintext when cluster.security.insecure_dev_mode, else
  // ca.crt, <self_name>.crt and <self_name>.key from security.cert_dir, read and checked now.
  // Throws SecurityError naming the file and security.cert_dir.
  static std::shared_ptr<const GrpcSecurity> load(const Cluster& cluster, const std::string& self_name);
  // Plaintext, no files: tests and tools that run the insecure_dev_mode path.
  static std::shared_ptr<const GrpcSecurity> plaintext();
  // From PEM texts already checked (tests).
  static std::shared_ptr<const GrpcSecurity> from_files(TlsFiles files, std::string self_name);

  bool insecure() const { return insecure_; }
  const std::string& self_name() const { return self_; }

  std::shared_ptr<grpc::ServerCredentials> server_credentials() const;
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const;
  // The one way programs open channels to each other: these credentials, the target-name
  // override `peer_cert_name` (unused in plaintext), fast reconnects (grpc_channel.h).
  std::shared_ptr<grpc::Channel> channel(const std::string& address, const std::string& peer_cert_name) const;

 private:
  GrpcSecurity() = default;
  bool insecure_ = true;
  std::string self_;
  TlsFiles files_;
};

// One start-up line: "gRPC: mutual TLS as '<name>' (certificates in <dir>)", or a warning that
// the program runs in plaintext with every call allowed.
void log_security(const GrpcSecurity& security, const Cluster& cluster);

// The caller's certificate name: the verified client certificate's subject CN (x509_common_name
// of the call's AuthContext), else its first SAN. "" for a call without one (plaintext, or no
// context at all).
std::string caller(const grpc::ServerContext* ctx);

// The method's entry in control.proto by its full name, e.g. "exo.CacheNode.Prepare"; nullptr if
// unknown (authorize then refuses: fail closed).
const google::protobuf::MethodDescriptor* rpc_method(std::string_view full_name);

// What the checks of one call came to (pure: no gRPC context, tests feed it names directly).
// code OK, UNAUTHENTICATED (no certificate name) or PERMISSION_DENIED (the name's role is not in
// allowed_roles, or the name is not in the cluster config); message names caller and method.
grpc::Status decide(const Cluster& cluster, const std::string& caller,
                    const google::protobuf::MethodDescriptor* method);

// The caller checks of one gRPC service. `refused` is the program's rpc_refused counter
// (counter_list.h), bumped on every refusal by either function. `handshake_refused`, if given, is
// its tls_handshake_refused counter: while this Authorizer lives, every TLS handshake the process
// refuses is added to it (grpc_log_hook.h, TlsRefusalSink).
class Authorizer {
 public:
  Authorizer(const Cluster& cluster, std::atomic<uint64_t>& refused,
             std::atomic<uint64_t>* handshake_refused = nullptr);

  // OK, or the refusal (decide()) counted and logged. Always OK in insecure_dev_mode.
  grpc::Status authorize(const grpc::ServerContext* ctx,
                         const google::protobuf::MethodDescriptor* method) const;
  // A handler's own "acts only for itself" check failed: PERMISSION_DENIED naming the caller,
  // the method and `why`, counted and logged.
  grpc::Status refuse(const grpc::ServerContext* ctx, const google::protobuf::MethodDescriptor* method,
                      const std::string& why) const;
  // Whether handler checks apply (false in insecure_dev_mode: every call allowed).
  bool checks_on() const { return !cluster_.security.insecure_dev_mode; }

 private:
  grpc::Status count(grpc::Status refusal) const;

  const Cluster& cluster_;
  std::atomic<uint64_t>& refused_;
  std::unique_ptr<TlsRefusalSink> handshake_sink_;
  // Log at most one refusal line per 10 s (an attacker would otherwise fill the disk).
  mutable LogThrottle log_throttle_;
};

}  // namespace exo

// The first statement of every handler: resolves the rpc's descriptor once (its allowed_roles)
// and returns the refusal when the caller may not call it. Leaves `kMethod` for the handler's
// own checks (Authorizer::refuse).
#define EXO_AUTHORIZE(authz, ctx, full_method_name)                                              \
  static const auto* const kMethod = ::exo::rpc_method(full_method_name);                       \
  if (::grpc::Status exo_refusal = (authz).authorize((ctx), kMethod); !exo_refusal.ok())        \
  return exo_refusal
