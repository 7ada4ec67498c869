"""A node on the loopback interface for the client's tests over real sockets: it reads the
client's raw request frames off `lo` (AF_PACKET, needs root) and answers as the test's
`behaviour(msg, attempt) -> [reply Message] | None` says, through a UDP socket to the client's
port, as a real node's reply arrives. The same behaviours drive test_client.py's FakeIO, so the
pure-Python path over a fake, the pure-Python path over RawIO and the native path run the same
tests. Not a cluster node: it knows nothing but the wire format (exoskeleton.wire)."""
from __future__ import annotations

import socket
import threading

from exoskeleton import wire
from exoskeleton.keyhash import REQUEST_PREFIXES

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # on lo every frame is seen twice; answer the incoming copy only


class LoopbackNode:
    def __init__(self, behaviour, client_port: int):
        self.behaviour = behaviour
        self.client_port = client_port
        self.sent: list[wire.Frame] = []    # the client's request frames, in arrival order
        self._rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._rx.bind(("lo", 0))
        self._rx.settimeout(0.05)
        self._tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loopback-node", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self._rx.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if addr[2] == PACKET_OUTGOING or len(data) < wire.MIN_FRAME or data[0] not in REQUEST_PREFIXES:
                continue
            try:
                f = wire.decode_frame(data)
            except wire.MalformedFrame:
                continue
            if f.udp_src != self.client_port:
                continue  # another test's client
            self.sent.append(f)
            attempt = sum(1 for s in self.sent if s.msg.seq == f.msg.seq)
            for reply in self.behaviour(f.msg, attempt) or []:
                self._tx.sendto(wire.encode_payload(reply), ("127.0.0.1", self.client_port))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
        self._rx.close()
        self._tx.close()
