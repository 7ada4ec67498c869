// A thread that calls a function at a fixed period until stopped: the resolver's delivery
// rounds and the dedup sweep (main.cc). stop() wakes it at once; a call in progress finishes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace exo::db {

class PeriodicThread {
 public:
  PeriodicThread(std::chrono::milliseconds period, std::function<void()> fn)
      : period_(period), fn_(std::move(fn)) {}
  ~PeriodicThread() { stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  void start() {
    if (thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = false;
    }
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      // A period after the previous call ended, not a fixed cadence: after a slow round (RPCs
      // to a dead node) the next one waits a full period instead of starting at once.
      if (cv_.wait_for(lk, period_, [this] { return stopping_; })) return;
      lk.unlock();
      fn_();
      lk.lock();
    }
  }

  const std::chrono::milliseconds period_;
  const std::function<void()> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace exo::db
