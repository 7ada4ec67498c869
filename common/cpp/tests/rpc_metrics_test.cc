// instrument() on a real gRPC server (unix socket, plaintext: the metrics part does not depend
// on the credentials): the standard health service answers SERVING, and the call lands in the
// latency histogram with its method and status code.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "exoproto/control.grpc.pb.h"
#include "rpc_latency.h"
#include "rpc_metrics.h"

namespace {

// One unary call through the generic stub: (status, response bytes).
std::pair<grpc::Status, std::string> call(grpc::GenericStub& stub, const std::string& method) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  grpc::Slice empty("");  // an empty HealthCheckRequest: service "" = the whole server
  grpc::ByteBuffer req(&empty, 1), resp;
  auto rpc = stub.PrepareUnaryCall(&ctx, method, req, &cq);
  rpc->StartCall();
  grpc::Status status;
  rpc->Finish(&resp, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) return {grpc::Status(grpc::StatusCode::INTERNAL, "no completion"), ""};
  std::string bytes;
  std::vector<grpc::Slice> slices;
  if (status.ok() && resp.Dump(&slices).ok())
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return {status, bytes};
}

TEST(RpcMetrics, HealthServiceAnswersAndEveryCallIsTimed) {
  const std::string path = "/tmp/exo-rpc-metrics-test-" + std::to_string(getpid()) + ".sock";
  exo::CacheNode::Service cache_node;  // every method UNIMPLEMENTED: enough to be timed
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(&cache_node);
  exo::metrics::instrument(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  grpc::GenericStub stub(grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
  const auto [status, bytes] = call(stub, "/grpc.health.v1.Health/Check");
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(bytes, std::string("\x08\x01", 2)) << "HealthCheckResponse{status: SERVING}";
  const auto [unimplemented, _] = call(stub, "/exo.CacheNode/Reset");
  EXPECT_EQ(unimplemented.error_code(), grpc::StatusCode::UNIMPLEMENTED);

  std::string page;
  exo::metrics::rpc_latency().append(page);
  EXPECT_NE(page.find("exo_rpc_server_seconds_count{method=\"grpc.health.v1.Health/Check\",code=\"OK\"} 1\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("exo_rpc_server_seconds_count{method=\"exo.CacheNode/Reset\",code=\"UNIMPLEMENTED\"} 1\n"),
            std::string::npos)
      << page;
  server->Shutdown();
  unlink(path.c_str());
}

TEST(RpcMetrics, StatusCodeNamesAreGrpcs) {
  EXPECT_EQ(exo::metrics::status_code_name(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(exo::metrics::status_code_name(grpc::StatusCode::PERMISSION_DENIED), "PERMISSION_DENIED");
  EXPECT_EQ(exo::metrics::status_code_name(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
}

}  // namespace
