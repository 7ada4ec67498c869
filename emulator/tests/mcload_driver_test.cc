// exo-mcload end to end without a network: the driver (mcload/driver.h) over unix socketpairs,
// against a fake memcached thread whose answers each test chooses: hits, misses, error lines,
// wrong keys and sizes, silence, garbage and closes, delayed or byte by byte. Checks the
// accounting (sent = answered + timeouts + unwritten + lost on dropped connections, always),
// the per-connection pipelining bound, the JSON totals the bench reads, and connect_all over
// real TCP and unix listeners.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loadgen/clock.h"
#include "loadgen/hot_set_swap.h"
#include "mcload/connect.h"
#include "mcload/driver.h"
#include "mcload/report.h"

namespace exo::mcload {
namespace {

using loadgen::mono_ns;

struct Answer {
  std::string bytes;    // written back (after the server's delay)
  bool silent = false;  // never answered
  bool close = false;   // the server closes the connection instead
};
using Policy = std::function<Answer(const std::string& key, size_t conn, uint64_t nth_on_conn)>;

std::string hit(const std::string& key, size_t len = 8) {
  return "VALUE " + key + " 0 " + std::to_string(len) + "\r\n" + std::string(len, 'v') + "\r\nEND\r\n";
}

uint64_t id_of(const std::string& key) { return std::stoull(key.substr(4)); }

// n socketpairs; the server ends are served by one thread until the object goes.
class FakeServer {
 public:
  FakeServer(size_t n, Policy policy, uint64_t delay_ns = 0, bool byte_by_byte = false)
      : policy_(std::move(policy)), delay_ns_(delay_ns), byte_by_byte_(byte_by_byte), conns_(n) {
    for (size_t i = 0; i < n; ++i) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) ADD_FAILURE() << "socketpair: " << std::strerror(errno);
      if (fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0) ADD_FAILURE() << "fcntl: " << std::strerror(errno);
      client_fds_.push_back(sv[0]);
      conns_[i].fd = sv[1];
    }
    if (pipe2(stop_, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe2";
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    if (write(stop_[1], "x", 1) != 1) ADD_FAILURE() << "stop pipe";
    thread_.join();
    for (Conn& c : conns_)
      if (c.fd >= 0) close(c.fd);
    close(stop_[0]);
    close(stop_[1]);
  }
  // The generator's ends, non-blocking; the driver takes them over.
  std::vector<int> take_client_fds() { return std::move(client_fds_); }

  // Read after the driver has finished (the thread only appends while requests arrive).
  uint64_t requests() const { return requests_.load(); }
  uint64_t max_pending() const { return max_pending_.load(); }
  uint64_t bad_requests() const { return bad_requests_.load(); }
  uint64_t silent() const { return silent_.load(); }

 private:
  struct Reply {
    uint64_t due_ns;
    std::string bytes;
  };
  struct Conn {
    int fd = -1;
    std::string in;
    std::deque<Reply> out;
    uint64_t nth = 0;
    uint64_t pending = 0;  // received, not answered (silent ones stay pending)
  };

  void serve() {
    std::vector<pollfd> pfd;
    for (;;) {
      pfd.clear();
      pfd.push_back({stop_[0], POLLIN, 0});
      for (Conn& c : conns_) pfd.push_back({c.fd, static_cast<short>(c.fd >= 0 ? POLLIN : 0), 0});
      if (poll(pfd.data(), pfd.size(), 1) < 0 && errno != EINTR) return;
      if (pfd[0].revents) return;
      for (size_t i = 0; i < conns_.size(); ++i)
        if (pfd[i + 1].revents & (POLLIN | POLLHUP)) on_readable(i);
      flush_due();
    }
  }

  void on_readable(size_t i) {
    Conn& c = conns_[i];
    char buf[4096];
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n <= 0) {
      close(c.fd);
      c.fd = -1;
      return;
    }
    c.in.append(buf, static_cast<size_t>(n));
    for (size_t eol; c.fd >= 0 && (eol = c.in.find("\r\n")) != std::string::npos;) {
      const std::string line = c.in.substr(0, eol);
      c.in.erase(0, eol + 2);
      ++requests_;
      if (line.rfind("get key:", 0) != 0 || line.size() != 4 + 16) ++bad_requests_;
      const std::string key = line.substr(4);
      const Answer a = policy_(key, i, c.nth++);
      if (a.close) {
        close(c.fd);
        c.fd = -1;
        return;
      }
      max_pending_.store(std::max(max_pending_.load(), ++c.pending));
      if (a.silent) {
        ++silent_;
        continue;
      }
      c.out.push_back(Reply{mono_ns() + delay_ns_, a.bytes});
    }
  }

  void flush_due() {
    const uint64_t now = mono_ns();
    for (Conn& c : conns_) {
      while (c.fd >= 0 && !c.out.empty() && c.out.front().due_ns <= now) {
        const std::string& b = c.out.front().bytes;
        for (size_t off = 0; off < b.size();) {
          const size_t len = byte_by_byte_ ? 1 : b.size() - off;
          const ssize_t w = write(c.fd, b.data() + off, len);
          if (w <= 0) return;  // the generator closed it
          off += static_cast<size_t>(w);
        }
        c.out.pop_front();
        --c.pending;
      }
    }
  }

  Policy policy_;
  uint64_t delay_ns_;
  bool byte_by_byte_;
  std::vector<Conn> conns_;
  std::vector<int> client_fds_;
  int stop_[2] = {-1, -1};
  std::atomic<uint64_t> requests_{0}, max_pending_{0}, bad_requests_{0}, silent_{0};
  std::thread thread_;
};

struct Outcome {
  DriverStats st;
  std::unique_ptr<loadgen::Series> series;
};

DriverConfig config(double rate = 4000, double seconds = 0.25, uint64_t drain_ms = 1000) {
  DriverConfig c;
  c.rate = rate;
  c.duration_ns = static_cast<uint64_t>(seconds * 1e9);
  c.drain_ns = drain_ms * 1'000'000;
  c.batch = 2;
  c.keys = 1000;
  c.alpha = 0;
  c.seed = 5;
  return c;
}

Outcome run(const DriverConfig& cfg, FakeServer& server) {
  Outcome o;
  o.series = std::make_unique<loadgen::Series>(mono_ns(), 64);
  Driver d(cfg, server.take_client_fds(), *o.series);
  std::atomic<bool> stop_send{false}, stop_all{false};
  o.st = d.run(stop_send, stop_all, [](uint64_t) {});
  EXPECT_EQ(o.st.fatal, "");
  // The one identity every run keeps: each released request is answered or lost one way.
  EXPECT_EQ(o.st.sent, o.st.answered + o.st.expired + o.st.timeouts + o.st.unwritten + o.st.lost_on_dropped);
  EXPECT_EQ(o.st.answered, o.st.hits + o.st.misses + o.st.error_replies + o.st.wrong_key + o.st.wrong_value_size);
  return o;
}

TEST(McDriver, AllHitsAreAnsweredAndTimed) {
  FakeServer server(8, [](const std::string& k, size_t, uint64_t) { return Answer{hit(k)}; });
  DriverConfig cfg = config();
  cfg.check_value_size = true;
  cfg.value_size = 8;
  const Outcome o = run(cfg, server);
  EXPECT_GE(o.st.sent, 950u);  // 4,000/s x 0.25 s
  EXPECT_LE(o.st.sent, 1000u);
  EXPECT_EQ(o.st.hits, o.st.sent);
  EXPECT_EQ(o.st.timeouts + o.st.unwritten + o.st.lost_on_dropped, 0u);
  EXPECT_EQ(server.requests(), o.st.sent);
  EXPECT_EQ(server.bad_requests(), 0u) << "every request is `get key:<12 digits>`";
  EXPECT_EQ(server.max_pending(), 1u) << "depth 1: one request in flight per connection";
  EXPECT_EQ(o.series->overall().count(), o.st.answered);
  EXPECT_EQ(o.st.connections_open_at_end, 8u);
  EXPECT_LT(o.st.drain_elapsed_ns, 500'000'000u) << "the drain ends once everything is answered";
}

TEST(McDriver, MissesErrorsAndWrongRepliesAreCountedApart) {
  FakeServer server(4, [](const std::string& k, size_t, uint64_t) {
    switch (id_of(k) % 5) {
      case 0: return Answer{hit(k)};
      case 1: return Answer{"END\r\n"};
      case 2: return Answer{"SERVER_ERROR cluster did not answer\r\n"};
      case 3: return Answer{hit(loadgen::key_name(id_of(k) + 1))};  // another key's value
      default: return Answer{hit(k, 9)};                            // the wrong size
    }
  });
  DriverConfig cfg = config();
  cfg.check_value_size = true;
  cfg.value_size = 8;
  const Outcome o = run(cfg, server);
  EXPECT_EQ(o.st.answered, o.st.sent);
  for (uint64_t n : {o.st.hits, o.st.misses, o.st.error_replies, o.st.wrong_key, o.st.wrong_value_size})
    EXPECT_GT(n, 100u);
  EXPECT_EQ(o.st.first_error_reply, "SERVER_ERROR cluster did not answer");
  uint64_t errors = 0, not_found = 0;
  for (const auto& r : o.series->rows()) {
    errors += r.errors;
    not_found += r.not_found;
  }
  EXPECT_EQ(errors, o.st.error_replies + o.st.wrong_key + o.st.wrong_value_size);
  EXPECT_EQ(not_found, o.st.misses);
}

TEST(McDriver, UnansweredRequestsBlockTheirConnectionAndAreLostAfterTheDrain) {
  FakeServer server(4, [](const std::string& k, size_t, uint64_t) {
    return id_of(k) % 10 == 0 ? Answer{"", true} : Answer{hit(k)};
  });
  const uint64_t t0 = mono_ns();
  const Outcome o = run(config(4000, 0.25, 200), server);
  // Each connection ends up stuck behind one silent request (depth 1); later requests wait in
  // the backlog and are lost unwritten.
  EXPECT_EQ(o.st.timeouts, 4u);
  EXPECT_EQ(server.silent(), 4u);
  EXPECT_GT(o.st.unwritten, 0u);
  EXPECT_GT(o.st.backlog_max, 0u);
  EXPECT_GE(o.st.drain_elapsed_ns, 190'000'000u);
  EXPECT_LT(mono_ns() - t0, 2'000'000'000u);
}

TEST(McDriver, AMalformedReplyDropsOnlyItsConnection) {
  FakeServer server(4, [](const std::string& k, size_t conn, uint64_t nth) {
    return conn == 0 && nth == 2 ? Answer{"GARBAGE\r\n"} : Answer{hit(k)};
  });
  const Outcome o = run(config(), server);
  EXPECT_EQ(o.st.malformed, 1u);
  EXPECT_EQ(o.st.conns_failed, 1u);
  EXPECT_EQ(o.st.connections_open_at_end, 3u);
  EXPECT_EQ(o.st.lost_on_dropped, 1u);
  EXPECT_EQ(o.st.hits, o.st.sent - 1);
  EXPECT_NE(o.st.first_error.find("malformed"), std::string::npos) << o.st.first_error;
}

TEST(McDriver, AServerCloseIsCountedAndTheOthersCarryOn) {
  FakeServer server(3, [](const std::string& k, size_t conn, uint64_t) {
    return conn == 1 ? Answer{"", false, true} : Answer{hit(k)};
  });
  const Outcome o = run(config(), server);
  EXPECT_EQ(o.st.conns_closed_by_peer, 1u);
  EXPECT_EQ(o.st.connections_open_at_end, 2u);
  EXPECT_EQ(o.st.lost_on_dropped, 1u);
  EXPECT_EQ(o.st.hits, o.st.sent - 1);
}

TEST(McDriver, DepthBoundsTheRequestsInFlightOnAConnection) {
  for (uint32_t depth : {1u, 4u}) {
    FakeServer server(2, [](const std::string& k, size_t, uint64_t) { return Answer{hit(k)}; }, 3'000'000);
    DriverConfig cfg = config(4000, 0.1, 3000);  // more than 2 x depth / 3 ms can carry
    cfg.depth = depth;
    const Outcome o = run(cfg, server);
    EXPECT_EQ(server.max_pending(), depth) << "depth " << depth;
    EXPECT_EQ(o.st.answered, o.st.sent) << "depth " << depth;
  }
}

TEST(McDriver, ABoundedWaitTurnsOverloadIntoLossAndServesTheRest) {
  // 4 connections at depth 1 against a server that takes 20 ms: 200 GETs/s at most. Offered
  // 1,000/s with a 30 ms bound on the wait for a connection: most requests are dropped unsent,
  // and those written are all answered and timed (however slow).
  {
    FakeServer server(4, [](const std::string& k, size_t, uint64_t) { return Answer{hit(k)}; }, 20'000'000);
    DriverConfig cfg = config(1000, 0.2, 500);
    cfg.max_wait_ns = 30'000'000;
    const Outcome o = run(cfg, server);
    EXPECT_GT(o.st.expired, o.st.sent / 2);
    EXPECT_EQ(o.st.answered, o.st.written);
    EXPECT_GE(o.st.answered, 20u);
    EXPECT_EQ(o.series->overall().count(), o.st.answered);
    EXPECT_LE(o.series->overall().max(), 100'000'000u) << "no request waited much beyond 30 ms + 20 ms";
  }
  // The same server without the bound: nothing expires, and the queue grows instead.
  {
    FakeServer server(4, [](const std::string& k, size_t, uint64_t) { return Answer{hit(k)}; }, 20'000'000);
    const Outcome o = run(config(1000, 0.1, 300), server);
    EXPECT_EQ(o.st.expired, 0u);
    EXPECT_GT(o.st.unwritten, 0u);
    EXPECT_GT(o.st.backlog_max, 50u);
  }
}

TEST(McDriver, RepliesSplitIntoSingleBytesAreReassembled) {
  FakeServer server(4, [](const std::string& k, size_t, uint64_t) { return Answer{hit(k, 100)}; }, 0, true);
  const Outcome o = run(config(1000, 0.2), server);
  EXPECT_GT(o.st.sent, 150u);
  EXPECT_EQ(o.st.hits, o.st.sent);
  EXPECT_EQ(o.st.malformed, 0u);
}

TEST(McDriver, TheReportHasTheTotalsTheBenchReads) {
  FakeServer server(2, [](const std::string& k, size_t, uint64_t) {
    return id_of(k) % 2 ? Answer{hit(k)} : Answer{"END\r\n"};
  });
  const Outcome o = run(config(), server);
  const auto doc = make_report({{"rate", 4000}}, *o.series, o.st, ProcessCpu{0.1, 0.2}, false);
  const auto& t = doc["totals"];
  for (const char* k : {"sent", "answered", "lost", "loss", "not_found", "errors", "offered_rps", "answered_rps",
                        "p50_us", "p99_us", "p999_us", "hits", "misses", "timeouts", "expired", "unwritten",
                        "connections",
                        "cpu_user_s", "syscalls_per_request"})
    EXPECT_TRUE(t.contains(k)) << k;
  for (const char* k : {"rx_frames", "rx_malformed", "from_cache", "tx_batches"}) EXPECT_FALSE(t.contains(k)) << k;
  EXPECT_EQ(t["sent"], o.st.sent);
  EXPECT_EQ(t["not_found"], o.st.misses);
  EXPECT_EQ(t["hits"].get<uint64_t>() + t["misses"].get<uint64_t>(), t["answered"].get<uint64_t>());
  EXPECT_GT(t["offered_rps"].get<double>(), 3000);
  EXPECT_FALSE(t["p99_us"].is_null());
}

// ---- connect_all over real listeners

int listen_tcp_any(uint16_t* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

TEST(McConnect, OpensEveryConnectionOverTcpAndUnix) {
  uint16_t port = 0;
  const int l = listen_tcp_any(&port);
  ASSERT_GE(l, 0) << std::strerror(errno);
  Target t;
  t.ip = INADDR_LOOPBACK;
  t.port = port;
  std::vector<int> fds;
  std::string err;
  ASSERT_TRUE(connect_all(t, 5, 2000, &fds, &err)) << err;
  EXPECT_EQ(fds.size(), 5u);
  for (int fd : fds) {
    EXPECT_TRUE(fcntl(fd, F_GETFL) & O_NONBLOCK);
    close(fd);
  }
  close(l);
  // The port is closed now: refused, and the error names the connection and the target.
  ASSERT_FALSE(connect_all(t, 3, 2000, &fds, &err));
  EXPECT_NE(err.find("connection 1 of 3 to 127.0.0.1:" + std::to_string(port)), std::string::npos) << err;
  EXPECT_TRUE(fds.empty());

  const std::string path = ::testing::TempDir() + "mcload-connect-" + std::to_string(getpid()) + ".sock";
  unlink(path.c_str());
  const int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof sun.sun_path);
  std::memcpy(sun.sun_path, path.data(), path.size());
  ASSERT_EQ(bind(u, reinterpret_cast<sockaddr*>(&sun), sizeof sun), 0) << std::strerror(errno);
  ASSERT_EQ(listen(u, 64), 0);
  Target ut;
  ut.is_unix = true;
  ut.path = path;
  ASSERT_TRUE(connect_all(ut, 4, 2000, &fds, &err)) << err;
  for (int fd : fds) close(fd);
  close(u);
  unlink(path.c_str());
  ASSERT_FALSE(connect_all(ut, 2, 2000, &fds, &err));
  EXPECT_NE(err.find("unix:" + path), std::string::npos) << err;
}

}  // namespace
}  // namespace exo::mcload
