#include "rpc_metrics.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rpc_latency.h"

namespace exo::metrics {
namespace {

namespace gx = grpc::experimental;

// One per call, made when the call starts; records when its status goes out.
class RpcTimer final : public gx::Interceptor {
 public:
  explicit RpcTimer(gx::ServerRpcInfo* info)
      : method_(info->method()), start_(std::chrono::steady_clock::now()) {
    if (!method_.empty() && method_[0] == '/') method_.erase(0, 1);  // "exo.CacheNode/Stats"
  }

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
      rpc_latency().observe(method_, status_code_name(methods->GetSendStatus().error_code()),
                            took.count());
    }
    methods->Proceed();
  }

 private:
  std::string method_;
  std::chrono::steady_clock::time_point start_;
};

class RpcTimerFactory final : public gx::ServerInterceptorFactoryInterface {
 public:
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override { return new RpcTimer(info); }
};

}  // namespace

void instrument(grpc::ServerBuilder& builder) {
  // Process-wide switch, read when a server is built: every server built after this has the
  // health service.
  grpc::EnableDefaultHealthCheckService(true);
  std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<RpcTimerFactory>());
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

std::string_view status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace exo::metrics
