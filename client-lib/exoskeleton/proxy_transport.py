"""transport="proxy": the client's calls through the host's exo-proxy (docs/proxy.md), which
speaks the memcached text protocol on 127.0.0.1:11211 and a unix socket and holds CAP_NET_RAW
itself, so the calling process needs no capability.

    Client(transport="proxy", proxy="/run/exo-proxy.sock")      # or "127.0.0.1:11211"
    AsyncClient(transport="proxy", proxy="/run/exo-proxy.sock")

The public calls are api.py's, as for the raw transport: a call's Requests go to a session
here instead of dispatch.Session, and come back as the same Results, so get/set/delete and the
many-key calls return and raise exactly what they do over raw frames.

What goes on the connection (one command per request; the proxy answers in request order):
  a key of printable ASCII (0x21-0x7e)  get <key> / set <key> 0 0 <n> / delete <key>
  any other key (spaces, control bytes, non-ASCII, e.g. UTF-8 str keys)
                                        mg <b64> b v / ms <b64> <n> b / md <b64> b
where <b64> is the key base64-encoded (the meta `b` flag: the proxy decodes it, so the cluster
sees the same key bytes as over raw frames). The text protocol limits the key *as sent* to 250
bytes, so such a key can be at most 186 bytes (KeyTooLong beyond, before anything is sent).
get_many sends one `get`/`mg` per key rather than one `get k1 k2 ...`: exo-proxy fails a multi-key
get as a whole when one key gets no answer, which would turn get_many's PartialResult (values for
what was read, failed_keys for the rest) into "nothing was read".

Requests are pipelined: up to `window` awaiting replies per call (and at most 64 KiB of commands),
topped up when half have been answered, so a batch of any size neither waits a round trip per
request nor fills the socket buffers both ways (a server that stops reading while its replies
go unread would otherwise deadlock with us).

Replies and the Result (status, then the exception error_for makes of it in a call):
  STORED, DELETED, HD, VALUE/VA           OK
  END, EN (get), NOT_FOUND, NF (delete)   NOT_FOUND (get: None; delete: False)
  SERVER_ERROR not stored|not deleted: <why>   BUSY / ERROR / BAD_REQUEST by <why>: DefinitelyFailed
  SERVER_ERROR outcome unknown            no reply (None): UnknownOutcome
  SERVER_ERROR cluster did not answer     no reply (None): Timeout (get_many: PartialResult)
  SERVER_ERROR <other>                    ERROR (object too large: BAD_REQUEST)
  CLIENT_ERROR ..., ERROR                 BAD_REQUEST: ServerError (a write: DefinitelyFailed)
Each Result carries the proxy's line in `detail`, which the exception's message quotes.

No answer: a call waits at most max(timeout x (1 + retries), 2 s + timeout) + 1 s for the next
bytes from the proxy (its own resends take timeout-ms x (1 + retries), 1.25 s by default; a BUSY
is retried for up to 2 s, dispatch.BUSY_BUDGET_S). Past that, or when the
connection breaks, the connection is dropped; a request already sent ends with no reply (a read:
Timeout; a write: UnknownOutcome), one not yet sent with "not sent" (a read: Timeout; a write:
DefinitelyFailed). A proxy that cannot be reached is "not sent" for every request.

Connections: a pool per client and process. A call takes an idle connection (or opens one) for
its whole batch and gives it back after; so threads sharing a Client each use their own
connection, and concurrent coroutines of an AsyncClient theirs. An idle connection the proxy has
closed (or that has bytes waiting) is dropped when taken. Fork: like dispatch.Session, a session
remembers dispatch.generation(); a forked child's first call replaces it (forked()), closing the
child's copies of the parent's connections and opening its own.

Not over the proxy: Result.flags (from_cache) is 0 (the proxy does not say), attempts is 1 (the
proxy's resends are its own), latency_s is measured here (send to reply); client_id and io raise
NotImplementedError.
"""
from __future__ import annotations

import asyncio
import base64
import os
import select
import socket
import threading
import time
from typing import NamedTuple, Optional

from . import dispatch, wire
from .errors import KeyTooLong
from .request import Request, Result

DEFAULT_ADDRESS = "127.0.0.1:11211"
MAX_KEY = 250       # the text protocol's limit, on the key as sent
MAX_B64_KEY = 186   # the longest key whose base64 form fits MAX_KEY
WAIT_GRACE = 1.0    # seconds past timeout x (1 + retries) to wait for the proxy's next bytes
CHUNK_BYTES = 1 << 16
RECV_BYTES = 1 << 18
MAX_LINE = 8192     # a reply line longer than this is not one we asked for

STAT_NAMES = dispatch.STAT_NAMES + ("connections",)

_PLAIN = bytes(range(0x21, 0x7F))
K_GET, K_SET, K_DELETE, K_MG, K_MS, K_MD = range(6)
_VERB = {K_GET: "get", K_SET: "set", K_DELETE: "delete", K_MG: "mg", K_MS: "ms", K_MD: "md"}
_CLUSTER_STATUS = {b"cluster busy": wire.ST_BUSY, b"cluster error": wire.ST_ERROR,
                   b"cluster rejected the request": wire.ST_BAD_REQUEST,
                   b"object too large for cache": wire.ST_BAD_REQUEST}


class _Lost(Exception):
    """The connection can no longer be trusted (closed, silent, or an answer we did not ask for)."""


# ---- addresses ----
class Address(NamedTuple):
    family: int
    sockaddr: object
    text: str


def parse_address(proxy) -> Address:
    """A unix socket path ("/run/exo-proxy.sock", "unix:/run/exo-proxy.sock", a path object, or
    any string without ':'), or a TCP address ("127.0.0.1:11211", "[::1]:11211", "localhost:11211",
    or a (host, port) tuple). None: 127.0.0.1:11211, where exo-proxy always listens."""
    if proxy is None:
        proxy = DEFAULT_ADDRESS
    if isinstance(proxy, tuple):
        host, port = proxy
    else:
        text = os.fspath(proxy)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if text.startswith("unix:"):
            text = text[5:]
        elif "/" not in text and ":" in text:
            host, _, port = text.rpartition(":")
            host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
            if not port.isdigit():
                raise ValueError(f"proxy={proxy!r}: the port must be a number (host:port, e.g. 127.0.0.1:11211)")
            return _tcp(host, int(port), proxy)
        if not text:
            raise ValueError("proxy= is empty: give a unix socket path or host:port")
        return Address(socket.AF_UNIX, text, f"unix:{text}")
    return _tcp(host, int(port), proxy)


def _tcp(host: str, port: int, given) -> Address:
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as err:
        raise ValueError(f"proxy={given!r}: cannot resolve {host!r}: {err}") from None
    return Address(family, sockaddr, f"{host}:{port}" if ":" not in host else f"[{host}]:{port}")


# ---- keys and commands ----
def is_plain(key: bytes) -> bool:
    """Whether `key` goes as it is in the classic commands: printable ASCII only."""
    return not key.translate(None, _PLAIN)


def check_key(key: bytes) -> None:
    """KeyTooLong for a key the text protocol cannot carry. Called after the client's own check
    (1..250 bytes), so only the base64 form's limit is left."""
    if len(key) > MAX_B64_KEY and not is_plain(key):
        raise KeyTooLong(f"key is {len(key)} bytes and not printable ASCII: exo-proxy gets such a key "
                         f"base64-encoded, and the memcached protocol's 250-byte limit on the encoded form "
                         f"allows at most {MAX_B64_KEY} bytes")


def command(req: Request) -> tuple[bytes, int]:
    """The command line(s) for one request, and the kind of reply to expect."""
    key, op = req.key, req.op
    if is_plain(key):
        if op == wire.OP_GET:
            return b"get " + key + b"\r\n", K_GET
        if op == wire.OP_PUT:
            return b"set %s 0 0 %d\r\n%s\r\n" % (key, len(req.value), req.value), K_SET
        if op == wire.OP_DELETE:
            return b"delete " + key + b"\r\n", K_DELETE
    else:
        b64 = base64.b64encode(key)
        if op == wire.OP_GET:
            return b"mg " + b64 + b" b v\r\n", K_MG
        if op == wire.OP_PUT:
            return b"ms %s %d b\r\n%s\r\n" % (b64, len(req.value), req.value), K_MS
        if op == wire.OP_DELETE:
            return b"md " + b64 + b" b\r\n", K_MD
    raise ValueError(f"opcode {op:#x} has no exo-proxy command (get, put and delete do)")


# ---- replies ----
def _number(token: bytes, line: bytes) -> int:
    if not token.isdigit():
        raise _Lost(f"exo-proxy sent a malformed reply: {line[:100]!r}")
    return int(token)


def _error(line: bytes, kind: int) -> tuple:
    """(status, value, detail) of an error line, or _Lost when `line` is no answer to `kind`."""
    detail = f'exo-proxy answered "{line.decode("utf-8", "replace")}"'
    if line.startswith(b"SERVER_ERROR "):
        why = line[13:]
        for refused in (b"not stored: ", b"not deleted: "):
            if why.startswith(refused):  # the cluster said no: definitely not applied
                return _CLUSTER_STATUS.get(why[len(refused):], wire.ST_ERROR), b"", detail
        if why in (b"outcome unknown", b"cluster did not answer"):
            return None, b"", detail
        return _CLUSTER_STATUS.get(why, wire.ST_ERROR), b"", detail
    if line.startswith(b"CLIENT_ERROR") or line == b"ERROR":
        return wire.ST_BAD_REQUEST, b"", detail
    raise _Lost(f"exo-proxy sent {line[:100]!r}, which does not answer a {_VERB[kind]}")


class Replies:
    """The bytes read from a connection; next() takes one complete reply off the front."""

    __slots__ = ("buf", "pos")

    def __init__(self):
        self.buf = bytearray()
        self.pos = 0

    def feed(self, data: bytes) -> None:
        if self.pos == len(self.buf):
            self.buf.clear()
            self.pos = 0
        elif self.pos > CHUNK_BYTES:
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += data

    def next(self, kind: int, key: bytes) -> Optional[tuple]:
        """(status, value, detail) of the reply to a `kind` request for `key`, or None until it
        has all arrived; _Lost for bytes that cannot be that reply."""
        buf, pos = self.buf, self.pos
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > MAX_LINE:
                raise _Lost(f"exo-proxy sent {MAX_LINE} bytes without a line end")
            return None
        line = bytes(buf[pos:eol])
        end = eol + 2
        if kind == K_GET:
            if line == b"END":
                out = (wire.ST_NOT_FOUND, b"", "")
            elif line.startswith(b"VALUE "):
                parts = line.split(b" ")  # VALUE <key> <flags> <bytes> [<cas unique>]
                if len(parts) not in (4, 5) or parts[1] != key:
                    raise _Lost(f"exo-proxy answered {line[:100]!r} to get {key[:100]!r}")
                n = _number(parts[3], line)
                if len(buf) < end + n + 7:
                    return None
                if buf[end + n:end + n + 7] != b"\r\nEND\r\n":
                    raise _Lost(f"exo-proxy's value for {key[:100]!r} is not followed by END")
                out = (wire.ST_OK, bytes(buf[end:end + n]), "")
                end += n + 7
            else:
                out = _error(line, kind)
        elif kind == K_MG:
            if line == b"EN":
                out = (wire.ST_NOT_FOUND, b"", "")
            elif line.startswith(b"VA "):
                parts = line.split(b" ")  # VA <bytes> <return flags>*
                n = _number(parts[1], line)
                if len(buf) < end + n + 2:
                    return None
                if buf[end + n:end + n + 2] != b"\r\n":
                    raise _Lost("exo-proxy's mg value is not followed by a line end")
                out = (wire.ST_OK, bytes(buf[end:end + n]), "")
                end += n + 2
            else:
                out = _error(line, kind)
        elif kind == K_SET:
            out = (wire.ST_OK, b"", "") if line == b"STORED" else \
                (wire.ST_ERROR, b"", 'exo-proxy answered "NOT_STORED"') if line == b"NOT_STORED" else _error(line, kind)
        elif kind == K_DELETE:
            out = (wire.ST_OK, b"", "") if line == b"DELETED" else \
                (wire.ST_NOT_FOUND, b"", "") if line == b"NOT_FOUND" else _error(line, kind)
        else:  # ms, md: HD [flags]; ms NS; md NF
            word = line.split(b" ", 1)[0]
            if word == b"HD":
                out = (wire.ST_OK, b"", "")
            elif word == b"NF" and kind == K_MD:
                out = (wire.ST_NOT_FOUND, b"", "")
            elif word == b"NS" and kind == K_MS:
                out = (wire.ST_ERROR, b"", 'exo-proxy answered "NS" (not stored)')
            else:
                out = _error(line, kind)
        self.pos = end
        return out


class Batch:
    """One call's requests on one connection: the commands still to send (to_send), the replies
    parsed so far (take), and what becomes of the rest when the connection fails (fail)."""

    def __init__(self, requests: list[Request], window: int):
        self.requests = requests
        self.cmds, self.kinds = [], []
        for req in requests:
            cmd, kind = command(req)
            self.cmds.append(cmd)
            self.kinds.append(kind)
        self.n = len(requests)
        self.window = window
        self.sent = self.got = 0
        self.in_flight_bytes = 0
        self.sent_at = [0.0] * self.n
        self.out: list[Optional[Result]] = [None] * self.n
        self.replies = Replies()
        self.timeouts = 0

    def to_send(self) -> Optional[bytes]:
        """The next commands to write, once at most half the window awaits replies; None: read."""
        if self.sent == self.n or self.sent - self.got > self.window // 2 or \
                self.in_flight_bytes > CHUNK_BYTES // 2:
            return None
        start = i = self.sent
        size = 0
        limit = min(self.n, self.got + self.window)
        while i < limit:
            n = len(self.cmds[i])
            if i > start and self.in_flight_bytes + size + n > CHUNK_BYTES:
                break
            size += n
            i += 1
        now = time.monotonic()
        for j in range(start, i):
            self.sent_at[j] = now
        self.sent = i
        self.in_flight_bytes += size
        return b"".join(self.cmds[start:i])

    def take(self) -> None:
        """Every complete reply read so far becomes its request's Result."""
        now = time.monotonic()
        while self.got < self.sent:
            i = self.got
            req = self.requests[i]
            r = self.replies.next(self.kinds[i], req.key)
            if r is None:
                return
            status, value, detail = r
            if status is None:
                self.timeouts += 1
            self.out[i] = Result(req, status, value, 0, now - self.sent_at[i], 1, detail)
            self.in_flight_bytes -= len(self.cmds[i])
            self.got = i + 1

    def fail(self, why: str) -> list[Result]:
        """Results for the requests without a reply: sent ones are unanswered (a write's outcome
        unknown); unsent ones failed (nothing was sent)."""
        now = time.monotonic()
        for i in range(self.got, self.n):
            req = self.requests[i]
            if i < self.sent:
                self.out[i] = Result(req, None, b"", 0, now - self.sent_at[i], 1, why)
                self.timeouts += 1
            elif req.op == wire.OP_GET:
                self.out[i] = Result(req, None, b"", 0, 0.0, 0, f"not sent: {why}")
                self.timeouts += 1
            else:
                self.out[i] = Result(req, wire.ST_ERROR, b"", 0, 0.0, 0, f"not sent: {why}")
        return self.out  # type: ignore[return-value]


def wait_budget(timeout: float, retries: int) -> float:
    """How long a call waits for the proxy's next bytes: the proxy's own resends, or its BUSY
    retries (dispatch.BUSY_BUDGET_S past the first send, plus the last wait), whichever is longer."""
    return max(timeout * (1 + retries), dispatch.BUSY_BUDGET_S + timeout) + WAIT_GRACE


# ---- sessions: one per client and process ----
class _Conn:
    __slots__ = ("sock", "timeout")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.timeout: Optional[float] = None


class ProxySessionBase:
    """What dispatch.current() needs of a session (generation, forked) and the connection pool.
    `proxied` tells the clients apart from a raw dispatch.Session."""

    proxied = True
    native = None

    def __init__(self, address: Address):
        self.address = address
        self.generation = dispatch.generation()
        self.lock = threading.Lock()
        self.idle: list[_Conn] = []
        self.conns: set = set()          # every open connection, idle or in use (closed in a child)
        self.closed = False
        self.stats = dict.fromkeys(STAT_NAMES, 0)

    @property
    def io(self):
        raise NotImplementedError(f"transport='proxy' has no raw I/O object: requests go to exo-proxy at "
                                  f"{self.address.text}")

    @property
    def client_id(self) -> int:
        raise NotImplementedError("transport='proxy' has no client_id: exo-proxy sends the cluster requests "
                                  "under its own ids")

    def forked(self) -> "ProxySessionBase":
        """This session for a forked child: close the child's copies of the parent's connections
        (the parent's stay open) and start a pool of its own. No lock: a parent's thread may have
        held it at fork()."""
        for conn in list(self.conns):
            conn.sock.close()
        return type(self)(self.address)

    def close(self) -> None:
        """Closes the idle connections; one in use is closed when its call ends. Later calls
        raise RuntimeError."""
        if self.generation != dispatch.generation():  # a forked child closing before any call:
            self.closed = True                         # its copies only, and not the parent's lock
            for conn in list(self.conns):
                conn.sock.close()
            return
        with self.lock:
            self.closed = True
            idle, self.idle = self.idle, []
        for conn in idle:
            self._drop(conn)

    # ---- the pool ----
    def _take_idle(self) -> Optional[_Conn]:
        with self.lock:
            if self.closed:
                raise RuntimeError("the client is closed")
            while self.idle:
                conn = self.idle.pop()
                if _still_idle(conn.sock):
                    return conn
                self.conns.discard(conn)
                conn.sock.close()
        return None

    def _opened(self, sock: socket.socket) -> _Conn:
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(sock)
        with self.lock:
            self.conns.add(conn)
            self.stats["connections"] += 1
        return conn

    def _give_back(self, conn: _Conn, reusable: bool) -> None:
        with self.lock:
            if reusable and not self.closed and self.generation == dispatch.generation():
                self.idle.append(conn)
                return
        self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        with self.lock:
            self.conns.discard(conn)
        conn.sock.close()

    def _count(self, batch: Batch) -> None:
        with self.lock:
            self.stats["sent"] += batch.sent
            self.stats["replies"] += batch.got
            self.stats["timeouts"] += batch.timeouts

    def _unreachable(self, err: BaseException) -> str:
        return f"cannot connect to exo-proxy at {self.address.text}: {err}"

    def _why(self, err: BaseException, budget: float) -> str:
        if isinstance(err, _Lost):
            return str(err)
        if isinstance(err, TimeoutError):
            return f"no answer from exo-proxy at {self.address.text} within {budget:g} s"
        return f"connection to exo-proxy at {self.address.text} failed: {err}"


def _still_idle(sock: socket.socket) -> bool:
    """An idle connection with something to read has been closed by the proxy (or is out of step)."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return not p.poll(0)


class ProxySession(ProxySessionBase):
    """Client's: blocking sockets, one per call in progress (so one per thread at most)."""

    def execute(self, requests: list[Request], timeout: float, retries: int, window: int) -> list[Result]:
        if not requests:
            return []
        batch = Batch(requests, window)
        budget = wait_budget(timeout, retries)
        conn = self._take_idle()
        if conn is None:
            sock = socket.socket(self.address.family, socket.SOCK_STREAM)
            try:
                sock.settimeout(budget)
                sock.connect(self.address.sockaddr)
            except OSError as err:
                sock.close()
                return batch.fail(self._unreachable(err))
            conn = self._opened(sock)
        done = False
        try:
            self._exchange(conn, batch, budget)
            done = True
        except (_Lost, OSError) as err:  # socket.timeout is a TimeoutError, an OSError
            batch.fail(self._why(err, budget))
        finally:
            self._give_back(conn, done)  # an interrupted call leaves replies unread: drop it
            self._count(batch)
        return batch.out  # type: ignore[return-value]

    @staticmethod
    def _exchange(conn: _Conn, batch: Batch, budget: float) -> None:
        sock = conn.sock
        if conn.timeout != budget:
            sock.settimeout(budget)
            conn.timeout = budget
        while batch.got < batch.n:
            data = batch.to_send()
            if data is not None:
                sock.sendall(data)
                continue
            chunk = sock.recv(RECV_BYTES)
            if not chunk:
                raise _Lost(f"exo-proxy closed the connection after {batch.got} of {batch.n} replies")
            batch.replies.feed(chunk)
            batch.take()


class AsyncProxySession(ProxySessionBase):
    """AsyncClient's: non-blocking sockets through the running loop's sock_* calls, one per call
    in progress. The sockets are ours, not a stream transport's, so a forked child closes its
    copies without touching the parent's event loop (whose epoll set it shares)."""

    async def execute(self, requests: list[Request], timeout: float, retries: int, window: int) -> list[Result]:
        if not requests:
            return []
        batch = Batch(requests, window)
        budget = wait_budget(timeout, retries)
        loop = asyncio.get_running_loop()
        conn = self._take_idle()
        if conn is None:
            sock = socket.socket(self.address.family, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                async with asyncio.timeout(budget):
                    await loop.sock_connect(sock, self.address.sockaddr)
            except OSError as err:
                sock.close()
                return batch.fail(self._unreachable(err))
            except BaseException:
                sock.close()
                raise
            conn = self._opened(sock)
        done = False
        try:
            await self._exchange(loop, conn.sock, batch, budget)
            done = True
        except (_Lost, OSError) as err:  # asyncio.timeout raises TimeoutError, an OSError
            batch.fail(self._why(err, budget))
        finally:
            self._give_back(conn, done)  # cancelled: its replies are still to come, so drop it
            self._count(batch)
        return batch.out  # type: ignore[return-value]

    @staticmethod
    async def _exchange(loop: asyncio.AbstractEventLoop, sock: socket.socket, batch: Batch, budget: float) -> None:
        async with asyncio.timeout(budget) as deadline:
            while batch.got < batch.n:
                data = batch.to_send()
                if data is not None:
                    await loop.sock_sendall(sock, data)
                else:
                    chunk = await loop.sock_recv(sock, RECV_BYTES)
                    if not chunk:
                        raise _Lost(f"exo-proxy closed the connection after {batch.got} of {batch.n} replies")
                    batch.replies.feed(chunk)
                    batch.take()
                deadline.reschedule(loop.time() + budget)
