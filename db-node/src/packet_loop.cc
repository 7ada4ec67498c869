#include "packet_loop.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "log.h"

namespace exo::db {
namespace {

// Larger than any frame at mtu 9000; frames that are still larger are reported by MSG_TRUNC
// and dropped as malformed rather than parsed truncated.
constexpr size_t kBufSize = 16384;
// Frames taken per recvmmsg and replies sent per sendmmsg. Under load a burst amortises the
// two system calls over up to this many requests; when idle, MSG_WAITFORONE returns as soon as
// one frame is there, so a lone request waits for nobody.
constexpr unsigned kBurst = 32;

// One burst's buffers, allocated once per thread.
struct Burst {
  std::vector<uint8_t> rx = std::vector<uint8_t>(kBurst * kBufSize);
  std::vector<uint8_t> tx = std::vector<uint8_t>(kBurst * kBufSize);
  std::array<iovec, kBurst> rx_iov{}, tx_iov{};
  std::array<mmsghdr, kBurst> rx_msg{}, tx_msg{};
  std::array<BurstItem, kBurst> items{};  // frame i's reply is built in tx_frame(i)

  Burst() {
    for (unsigned i = 0; i < kBurst; ++i) {
      rx_iov[i] = {rx.data() + i * kBufSize, kBufSize};
      rx_msg[i].msg_hdr.msg_iov = &rx_iov[i];
      rx_msg[i].msg_hdr.msg_iovlen = 1;
      tx_msg[i].msg_hdr.msg_iov = &tx_iov[i];
      tx_msg[i].msg_hdr.msg_iovlen = 1;
    }
  }
  uint8_t* rx_frame(unsigned i) { return rx.data() + i * kBufSize; }
  uint8_t* tx_frame(unsigned i) { return tx.data() + i * kBufSize; }
};

// Sends replies [0, n) of the burst; counts what went out and what the socket refused.
void send_burst(int fd, Burst& b, unsigned n, Counters& c) {
  unsigned done = 0;
  while (done < n) {
    // The socket is bound to the interface, so no address is needed: each frame already
    // carries the client's MAC as destination.
    const int sent = sendmmsg(fd, b.tx_msg.data() + done, n - done, 0);
    if (sent < 0) {
      if (errno == EINTR) continue;
      // The first unsent frame is dropped (counted) and the rest tried again, so one refused
      // frame (e.g. ENOBUFS) does not take the whole burst with it.
      bump(c.tx_errors);
      LOG_DEBUG("sendmmsg: %s", std::strerror(errno));
      ++done;
      continue;
    }
    for (int i = 0; i < sent; ++i) {
      const mmsghdr& m = b.tx_msg[done + i];
      if (m.msg_len == m.msg_hdr.msg_iov->iov_len)
        bump(c.requests_served);
      else
        bump(c.tx_errors);  // short write
    }
    done += static_cast<unsigned>(sent);
  }
}

}  // namespace

void run_packet_loop(int fd, RequestHandler& handler, Counters& c, const std::atomic<bool>& quit) {
  Burst b;
  while (!quit.load(std::memory_order_relaxed)) {
    for (unsigned i = 0; i < kBurst; ++i) b.rx_msg[i].msg_hdr.msg_flags = 0;
    // MSG_TRUNC: each message's length is the real frame length even if it did not fit.
    // MSG_WAITFORONE: block (up to SO_RCVTIMEO) for the first frame only.
    const int got = recvmmsg(fd, b.rx_msg.data(), kBurst, MSG_TRUNC | MSG_WAITFORONE, nullptr);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;  // timeout: poll quit
      // E.g. ENETDOWN while the link flaps: keep going, but do not spin.
      LOG_WARN("recvmmsg: %s", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    // Batch, then execute: the handler answers the burst's writes in order and its GETs with
    // one MultiGet (RequestHandler::handle_burst).
    unsigned n_items = 0;
    for (int i = 0; i < got; ++i) {
      const size_t n = b.rx_msg[i].msg_len;
      if (n > kBufSize) {
        bump(c.rx_frames);
        bump(c.malformed_dropped);
        continue;
      }
      b.items[n_items++] = BurstItem{std::span<const uint8_t>(b.rx_frame(i), n),
                                     std::span<uint8_t>(b.tx_frame(i), kBufSize)};
    }
    handler.handle_burst(std::span<BurstItem>(b.items.data(), n_items));
    unsigned replies = 0;
    for (unsigned i = 0; i < n_items; ++i) {
      if (b.items[i].len == 0) continue;
      b.tx_iov[replies] = {b.items[i].out.data(), b.items[i].len};
      ++replies;
    }
    if (replies) send_burst(fd, b, replies, c);
  }
}

}  // namespace exo::db
