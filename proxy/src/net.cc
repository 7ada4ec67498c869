#include "net.h"

#include <arpa/inet.h>
#include <grp.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <vector>

#include "unix_socket.h"

namespace exo::proxy {
namespace {

int fail(int fd, std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  if (fd >= 0) close(fd);
  return -1;
}

bool failed(int fd, std::string* error, const std::string& what) {
  fail(fd, error, what);
  return false;
}

std::string dotted(uint32_t ip) {
  in_addr a{htonl(ip)};
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

bool fill_sun(const std::string& path, sockaddr_un* sun) {
  *sun = sockaddr_un{};
  sun->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sun->sun_path) return false;
  std::memcpy(sun->sun_path, path.data(), path.size());
  return true;
}

}  // namespace

std::optional<HostPort> parse_host_port(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  in_addr a{};
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &a) != 1) return std::nullopt;
  const std::string_view p = std::string_view(text).substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (p.empty() || ec != std::errc() || end != p.data() + p.size() || port > 65535) return std::nullopt;
  return HostPort{ntohl(a.s_addr), static_cast<uint16_t>(port)};
}

int listen_tcp(const HostPort& at, std::string* error, uint16_t* bound_port) {
  const std::string where = dotted(at.ip) + ":" + std::to_string(at.port);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(fd, error, "socket(AF_INET, SOCK_STREAM)");
  const int one = 1;  // a restarted proxy can bind while old connections sit in TIME_WAIT
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(at.port);
  sin.sin_addr.s_addr = htonl(at.ip);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) return fail(fd, error, "--listen: bind " + where);
  if (listen(fd, SOMAXCONN) != 0) return fail(fd, error, "--listen: listen on " + where);
  socklen_t len = sizeof sin;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) return fail(fd, error, "getsockname");
  if (bound_port) *bound_port = ntohs(sin.sin_port);
  return fd;
}

int listen_unix(const std::string& path, std::string* error, const UnixAccess& access) {
  sockaddr_un sun;
  if (!fill_sun(path, &sun)) {
    *error = "--unix: path must be 1.." + std::to_string(sizeof sun.sun_path - 1) + " bytes";
    return -1;
  }
  // A live proxy on this path answers a connect: leave it alone rather than steal its socket.
  if (const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); probe >= 0) {
    const bool live = connect(probe, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0;
    close(probe);
    if (live) {
      *error = "--unix: '" + path + "' is in use by a running process";
      return -1;
    }
  }
  if (const std::string e = prepare_unix_socket("unix:" + path); !e.empty()) {
    *error = "--unix: " + e;
    return -1;
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(fd, error, "socket(AF_UNIX, SOCK_STREAM)");
  if (bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) != 0) return fail(fd, error, "--unix: bind " + path);
  // From here on the file is ours: every failure removes it again.
  const auto fail_unlink = [&](const std::string& what) {
    fail(fd, error, what);
    unlink(path.c_str());
    return -1;
  };
  char mode_text[8];
  std::snprintf(mode_text, sizeof mode_text, "%04o", access.mode);
  if (chmod(path.c_str(), static_cast<mode_t>(access.mode)) != 0)
    return fail_unlink("--unix-mode: chmod " + std::string(mode_text) + " " + path);
  if (access.gid >= 0 && chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(access.gid)) != 0)
    return fail_unlink("--unix-group: chgrp " + path + " to gid " + std::to_string(access.gid) +
                       " (the proxy must run as root, with CAP_CHOWN, or as a member of that group)");
  if (listen(fd, SOMAXCONN) != 0) return fail_unlink("--unix: listen on " + path);
  return fd;
}

bool lookup_group(const std::string& name_or_gid, int64_t* gid, std::string* error) {
  if (name_or_gid.empty()) {
    *error = "--unix-group: empty group name";
    return false;
  }
  int64_t number = 0;
  const char* end = name_or_gid.data() + name_or_gid.size();
  if (const auto [p, ec] = std::from_chars(name_or_gid.data(), end, number);
      ec == std::errc() && p == end && number >= 0 && number < (int64_t{1} << 32) - 1) {
    *gid = number;  // a number is taken as it is, as chgrp does: the group database may not list it
    return true;
  }
  group gr{};
  group* found = nullptr;
  std::vector<char> buf(16384);
  int rc = 0;
  while ((rc = getgrnam_r(name_or_gid.c_str(), &gr, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 24))
    buf.resize(buf.size() * 2);
  if (rc != 0) {
    *error = "--unix-group: looking up '" + name_or_gid + "': " + std::strerror(rc);
    return false;
  }
  if (found == nullptr) {
    *error = "--unix-group: no group named '" + name_or_gid + "' on this host";
    return false;
  }
  *gid = gr.gr_gid;
  return true;
}

bool open_cluster_sockets(const std::string& iface, uint32_t ip, int rcvbuf, ClusterSockets* out,
                          std::string* error) {
  const unsigned ifindex = if_nametoindex(iface.c_str());
  if (ifindex == 0) return failed(-1, error, "interface '" + iface + "'");
  // Non-blocking: a full send buffer drops frames (each is resent at its deadline) instead of
  // stalling every connection behind the one event loop.
  const int tx = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (tx < 0) return failed(tx, error, "socket(AF_PACKET, SOCK_RAW) (exo-proxy needs CAP_NET_RAW)");
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (bind(tx, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0)
    return failed(tx, error, "bind the raw socket to '" + iface + "'");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, iface.c_str(), IFNAMSIZ - 1);
  if (ioctl(tx, SIOCGIFHWADDR, &ifr) != 0) return failed(tx, error, "ioctl(SIOCGIFHWADDR) on '" + iface + "'");
  std::memcpy(out->iface_mac, ifr.ifr_hwaddr.sa_data, 6);

  const int rx = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (rx < 0) {
    close(tx);
    return failed(rx, error, "socket(AF_INET, SOCK_DGRAM)");
  }
  setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);  // best effort: rmem_max caps it
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(ip);
  socklen_t len = sizeof sin;
  if (bind(rx, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 ||
      getsockname(rx, reinterpret_cast<sockaddr*>(&sin), &len) != 0) {
    close(tx);
    return failed(rx, error, "bind UDP to the client's address " + dotted(ip) + " (is it configured here?)");
  }
  out->tx = tx;
  out->rx = rx;
  out->port = ntohs(sin.sin_port);
  return true;
}

}  // namespace exo::proxy
