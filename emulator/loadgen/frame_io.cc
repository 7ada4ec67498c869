#include "loadgen/frame_io.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace exo::loadgen {

RxBatch::RxBatch(unsigned size, size_t frame_cap)
    : cap_(frame_cap), storage_(size * frame_cap), iov_(size), msgs_(size) {
  for (unsigned i = 0; i < size; ++i) {
    iov_[i].iov_base = storage_.data() + i * frame_cap;
    iov_[i].iov_len = frame_cap;
    std::memset(&msgs_[i], 0, sizeof msgs_[i]);
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
  }
}

std::span<const uint8_t> RxBatch::frame(unsigned i) const {
  const size_t len = msgs_[i].msg_len < cap_ ? msgs_[i].msg_len : cap_;
  return {storage_.data() + i * cap_, len};
}

SocketIo::SocketIo(int fd, const sockaddr* dest, socklen_t dest_len) : fd_(fd) {
  if (dest != nullptr && dest_len <= sizeof dest_) {
    std::memcpy(&dest_, dest, dest_len);
    dest_len_ = dest_len;
  }
}

SocketIo::~SocketIo() {
  if (fd_ >= 0) close(fd_);  // nothing useful to do if close fails at exit
}

int SocketIo::send(std::span<mmsghdr> msgs) {
  if (msgs.empty()) return 0;
  if (dest_len_ != 0) {
    for (mmsghdr& m : msgs) {
      m.msg_hdr.msg_name = &dest_;
      m.msg_hdr.msg_namelen = dest_len_;
    }
  }
  for (;;) {
    const int r = sendmmsg(fd_, msgs.data(), static_cast<unsigned>(msgs.size()), 0);
    if (r > 0) return r;
    if (r == 0) return -EAGAIN;  // not expected from a blocking socket; report, do not spin
    if (errno != EINTR) return -errno;
  }
}

int SocketIo::recv(RxBatch& batch, int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  const int ready = poll(&p, 1, timeout_ms);
  if (ready == 0) return 0;
  if (ready < 0) return errno == EINTR ? 0 : -errno;
  if (p.revents & (POLLERR | POLLNVAL)) {
    if (!(p.revents & POLLIN)) return -EIO;
  }
  const int r = recvmmsg(fd_, batch.msgs(), batch.size(), MSG_DONTWAIT, nullptr);
  if (r >= 0) return r;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  return -errno;
}

}  // namespace exo::loadgen
