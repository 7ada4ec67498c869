// The real FrameIO: frames out through a raw AF_PACKET socket with sendmmsg (one system call per
// batch), replies in through the UDP socket with poll + recvmmsg (one call drains up to
// kRecvBatch into buffers allocated once). The sockets belong to the Python client
// (exoskeleton.rawio.RawIO), which opened them with the privileges it needs; this class only
// borrows the descriptors.
#pragma once

#include <sys/socket.h>

#include <array>
#include <vector>

#include "pipeline.h"

namespace exo::client {

class MmsgIO final : public FrameIO {
 public:
  static constexpr size_t kRecvBatch = 64;
  static constexpr size_t kMaxPayload = 2048;  // > any reply at the cluster's MTU (1500)

  MmsgIO(int tx_fd, int rx_fd);
  void send(std::span<const std::span<const uint8_t>> frames) override;
  void recv(std::vector<std::span<const uint8_t>>& out, double timeout_s) override;

 private:
  int tx_fd_, rx_fd_;
  std::vector<std::array<uint8_t, kMaxPayload>> rx_buf_;
  std::vector<iovec> rx_iov_, tx_iov_;
  std::vector<mmsghdr> rx_msgs_, tx_msgs_;
};

}  // namespace exo::client
