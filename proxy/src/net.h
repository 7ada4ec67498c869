// exo-proxy's sockets. Every function returns a descriptor (non-blocking, close-on-exec), or -1
// with *error naming the step and the address that failed.
//  - memcached side: a TCP listener on an IPv4 address (127.0.0.1:11211 by default) and an
//    optional unix stream socket, whose file gets the permissions and group given (so web
//    workers of another user reach it by being in its group).
//  - cluster side, opened as client-lib/exoskeleton/rawio.py does: an AF_PACKET/SOCK_RAW socket
//    bound to the interface to send frames (protocol 0: it receives nothing; needs CAP_NET_RAW),
//    and a UDP socket bound to the client's IPv4 address on an ephemeral port, on which the
//    kernel hands over the nodes' replies (they answer to our MAC, IP and port).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace exo::proxy {

struct HostPort {
  uint32_t ip = 0;  // host order
  uint16_t port = 0;
};

// "A.B.C.D:PORT" (port 0: any free port); nullopt if it is not one.
std::optional<HostPort> parse_host_port(const std::string& text);

int listen_tcp(const HostPort& at, std::string* error, uint16_t* bound_port = nullptr);

// Who may connect to the unix socket: the file's permission bits and group, set after bind and
// before listen, so no client can connect while the file still has the umask's permissions.
struct UnixAccess {
  uint32_t mode = 0660;
  int64_t gid = -1;  // -1: keep the group the file was created with (the proxy's)
};

// Removes a stale socket file at `path` first (never anything else: common/cpp/unix_socket.h).
// On failure the socket file it created is removed again.
int listen_unix(const std::string& path, std::string* error, const UnixAccess& access = {});

// --unix-group: a group name from the group database, or a decimal gid. False with *error
// naming the option when there is no such group.
bool lookup_group(const std::string& name_or_gid, int64_t* gid, std::string* error);

struct ClusterSockets {
  int tx = -1;  // AF_PACKET raw: whole frames out
  int rx = -1;  // UDP: reply payloads in
  uint16_t port = 0;  // the rx socket's port: requests carry it as their UDP source
  uint8_t iface_mac[6] = {};
};

// iface: the interface frames go out on; ip: the client's IPv4 address (host order) from the
// cluster config, which must be configured on this host. On failure nothing stays open.
bool open_cluster_sockets(const std::string& iface, uint32_t ip, int rcvbuf, ClusterSockets* out,
                          std::string* error);

}  // namespace exo::proxy
