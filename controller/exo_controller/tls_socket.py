"""A TLS connection that os-ken's two threads per switch may use at once.

os-ken's native hub gives every datapath a receive thread (blocked in recv) and a send thread
(sendall), both on the one socket. On a TLS socket that means SSL_read and SSL_write on one SSL
object from two threads, which OpenSSL forbids (CPython releases the GIL around both; the
result is a corrupted stream or a crash). So here every call into the TLS object holds one lock,
the socket is non-blocking, and waiting for it to become readable or writable happens outside
the lock: a receive thread waiting for the switch never holds up a flow-mod.

It offers what os_ken.controller.controller.Datapath uses of its socket: setsockopt,
settimeout, recv, sendall, shutdown, close (and getpeercert, fileno). A fatal TLS error is
raised as ConnectionResetError: Datapath's receive loop retries on ssl.SSLError (it means a
read timeout there) and would spin on a broken connection forever.
"""
from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from typing import Optional


class SerializedTlsSocket:
    def __init__(self, tls: ssl.SSLSocket):
        self._tls = tls
        self._lock = threading.Lock()
        self._timeout: Optional[float] = tls.gettimeout()
        tls.setblocking(False)

    # ---- what Datapath calls besides recv/sendall ----
    def setsockopt(self, *args) -> None:
        self._tls.setsockopt(*args)

    def settimeout(self, timeout: Optional[float]) -> None:
        self._timeout = timeout

    def gettimeout(self) -> Optional[float]:
        return self._timeout

    def fileno(self) -> int:
        return self._tls.fileno()

    def getpeercert(self, binary_form: bool = False):
        with self._lock:
            return self._tls.getpeercert(binary_form)

    def shutdown(self, how: int) -> None:
        """Shut the TCP socket only: ssl.SSLSocket.shutdown would also drop the TLS object, and
        a receive still under way would then read ciphertext as OpenFlow."""
        socket.socket.shutdown(self._tls, how)

    def close(self) -> None:
        with self._lock:
            self._tls.close()

    # ---- I/O ----
    def _deadline(self) -> Optional[float]:
        return None if self._timeout is None else time.monotonic() + self._timeout

    def _wait(self, readable: bool, deadline: Optional[float]) -> None:
        """Block (without the lock) until the socket is readable/writable; socket.timeout at deadline."""
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise socket.timeout("timed out")
        poller = select.poll()
        poller.register(self._tls.fileno(), select.POLLIN if readable else select.POLLOUT)
        if not poller.poll(None if left is None else max(1, int(left * 1000))):
            raise socket.timeout("timed out")

    def recv(self, n: int) -> bytes:
        deadline = self._deadline()
        while True:
            with self._lock:
                try:
                    return self._tls.recv(n)
                except ssl.SSLWantReadError:
                    readable = True
                except ssl.SSLWantWriteError:  # TLS 1.3 may have to write while reading
                    readable = False
                except ssl.SSLError as err:
                    raise ConnectionResetError(f"TLS: {err}") from err
            self._wait(readable, deadline)

    def sendall(self, data) -> None:
        view = memoryview(data)
        deadline = self._deadline()
        while view:
            with self._lock:
                try:
                    view = view[self._tls.send(view):]
                    continue
                except ssl.SSLWantWriteError:
                    readable = False
                except ssl.SSLWantReadError:
                    readable = True
                except ssl.SSLError as err:
                    raise ConnectionResetError(f"TLS: {err}") from err
            # OpenSSL wants the same bytes again after WANT_WRITE: `view` is unchanged.
            self._wait(readable, deadline)
