#include "session.h"

#include <algorithm>

namespace exo::proxy {
namespace {

// A tag: session id (32 bits) | slot seq (24 bits) | key index (8 bits). 24 bits of slot seq
// are enough because a session never has more than max_pending (< 2^24) slots at once.
constexpr uint32_t kSeqMask = 0xFFFFFF;
constexpr size_t kMaxKeys = 256;
constexpr size_t kMaxPending = kSeqMask;

SessionConfig bounded(SessionConfig cfg) {
  cfg.limits.max_keys_per_get = std::clamp<size_t>(cfg.limits.max_keys_per_get, 1, kMaxKeys);
  cfg.max_pending = std::clamp<size_t>(cfg.max_pending, 1, kMaxPending);
  return cfg;
}

}  // namespace

Session::Session(uint32_t id, const SessionConfig& cfg, SessionHost& host, Counters& counters)
    : id_(id), cfg_(bounded(cfg)), host_(host), counters_(counters), parser_(cfg_.limits) {}

uint64_t Session::tag(uint32_t slot_seq, size_t key_index) const {
  return uint64_t{id_} << 32 | uint64_t{slot_seq & kSeqMask} << 8 | key_index;
}

void Session::on_input(std::string_view bytes) {
  if (closing_) return;  // after quit or a fatal error nothing more is read
  in_.append(bytes);
  parse();
}

void Session::on_eof() {
  eof_ = true;
  parse();
}

void Session::parse() {
  if (parsing_) return;  // a completion delivered while parsing: this loop carries on
  parsing_ = true;
  size_t off = 0;
  while (!closing_ && slots_.size() < cfg_.max_pending && off < in_.size()) {
    size_t used = 0;
    ParseResult r = parser_.next(std::string_view(in_).substr(off), &used);
    off += used;  // also after kNeedMore: a swallowed data block is consumed as it arrives
    if (r.kind == ParseResult::kNeedMore) break;
    if (r.kind == ParseResult::kError) {
      if (!r.error.noreply) answer(r.error.line);
      if (r.error.close) closing_ = true;  // binary protocol, line too long: stop reading
      continue;
    }
    start(std::move(r.request));
  }
  in_.erase(0, off);
  // Stopped for want of input (not held back by max_pending) after EOF: what is left is an
  // incomplete request that will never be completed.
  if (eof_ && slots_.size() < cfg_.max_pending) closing_ = true;
  if (closing_) in_.clear();
  parsing_ = false;
}

void Session::answer(std::string_view text) {
  if (slots_.empty()) {
    out_.append(text);
    return;
  }
  Slot s;
  s.reply.assign(text);
  slots_.push_back(std::move(s));
}

void Session::start(Request&& req) {
  const bool classic_noreply = req.noreply && !is_meta(req.cmd);
  switch (req.cmd) {
    case Cmd::kQuit:
      closing_ = true;
      return;
    case Cmd::kVersion: {
      std::string v;
      reply::version(v, "exo-proxy " + std::string(kProxyVersion));
      answer(v);
      return;
    }
    case Cmd::kStats: {
      std::string s;
      if (!req.keys.empty()) {
        reply::client_error(s, "stats " + req.keys[0] + " not supported");
        answer(s);
      } else if (slots_.empty()) {
        host_.append_stats(out_);
        reply::end(out_);
      } else {
        // Rendered when its turn comes, so it counts the requests pipelined before it.
        slots_.emplace_back().stats = true;
      }
      return;
    }
    case Cmd::kVerbosity:  // nothing to change: the proxy logs by --log-level
      if (!classic_noreply) answer("OK\r\n");
      return;
    case Cmd::kMetaNoop:
      answer("MN\r\n");
      return;
    default:
      break;
  }
  if (const std::string no = refusal(req, cfg_.max_kv); !no.empty()) {
    ++counters_.refused;
    if (!classic_noreply) answer(no);  // meta errors are always sent, q or not
    return;
  }
  const uint8_t op = cluster_op(req.cmd);
  std::atomic<uint64_t>& cmd_count = op == wire::kGet ? counters_.cmd_get : op == wire::kPut ? counters_.cmd_set : counters_.cmd_delete;
  cmd_count += req.keys.size();
  const uint32_t seq = front_seq_ + static_cast<uint32_t>(slots_.size());
  const size_t n = req.keys.size();
  slots_.emplace_back();
  Slot& s = slots_.back();
  s.results.resize(n);
  s.got.assign(n, false);
  s.outstanding = n;
  const std::string value = std::move(req.value);  // the frame holds it from here on
  s.req = std::move(req);
  for (size_t i = 0; i < n; ++i) host_.submit(op, s.req.keys[i], value, tag(seq, i));
}

void Session::complete(client::Completion c) {
  if (Session::session_of(c.tag) != id_) return;
  const uint32_t seq = static_cast<uint32_t>(c.tag >> 8) & kSeqMask;
  const size_t idx = c.tag & 0xFF;
  const size_t pos = (seq - front_seq_) & kSeqMask;
  if (pos >= slots_.size()) return;  // not ours (never happens: the engine completes each op once)
  Slot& s = slots_[pos];
  if (idx >= s.got.size() || s.got[idx]) return;
  s.got[idx] = true;
  s.results[idx] = std::move(c);
  if (--s.outstanding > 0) return;
  render(s.req, s.results, s.reply, counters_);
  s.results.clear();
  s.req = Request{};  // keep only the reply
  flush();
  parse();  // slots were freed: carry on with input held back by max_pending
}

void Session::flush() {
  while (!slots_.empty() && slots_.front().outstanding == 0) {
    if (slots_.front().stats) {
      host_.append_stats(out_);
      reply::end(out_);
    }
    out_ += slots_.front().reply;
    slots_.pop_front();
    ++front_seq_;
  }
}

void Session::consume_output(size_t n) {
  out_off_ += std::min(n, out_.size() - out_off_);
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  } else if (out_off_ > (64u << 10) && out_off_ * 2 > out_.size()) {
    out_.erase(0, out_off_);  // amortized: only once half of the buffer has been written
    out_off_ = 0;
  }
}

}  // namespace exo::proxy
