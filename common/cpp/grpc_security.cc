#include "grpc_security.h"

#include <grpc/grpc_security_constants.h>

#include "exoproto/control.pb.h"
#include "grpc_channel.h"
#include "log.h"
#include "ms_clock.h"

namespace exo {

namespace pb = google::protobuf;

// ---- credentials ----

std::shared_ptr<const GrpcSecurity> GrpcSecurity::load(const Cluster& cluster, const std::string& self_name) {
  install_grpc_log_hook();  // before any handshake: refused ones are counted from the first
  if (cluster.security.insecure_dev_mode) return plaintext();
  if (self_name.empty()) throw SecurityError("no certificate name for this program");
  return from_files(load_tls_files(cluster.security.cert_dir, self_name), self_name);
}

std::shared_ptr<const GrpcSecurity> GrpcSecurity::plaintext() {
  install_grpc_log_hook();  // gRPC core's lines in our log format
  return std::shared_ptr<const GrpcSecurity>(new GrpcSecurity());
}

std::shared_ptr<const GrpcSecurity> GrpcSecurity::from_files(TlsFiles files, std::string self_name) {
  install_grpc_log_hook();
  auto s = std::shared_ptr<GrpcSecurity>(new GrpcSecurity());
  s->insecure_ = false;
  s->self_ = std::move(self_name);
  s->files_ = std::move(files);
  return s;
}

std::shared_ptr<grpc::ServerCredentials> GrpcSecurity::server_credentials() const {
  if (insecure_) return grpc::InsecureServerCredentials();
  // REQUEST (not REQUIRE) a client certificate, and verify it against the cluster CA when one is
  // presented. A certificate of another CA, or a caller that does not speak TLS, still fails the
  // handshake (counted in tls_handshake_refused by the gRPC log hook, grpc_log_hook.h). A caller
  // with NO certificate finishes the handshake with no name (caller() == ""), and every handler's
  // first statement, EXO_AUTHORIZE, refuses it UNAUTHENTICATED and counts it in rpc_refused: a
  // refusal gRPC would otherwise make silently, inside the handshake. What such a caller can
  // reach without a handler check: the gRPC health service (grpc.health.v1.Health, registered by
  // exo::metrics::instrument, rpc_metrics.h), deliberately open: it answers SERVING/NOT_SERVING
  // and nothing else, for probes that hold no certificate. Every exo.* rpc is checked.
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = files_.ca_pem;
  o.pem_key_cert_pairs.push_back({files_.key_pem, files_.cert_pem});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> GrpcSecurity::channel_credentials() const {
  if (insecure_) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = files_.ca_pem;  // the server's certificate must be the cluster CA's too
  o.pem_private_key = files_.key_pem;
  o.pem_cert_chain = files_.cert_pem;
  return grpc::SslCredentials(o);
}

std::shared_ptr<grpc::Channel> GrpcSecurity::channel(const std::string& address,
                                                     const std::string& peer_cert_name) const {
  return make_channel(address, channel_credentials(), insecure_ ? "" : peer_cert_name);
}

void log_security(const GrpcSecurity& security, const Cluster& cluster) {
  if (security.insecure())
    LOG_WARN("gRPC: plaintext and every call allowed (security.insecure_dev_mode: true)");
  else
    LOG_INFO("gRPC: mutual TLS as '%s' (certificates in %s)", security.self_name().c_str(),
             cluster.security.cert_dir.c_str());
}

// ---- caller checks ----

std::string caller(const grpc::ServerContext* ctx) {
  if (ctx == nullptr) return "";
  const std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    const std::vector<grpc::string_ref> v = auth->FindPropertyValues(property);
    if (!v.empty()) return std::string(v.front().data(), v.front().size());
  }
  return "";
}

const pb::MethodDescriptor* rpc_method(std::string_view full_name) {
  // The generated pool holds control.proto once exo_proto is linked (its messages are used).
  return pb::DescriptorPool::generated_pool()->FindMethodByName(std::string(full_name));
}

grpc::Status decide(const Cluster& cluster, const std::string& who, const pb::MethodDescriptor* method) {
  const std::string what = method ? method->full_name() : std::string("an unknown method");
  if (who.empty())
    return {grpc::StatusCode::UNAUTHENTICATED, what + ": no client certificate name"};
  if (!method)
    return {grpc::StatusCode::PERMISSION_DENIED, "'" + who + "' may not call " + what};
  const std::string role = cluster.role_of(who);
  if (role.empty())
    return {grpc::StatusCode::PERMISSION_DENIED,
            "'" + who + "' is not a name of this cluster's config; may not call " + what};
  const pb::MethodOptions& options = method->options();
  std::string list;
  for (int i = 0, n = options.ExtensionSize(exo::allowed_roles); i < n; ++i) {
    const std::string& allowed = options.GetExtension(exo::allowed_roles, i);
    if (allowed == role) return grpc::Status::OK;
    list += (list.empty() ? "" : ", ") + allowed;
  }
  return {grpc::StatusCode::PERMISSION_DENIED,
          "'" + who + "' (role " + role + ") may not call " + what + " (allowed: " +
              (list.empty() ? "nobody" : list) + ")"};
}

Authorizer::Authorizer(const Cluster& cluster, std::atomic<uint64_t>& refused,
                       std::atomic<uint64_t>* handshake_refused)
    : cluster_(cluster), refused_(refused) {
  if (handshake_refused) handshake_sink_ = std::make_unique<TlsRefusalSink>(*handshake_refused);
}

grpc::Status Authorizer::authorize(const grpc::ServerContext* ctx, const pb::MethodDescriptor* method) const {
  if (!checks_on()) return grpc::Status::OK;
  grpc::Status s = decide(cluster_, caller(ctx), method);
  return s.ok() ? s : count(std::move(s));
}

grpc::Status Authorizer::refuse(const grpc::ServerContext* ctx, const pb::MethodDescriptor* method,
                                const std::string& why) const {
  const std::string what = method ? method->full_name() : std::string("an unknown method");
  return count({grpc::StatusCode::PERMISSION_DENIED, "'" + caller(ctx) + "' may not call " + what + ": " + why});
}

grpc::Status Authorizer::count(grpc::Status refusal) const {
  refused_.fetch_add(1, std::memory_order_relaxed);
  uint64_t unlogged = 0;
  if (!log_throttle_.admit(steady_ms(), &unlogged)) return refusal;
  if (unlogged == 0)
    LOG_WARN("refused: %s", refusal.error_message().c_str());
  else
    LOG_WARN("refused: %s (and %llu more refusals not logged since the last message)",
             refusal.error_message().c_str(), static_cast<unsigned long long>(unlogged));
  return refusal;
}

}  // namespace exo
