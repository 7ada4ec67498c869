// REPORT (docs/cache-fill.md, 1; thesis 3.5.1): every hot_keys.report_interval_ms the db node
// tells the cache node serving its partitions its load and its hottest keys.
//
// `Reporter` owns the load meter and the sequence number and builds the reports; a
// `ReportSink` delivers them (`GrpcReportSink` calls CacheNode.Report; tests use a recording
// fake). The thread is optional: a node without a cache node never starts it, but the DbNode
// HotKeys RPC still builds reports through peek().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cluster.h"
#include "counters.h"
#include "exoproto/control.pb.h"
#include "grpc_security.h"
#include "hot_keys/hot_key_detector.h"
#include "hot_keys/load_meter.h"

namespace exo::db {

class ReportSink {
 public:
  virtual ~ReportSink() = default;
  // true when the receiver accepted the report; otherwise *error says why.
  virtual bool send(const exo::ReportRequest& report, std::string* error) = 0;
};

// CacheNode.Report to one cache node (`cache_node`: its name, also its certificate's). The
// channel is created on the first send (CreateChannel does not connect; the RPC does, within
// its deadline), with `security`. Called from the reporter thread only.
class GrpcReportSink final : public ReportSink {
 public:
  GrpcReportSink(std::string address, std::string cache_node, std::shared_ptr<const GrpcSecurity> security,
                 std::chrono::milliseconds deadline = std::chrono::milliseconds(1000));
  ~GrpcReportSink() override;
  bool send(const exo::ReportRequest& report, std::string* error) override;

 private:
  struct Peer;
  std::string address_;
  std::string cache_node_;
  std::shared_ptr<const GrpcSecurity> security_;
  std::chrono::milliseconds deadline_;
  std::unique_ptr<Peer> peer_;  // created lazily
};

// The one place a REPORT is assembled, for the reporter thread and the HotKeys RPC alike.
exo::ReportRequest build_report(const std::string& db_node, double load, HotKeyDetector& detector,
                                size_t report_keys, uint64_t seq, uint64_t now_ms);

class Reporter {
 public:

  // `counters`: all blocks of the node, summed for the load (gets + puts + deletes).
  // `own`: a counter block only this reporter writes (reports_sent, report_errors).
  // `sink` may be null (nothing to send to: start() then refuses to run).
  Reporter(const HotKeysConfig& cfg, std::string db_node, HotKeyDetector& detector,
           const CounterSet& counters, Counters& own, ReportSink* sink,
           Clock clock = steady_ms);
  ~Reporter();  // stops the thread
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // One round at now_ms: feed the load meter, build the report, send it, count the outcome.
  // The thread calls this every report interval; tests call it directly with a fake time.
  void tick(uint64_t now_ms);

  // The report tick() would send at the clock's now, without sending it, sampling the load or
  // using up a sequence number (the DbNode.HotKeys RPC). Thread-safe against tick().
  exo::ReportRequest peek();

  // Starts the thread (no-op without a sink or when running). stop() wakes it at once; it
  // returns when a send in flight has finished (at most the sink's deadline).
  void start();
  void stop();

 private:
  void run();
  uint64_t total_requests() const;

  const uint32_t report_keys_;
  const std::chrono::milliseconds interval_;
  const std::string db_node_;
  HotKeyDetector& detector_;
  const CounterSet& counters_;
  Counters& c_;
  ReportSink* sink_;
  Clock clock_;

  std::mutex mu_;  // guards meter_ and next_seq_ (tick vs peek)
  LoadMeter meter_;
  uint64_t next_seq_ = 1;  // 0 is proto3's "unset"

  // Failure logging, reporter thread only: at most one line per 10 s.
  uint64_t last_error_log_ms_ = 0;
  bool logged_error_ = false;
  uint64_t errors_since_log_ = 0;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace exo::db
