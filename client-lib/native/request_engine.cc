#include "request_engine.h"

#include <algorithm>

#include "keyhash.h"
#include "wire.h"
#include "wire_layout.h"

namespace exo::client {
namespace {

double seconds(RequestEngine::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

RequestEngine::Clock::duration to_duration(double s) {
  return std::chrono::round<RequestEngine::Clock::duration>(std::chrono::duration<double>(s));
}

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

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The key of a frame wire::build wrote (it starts right after the fixed headers).
std::span<const uint8_t> frame_key(const std::vector<uint8_t>& frame) {
  return {frame.data() + wire::kMinFrame, wire::header_of(frame.data())->exo.key_len.get()};
}

// The seq is outside the IPv4 checksum and the UDP checksum is 0 (wire::build), so a new seq
// needs no other change to the frame.
void set_seq(std::vector<uint8_t>& frame, uint32_t seq) { wire::header_of(frame.data())->exo.seq.set(seq); }

}  // namespace

Stats& Stats::operator+=(const Stats& o) {
  sent += o.sent;
  resent += o.resent;
  replies += o.replies;
  stray_replies += o.stray_replies;
  timeouts += o.timeouts;
  busy_retries += o.busy_retries;
  send_calls += o.send_calls;
  recv_calls += o.recv_calls;
  return *this;
}

RequestEngine::RequestEngine(const Endpoint& ep, uint32_t client_id, const EngineOptions& opt, uint32_t last_seq)
    : ep_(ep), client_id_(client_id), opt_(opt), timeout_(to_duration(opt.timeout_s)), seq_(last_seq) {
  opt_.window = std::max<size_t>(opt_.window, 1);
  inflight_.reserve(opt_.window * 2);
}

void RequestEngine::submit(uint8_t op, std::string_view key, std::string_view value, uint64_t tag) {
  std::vector<uint8_t> f(wire::kMinFrame + key.size() + value.size());
  const uint64_t hash = key_hash(bytes(key));
  const Mac dst = request_mac(op == wire::kGet ? kPrefixGet : kPrefixOther, hash);
  const wire::Addr src{ep_.mac.data(), ep_.ip, ep_.port};
  wire::Header h;
  h.opcode = op;
  h.client_id = client_id_;
  f.resize(wire::build(f, dst.data(), src, request_ip(hash), ep_.udp_port, h, bytes(key), bytes(value)));
  if (f.empty() || key.empty() || key.size() > wire::kMaxKeyLen) {
    // A broken precondition: answered BAD_REQUEST here (through expire()) rather than sent.
    gave_up_.push_back({tag, wire::kBadRequest, {}, 0, 0, 0});
    return;
  }
  pending_.push_back({tag, std::move(f)});
}

uint32_t RequestEngine::fresh_seq() {
  // After a 2^32 wrap a seq may still be in flight: take the next one.
  do ++seq_;
  while (inflight_.contains(seq_));
  return seq_;
}

void RequestEngine::schedule(uint32_t seq, InFlight& f, Time at) {
  f.deadline = at;
  f.gen = ++gen_;
  deadlines_.push({at, seq, f.gen});
}

void RequestEngine::advance(Time now) {
  // Once per `now`: with a zero timeout, a resend scheduled now would be due again at once.
  if (advanced_at_ == now) return;
  advanced_at_ = now;
  std::vector<Due> due;
  while (!deadlines_.empty() && deadlines_.top().at <= now) {
    due.push_back(deadlines_.top());
    deadlines_.pop();
  }
  for (const Due& d : due) {
    auto it = inflight_.find(d.seq);
    if (it == inflight_.end() || it->second.gen != d.gen) continue;  // answered or rescheduled
    InFlight& f = it->second;
    if (f.unsent) {  // BUSY backoff over: first send under the new seq
      f.unsent = false;
      ++f.attempts;
      ++stats_.sent;
    } else if (f.attempts > opt_.retries) {
      ++stats_.timeouts;
      gave_up_.push_back({f.tag, -1, {}, 0, seconds(now - f.first_sent), f.attempts});
      inflight_.erase(it);
      continue;
    } else {
      ++f.attempts;  // same (client_id, seq): the node sees a resend
      ++stats_.resent;
    }
    schedule(d.seq, f, now + timeout_);
    due_sends_.emplace_back(d.seq, f.gen);
  }
}

const std::vector<std::span<const uint8_t>>& RequestEngine::frames_to_send(Time now) {
  advance(now);
  frames_.clear();
  for (const auto& [seq, gen] : due_sends_) {
    auto it = inflight_.find(seq);
    if (it != inflight_.end() && it->second.gen == gen) frames_.emplace_back(it->second.frame);
  }
  due_sends_.clear();
  while (!pending_.empty() && inflight_.size() < opt_.window) {
    Pending& p = pending_.front();
    const uint32_t s = fresh_seq();
    set_seq(p.frame, s);
    InFlight& f = inflight_.emplace(s, InFlight{p.tag, std::move(p.frame), now, now}).first->second;
    pending_.pop_front();
    schedule(s, f, now + timeout_);
    frames_.emplace_back(f.frame);
    ++stats_.sent;
  }
  return frames_;
}

void RequestEngine::on_reply(std::span<const uint8_t> payload, Time now, std::vector<Completion>& done) {
  Reply r;
  auto it = read_reply(payload, r) ? inflight_.find(r.seq) : inflight_.end();
  if (it == inflight_.end() || r.client_id != client_id_ || !(r.opcode & wire::kReplyBit) ||
      it->second.unsent || !std::ranges::equal(r.key, frame_key(it->second.frame))) {
    ++stats_.stray_replies;  // e.g. the second answer to a resent request
    return;
  }
  ++stats_.replies;
  if (r.status == wire::kBusy && (it->second.attempts <= opt_.retries ||
                                   seconds(now - it->second.first_sent) < opt_.busy_budget_s)) {
    // Not applied, and the node will not apply this id later: retry under a new id.
    InFlight f = std::move(it->second);
    inflight_.erase(it);
    ++f.busy;
    ++stats_.busy_retries;
    const uint32_t s = fresh_seq();
    set_seq(f.frame, s);
    f.unsent = true;
    const double backoff = std::min(opt_.timeout_s, opt_.busy_backoff_s * (1 << std::min(f.busy, 6)));
    InFlight& moved = inflight_.emplace(s, std::move(f)).first->second;
    schedule(s, moved, now + to_duration(backoff));
    return;
  }
  InFlight& f = it->second;
  done.push_back({f.tag, r.status, std::string(r.value.begin(), r.value.end()), r.flags,
                  seconds(now - f.first_sent), f.attempts});
  inflight_.erase(it);
}

void RequestEngine::expire(Time now, std::vector<Completion>& done) {
  advance(now);
  for (Completion& c : gave_up_) done.push_back(std::move(c));
  gave_up_.clear();
}

std::optional<RequestEngine::Time> RequestEngine::next_deadline() const {
  if (!due_sends_.empty() || !gave_up_.empty() || (!pending_.empty() && inflight_.size() < opt_.window))
    return Time{};
  while (!deadlines_.empty()) {
    const Due& d = deadlines_.top();
    auto it = inflight_.find(d.seq);
    if (it != inflight_.end() && it->second.gen == d.gen) return d.at;
    deadlines_.pop();
  }
  return std::nullopt;
}

}  // namespace exo::client
