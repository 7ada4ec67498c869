#include "reporter.h"

#include <grpcpp/grpcpp.h>

#include "exoproto/control.grpc.pb.h"
#include "log.h"

namespace exo::db {

struct GrpcReportSink::Peer {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<exo::CacheNode::Stub> stub;
};

GrpcReportSink::GrpcReportSink(std::string address, std::string cache_node,
                               std::shared_ptr<const GrpcSecurity> security,
                               std::chrono::milliseconds deadline)
    : address_(std::move(address)), cache_node_(std::move(cache_node)), security_(std::move(security)),
      deadline_(deadline) {}

GrpcReportSink::~GrpcReportSink() = default;

bool GrpcReportSink::send(const exo::ReportRequest& report, std::string* error) {
  if (!peer_) {
    peer_ = std::make_unique<Peer>();
    peer_->channel = security_->channel(address_, cache_node_);
    peer_->stub = exo::CacheNode::NewStub(peer_->channel);
  }
  exo::ReportReply reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline_);
  const grpc::Status s = peer_->stub->Report(&ctx, report, &reply);
  if (!s.ok()) {
    *error = "Report to " + address_ + ": " + std::to_string(s.error_code()) + " " +
             s.error_message();
    return false;
  }
  if (!reply.accepted()) {
    *error = "Report refused by " + address_ + ": " + reply.error();
    return false;
  }
  return true;
}

exo::ReportRequest build_report(const std::string& db_node, double load, HotKeyDetector& detector,
                                size_t report_keys, uint64_t seq, uint64_t now_ms) {
  exo::ReportRequest r;
  r.set_db_node(db_node);
  r.set_load(load);
  for (KeyRate& kr : detector.hottest(report_keys, now_ms)) {
    exo::KeyLoad* kl = r.add_keys();
    kl->set_key(std::move(kr.key));
    kl->set_rate(kr.rate);
  }
  r.set_sampled(detector.sampled(now_ms));
  r.set_seq(seq);
  return r;
}

Reporter::Reporter(const HotKeysConfig& cfg, std::string db_node, HotKeyDetector& detector,
                   const CounterSet& counters, Counters& own, ReportSink* sink, Clock clock)
    : report_keys_(cfg.report_keys),
      interval_(std::max<uint32_t>(cfg.report_interval_ms, 1)),
      db_node_(std::move(db_node)),
      detector_(detector),
      counters_(counters),
      c_(own),
      sink_(sink),
      clock_(std::move(clock)),
      meter_(cfg.load_ewma_alpha) {}

Reporter::~Reporter() { stop(); }

uint64_t Reporter::total_requests() const {
  const CounterValues v = counters_.sum();
  uint64_t total = 0;
  for (size_t i = 0; i < kNumCounters; ++i) {
    const std::string_view n = kCounterDescs[i].name;
    if (n == "gets" || n == "puts" || n == "deletes") total += v[i];
  }
  return total;
}

void Reporter::tick(uint64_t now_ms) {
  exo::ReportRequest report;
  {
    std::lock_guard<std::mutex> lk(mu_);
    meter_.update(total_requests(), now_ms);
    report = build_report(db_node_, meter_.load(), detector_, report_keys_, next_seq_++, now_ms);
  }
  if (!sink_) return;
  std::string error;
  if (sink_->send(report, &error)) {
    bump(c_.reports_sent);
    return;
  }
  bump(c_.report_errors);
  ++errors_since_log_;
  // A cache node that is down fails every 250 ms; one line per 10 s says the same.
  if (!logged_error_ || now_ms - last_error_log_ms_ >= 10000) {
    LOG_WARN("REPORT not delivered (%llu failures since the last message): %s",
             static_cast<unsigned long long>(errors_since_log_), error.c_str());
    logged_error_ = true;
    last_error_log_ms_ = now_ms;
    errors_since_log_ = 0;
  }
}

exo::ReportRequest Reporter::peek() {
  const uint64_t now_ms = clock_();
  std::lock_guard<std::mutex> lk(mu_);
  return build_report(db_node_, meter_.load(), detector_, report_keys_, next_seq_, now_ms);
}

void Reporter::start() {
  if (!sink_ || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void Reporter::stop() {
  {
    std::lock_guard<std::mutex> lk(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Reporter::run() {
  auto next = std::chrono::steady_clock::now() + interval_;
  std::unique_lock<std::mutex> lk(stop_mu_);
  for (;;) {
    if (stop_cv_.wait_until(lk, next, [this] { return stopping_; })) return;
    lk.unlock();
    tick(clock_());
    lk.lock();
    // Fixed cadence, but after a stall (a slow send) start afresh instead of firing a burst.
    next += interval_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + interval_;
  }
}

}  // namespace exo::db
