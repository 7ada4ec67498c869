// How nodes' gRPC channels to each other are set up. Programs call GrpcSecurity::channel
// (grpc_security.h), which picks the credentials (mutual TLS, or plaintext in insecure_dev_mode)
// and the target-name override and comes here; nothing else creates a channel.
//
// Creating a channel does not connect; the first RPC does (and fails fast on its deadline).
// gRPC's default reconnect backoff starts at 1 s and grows to 120 s, so after a peer restarts
// (kill -9 of a cache node, db node or controller, then a restart) RPCs would fail for up to
// two minutes without even trying: a db node's pending 2PC decisions and REPORTs, a cache node's
// FETCHes and rule changes. Peers are local and few, so retry often.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace exo {

// `target_name_override`: the name the server's certificate must carry ("" = none, plaintext).
inline std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                                   const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                                   const std::string& target_name_override) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (!target_name_override.empty()) args.SetSslTargetNameOverride(target_name_override);
  return grpc::CreateCustomChannel(address, creds, args);
}

}  // namespace exo
