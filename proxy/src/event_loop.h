// exo-proxy's one thread: an epoll loop over the listeners, the client connections, the
// cluster's reply socket and a stop descriptor, around the pure parts: Sessions (session.h) and
// the RequestEngine (client-lib/native/request_engine.h), which pipelines every connection's
// cluster ops into shared sendmmsg batches. The engine's next deadline is the epoll timeout.
//
// One iteration: wait -> accept / read connections (requests to the engine) / read replies
// (completions to sessions) -> engine deadlines (resends, give-ups) -> one batch of frames out ->
// write every touched connection, close the finished ones, re-arm the rest.
// Nothing here is shared with another thread.
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeline.h"  // client::FrameIO
#include "request_engine.h"
#include "session.h"

namespace exo::proxy {

struct LoopConfig {
  SessionConfig session;
  size_t max_conns = 1024;  // more are accepted and closed at once
};

class EventLoop final : public SessionHost {
 public:
  // io sends frames and reads replies; rx_fd is the descriptor io reads (epoll watches it).
  EventLoop(const LoopConfig& cfg, client::RequestEngine& engine, client::FrameIO& io, int rx_fd);
  ~EventLoop() override;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Listening sockets (non-blocking); their connections become Sessions. The loop closes them.
  void add_listener(int fd);
  // Readable (a signalfd, an eventfd) -> run() returns. Not read, not closed.
  void add_stop_fd(int fd);
  // Until a stop descriptor turns readable. Returns 0, or 1 if epoll itself fails.
  int run();

  const Counters& counters() const { return counters_; }
  size_t connections() const { return conns_.size(); }

  // SessionHost
  void submit(uint8_t op, std::string_view key, std::string_view value, uint64_t tag) override;
  void append_stats(std::string& out) override;

 private:
  struct Conn {
    int fd;
    Session session;
    uint32_t events;  // what epoll watches now
  };

  void watch(int fd, uint64_t key, uint32_t events);
  void on_event(const epoll_event& ev);
  void accept_all(int listener);
  void read_conn(Conn& c);
  void read_replies();
  void deliver();
  void pump();  // deadlines, frames out, then service the touched connections
  void service(uint32_t id);
  void close_conn(uint32_t id);
  int timeout_ms() const;

  LoopConfig cfg_;
  client::RequestEngine& engine_;
  client::FrameIO& io_;
  int ep_ = -1;
  int spare_fd_ = -1;  // given up to accept (and close) a connection when out of descriptors
  std::vector<int> listeners_;
  std::unordered_map<uint32_t, std::unique_ptr<Conn>> conns_;
  uint32_t next_id_ = 0;
  std::vector<uint32_t> touched_;
  std::vector<client::Completion> done_;
  std::vector<std::span<const uint8_t>> replies_;
  std::vector<char> buf_;
  Counters counters_;
  bool stop_ = false;
  std::chrono::steady_clock::time_point started_;
  uint64_t io_errors_ = 0;
};

}  // namespace exo::proxy
