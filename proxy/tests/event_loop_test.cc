// exo-proxy end to end, without root: the real EventLoop, RequestEngine and MmsgIO, with the
// cluster's raw socket and UDP socket replaced by one end of a SOCK_DGRAM socketpair (frames out,
// reply payloads in) and a fake cluster thread on the other end. memcached clients connect over
// TCP (127.0.0.1, an ephemeral port) and a unix socket.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "event_loop.h"
#include "mmsg_io.h"
#include "net.h"
#include "tests/reply_builder.h"
#include "wire.h"

namespace exo::proxy {
namespace {

// Keys starting with "silent" are never answered; "lost" loses the first copy of each request;
// "busy" answers each request's first id BUSY. Everything else is a plain store.
class FakeCluster {
 public:
  explicit FakeCluster(int fd) : fd_(fd), thread_([this] { run(); }) {}
  ~FakeCluster() {
    stop_ = true;
    thread_.join();
  }
  size_t copies_of_key(const std::string& key) {
    std::lock_guard lock(mu_);
    return frames_[key].size();
  }
  std::vector<uint32_t> seqs_of_key(const std::string& key) {
    std::lock_guard lock(mu_);
    return frames_[key];
  }

 private:
  void run() {
    std::vector<uint8_t> buf(4096);
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n > 0) serve(std::span(buf.data(), static_cast<size_t>(n)));
    }
  }

  void serve(std::span<const uint8_t> frame) {
    wire::FrameView v;
    if (wire::parse(frame, v) != wire::ParseError::kNone) return;
    const std::string key(v.key.begin(), v.key.end());
    std::string value;
    uint8_t status = wire::kOk;
    {
      std::lock_guard lock(mu_);
      auto& seen = frames_[key];
      const bool first_copy = std::find(seen.begin(), seen.end(), v.seq) == seen.end();
      const bool first_id = seen.empty();
      seen.push_back(v.seq);
      if (key.starts_with("silent") || (key.starts_with("lost") && first_copy)) return;
      if (key.starts_with("busy") && first_id) {
        status = wire::kBusy;
      } else if (v.op() == wire::kPut) {
        store_[key].assign(v.value.begin(), v.value.end());
      } else if (v.op() == wire::kDelete) {
        store_.erase(key);
      } else if (auto it = store_.find(key); it != store_.end()) {
        value = it->second;
      } else {
        status = wire::kNotFound;
      }
    }
    const std::vector<uint8_t> p = client::testing::reply_payload(v, status, value);
    send(fd_, p.data(), p.size(), 0);
  }

  int fd_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, std::string> store_;
  std::map<std::string, std::vector<uint32_t>> frames_;  // seq of every copy received, per key
  std::thread thread_;
};

client::Endpoint endpoint() {
  client::Endpoint e;
  e.mac = {2, 0, 0, 0, 0, 9};
  e.ip = 0x0A000009;
  e.port = 40009;
  return e;
}

class Proxy {
 public:
  explicit Proxy(LoopConfig cfg = {}, client::EngineOptions eo = {64, 0.5, 2, 0.005}) {
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv_), 0);
    cluster_ = std::make_unique<FakeCluster>(sv_[1]);
    engine_ = std::make_unique<client::RequestEngine>(endpoint(), 77, eo);
    io_ = std::make_unique<client::MmsgIO>(sv_[0], sv_[0]);
    loop_ = std::make_unique<EventLoop>(cfg, *engine_, *io_, sv_[0]);
    std::string err;
    const int tcp = listen_tcp(HostPort{0x7F000001, 0}, &err, &port);
    EXPECT_GE(tcp, 0) << err;
    loop_->add_listener(tcp);
    dir_ = std::filesystem::temp_directory_path() / ("exo-proxy-test-" + std::to_string(getpid()));
    unix_path = (dir_ / "proxy.sock").string();
    const int ux = listen_unix(unix_path, &err);
    EXPECT_GE(ux, 0) << err;
    loop_->add_listener(ux);
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    loop_->add_stop_fd(stop_fd_);
    thread_ = std::thread([this] { rc_ = loop_->run(); });
  }
  ~Proxy() {
    if (thread_.joinable()) stop();
    close(stop_fd_);
    cluster_.reset();
    close(sv_[0]);
    close(sv_[1]);
    std::filesystem::remove_all(dir_);
  }
  // Stops the loop; its counters and the engine's stats may be read after this.
  void stop() {
    const uint64_t one = 1;
    EXPECT_EQ(write(stop_fd_, &one, sizeof one), 8);
    thread_.join();
    EXPECT_EQ(rc_, 0);
  }
  const Counters& counters() const { return loop_->counters(); }
  const client::Stats& engine_stats() const { return engine_->stats(); }
  FakeCluster& cluster() { return *cluster_; }

  uint16_t port = 0;
  std::string unix_path;

 private:
  int sv_[2] = {-1, -1};
  int stop_fd_ = -1;
  int rc_ = -1;
  std::filesystem::path dir_;
  std::unique_ptr<FakeCluster> cluster_;
  std::unique_ptr<client::RequestEngine> engine_;
  std::unique_ptr<client::MmsgIO> io_;
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

// A blocking memcached client connection with a 5 s receive timeout.
class Client {
 public:
  explicit Client(uint16_t tcp_port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(tcp_port);
    sin.sin_addr.s_addr = htonl(0x7F000001);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
    set_timeout();
  }
  explicit Client(const std::string& unix_path) : fd_(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::memcpy(sun.sun_path, unix_path.data(), unix_path.size());
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&sun), sizeof sun), 0);
    set_timeout();
  }
  ~Client() { close(fd_); }
  void send_all(const std::string& s) { ASSERT_EQ(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }
  // Reads until `n` bytes came (or EOF, or the timeout).
  std::string read_n(size_t n) {
    std::string out;
    char buf[4096];
    while (out.size() < n) {
      const ssize_t got = recv(fd_, buf, sizeof buf, 0);
      if (got <= 0) break;
      out.append(buf, static_cast<size_t>(got));
    }
    return out;
  }
  std::string ask(const std::string& req, const std::string& want) {
    send_all(req);
    return read_n(want.size());
  }
  bool closed_by_peer() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }
  void shutdown_write() { shutdown(fd_, SHUT_WR); }

 private:
  void set_timeout() {
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  int fd_;
};

TEST(ProxyEndToEnd, SetGetDeleteOverTcpAndUnix) {
  Proxy p;
  Client tcp(p.port);
  std::string want = "STORED\r\nVALUE a 0 5\r\nhello\r\nEND\r\n";
  EXPECT_EQ(tcp.ask("set a 0 0 5\r\nhello\r\nget a b\r\n", want), want);
  Client ux(p.unix_path);
  want = "VALUE a 0 5\r\nhello\r\nEND\r\nDELETED\r\nEN\r\n";
  EXPECT_EQ(ux.ask("get a\r\ndelete a\r\nmg a v\r\n", want), want);
  p.stop();
  EXPECT_EQ(p.counters().cmd_get, 4u);
  EXPECT_EQ(p.counters().curr_connections, 2u);
}

TEST(ProxyEndToEnd, ALostFrameIsResentAndAnUnansweredSetIsNeverStored) {
  Proxy p({}, {64, 0.05, 2, 0.005});
  Client c(p.port);
  const std::string want = "STORED\r\nSERVER_ERROR outcome unknown\r\nSERVER_ERROR cluster did not answer\r\nEND\r\n";
  EXPECT_EQ(c.ask("set lost1 0 0 1\r\nx\r\nset silent1 0 0 1\r\ny\r\nget silent1\r\nget nothing\r\n", want), want);
  const auto lost = p.cluster().seqs_of_key("lost1");
  ASSERT_GE(lost.size(), 2u);  // more only if a machine this slow outran the 50 ms timeout
  EXPECT_EQ(lost[0], lost[1]) << "the resend keeps its seq";
  EXPECT_EQ(p.cluster().copies_of_key("silent1"), 6u) << "set and get: 1 + 2 retries each";
  p.stop();
  EXPECT_EQ(p.counters().outcome_unknown, 1u);
  EXPECT_EQ(p.counters().cluster_timeouts, 2u);
}

TEST(ProxyEndToEnd, BusyIsRetriedUnderANewSeq) {
  Proxy p;
  Client c(p.port);
  EXPECT_EQ(c.ask("set busy1 0 0 1\r\nx\r\n", "STORED\r\n"), "STORED\r\n");
  const auto seqs = p.cluster().seqs_of_key("busy1");
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_NE(seqs[0], seqs[1]);
  p.stop();
  EXPECT_EQ(p.engine_stats().busy_retries, 1u);
}

TEST(ProxyEndToEnd, ConnectionsOverMaxConnsAreClosedAtOnce) {
  LoopConfig cfg;
  cfg.max_conns = 1;
  Proxy p(cfg);
  Client first(p.unix_path);
  EXPECT_EQ(first.ask("mn\r\n", "MN\r\n"), "MN\r\n");
  Client second(p.port);
  EXPECT_TRUE(second.closed_by_peer());
  EXPECT_EQ(first.ask("mn\r\n", "MN\r\n"), "MN\r\n") << "the first is unaffected";
  p.stop();
  EXPECT_EQ(p.counters().rejected_connections, 1u);
}

TEST(ProxyEndToEnd, ManyPipelinedClientsAllGetTheirOwnRepliesInOrder) {
  Proxy p;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(std::make_unique<Client>(p.port));
  std::vector<std::string> wants(4);
  for (int i = 0; i < 4; ++i) {
    std::string req;
    for (int k = 0; k < 50; ++k) {
      const std::string key = "c" + std::to_string(i) + "k" + std::to_string(k);
      req += "set " + key + " 0 0 " + std::to_string(key.size()) + "\r\n" + key + "\r\nget " + key + "\r\n";
      wants[i] += "STORED\r\nVALUE " + key + " 0 " + std::to_string(key.size()) + "\r\n" + key + "\r\nEND\r\n";
    }
    clients[i]->send_all(req);
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(clients[i]->read_n(wants[i].size()), wants[i]) << "client " << i;
  p.stop();
  EXPECT_EQ(p.engine_stats().sent, 400u);
  EXPECT_EQ(p.engine_stats().stray_replies, 0u);
}

TEST(ProxyEndToEnd, AHalfClosedClientStillGetsItsReplies) {
  Proxy p;
  Client c(p.port);
  c.send_all("set h 0 0 1\r\nz\r\nget h\r\n");
  c.shutdown_write();
  const std::string want = "STORED\r\nVALUE h 0 1\r\nz\r\nEND\r\n";
  EXPECT_EQ(c.read_n(want.size()), want);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST(ProxyEndToEnd, StatsShowConnectionsAndClusterCounters) {
  Proxy p;
  Client c(p.port);
  c.send_all("get x\r\nstats\r\n");  // stats waits its turn: it sees the get's outcome
  std::string out;
  while (out.find("STAT ") == std::string::npos || !out.ends_with("END\r\n")) {
    const std::string more = c.read_n(1);  // whatever one recv brings
    if (more.empty()) break;
    out += more;
  }
  EXPECT_NE(out.find("STAT curr_connections 1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("STAT cmd_get 1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("STAT get_misses 1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("STAT cluster_sent 1\r\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace exo::proxy
