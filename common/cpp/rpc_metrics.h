// What every C++ gRPC server of the project carries besides its own service: the standard
// health service (grpc.health.v1.Health, answering SERVING while the server runs) and an
// interceptor timing each call into the process's RPC latency histograms (rpc_latency.h), by
// method and final status code, refusals included. One call beside each server's
// AddListeningPort:
//     exo::metrics::instrument(builder);
// It sets the builder's interceptor creators: a server that needs interceptors of its own must
// add them to the list made here (rpc_metrics.cc), not call SetInterceptorCreators again.
#pragma once

#include <grpcpp/server_builder.h>
#include <grpcpp/support/status.h>

#include <string_view>

namespace exo::metrics {

void instrument(grpc::ServerBuilder& builder);

// "OK", "PERMISSION_DENIED", ...: the code's name as gRPC documents it (the `code` label).
std::string_view status_code_name(grpc::StatusCode code);

}  // namespace exo::metrics
