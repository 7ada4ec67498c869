// The client's hot path in native code: keep up to `window` requests in flight, resend each
// with the same (client_id, seq) after `timeout_s` at most `retries` times, retry a BUSY under a
// new seq after a short backoff -- the same rules as Client.stream in client-lib/exoskeleton/
// client.py (the pure-Python path, which stays as the fallback; both pass the same tests).
//
// Pure logic around a FrameIO: the real one (mmsg_io.h) moves whole batches per system call,
// sendmmsg on the raw socket and recvmmsg on the UDP socket; tests drive a fake.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace exo::client {

struct Op {
  uint8_t op = 0;  // wire::kGet / kPut / kDelete
  std::string key;
  std::string value;
};

struct Outcome {
  int status = -1;  // wire::Status, or -1: no reply after every resend
  std::string value;
  uint8_t flags = 0;
  double latency_s = 0;
  int attempts = 0;
};

struct Stats {
  uint64_t sent = 0, resent = 0, replies = 0, stray_replies = 0, timeouts = 0, busy_retries = 0;
  uint64_t send_calls = 0, recv_calls = 0;  // system calls (batches), for requests per syscall
};

// Where requests come from and go to (host byte order for ip/port).
struct Endpoint {
  std::array<uint8_t, 6> mac{};
  uint32_t ip = 0;
  uint16_t port = 0;
  uint32_t service_ip = 0;  // accepted (the module's service_ip), unused: a request's IPv4 dst is
                            // request_ip(key hash), keyhash.h
  uint16_t udp_port = 7777;
};

class FrameIO {
 public:
  virtual ~FrameIO() = default;
  // Sends every frame (whole batches per call where the I/O allows it).
  virtual void send(std::span<const std::span<const uint8_t>> frames) = 0;
  // Waits up to timeout_s for the first reply, then takes what else is ready: `out` gets one
  // span per UDP payload, pointing into the I/O's own buffers, valid until the next recv().
  virtual void recv(std::vector<std::span<const uint8_t>>& out, double timeout_s) = 0;
};

struct Options {
  size_t window = 32;
  double timeout_s = 0.25;
  int retries = 4;
};

class Pipeline {
 public:
  Pipeline(FrameIO& io, const Endpoint& ep, uint32_t client_id) : io_(io), ep_(ep), client_id_(client_id) {}

  // Runs `ops` pipelined; outcomes in request order. The caller has checked key and value sizes.
  std::vector<Outcome> execute(const std::vector<Op>& ops, const Options& opt);

  uint32_t seq = 0;  // the last seq used; the Python client hands its counter in and reads it back
  Stats stats;

 private:
  FrameIO& io_;
  Endpoint ep_;
  uint32_t client_id_;
};

}  // namespace exo::client
