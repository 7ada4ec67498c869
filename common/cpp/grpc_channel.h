// The one way nodes open gRPC channels to each other.
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

inline std::shared_ptr<grpc::Channel> make_channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace exo
