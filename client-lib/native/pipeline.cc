#include "pipeline.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "keyhash.h"
#include "wire.h"
#include "wire_layout.h"

namespace exo::client {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

struct InFlight {
  size_t index;                  // position in ops / outcomes
  std::vector<uint8_t> frame;
  Clock::time_point first_sent;
  Clock::time_point deadline;
  int attempts = 1;
  int busy = 0;                  // BUSY replies so far (each retried under a new seq)
  bool unsent = false;           // waiting out a BUSY backoff: send `frame` at `deadline`
};

// A reply's fields, read from the UDP payload (header + key + value); false if it is not one.
struct Reply {
  uint8_t opcode, status, flags;
  uint32_t client_id, seq;
  std::span<const uint8_t> key, value;
};

bool read_reply(std::span<const uint8_t> payload, Reply& r) {
  const uint8_t* p = payload.data();
  if (payload.size() < wire::kHdrLen) return false;
  const auto* h = reinterpret_cast<const wire::ExoHeader*>(p);
  if (h->magic.get() != wire::kMagic || h->version != wire::kVersion) return false;
  const size_t kl = h->key_len.get(), vl = h->value_len.get();
  if (wire::kHdrLen + kl + vl != payload.size()) return false;
  r = {h->opcode, h->status, h->flags, h->client_id.get(), h->seq.get(),
       {p + wire::kHdrLen, kl}, {p + wire::kHdrLen + kl, vl}};
  return true;
}

}  // namespace

std::vector<Outcome> Pipeline::execute(const std::vector<Op>& ops, const Options& opt) {
  std::vector<Outcome> out(ops.size());
  std::unordered_map<uint32_t, InFlight> inflight;
  inflight.reserve(opt.window * 2);
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.timeout_s));
  std::vector<std::span<const uint8_t>> batch;
  std::vector<std::span<const uint8_t>> replies;
  size_t next = 0;

  auto frame_for = [&](const Op& op, uint32_t s) {
    std::vector<uint8_t> f(wire::kMinFrame + op.key.size() + op.value.size());
    const uint8_t prefix = op.op == wire::kGet ? kPrefixGet : kPrefixOther;
    const auto key = std::span(reinterpret_cast<const uint8_t*>(op.key.data()), op.key.size());
    const uint64_t hash = key_hash(key);
    const Mac dst = request_mac(prefix, hash);
    const wire::Addr src{ep_.mac.data(), ep_.ip, ep_.port};
    wire::Header h;
    h.opcode = op.op;
    h.client_id = client_id_;
    h.seq = s;
    f.resize(wire::build(f, dst.data(), src, request_ip(hash), ep_.udp_port, h, key,
                         std::span(reinterpret_cast<const uint8_t*>(op.value.data()), op.value.size())));
    return f;
  };
  auto flush = [&] {
    if (batch.empty()) return;
    io_.send(batch);
    ++stats.send_calls;
    batch.clear();
  };

  while (true) {
    auto now = Clock::now();
    // 1. fill the window, one batch
    while (next < ops.size() && inflight.size() < opt.window) {
      const uint32_t s = ++seq;
      InFlight f{next, frame_for(ops[next], s), now, now + timeout};
      auto [it, fresh] = inflight.emplace(s, std::move(f));
      if (!fresh) continue;  // after a 2^32 wrap this seq is still in flight: take the next
      batch.emplace_back(it->second.frame);
      ++stats.sent;
      ++next;
    }
    flush();
    if (inflight.empty() && next >= ops.size()) return out;

    // 2. wait for replies until the earliest deadline
    auto earliest = inflight.begin()->second.deadline;
    for (const auto& [s, f] : inflight) earliest = std::min(earliest, f.deadline);
    io_.recv(replies, std::max(0.0, seconds_since(Clock::now(), earliest)));
    ++stats.recv_calls;
    now = Clock::now();
    for (const auto& payload : replies) {
      Reply r;
      auto it = read_reply(payload, r) ? inflight.find(r.seq) : inflight.end();
      if (it == inflight.end() || r.client_id != client_id_ || !(r.opcode & wire::kReplyBit) ||
          !std::ranges::equal(r.key, std::span(reinterpret_cast<const uint8_t*>(ops[it->second.index].key.data()),
                                               ops[it->second.index].key.size()))) {
        ++stats.stray_replies;  // e.g. the second answer to a resent request
        continue;
      }
      InFlight f = std::move(it->second);
      inflight.erase(it);
      ++stats.replies;
      if (r.status == wire::kBusy && f.attempts <= opt.retries) {
        // Not applied, and the node will not apply this id later: retry under a new id.
        ++f.busy;
        ++stats.busy_retries;
        const uint32_t s = ++seq;
        f.frame = frame_for(ops[f.index], s);
        f.unsent = true;
        const double backoff = std::min(opt.timeout_s, 0.02 * (1 << std::min(f.busy, 6)));
        f.deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(backoff));
        inflight.emplace(s, std::move(f));
        continue;
      }
      Outcome& o = out[f.index];
      o.status = r.status;
      o.value.assign(reinterpret_cast<const char*>(r.value.data()), r.value.size());
      o.flags = r.flags;
      o.latency_s = seconds_since(f.first_sent, now);
      o.attempts = f.attempts;
    }

    // 3. deadlines: send after a BUSY backoff, resend, or give up
    for (auto it = inflight.begin(); it != inflight.end();) {
      InFlight& f = it->second;
      if (f.deadline > now) {
        ++it;
        continue;
      }
      if (f.unsent) {
        f.unsent = false;
        ++f.attempts;
        ++stats.sent;
      } else if (f.attempts > opt.retries) {
        ++stats.timeouts;
        out[f.index] = Outcome{-1, {}, 0, seconds_since(f.first_sent, now), f.attempts};
        it = inflight.erase(it);
        continue;
      } else {
        ++f.attempts;  // same (client_id, seq): the node sees a resend
        ++stats.resent;
      }
      f.deadline = now + timeout;
      batch.emplace_back(f.frame);
      ++it;
    }
    flush();
  }
}

}  // namespace exo::client
