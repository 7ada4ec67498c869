#include "mcload/driver.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "loadgen/clock.h"
#include "loadgen/hot_set_swap.h"  // key_name: the generator's one key format
#include "wire.h"

namespace exo::mcload {
namespace {

using loadgen::kNsPerSec;
using loadgen::mono_ns;

constexpr size_t kReadChunk = 64 << 10;
constexpr int kReadsPerWakeup = 4;  // then the next connection's turn (level-triggered)
constexpr size_t kMaxEvents = 256;
constexpr size_t kMaxErrorText = 200;

double burst_of(const DriverConfig& c) {
  return std::max<double>(c.batch, std::ceil(c.rate * c.catch_up_s));
}

}  // namespace

Driver::Driver(const DriverConfig& cfg, std::vector<int> fds, loadgen::Series& series)
    : cfg_(cfg), series_(series), buf_(kReadChunk), zipf_(cfg.keys, cfg.alpha), rng_(cfg.seed),
      burst_(burst_of(cfg)), bucket_(cfg.rate, burst_of(cfg), series.start_ns()) {
  if (!(cfg.rate > 0.0) || cfg.batch < 1 || cfg.depth < 1)
    throw std::invalid_argument("Driver: rate, batch and depth must be positive");
  conns_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) conns_[i].fd = fds[i];
  st_.connections = static_cast<uint32_t>(fds.size());
}

Driver::~Driver() {
  for (Conn& k : conns_)
    if (k.fd >= 0) close(k.fd);
  if (ep_ >= 0) close(ep_);
}

void Driver::watch(uint32_t c, uint32_t events) {
  Conn& k = conns_[c];
  if (k.dead || k.events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c;
  if (epoll_ctl(ep_, EPOLL_CTL_MOD, k.fd, &ev) != 0) {
    drop(c, std::string("epoll_ctl: ") + std::strerror(errno), st_.conns_failed);
    return;
  }
  k.events = events;
}

void Driver::drop(uint32_t c, const std::string& why, uint64_t& counter) {
  Conn& k = conns_[c];
  if (k.dead) return;
  ++counter;
  if (st_.first_error.empty())
    st_.first_error = ("connection " + std::to_string(c) + ": " + why).substr(0, kMaxErrorText);
  st_.lost_on_dropped += k.inflight.size();
  k.inflight.clear();
  close(k.fd);  // also leaves the epoll set
  k.fd = -1;
  k.dead = true;
  k.in.clear();
  k.out.clear();
  k.out_off = 0;
}

void Driver::release(uint64_t now, uint64_t end) {
  const auto avail = static_cast<uint64_t>(std::max(0.0, std::floor(bucket_.available(now))));
  if (avail == 0) return;
  // Wait for a whole batch unless the send phase ends first (as exo-loadgen's TX loop does).
  if (avail < cfg_.batch && bucket_.next_ready_ns(now, cfg_.batch) < end) return;
  if (!bucket_.take(now, static_cast<double>(avail))) return;  // cannot happen: `available` said so
  for (uint64_t i = 0; i < avail; ++i) backlog_.push_back(Pending{zipf_(rng_) - 1, now});
  series_.on_sent(now, avail);
  st_.sent += avail;
}

void Driver::dispatch(uint64_t now) {
  if (cfg_.max_wait_ns > 0)
    while (!backlog_.empty() && now - backlog_.front().sched_ns >= cfg_.max_wait_ns) {
      backlog_.pop_front();  // the bounded queue overflowed: never sent
      ++st_.expired;
    }
  while (!backlog_.empty() && !free_slots_.empty()) {
    const uint32_t c = free_slots_.front();
    free_slots_.pop_front();
    Conn& k = conns_[c];
    if (k.dead) continue;  // its slots die with it
    const Pending p = backlog_.front();
    backlog_.pop_front();
    k.out.append("get ").append(loadgen::key_name(p.key_id, cfg_.key_size)).append("\r\n");
    k.inflight.push_back(p);
    ++st_.written;
    if (!k.touched) {
      k.touched = true;
      touched_.push_back(c);
    }
  }
  st_.backlog_max = std::max<uint64_t>(st_.backlog_max, backlog_.size());
}

void Driver::flush() {
  for (uint32_t c : touched_) {
    conns_[c].touched = false;
    write_out(c);
  }
  touched_.clear();
}

void Driver::write_out(uint32_t c) {
  Conn& k = conns_[c];
  while (!k.dead && k.out_off < k.out.size()) {
    const ssize_t n = send(k.fd, k.out.data() + k.out_off, k.out.size() - k.out_off, MSG_NOSIGNAL);
    ++st_.writes;
    if (n > 0) {
      k.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch(c, EPOLLIN | EPOLLOUT);  // the server is not reading: wait until it does
      return;
    }
    drop(c, std::string("write: ") + (n < 0 ? std::strerror(errno) : "wrote nothing"), st_.conns_failed);
    return;
  }
  if (k.dead) return;
  k.out.clear();
  k.out_off = 0;
  watch(c, EPOLLIN);
}

void Driver::read_in(uint32_t c, uint64_t recv_ns) {
  for (int i = 0; i < kReadsPerWakeup && !conns_[c].dead; ++i) {
    const ssize_t n = read(conns_[c].fd, buf_.data(), buf_.size());
    ++st_.reads;
    if (n > 0) {
      if (!consume(c, std::string_view(buf_.data(), static_cast<size_t>(n)), recv_ns)) return;
      if (static_cast<size_t>(n) < buf_.size()) return;
      continue;
    }
    if (n == 0) {
      drop(c, "closed by the server", st_.conns_closed_by_peer);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    drop(c, std::string("read: ") + std::strerror(errno), st_.conns_failed);
    return;
  }
}

bool Driver::consume(uint32_t c, std::string_view bytes, uint64_t recv_ns) {
  Conn& k = conns_[c];
  const bool carried = !k.in.empty();
  if (carried) k.in.append(bytes);
  const std::string_view view = carried ? std::string_view(k.in) : bytes;
  size_t off = 0;
  for (;;) {
    const Reply r = parse_reply(view.substr(off), cfg_.max_value);
    if (r.kind == ReplyKind::kNeedMore) break;
    if (r.kind == ReplyKind::kMalformed) {
      ++st_.malformed;
      drop(c, "malformed reply (" + std::string(r.line) + ")", st_.conns_failed);
      return false;
    }
    if (k.inflight.empty()) {
      ++st_.malformed;
      drop(c, "a reply with no request outstanding", st_.conns_failed);
      return false;
    }
    const Pending p = k.inflight.front();
    k.inflight.pop_front();
    free_slots_.push_back(c);
    book(p, r, recv_ns);
    off += r.consumed;
  }
  if (carried) k.in.erase(0, off);
  else k.in.assign(view.substr(off));
  return true;
}

void Driver::book(const Pending& p, const Reply& r, uint64_t recv_ns) {
  uint8_t status = wire::kError;
  switch (r.kind) {
    case ReplyKind::kHit:
      if (r.key != loadgen::key_name(p.key_id, cfg_.key_size)) {
        ++st_.wrong_key;
      } else if (cfg_.check_value_size && r.value_len != cfg_.value_size) {
        ++st_.wrong_value_size;
      } else {
        ++st_.hits;
        status = wire::kOk;
      }
      break;
    case ReplyKind::kMiss:
      ++st_.misses;
      status = wire::kNotFound;
      break;
    default:  // kError (parse_reply's other kinds never get here)
      ++st_.error_replies;
      if (st_.first_error_reply.empty()) st_.first_error_reply = std::string(r.line.substr(0, kMaxErrorText));
      break;
  }
  ++st_.answered;
  series_.on_reply(p.sched_ns, recv_ns, status, 0);
}

DriverStats Driver::run(const std::atomic<bool>& stop_send, const std::atomic<bool>& stop_all,
                        const std::function<void(uint64_t)>& each_second) {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  if (ep_ < 0) {
    st_.fatal = std::string("epoll_create1: ") + std::strerror(errno);
    return st_;
  }
  for (uint32_t c = 0; c < conns_.size(); ++c) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, conns_[c].fd, &ev) != 0) {
      st_.fatal = std::string("epoll_ctl(ADD): ") + std::strerror(errno);
      return st_;
    }
    conns_[c].events = EPOLLIN;
  }
  // Every connection's first slot before any second one: with few requests in flight they
  // spread over all connections.
  for (uint32_t d = 0; d < cfg_.depth; ++d)
    for (uint32_t c = 0; c < conns_.size(); ++c) free_slots_.push_back(c);

  const uint64_t start = series_.start_ns();
  const uint64_t end = start + cfg_.duration_ns;
  bucket_.take(start, burst_);  // start empty: no burst at t = 0
  uint64_t tick = 0, next_tick = start + kNsPerSec;
  bool sending = true;
  uint64_t drain_start = 0, drain_deadline = 0;
  std::vector<epoll_event> evs(kMaxEvents);
  for (;;) {
    uint64_t now = mono_ns();
    for (; now >= next_tick; next_tick += kNsPerSec) each_second(tick++);
    if (sending && (stop_send.load(std::memory_order_relaxed) || now >= end)) {
      sending = false;
      st_.send_elapsed_ns = std::min(now, end) - start;
      drain_start = now;
      drain_deadline = now + cfg_.drain_ns;
    }
    if (sending) release(now, end);
    dispatch(now);
    flush();
    if (!sending && (stop_all.load(std::memory_order_relaxed) || now >= drain_deadline ||
                     (backlog_.empty() && in_flight() == 0)))
      break;
    const uint64_t wake = sending ? std::min({bucket_.next_ready_ns(now, cfg_.batch), end, next_tick})
                                  : std::min(drain_deadline, next_tick);
    const uint64_t wait = wake > now ? wake - now : 0;
    timespec ts{static_cast<time_t>(wait / kNsPerSec), static_cast<long>(wait % kNsPerSec)};
    const int n = epoll_pwait2(ep_, evs.data(), static_cast<int>(evs.size()), &ts, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;  // a signal: the loop re-checks the stop flags
      st_.fatal = std::string("epoll_pwait2: ") + std::strerror(errno);
      break;
    }
    ++st_.wakeups;
    const uint64_t recv_ns = mono_ns();  // one clock read per wakeup, as exo-loadgen per recvmmsg
    for (int i = 0; i < n; ++i) {
      const auto c = static_cast<uint32_t>(evs[i].data.u64);
      if (conns_[c].dead) continue;
      if (evs[i].events & EPOLLOUT) write_out(c);
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_in(c, recv_ns);
    }
  }
  if (sending) st_.send_elapsed_ns = std::min(mono_ns(), end) - start;  // only after a fatal error
  st_.drain_elapsed_ns = drain_start ? mono_ns() - drain_start : 0;
  st_.unwritten = backlog_.size();
  st_.timeouts = in_flight();
  for (const Conn& k : conns_) st_.connections_open_at_end += k.dead ? 0 : 1;
  return st_;
}

}  // namespace exo::mcload
