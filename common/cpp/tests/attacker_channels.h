// The channels of the attack identities that never hold a certificate of the cluster CA, as
// experiments/exo_attack uses them (`nocert`, `rogue`, `plaintext`), for the C++ security tests
// of every program (included as "tests/attacker_channels.h"):
//   - without_certificate: TLS that trusts the cluster CA but presents no client certificate:
//     finishes the handshake; each call must be refused UNAUTHENTICATED (rpc_refused);
//   - rogue: TLS with a certificate of another CA carrying a real operator's name: the server
//     refuses the handshake (tls_handshake_refused);
//   - plaintext: no TLS at all: the server refuses the handshake (tls_handshake_refused).
// And eventually(): a refused handshake is counted on a gRPC thread of the server, while the
// client may already hold its UNAVAILABLE. Header-only, next to tests/test_pki.h.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "tests/test_pki.h"

namespace exo::testing {

// Whether `done` holds within `ms`.
inline bool eventually(const std::function<bool()>& done, int ms = 3000) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

inline std::shared_ptr<grpc::Channel> tls_channel(const std::string& address,
                                                  const grpc::SslCredentialsOptions& o,
                                                  const std::string& server_name) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(o), args);
}

// `ca_dir` holds the cluster's ca.crt; `server_name` is the server's certificate name.
inline std::shared_ptr<grpc::Channel> channel_without_certificate(const std::string& address,
                                                                  const std::filesystem::path& ca_dir,
                                                                  const std::string& server_name) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = read_text(ca_dir / "ca.crt");  // trusts the server, shows nothing
  return tls_channel(address, o, server_name);
}

// Makes a rogue CA and its leaf `name` in `rogue_dir` (once per directory) and dials with it.
inline std::shared_ptr<grpc::Channel> rogue_channel(const std::string& address,
                                                    const std::filesystem::path& ca_dir,
                                                    const std::filesystem::path& rogue_dir,
                                                    const std::string& server_name,
                                                    const std::string& name = "operator") {
  if (!std::filesystem::exists(rogue_dir / "ca.crt")) make_test_ca(rogue_dir, "rogue CA");
  if (!std::filesystem::exists(rogue_dir / (name + ".crt"))) make_test_leaf(rogue_dir, name, "operator");
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = read_text(ca_dir / "ca.crt");
  o.pem_private_key = read_text(rogue_dir / (name + ".key"));
  o.pem_cert_chain = read_text(rogue_dir / (name + ".crt"));
  return tls_channel(address, o, server_name);
}

inline std::shared_ptr<grpc::Channel> plaintext_channel(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

}  // namespace exo::testing
