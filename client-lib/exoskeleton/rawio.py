"""The client's two sockets: a raw AF_PACKET socket to send frames whose destination MAC
carries the key hash, and a plain UDP socket on which the kernel hands us the replies
(nodes answer to our real MAC, IP and UDP port). Sending raw frames needs CAP_NET_RAW.
"""
from __future__ import annotations

import fcntl
import socket
import struct

SIOCGIFADDR = 0x8915
SIOCGIFHWADDR = 0x8927


def interface_addresses(iface: str) -> tuple[bytes, bytes]:
    """(MAC, IPv4) of `iface` in the current network namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("256s", iface.encode()[:15])
        try:
            mac = fcntl.ioctl(s.fileno(), SIOCGIFHWADDR, req)[18:24]
            ip = fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)[20:24]
        except OSError as err:
            raise OSError(f"interface {iface!r}: {err.strerror} (does it exist here and have an IPv4 address?)") from None
    return mac, ip


class RawIO:
    def __init__(self, iface: str, recv_buf: int = 4 << 20):
        self.iface = iface
        self.recv_buf = recv_buf
        self.mac, self.ip = interface_addresses(iface)
        try:
            self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: send only
        except PermissionError:
            raise PermissionError("the Exoskeleton client needs CAP_NET_RAW (AmbientCapabilities=CAP_NET_RAW "
                                  "in the service's systemd unit, or run as root), or use "
                                  "transport='proxy' through exo-proxy (docs/client.md)") from None
        self.tx.bind((iface, 0))
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_buf)
        self.rx.bind((socket.inet_ntoa(self.ip), 0))
        self.port = self.rx.getsockname()[1]
        self._timeout: float | None = None  # rx's current timeout

    def send(self, frame: bytes) -> None:
        self.tx.send(frame)

    def recv(self, timeout: float) -> bytes | None:
        """One reply, waiting up to `timeout` seconds; timeout <= 0: only one already there."""
        timeout = timeout if timeout > 0 else 0.0  # 0.0: non-blocking
        if timeout != self._timeout:
            self.rx.settimeout(timeout)
            self._timeout = timeout
        try:
            return self.rx.recv(65536)
        except (socket.timeout, BlockingIOError):
            return None

    def fileno(self) -> int:
        """The descriptor that turns readable when a reply is there (AsyncClient's add_reader)."""
        return self.rx.fileno()

    def reopen(self) -> "RawIO":
        """For a forked child: close this process's copies of the sockets (the parent keeps
        its own) and open new ones on the same interface."""
        self.close()
        return RawIO(self.iface, self.recv_buf)

    def close(self) -> None:
        self.tx.close()
        self.rx.close()
