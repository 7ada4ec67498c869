#include "packet_loop.h"

#include <sys/socket.h>
#include <unistd.h>

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

}  // namespace

void run_packet_loop(int fd, RequestHandler& handler, Counters& c, const std::atomic<bool>& quit) {
  std::vector<uint8_t> rx(kBufSize), tx(kBufSize);
  while (!quit.load(std::memory_order_relaxed)) {
    // MSG_TRUNC: return the real frame length even if it did not fit.
    const ssize_t n = recv(fd, rx.data(), rx.size(), MSG_TRUNC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;  // timeout: poll quit
      // E.g. ENETDOWN while the link flaps: keep going, but do not spin.
      LOG_WARN("recv: %s", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (static_cast<size_t>(n) > rx.size()) {
      bump(c.rx_frames);
      bump(c.malformed_dropped);
      continue;
    }
    const size_t len = handler.handle(std::span<const uint8_t>(rx.data(), static_cast<size_t>(n)), tx);
    if (len == 0) continue;
    // The socket is bound to the interface, so send() needs no address: the frame already
    // carries the client's MAC as destination.
    const ssize_t sent = send(fd, tx.data(), len, 0);
    if (sent == static_cast<ssize_t>(len)) {
      bump(c.requests_served);
    } else {
      bump(c.tx_errors);
      LOG_DEBUG("send: %s", sent < 0 ? std::strerror(errno) : "short write");
    }
  }
}

}  // namespace exo::db
