// The client's request rules as a pure state machine, for callers that own their I/O: the
// blocking Pipeline (pipeline.h, under the Python client) and exo-proxy's epoll loop
// (proxy/src/event_loop.h) both run their requests through it, so the rules exist once in C++
// (their Python twin is client-lib/exoskeleton/dispatch.py):
//  - at most `window` requests in flight (sent, or waiting out a BUSY backoff);
//  - a request with no reply after `timeout_s` is resent under the same (client_id, seq), at
//    most `retries` times; then it completes with status -1 (no reply: a write's outcome is
//    unknown, since any copy may have been applied);
//  - a BUSY reply (not applied, and the node will never apply that id) is retried under a new
//    seq after a backoff of min(timeout_s, busy_backoff_s * 2^min(busy replies, 6)), while
//    attempts <= retries or less than busy_budget_s passed since the first send; the last BUSY
//    is the outcome;
//  - a reply is matched by (client_id, seq, key); anything else (a second answer to a resent
//    request, another client's, garbage) is counted stray and dropped.
// The engine never reads a clock or touches a socket: every call takes `now`, and frames go out
// only through frames_to_send(). Callers serialize calls (one thread).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace exo::client {

// Where requests come from and go to (host byte order for ip/port).
struct Endpoint {
  std::array<uint8_t, 6> mac{};
  uint32_t ip = 0;
  uint16_t port = 0;
  uint32_t service_ip = 0;  // accepted (the module's service_ip), unused: a request's IPv4 dst is
                            // request_ip(key hash), keyhash.h
  uint16_t udp_port = 7777;
};

struct EngineOptions {
  size_t window = 32;  // requests in flight at most, BUSY backoffs included
  double timeout_s = 0.25;
  int retries = 4;
  double busy_backoff_s = 0.02;  // doubled per BUSY reply of a request (first wait: 2x this)
  // A BUSY is retried while attempts <= retries, and past that until this long after the
  // request was first sent: a chain's hand-over to a new tail leaves its slot without a read
  // server for a little over 1 s (GETs BUSY, docs/replication.md), and a BUSY is never applied,
  // so waiting it out costs latency, not correctness. The same as BUSY_BUDGET_S in
  // client-lib/exoskeleton/dispatch.py (tests/unit/test_client.py checks that they agree).
  double busy_budget_s = 2.0;
};

struct Stats {
  uint64_t sent = 0, resent = 0, replies = 0, stray_replies = 0, timeouts = 0, busy_retries = 0;
  uint64_t send_calls = 0, recv_calls = 0;  // system calls (batches): counted by the I/O's owner
  Stats& operator+=(const Stats& o);
};

struct Completion {
  uint64_t tag = 0;  // the caller's, from submit()
  int status = -1;   // wire::Status, or -1: no reply after every resend
  std::string value;
  uint8_t flags = 0;  // the reply's (wire::kFromCache)
  double latency_s = 0;
  int attempts = 0;  // frames sent under any seq (resends and BUSY retries included)
};

class RequestEngine {
 public:
  using Clock = std::chrono::steady_clock;
  using Time = Clock::time_point;

  // last_seq: the seq counter's start (the next request uses last_seq + 1).
  RequestEngine(const Endpoint& ep, uint32_t client_id, const EngineOptions& opt, uint32_t last_seq = 0);

  // Queues one GET/PUT/DELETE (wire::Op). The caller has checked the sizes: a key of 1..250
  // bytes, key + value within its MTU (wire::max_kv_bytes). A key outside 1..250 bytes or a
  // frame wire::build refuses is not sent: expire() completes it with BAD_REQUEST, 0 attempts.
  void submit(uint8_t op, std::string_view key, std::string_view value, uint64_t tag);

  // Frames to send now: resends and post-backoff sends that are due, then queued requests as
  // the window allows. The spans stay valid until the next non-const call.
  const std::vector<std::span<const uint8_t>>& frames_to_send(Time now);

  // One UDP payload (Exoskeleton header + key + value). Appends to `done` the request it
  // completes, if any.
  void on_reply(std::span<const uint8_t> payload, Time now, std::vector<Completion>& done);

  // Appends to `done` the requests whose last resend went unanswered by `now` (status -1).
  void expire(Time now, std::vector<Completion>& done);

  // When to call again (frames_to_send / expire): nullopt when nothing waits on a clock; Time{}
  // (long past) when frames or completions are ready now.
  std::optional<Time> next_deadline() const;

  bool idle() const { return pending_.empty() && inflight_.empty() && gave_up_.empty(); }
  size_t queued() const { return pending_.size(); }
  size_t in_flight() const { return inflight_.size(); }
  uint32_t last_seq() const { return seq_; }
  uint32_t client_id() const { return client_id_; }
  const Stats& stats() const { return stats_; }
  const EngineOptions& options() const { return opt_; }

 private:
  struct InFlight {
    uint64_t tag;
    std::vector<uint8_t> frame;  // the whole request frame under the current seq
    Time first_sent, deadline;
    uint64_t gen = 0;   // this schedule's entry in deadlines_ (older entries are stale)
    int attempts = 1;
    int busy = 0;       // BUSY replies so far (each retried under a new seq)
    bool unsent = false;  // waiting out a BUSY backoff: send `frame` at `deadline`
  };
  struct Pending {
    uint64_t tag;
    std::vector<uint8_t> frame;  // built at submit(), its seq written when it is sent
  };
  struct Due {
    Time at;
    uint32_t seq;
    uint64_t gen;
    bool operator>(const Due& o) const { return at > o.at; }
  };

  uint32_t fresh_seq();
  void schedule(uint32_t seq, InFlight& f, Time at);
  void advance(Time now);  // handles every deadline <= now, once per `now`

  Endpoint ep_;
  uint32_t client_id_;
  EngineOptions opt_;
  Clock::duration timeout_;
  uint32_t seq_;
  uint64_t gen_ = 0;
  std::optional<Time> advanced_at_;
  std::deque<Pending> pending_;
  std::unordered_map<uint32_t, InFlight> inflight_;
  // Lazy deletion: an entry is live only while inflight_[seq].gen matches; next_deadline()
  // pops stale tops, hence mutable.
  mutable std::priority_queue<Due, std::vector<Due>, std::greater<>> deadlines_;
  std::vector<std::pair<uint32_t, uint64_t>> due_sends_;  // (seq, gen) to send
  std::vector<Completion> gave_up_;
  std::vector<std::span<const uint8_t>> frames_;
  Stats stats_;
};

}  // namespace exo::client
