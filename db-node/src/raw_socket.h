// AF_PACKET socket setup for the packet threads (thesis 3.8: raw sockets, so the node reads
// and writes whole Ethernet frames, one thread per core, no inter-thread communication).
#pragma once

#include <string>

namespace exo::db {

struct RawSocketOptions {
  std::string iface;
  int recv_timeout_ms = 200;  // how often a blocked thread re-checks the quit flag
  int rcvbuf_bytes = 4 << 20;  // absorbs bursts while a thread waits on RocksDB or a cache node
};

// Opens one AF_PACKET/SOCK_RAW socket bound to opts.iface (all EtherTypes), that
//  - joins the PACKET_FANOUT_HASH group derived from the ifindex, so the kernel spreads
//    requests over the threads' sockets by flow hash (each thread has its own socket, so
//    replies need no locking either),
//  - ignores its own transmitted frames (PACKET_IGNORE_OUTGOING), so replies are not read back,
//  - puts the interface in promiscuous mode (PACKET_MR_PROMISC membership): requests are
//    addressed to key-hash MACs, not to this interface's MAC, and a real NIC would filter them,
//  - has SO_RCVTIMEO set, so recv() returns EAGAIN periodically.
// Returns the fd, or -1 with *error naming the step that failed (usually: not root /
// missing CAP_NET_RAW, or no such interface).
int open_packet_socket(const RawSocketOptions& opts, std::string* error);

// The fanout group id used for an interface: all sockets of one node on one iface share it.
int fanout_group_for(int ifindex);

}  // namespace exo::db
