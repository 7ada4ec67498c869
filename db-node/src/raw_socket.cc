#include "raw_socket.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace exo::db {
namespace {

int fail(int fd, std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  if (fd >= 0) close(fd);
  return -1;
}

}  // namespace

int fanout_group_for(int ifindex) { return ifindex & 0xffff; }

int open_packet_socket(const RawSocketOptions& opts, std::string* error) {
  const unsigned ifindex = if_nametoindex(opts.iface.c_str());
  if (ifindex == 0) return fail(-1, error, "iface '" + opts.iface + "'");

  const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (fd < 0) return fail(fd, error, "socket(AF_PACKET, SOCK_RAW) (needs root or CAP_NET_RAW)");

  // Set before bind so no frame slips in before our own TX is excluded.
  const int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0)
    return fail(fd, error, "setsockopt(PACKET_IGNORE_OUTGOING)");

  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opts.rcvbuf_bytes, sizeof opts.rcvbuf_bytes) != 0)
    return fail(fd, error, "setsockopt(SO_RCVBUF)");

  timeval tv{};
  tv.tv_sec = opts.recv_timeout_ms / 1000;
  tv.tv_usec = (opts.recv_timeout_ms % 1000) * 1000;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
    return fail(fd, error, "setsockopt(SO_RCVTIMEO)");

  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0)
    return fail(fd, error, "bind to '" + opts.iface + "'");

  packet_mreq mr{};
  mr.mr_ifindex = static_cast<int>(ifindex);
  mr.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0)
    return fail(fd, error, "setsockopt(PACKET_ADD_MEMBERSHIP, PROMISC)");

  // Fanout needs a bound socket. The group is per network namespace; deriving it from the
  // ifindex keeps two nodes on different interfaces of one namespace in different groups.
  const int fanout = fanout_group_for(static_cast<int>(ifindex)) | (PACKET_FANOUT_HASH << 16);
  if (setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &fanout, sizeof fanout) != 0)
    return fail(fd, error, "setsockopt(PACKET_FANOUT) (another process using this iface's group?)");
  return fd;
}

}  // namespace exo::db
