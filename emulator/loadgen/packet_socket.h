// The sockets of a real run (root or CAP_NET_RAW, inside the client's Mininet host):
//  - TX: AF_PACKET/SOCK_RAW with protocol 0 (it receives nothing), bound to the interface;
//    frames are sent to a sockaddr_ll naming the interface and EtherType IPv4.
//  - RX: AF_PACKET/SOCK_RAW for IPv4 frames on the interface, ignoring our own outgoing
//    frames (PACKET_IGNORE_OUTGOING), so the RX thread reads only what arrives.
//  - Port guard: a UDP socket bound to the requests' source port with a drop-everything BPF
//    filter. Replies are addressed to that port; without a socket on it the kernel would answer
//    each one with an ICMP port unreachable. The filter discards them before they are queued
//    (the RX thread already has them from AF_PACKET). Also picks the port when none is given.
// Every function returns false with *error naming the step that failed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "loadgen/frame_io.h"

namespace exo::loadgen {

struct PacketSockets {
  std::unique_ptr<SocketIo> tx;
  std::unique_ptr<SocketIo> rx;
  std::unique_ptr<SocketIo> port_guard;  // held open for the run, never read
  uint16_t src_port = 0;
  uint8_t iface_mac[6] = {};  // the interface's own MAC (main warns if the config's differs)
  int sndbuf = 0;  // what the kernel granted
  int rcvbuf = 0;
};

// iface: interface name; ip: the client's IPv4 (host order; the guard binds it, or any address
// when it is not configured here); src_port: 0 = an ephemeral port.
bool open_packet_sockets(const std::string& iface, uint32_t ip, uint16_t src_port, int sndbuf,
                         int rcvbuf, PacketSockets* out, std::string* error);

}  // namespace exo::loadgen
