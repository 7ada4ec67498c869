// The end-to-end rig of the exo-loadgen tests: the generator's TX loop (Sender) and RX loop
// (run_receiver) on one end of a SOCK_DGRAM socketpair, and a fake server on the other end, a
// thread that hands every datagram it receives to the test's `serve` (which may send() replies
// on the fd it gets). The tests differ only in the server they fake and what they check.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "loadgen/clock.h"
#include "loadgen/frame_io.h"
#include "loadgen/receiver.h"
#include "loadgen/reply_handler.h"
#include "loadgen/sender.h"

namespace exo::loadgen::testing {

// serve(buf, n, fd): one datagram of n bytes in buf (n > 0), the far end's fd to reply on.
using Serve = std::function<void(std::vector<uint8_t>& buf, size_t n, int fd)>;

struct RigResult {
  TxStats tx;
  std::string rx_error;  // the receiver's error, if it stopped on one
};

// Runs `cfg` through a Sender over the socketpair, then drains for `drain_ns` (generous:
// sanitizers and a busy CI machine) before stopping the receiver and the fake server. Every
// counter the fake server keeps can be read once this returns (its thread has been joined).
inline RigResult run_over_socketpair(const SenderConfig& cfg, const RequestWriter& builder,
                                     SendRing& ring, Series& series, ReplyHandler& handler,
                                     const Serve& serve, uint64_t drain_ns = 1'000'000'000) {
  RigResult out;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << errno;
    return out;
  }
  SocketIo tx(sv[0]);
  SocketIo rx(dup(sv[0]));
  EXPECT_GE(rx.fd(), 0);
  std::atomic<bool> server_stop{false}, rx_stop{false}, stop{false};
  std::thread server([&] {
    std::vector<uint8_t> buf(4096);
    while (!server_stop) {
      pollfd p{sv[1], POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      const ssize_t n = recv(sv[1], buf.data(), buf.size(), 0);
      if (n > 0) serve(buf, static_cast<size_t>(n), sv[1]);
    }
  });
  std::thread rx_thread([&] { run_receiver(rx, handler, ReceiverOptions{}, rx_stop, &out.rx_error); });
  Sender sender(cfg, builder, tx, ring, series);
  out.tx = sender.run(stop, [](uint64_t) {});
  sleep_until_ns(mono_ns() + drain_ns);
  rx_stop = true;
  rx_thread.join();
  server_stop = true;
  server.join();
  close(sv[1]);
  return out;
}

}  // namespace exo::loadgen::testing
