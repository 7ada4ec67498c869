#include "mmsg_io.h"

#include <poll.h>

#include <cerrno>
#include <cmath>
#include <system_error>

namespace exo::client {

MmsgIO::MmsgIO(int tx_fd, int rx_fd)
    : tx_fd_(tx_fd), rx_fd_(rx_fd), rx_buf_(kRecvBatch), rx_iov_(kRecvBatch), rx_msgs_(kRecvBatch) {
  for (size_t i = 0; i < kRecvBatch; ++i) rx_iov_[i] = {rx_buf_[i].data(), kMaxPayload};
}

void MmsgIO::send(std::span<const std::span<const uint8_t>> frames) {
  tx_iov_.resize(frames.size());
  tx_msgs_.assign(frames.size(), mmsghdr{});
  for (size_t i = 0; i < frames.size(); ++i) {
    tx_iov_[i] = {const_cast<uint8_t*>(frames[i].data()), frames[i].size()};
    tx_msgs_[i].msg_hdr.msg_iov = &tx_iov_[i];
    tx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  size_t done = 0;
  while (done < tx_msgs_.size()) {
    const int n = ::sendmmsg(tx_fd_, tx_msgs_.data() + done, static_cast<unsigned>(tx_msgs_.size() - done), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // A full send buffer loses these frames as a congested link would: each request is
      // resent at its deadline, so this is not an error for the caller.
      if (errno == ENOBUFS || errno == EAGAIN) return;
      throw std::system_error(errno, std::generic_category(), "sendmmsg on the raw socket");
    }
    done += static_cast<size_t>(n);
  }
}

void MmsgIO::recv(std::vector<std::span<const uint8_t>>& out, double timeout_s) {
  out.clear();
  pollfd p{rx_fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(std::ceil(timeout_s * 1000.0)));
  if (ready < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
  if (ready <= 0) return;
  for (size_t i = 0; i < kRecvBatch; ++i) {
    rx_msgs_[i] = mmsghdr{};
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  const int n = ::recvmmsg(rx_fd_, rx_msgs_.data(), kRecvBatch, MSG_DONTWAIT, nullptr);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    throw std::system_error(errno, std::generic_category(), "recvmmsg on the UDP socket");
  }
  for (int i = 0; i < n; ++i) out.emplace_back(rx_buf_[i].data(), rx_msgs_[i].msg_len);
}

}  // namespace exo::client
