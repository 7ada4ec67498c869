// exo-mcload's one thread: the open loop over many connections, in an epoll loop.
//
// Pacing is exo-loadgen's: a token bucket (common/cpp/token_bucket.h) on the monotonic clock
// releases `batch` requests at a time at `rate` per second whatever the replies do, and catches
// up by at most catch_up_s after a stall (anything beyond is not released, so offered_rps shows
// a generator that fell behind). A released request's latency is measured from its release
// time (its schedule), so time spent waiting for a free connection counts against the server.
//
// Released requests queue in a backlog and go to connections with a free slot, least recently
// freed first; a connection has `depth` slots (requests in flight; 1 = no pipelining). Each is
// `get <key>\r\n` for key_name(id) with id = Zipf rank - 1 (alpha 0: uniform over 0..keys-1).
// Replies come back in request order on each connection (the memcached protocol) and are parsed
// by parse_reply (reply_parser.h): a hit whose key is not the one asked or whose value has
// another size than expected counts as an error; a malformed reply, a reply nobody asked for, a
// reset or a close drops the connection, and the requests in flight on it are lost.
//
// After the send phase the loop drains for at most drain_ns, ending early once every request is
// answered or lost. A request not answered by then is lost (a timeout).
//
// TCP never drops a request: a server past its capacity only queues (here, in the backlog), and
// with an unbounded backlog a 3-second run 10% over capacity still has every reply back within a
// 300 ms drain, so it would pass a loss rule that a UDP server, whose socket buffer overflows,
// fails. With max_wait_ns > 0 the backlog is bounded like that buffer: a request that has waited
// max_wait_ns for a free connection is dropped unsent (expired, lost), so sustained overload
// shows as loss. Requests once written have no deadline but the drain's: a deadline on them
// too would make an overloaded FIFO queue serve only requests about to expire, so that nearly
// every reply counts as late and the measured rate collapses far below what the server does.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "loadgen/rng.h"
#include "loadgen/series.h"
#include "loadgen/zipf.h"
#include "mcload/reply_parser.h"
#include "token_bucket.h"

namespace exo::mcload {

struct DriverConfig {
  double rate = 1000;         // requests per second, > 0
  uint64_t duration_ns = 0;   // send phase
  uint64_t drain_ns = 0;      // after it, at most this long for replies
  uint64_t max_wait_ns = 0;   // > 0: a request waiting this long for a connection is dropped
  unsigned batch = 1;         // released at a time, >= 1
  double catch_up_s = 0.01;   // burst = max(batch, rate x this)
  uint64_t keys = 1;
  double alpha = 0.0;
  uint32_t key_size = 16;
  uint64_t seed = 1;
  uint32_t depth = 1;         // slots per connection, >= 1
  bool check_value_size = false;
  size_t value_size = 0;      // with check_value_size
  size_t max_value = kDefaultMaxValue;
};

struct DriverStats {
  uint64_t sent = 0;       // released by the pacing: the open loop's requests
  uint64_t written = 0;    // of those, written to a connection
  uint64_t answered = 0;   // replies matched to a request (hits + misses + the three error kinds)
  uint64_t hits = 0, misses = 0;
  uint64_t error_replies = 0;     // ERROR / CLIENT_ERROR / SERVER_ERROR
  uint64_t wrong_key = 0;         // VALUE for another key than the one asked on that connection
  uint64_t wrong_value_size = 0;  // VALUE whose <bytes> is not the expected size
  uint64_t malformed = 0;         // replies that broke the stream's framing, or nobody asked for
  uint64_t conns_closed_by_peer = 0;
  uint64_t conns_failed = 0;      // read/write errors, malformed replies
  uint64_t lost_on_dropped = 0;   // in flight on a connection when it was dropped
  uint64_t timeouts = 0;          // written, not answered when the drain ended
  uint64_t expired = 0;           // dropped unwritten after max_wait_ns in the backlog: lost
  uint64_t unwritten = 0;         // released, never written (no free slot) when the drain ended
  uint64_t backlog_max = 0;       // most released-but-unwritten requests at once
  uint64_t writes = 0, reads = 0, wakeups = 0;  // system calls, for CPU cost per request
  uint64_t send_elapsed_ns = 0;
  uint64_t drain_elapsed_ns = 0;
  uint32_t connections = 0;
  uint32_t connections_open_at_end = 0;
  std::string first_error;        // the first connection dropped, and why
  std::string first_error_reply;  // the first error line the server sent
  std::string fatal;              // epoll itself failed: the run is not valid
};

class Driver {
 public:
  // Takes ownership of `fds`: connected, non-blocking stream sockets. Throws
  // std::invalid_argument for a config the samplers or the bucket reject.
  Driver(const DriverConfig& cfg, std::vector<int> fds, loadgen::Series& series);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Sends from series.start_ns() for duration_ns or until stop_send, then drains (stop_all cuts
  // the drain short). each_second(t) runs on this thread once wall second t has ended.
  DriverStats run(const std::atomic<bool>& stop_send, const std::atomic<bool>& stop_all,
                  const std::function<void(uint64_t)>& each_second);

 private:
  struct Pending {
    uint64_t key_id;
    uint64_t sched_ns;
  };
  struct Conn {
    int fd = -1;
    bool dead = false;
    bool touched = false;  // has unflushed output this iteration
    uint32_t events = 0;   // what epoll watches
    std::string in;        // an incomplete reply carried over between reads
    std::string out;
    size_t out_off = 0;
    std::deque<Pending> inflight;
  };

  void release(uint64_t now, uint64_t end);
  void dispatch(uint64_t now);
  void flush();
  void write_out(uint32_t c);
  void read_in(uint32_t c, uint64_t recv_ns);
  bool consume(uint32_t c, std::string_view bytes, uint64_t recv_ns);
  void book(const Pending& p, const Reply& r, uint64_t recv_ns);
  void watch(uint32_t c, uint32_t events);
  void drop(uint32_t c, const std::string& why, uint64_t& counter);
  uint64_t in_flight() const { return st_.written - st_.answered - st_.lost_on_dropped; }

  DriverConfig cfg_;
  loadgen::Series& series_;
  std::vector<Conn> conns_;
  std::deque<Pending> backlog_;
  std::deque<uint32_t> free_slots_;  // one entry per free slot, least recently freed first
  std::vector<uint32_t> touched_;
  std::vector<char> buf_;
  int ep_ = -1;
  DriverStats st_;
  loadgen::ZipfSampler zipf_;
  loadgen::Xoshiro256ss rng_;
  double burst_;
  TokenBucket bucket_;
};

}  // namespace exo::mcload
