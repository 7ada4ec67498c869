// The generator's only contact with the network, behind two tiny interfaces so the TX and RX
// loops run unchanged over an AF_PACKET socket (the binary), a socketpair or a fake (the tests).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace exo::loadgen {

// Where request frames go. msgs[i].msg_hdr.msg_iov holds frame i (one iovec).
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // Sends msgs in order. Returns how many were sent (>= 1 for a non-empty span), or -errno when
  // the first could not be sent. The sink may set msg_name/msg_namelen.
  virtual int send(std::span<mmsghdr> msgs) = 0;
};

// Receive buffers for up to `size` frames of at most `frame_cap` bytes each.
class RxBatch {
 public:
  RxBatch(unsigned size, size_t frame_cap);
  unsigned size() const { return static_cast<unsigned>(msgs_.size()); }
  size_t frame_cap() const { return cap_; }
  mmsghdr* msgs() { return msgs_.data(); }
  // Frame i after a recv() that returned more than i (cut to frame_cap if it was longer).
  std::span<const uint8_t> frame(unsigned i) const;

 private:
  size_t cap_;
  std::vector<uint8_t> storage_;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> msgs_;
};

// Where reply frames come from.
class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // Waits up to timeout_ms for frames and reads as many as are ready (at most batch.size()).
  // Returns the count (0 on timeout or a signal), or -errno.
  virtual int recv(RxBatch& batch, int timeout_ms) = 0;
};

// Takes every frame and drops it: --dry-run (a TX benchmark without sockets) and tests.
class DiscardSink final : public FrameSink {
 public:
  int send(std::span<mmsghdr> msgs) override {
    frames_ += msgs.size();
    return static_cast<int>(msgs.size());
  }
  uint64_t frames() const { return frames_; }

 private:
  uint64_t frames_ = 0;
};

// Both, over any datagram or packet socket fd (sendmmsg / poll + recvmmsg). Owns the fd.
// With `dest` (an AF_PACKET socket's sockaddr_ll) every frame is sent to it.
class SocketIo final : public FrameSink, public FrameSource {
 public:
  explicit SocketIo(int fd, const sockaddr* dest = nullptr, socklen_t dest_len = 0);
  ~SocketIo() override;
  SocketIo(const SocketIo&) = delete;
  SocketIo& operator=(const SocketIo&) = delete;

  int fd() const { return fd_; }
  int send(std::span<mmsghdr> msgs) override;
  int recv(RxBatch& batch, int timeout_ms) override;

 private:
  int fd_;
  sockaddr_storage dest_{};
  socklen_t dest_len_ = 0;
};

}  // namespace exo::loadgen
