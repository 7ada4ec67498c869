// The client's hot path in native code: keep up to `window` requests in flight, resend each
// with the same (client_id, seq) after `timeout_s` at most `retries` times, retry a BUSY under a
// new seq after a short backoff -- the same rules as Client.stream in client-lib/exoskeleton/
// client.py (the pure-Python path, which stays as the fallback; both pass the same tests).
//
// The rules themselves are RequestEngine's (request_engine.h, shared with exo-proxy); this is the
// blocking loop around it and a FrameIO: the real one (mmsg_io.h) moves whole batches per system
// call, sendmmsg on the raw socket and recvmmsg on the UDP socket; tests drive a fake.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "request_engine.h"

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

class FrameIO {
 public:
  virtual ~FrameIO() = default;
  // Sends every frame (whole batches per call where the I/O allows it).
  virtual void send(std::span<const std::span<const uint8_t>> frames) = 0;
  // Waits up to timeout_s for the first reply, then takes what else is ready: `out` gets one
  // span per UDP payload, pointing into the I/O's own buffers, valid until the next recv().
  virtual void recv(std::vector<std::span<const uint8_t>>& out, double timeout_s) = 0;
};

// {window, timeout_s, retries[, busy_backoff_s]}
using Options = EngineOptions;

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
