#include "pipeline.h"

#include <algorithm>
#include <chrono>

namespace exo::client {

std::vector<Outcome> Pipeline::execute(const std::vector<Op>& ops, const Options& opt) {
  using Clock = RequestEngine::Clock;
  std::vector<Outcome> out(ops.size());
  RequestEngine engine(ep_, client_id_, opt, seq);
  for (size_t i = 0; i < ops.size(); ++i) engine.submit(ops[i].op, ops[i].key, ops[i].value, i);
  std::vector<Completion> done;
  std::vector<std::span<const uint8_t>> replies;
  const auto take = [&] {
    for (Completion& c : done) out[c.tag] = Outcome{c.status, std::move(c.value), c.flags, c.latency_s, c.attempts};
    done.clear();
  };

  while (true) {
    // 1. deadlines (give up, resend, send after a BUSY backoff) and the window, one batch
    auto now = Clock::now();
    engine.expire(now, done);
    const auto& frames = engine.frames_to_send(now);
    if (!frames.empty()) {
      io_.send(frames);
      ++stats.send_calls;
    }
    take();
    if (engine.idle()) break;

    // 2. wait for replies until the earliest deadline
    double wait_s = 0;
    if (const auto deadline = engine.next_deadline())
      wait_s = std::max(0.0, std::chrono::duration<double>(*deadline - Clock::now()).count());
    io_.recv(replies, wait_s);
    ++stats.recv_calls;
    now = Clock::now();
    for (const auto& payload : replies) engine.on_reply(payload, now, done);
    take();
  }
  seq = engine.last_seq();
  Stats s = engine.stats();
  s.send_calls = s.recv_calls = 0;  // counted above
  stats += s;
  return out;
}

}  // namespace exo::client
