#include "event_loop.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>

#include "log.h"
#include "mmsg_io.h"

namespace exo::proxy {
namespace {

// epoll keys: connections are (kConnBit | id); everything else is a small constant or fd.
constexpr uint64_t kConnBit = uint64_t{1} << 40;
constexpr uint64_t kRxKey = 1;
constexpr uint64_t kStopBit = uint64_t{1} << 41;
constexpr uint64_t kListenBit = uint64_t{1} << 42;
constexpr size_t kReadChunk = 64 << 10;
constexpr int kReadsPerWakeup = 4;  // then the next connection's turn (level-triggered: we return)

}  // namespace

EventLoop::EventLoop(const LoopConfig& cfg, client::RequestEngine& engine, client::FrameIO& io, int rx_fd)
    : cfg_(cfg), engine_(engine), io_(io), buf_(kReadChunk), started_(std::chrono::steady_clock::now()) {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  watch(rx_fd, kRxKey, EPOLLIN);
}

EventLoop::~EventLoop() {
  for (auto& [id, c] : conns_) close(c->fd);
  for (int fd : listeners_) close(fd);
  if (spare_fd_ >= 0) close(spare_fd_);
  if (ep_ >= 0) close(ep_);
}

void EventLoop::watch(int fd, uint64_t key, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key;
  if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) LOG_ERROR("epoll_ctl(ADD, fd %d): %s", fd, std::strerror(errno));
}

void EventLoop::add_listener(int fd) {
  listeners_.push_back(fd);
  watch(fd, kListenBit | static_cast<uint32_t>(fd), EPOLLIN);
}

void EventLoop::add_stop_fd(int fd) { watch(fd, kStopBit, EPOLLIN); }

int EventLoop::run() {
  std::vector<epoll_event> evs(64);
  while (!stop_) {
    const int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), timeout_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      LOG_ERROR("epoll_wait: %s", std::strerror(errno));
      return 1;
    }
    for (int i = 0; i < n; ++i) on_event(evs[i]);
    pump();
  }
  return 0;
}

void EventLoop::on_event(const epoll_event& ev) {
  const uint64_t key = ev.data.u64;
  if (key & kConnBit) {
    const auto id = static_cast<uint32_t>(key);
    auto it = conns_.find(id);
    if (it == conns_.end()) return;  // closed earlier in this batch
    if (ev.events & (EPOLLHUP | EPOLLERR)) {
      close_conn(id);  // reset, or both directions shut: nobody reads the replies
      return;
    }
    if (ev.events & EPOLLIN) read_conn(*it->second);
    touched_.push_back(id);  // EPOLLOUT, or after reading: service() writes (or closes)
  } else if (key == kRxKey) {
    read_replies();
  } else if (key & kStopBit) {
    stop_ = true;
  } else if (key & kListenBit) {
    accept_all(static_cast<int>(key & 0xFFFFFFFF));
  }
}

void EventLoop::accept_all(int listener) {
  while (true) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
        // Out of descriptors: the pending connection would keep the listener readable and spin
        // the loop. Free the spare, accept and close it (the client sees the refusal), re-take.
        LOG_WARN("out of file descriptors: refusing a connection");
        close(spare_fd_);
        const int victim = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (victim >= 0) close(victim);
        spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ++counters_.rejected_connections;
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) LOG_WARN("accept: %s", std::strerror(errno));
      return;
    }
    if (conns_.size() >= cfg_.max_conns) {
      close(fd);  // over --max-conns: refused by closing at once
      ++counters_.rejected_connections;
      continue;
    }
    const int one = 1;  // replies are small and latency-bound (fails harmlessly on unix sockets)
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    do ++next_id_;
    while (next_id_ == 0 || conns_.contains(next_id_));
    const uint32_t id = next_id_;
    conns_.emplace(id, std::make_unique<Conn>(Conn{fd, Session(id, cfg_.session, *this, counters_), EPOLLIN}));
    watch(fd, kConnBit | id, EPOLLIN);
    ++counters_.curr_connections;
    ++counters_.total_connections;
  }
}

void EventLoop::read_conn(Conn& c) {
  for (int i = 0; i < kReadsPerWakeup && c.session.wants_input(); ++i) {
    const ssize_t n = read(c.fd, buf_.data(), buf_.size());
    if (n > 0) {
      c.session.on_input(std::string_view(buf_.data(), static_cast<size_t>(n)));
      if (static_cast<size_t>(n) < buf_.size()) return;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n == 0) {
      // The client shut its sending side (`printf 'get k\r\n' | nc -N`): answer what it sent,
      // then close (service() does, once the session has finished).
      c.session.on_eof();
      return;
    }
    close_conn(c.session.id());  // a reset: nobody will read the replies
    return;
  }
}

void EventLoop::read_replies() {
  const auto now = client::RequestEngine::Clock::now();
  // A full batch may mean more are queued: take a few before serving the connections again.
  for (int i = 0; i < 4; ++i) {
    try {
      io_.recv(replies_, 0);
    } catch (const std::exception& e) {
      if (io_errors_++ % 1000 == 0) LOG_WARN("reading cluster replies: %s", e.what());
      return;
    }
    for (const auto& p : replies_) engine_.on_reply(p, now, done_);
    deliver();
    if (replies_.size() < client::MmsgIO::kRecvBatch) return;
  }
}

void EventLoop::deliver() {
  for (client::Completion& c : done_) {
    auto it = conns_.find(Session::session_of(c.tag));
    if (it == conns_.end()) continue;  // its connection closed while the op was in flight
    it->second->session.complete(std::move(c));
    touched_.push_back(it->first);
  }
  done_.clear();
}

void EventLoop::submit(uint8_t op, std::string_view key, std::string_view value, uint64_t tag) {
  engine_.submit(op, key, value, tag);
}

void EventLoop::pump() {
  const auto now = client::RequestEngine::Clock::now();
  engine_.expire(now, done_);
  deliver();  // may let sessions parse held-back input: those ops go out in this batch too
  const auto& frames = engine_.frames_to_send(now);
  if (!frames.empty()) {
    try {
      io_.send(frames);
    } catch (const std::exception& e) {
      // Lost like frames on a congested link: every request is resent at its deadline.
      if (io_errors_++ % 1000 == 0) LOG_WARN("sending to the cluster: %s", e.what());
    }
  }
  for (size_t i = 0; i < touched_.size(); ++i) service(touched_[i]);
  touched_.clear();
}

void EventLoop::service(uint32_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  while (!c.session.output().empty()) {
    const std::string_view out = c.session.output();
    const ssize_t n = send(c.fd, out.data(), out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.session.consume_output(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close_conn(id);  // EPIPE, ECONNRESET: gone
    return;
  }
  if (c.session.finished()) {
    if (c.session.overflowed()) {
      ++counters_.slow_reader_closes;
      LOG_INFO("closing connection %u: %zu reply bytes unread (--max-output)", id, c.session.output().size());
    }
    close_conn(id);
    return;
  }
  const uint32_t want = (c.session.wants_input() ? EPOLLIN : 0u) | (c.session.output().empty() ? 0u : EPOLLOUT);
  if (want != c.events) {
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = kConnBit | id;
    if (epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.events = want;
  }
}

void EventLoop::close_conn(uint32_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  epoll_ctl(ep_, EPOLL_CTL_DEL, it->second->fd, nullptr);
  close(it->second->fd);
  conns_.erase(it);
  --counters_.curr_connections;
}

int EventLoop::timeout_ms() const {
  const auto d = engine_.next_deadline();
  if (!d) return -1;
  const auto left = *d - client::RequestEngine::Clock::now();
  if (left <= decltype(left)::zero()) return 0;
  // Rounded up: waking a little early would only spin until the deadline.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

void EventLoop::append_stats(std::string& out) {
  const auto stat = [&out](std::string_view name, uint64_t v) { reply::stat(out, name, std::to_string(v)); };
  const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_);
  stat("pid", static_cast<uint64_t>(getpid()));
  stat("uptime", static_cast<uint64_t>(uptime.count()));
  reply::stat(out, "version", "exo-proxy " + std::string(kProxyVersion));
  for (const auto& [name, value] : counter_values(counters_)) stat(name, value);
  const client::Stats& e = engine_.stats();
  stat("cluster_client_id", engine_.client_id());
  stat("cluster_sent", e.sent);
  stat("cluster_resent", e.resent);
  stat("cluster_replies", e.replies);
  stat("cluster_stray_replies", e.stray_replies);
  stat("cluster_busy_retries", e.busy_retries);
  stat("cluster_in_flight", engine_.in_flight());
  stat("cluster_queued", engine_.queued());
  stat("cluster_io_errors", io_errors_);
}

}  // namespace exo::proxy
