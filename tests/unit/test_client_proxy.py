"""transport="proxy": Client and AsyncClient through exo-proxy's memcached text protocol
(client-lib/exoskeleton/proxy_transport.py, docs/client.md "No capability: through exo-proxy").

The protocol side runs against a real memcached (Debian's /usr/bin/memcached, one per module on
a unix socket in a temporary directory): for the commands the client sends it answers as
exo-proxy does (STORED, VALUE/END, DELETED/NOT_FOUND, HD/VA/EN/NF), so it checks the bytes we
send and parse. The answers only exo-proxy gives (SERVER_ERROR not stored / outcome unknown /
cluster did not answer, its CLIENT_ERROR refusals) come from ScriptedProxy, a small unix-socket
server in a thread that answers canned lines for chosen keys."""
import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from exoskeleton.dispatch import BUSY_BUDGET_S
from conftest_ci import missing_or_fail

from exoskeleton import (AsyncClient, Client, DefinitelyFailed, ExoError, KeyTooLong, PartialResult, Request,
                         ServerError, Timeout, UnknownOutcome, ValueTooLarge, proxy_transport, wire)

MEMCACHED = shutil.which("memcached") or "/usr/bin/memcached"
# Under CI a missing memcached fails these tests (conftest_ci.missing_or_fail), elsewhere it skips them.
needs_memcached = pytest.mark.skipif(not os.access(MEMCACHED, os.X_OK) and not os.environ.get("CI"),
                                     reason=f"no memcached at {MEMCACHED}")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


# ---- a real memcached ----
def start_memcached(args: list[str], ready) -> subprocess.Popen:
    cmd = [MEMCACHED, *args, "-U", "0", "-m", "64", "-t", "1"] + (["-u", "root"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.read().decode()}")
        try:
            ready()
            return proc
        except OSError:
            time.sleep(0.02)
    stop(proc)
    raise RuntimeError(f"{' '.join(cmd)} did not start listening")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.stderr.close()


def mc(address, data: bytes, until: bytes = b"\r\n") -> bytes:
    """Send `data` to memcached directly; its answer, up to `until`."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(address)
        s.sendall(data)
        out = b""
        while not out.endswith(until):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


@pytest.fixture(scope="module")
def memcached(tmp_path_factory):
    """The unix socket path of a memcached of this module's own."""
    if not os.access(MEMCACHED, os.X_OK):
        missing_or_fail(f"no memcached at {MEMCACHED} (make deps installs it)")
    path = str(tmp_path_factory.mktemp("mc") / "memcached.sock")
    proc = start_memcached(["-s", path, "-a", "0700"], lambda: mc(path, b"version\r\n"))
    try:
        yield path
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def memcached_tcp():
    """("127.0.0.1", port) of a memcached listening on TCP."""
    if not os.access(MEMCACHED, os.X_OK):
        missing_or_fail(f"no memcached at {MEMCACHED} (make deps installs it)")
    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            proc = start_memcached(["-l", "127.0.0.1", "-p", str(port)],
                                   lambda: mc(("127.0.0.1", port), b"version\r\n"))
            break
        except RuntimeError:  # the port was taken in between: another one
            continue
    else:
        raise RuntimeError("could not start memcached on a free TCP port")
    try:
        yield ("127.0.0.1", port)
    finally:
        stop(proc)


@pytest.fixture
def closing():
    """closing(client) -> client, closed when the test ends."""
    clients = []

    def track(c):
        clients.append(c)
        return c
    yield track
    for c in clients:
        if isinstance(c, AsyncClient):
            c._s.close()  # what `await c.close()` does, without a loop
        else:
            c.close()


@pytest.fixture
def ns():
    """A key prefix of this test's own (the memcached is shared by the module)."""
    return f"t{uuid.uuid4().hex[:10]}:"


# ---- exo-proxy's own answers, scripted ----
HANG = object()   # read the command, never answer
CLOSE = object()  # close the connection instead of answering


class ScriptedProxy:
    """A unix-socket server in a thread. For a command on a key in `script` it answers the canned
    line (or HANG / CLOSE); otherwise as memcached would, from a dict. Keys are the decoded bytes
    (meta `b` keys base64-decoded). `received` is every byte read, per connection."""

    def __init__(self, path: str, script: dict | None = None):
        self.path = path
        self.script = script or {}
        self.store: dict[bytes, bytes] = {}
        self.received: list[bytearray] = []
        self.socks: list[socket.socket] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.listener.settimeout(0.05)
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def connections(self) -> int:
        return len(self.received)

    def sent_bytes(self) -> bytes:
        return b"".join(bytes(r) for r in self.received)

    def drop_connections(self) -> None:
        """Close every connection from this side (as a restarted proxy would)."""
        for s in list(self.socks):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.stopped.set()
        self.drop_connections()
        for t in self.threads:
            t.join(5)
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            got = bytearray()
            self.received.append(got)
            self.socks.append(sock)
            t = threading.Thread(target=self._serve, args=(sock, got), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, sock: socket.socket, got: bytearray) -> None:
        buf = b""
        hung = False
        with sock:
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                got += data
                buf += data
                while not hung:
                    cmd, buf = self._command(buf)
                    if cmd is None:
                        break
                    answer = self._answer(*cmd)
                    if answer is HANG:
                        hung = True
                    elif answer is CLOSE:
                        sock.shutdown(socket.SHUT_RDWR)
                        return
                    else:
                        sock.sendall(answer)

    @staticmethod
    def _command(buf: bytes):
        """((verb, key, value), rest) of the first complete command in buf, or (None, buf)."""
        eol = buf.find(b"\r\n")
        if eol < 0:
            return None, buf
        tokens = buf[:eol].split(b" ")
        verb, rest, value = tokens[0], buf[eol + 2:], b""
        if verb in (b"set", b"ms"):
            n = int(tokens[4] if verb == b"set" else tokens[2])
            if len(rest) < n + 2:
                return None, buf
            value, rest = rest[:n], rest[n + 2:]
        key = tokens[1]
        if verb in (b"mg", b"ms", b"md") and b"b" in tokens[2:]:
            key = base64.b64decode(key)
        return (verb, key, value), rest

    def _answer(self, verb: bytes, key: bytes, value: bytes):
        canned = self.script.get(key)
        if canned is not None:
            return canned if canned in (HANG, CLOSE) else canned + b"\r\n"
        if verb in (b"get", b"mg"):
            if key not in self.store:
                return b"END\r\n" if verb == b"get" else b"EN\r\n"
            v = self.store[key]
            return b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key, len(v), v) if verb == b"get" else \
                b"VA %d\r\n%s\r\n" % (len(v), v)
        if verb in (b"set", b"ms"):
            self.store[key] = value
            return b"STORED\r\n" if verb == b"set" else b"HD\r\n"
        existed = self.store.pop(key, None) is not None
        if verb == b"delete":
            return b"DELETED\r\n" if existed else b"NOT_FOUND\r\n"
        return b"HD\r\n" if existed else b"NF\r\n"


@pytest.fixture
def scripted(tmp_path):
    servers = []

    def make(script=None):
        s = ScriptedProxy(str(tmp_path / f"proxy{len(servers)}.sock"), script)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()


@pytest.fixture
def short_grace(monkeypatch):
    """A silent proxy is given up on after timeout x (1 + retries), without the 1 s grace."""
    monkeypatch.setattr(proxy_transport, "WAIT_GRACE", 0.0)


# ================= against a real memcached =================
def test_set_get_delete_round_trip(memcached, ns):
    with Client(transport="proxy", proxy=memcached) as c:
        k = (ns + "user:1").encode()
        assert c.get(k) is None
        assert c.set(k, b"alice") is None
        assert c.get(k) == b"alice"
        assert c.set(k, bytearray(b"bob")) is None and c.get(k) == b"bob"
        assert c.delete(k) is True
        assert c.get(k) is None
        assert c.delete(k) is False  # memcached's NOT_FOUND, as exo-proxy's
        assert mc(memcached, b"get " + k + b"\r\n", b"END\r\n") == b"END\r\n"
        assert c.transport == "proxy" and c.proxy == f"unix:{memcached}"
        assert c.stats["connections"] == 1 and c.stats["sent"] == c.stats["replies"] == 8


def test_values_are_opaque_bytes(memcached, ns, closing):
    c = closing(Client(transport="proxy", proxy=memcached))
    values = {ns + "empty": b"", ns + "crlf": b"a\r\nEND\r\nVALUE x 0 1\r\n", ns + "nul": bytes(range(256)) * 5}
    assert c.set_many(values) == []
    assert c.get_many(list(values)) == values
    c.close()


def test_str_keys_are_utf8(memcached, ns, closing):
    """A str key is its UTF-8 bytes, whether it goes plain (ASCII) or base64-encoded (not)."""
    c = closing(Client(transport="proxy", proxy=memcached))
    c.set(ns + "user:1", b"ascii")
    c.set(ns + "ключ", b"cyrillic")
    assert c.get((ns + "user:1").encode()) == b"ascii"
    assert c.get((ns + "ключ").encode("utf-8")) == b"cyrillic"
    # memcached stored them under exactly those bytes (the base64 one decoded)
    assert mc(memcached, b"get " + (ns + "user:1").encode() + b"\r\n", b"END\r\n").endswith(b"\r\nascii\r\nEND\r\n")
    raw = mc(memcached, b"get " + (ns + "ключ").encode() + b"\r\n", b"END\r\n")
    assert raw.endswith(b"\r\ncyrillic\r\nEND\r\n")
    assert c.get_many([ns + "user:1", ns + "ключ", ns + "none"]) == {
        ns + "user:1": b"ascii", ns + "ключ": b"cyrillic", ns + "none": None}


def test_binary_keys_travel_base64(memcached, ns, closing):
    c = closing(Client(transport="proxy", proxy=memcached))
    keys = [ns.encode() + k for k in (b"with space", b"crlf\r\nget x", b"nul\x00", b"\xff\xfe", b"tab\t", b"del\x7f")]
    for i, k in enumerate(keys):
        c.set(k, b"v%d" % i)
    for i, k in enumerate(keys):
        assert c.get(k) == b"v%d" % i
        assert mc(memcached, b"mg " + base64.b64encode(k) + b" b v\r\n", b"v%d\r\n" % i) == b"VA 2\r\nv%d\r\n" % i
    assert c.get_many(keys) == {k: b"v%d" % i for i, k in enumerate(keys)}
    assert c.delete(keys[0]) is True and c.delete(keys[0]) is False
    assert c.delete_many(keys).not_found == [keys[0]]
    assert c.get_many(keys) == dict.fromkeys(keys)


def test_key_limits_raise_before_anything_is_sent(memcached, ns, closing):
    c = closing(Client(transport="proxy", proxy=memcached))
    plain250, binary186 = b"k" * 250, b" " * 186
    c.set(plain250, b"ok")
    c.set(binary186, b"ok")
    assert c.get_many([plain250, binary186]) == {plain250: b"ok", binary186: b"ok"}
    sent = c.stats["sent"]
    with pytest.raises(KeyTooLong, match="250"):
        c.set(b"k" * 251, b"v")
    with pytest.raises(KeyTooLong, match="base64"):
        c.set(b" " * 187, b"v")
    with pytest.raises(KeyTooLong, match="base64"):
        c.get("é" * 94)  # 188 UTF-8 bytes, not ASCII
    with pytest.raises(KeyTooLong):
        c.delete(b"")
    with pytest.raises(KeyTooLong):  # one bad key fails the batch before any of it is sent
        c.set_many({ns + "a": b"1", b"\x00" * 200: b"2"})
    with pytest.raises(ValueTooLarge):
        c.set(ns + "big", b"x" * 1500)
    with pytest.raises(TypeError, match="keys are bytes or str"):
        c.get(12)
    with pytest.raises(TypeError, match="serializer"):
        c.set(ns + "s", "a str")
    assert c.stats["sent"] == sent
    assert c.get(ns + "a") is None


def test_many_key_calls_are_pipelined_past_the_window(memcached, ns, closing):
    c = closing(Client(transport="proxy", proxy=memcached, window=8))
    items = {(f"{ns}{i}" if i % 3 else f"{ns} {i}"): b"v%d" % i for i in range(500)}  # a third base64
    out = c.set_many(items)
    assert out == [] and not out and out.succeeded == list(items) and out.failed == out.unknown == []
    got = c.get_many(list(items) + [ns + "missing"])
    assert got == {**items, ns + "missing": None} and list(got)[:3] == list(items)[:3]
    gone = c.delete_many(list(items)[:10] + [ns + "missing"])
    assert gone == [] and gone.not_found == [ns + "missing"] and len(gone.succeeded) == 11
    assert c.set_many([(ns + "pair", b"1")]) == [] and c.get(ns + "pair") == b"1"  # (key, value) pairs
    assert c.stats["connections"] == 1 and c.stats["timeouts"] == 0


def test_large_batches_neither_deadlock_nor_split_replies(memcached, ns, closing):
    """3,000 near-MTU values both ways with a window of 256: megabytes each way on one
    connection, more than the socket buffers hold."""
    c = closing(Client(transport="proxy", proxy=memcached, window=256))
    items = {f"{ns}{i:05d}": bytes([i % 251]) * 1400 for i in range(3000)}
    assert c.set_many(items) == []
    assert c.get_many(list(items)) == items


def test_serializer_hooks(memcached, ns, closing):
    c = closing(Client(transport="proxy", proxy=memcached,
                       serializer=lambda k, v: json.dumps([k, v]).encode(),
                       deserializer=lambda k, data: json.loads(data)[1]))
    c.set(ns + "obj", {"a": [1, 2]})
    assert c.get(ns + "obj") == {"a": [1, 2]}
    stored = mc(memcached, f"get {ns}obj\r\n".encode(), b"END\r\n").split(b"\r\n")[1]
    assert json.loads(stored) == [ns + "obj", {"a": [1, 2]}]  # what the serializer made
    assert c.set_many({ns + "x": "str", ns + "y": 3}) == []
    assert c.get_many([ns + "x", ns + "y", ns + "none"]) == {ns + "x": "str", ns + "y": 3, ns + "none": None}


def test_execute_and_stream_with_requests(memcached, ns, closing):
    c = closing(Client(transport="proxy", proxy=memcached, window=4))
    k = (ns + "r").encode()
    res = c.execute([Request(wire.OP_PUT, k, b"1"), Request(wire.OP_GET, k), Request(wire.OP_DELETE, k),
                     Request(wire.OP_GET, k), Request(wire.OP_DELETE, b"x y" + k)])
    assert [r.status for r in res] == [wire.ST_OK, wire.ST_OK, wire.ST_OK, wire.ST_NOT_FOUND, wire.ST_NOT_FOUND]
    assert res[1].value == b"1" and all(r.outcome == "ok" and not r.from_cache and r.attempts == 1 for r in res)
    assert all(r.latency_s >= 0 and r.detail == "" for r in res)
    seen = []
    c.stream((Request(wire.OP_PUT, b"%s%d" % (k, i), b"%d" % i) for i in range(50)), seen.append)
    assert len(seen) == 50 and all(r.status == wire.ST_OK for r in seen)
    with pytest.raises(ValueError, match="no exo-proxy command"):
        c.execute([Request(0x7F, k)])
    assert c.native is False and c.native_stats() is None


def test_proxy_transport_arguments(memcached, closing):
    with pytest.raises(ValueError, match="iface= is for transport='raw'"):
        Client("eth0", transport="proxy", proxy=memcached)
    with pytest.raises(ValueError, match="io= is for"):
        Client(transport="proxy", io=object())
    with pytest.raises(ValueError, match="client_id= is for"):
        AsyncClient(transport="proxy", client_id=7)
    with pytest.raises(ValueError, match="history= and native=True"):
        Client(transport="proxy", native=True)
    with pytest.raises(ValueError, match="pass transport='proxy'"):
        Client("eth0", proxy=memcached)
    with pytest.raises(ValueError, match="'raw'.*'proxy'"):
        Client(transport="memcached")
    with pytest.raises(TypeError, match="needs iface="):
        Client()
    c = closing(Client(transport="proxy", proxy=memcached, native=False))
    with pytest.raises(NotImplementedError, match="no raw I/O"):
        c.io
    with pytest.raises(NotImplementedError, match="client_id"):
        c.client_id
    assert Client(transport="proxy").proxy == "127.0.0.1:11211"  # connects lazily: nothing listens there


def test_proxy_addresses():
    p = proxy_transport.parse_address
    assert p("/run/exo-proxy.sock") == (socket.AF_UNIX, "/run/exo-proxy.sock", "unix:/run/exo-proxy.sock")
    assert p("unix:/run/x.sock").sockaddr == "/run/x.sock"
    assert p("exo.sock").family == socket.AF_UNIX
    assert p("127.0.0.1:11211") == (socket.AF_INET, ("127.0.0.1", 11211), "127.0.0.1:11211")
    assert p(("127.0.0.1", 11212)).sockaddr == ("127.0.0.1", 11212)
    assert p(None).text == "127.0.0.1:11211"
    six = p("[::1]:11211")
    assert six.family == socket.AF_INET6 and six.sockaddr[:2] == ("::1", 11211) and six.text == "[::1]:11211"
    with pytest.raises(ValueError, match="port must be a number"):
        p("127.0.0.1:http")
    with pytest.raises(ValueError, match="empty"):
        p("")


def test_tcp_address(memcached_tcp, ns, closing):
    host, port = memcached_tcp
    c = closing(Client(transport="proxy", proxy=f"{host}:{port}"))
    c.set(ns + "tcp", b"yes")
    assert c.get(ns + "tcp") == b"yes" and c.get_many([ns + "tcp", ns + "no"]) == {ns + "tcp": b"yes", ns + "no": None}
    assert c.delete(ns + "tcp") is True


def test_ten_threads_share_a_client(memcached, ns, closing):
    c = closing(Client(transport="proxy", proxy=memcached, window=4))
    c.set(ns + "shared", b"S")
    start = threading.Barrier(10)
    errors = []

    def worker(t: int) -> None:
        try:
            start.wait()
            for i in range(100):
                k = f"{ns}{t}:{i}" if i % 2 else f"{ns}{t} {i}"
                v = b"%d.%d" % (t, i)
                c.set(k, v)
                assert c.get(k) == v, (k, v)
                if i % 10 == 0:
                    many = {f"{ns}{t}:m{j}": b"%d.%d.%d" % (t, i, j) for j in range(12)}
                    assert c.set_many(many) == []
                    assert c.get_many([*many, ns + "shared"]) == {**many, ns + "shared": b"S"}
                    assert c.delete_many(many) == []
        except BaseException as e:  # noqa: BLE001
            errors.append(f"thread {t}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert 1 <= c.stats["connections"] <= 10  # a connection per call in progress, reused
    assert c.stats["timeouts"] == 0 and c.stats["sent"] == c.stats["replies"]
    assert len(c._s.idle) == c.stats["connections"]


def test_forked_child_opens_its_own_connection(memcached, ns, closing):
    """Parent and child hammer the same Client at once; had the child kept the parent's
    connection, replies would cross and values mismatch."""
    c = closing(Client(transport="proxy", proxy=memcached))
    c.set(ns + "p", b"parent")
    parent_session, parent_conn = c._s, c._s.idle[0]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        os.close(r)
        signal.alarm(20)
        try:
            got = c.get(ns + "p")
            for i in range(300):
                c.set(f"{ns}c{i}", b"child%d" % i)
                assert c.get(f"{ns}c{i}") == b"child%d" % i
            out = {"got": got.decode(), "new_session": c._s is not parent_session,
                   "connections": c.stats["connections"], "own_conn": c._s.idle[0] is not parent_conn,
                   "parents_copy_closed": parent_conn.sock.fileno() == -1}
        except BaseException as e:  # noqa: BLE001
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    for i in range(300):  # at the same time, on the parent's connection
        c.set(f"{ns}p{i}", b"parent%d" % i)
        assert c.get(f"{ns}p{i}") == b"parent%d" % i
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    out = json.loads(b"".join(chunks))
    assert out == {"got": "parent", "new_session": True, "connections": 1, "own_conn": True,
                   "parents_copy_closed": True}
    # the parent's connection outlived the child's closing its copy
    assert c._s is parent_session and c._s.idle == [parent_conn] and c.stats["connections"] == 1
    assert c.get(f"{ns}c299") == b"child299" and c.get(ns + "p") == b"parent"


def test_async_client_over_the_proxy(memcached, ns):
    async def main():
        async with AsyncClient(transport="proxy", proxy=memcached, window=8,
                               serializer=lambda k, v: v.encode() if isinstance(v, str) else v,
                               deserializer=lambda k, d: d.decode()) as c:
            assert await c.set(ns + "a", "alpha") is None
            assert await c.get(ns + "a") == "alpha"
            assert await c.get(ns + "none") is None
            keys = [f"{ns}{i}" if i % 2 else f"{ns} {i}" for i in range(100)]
            assert await c.set_many({k: k for k in keys}) == []
            assert await c.get_many(keys) == {k: k for k in keys}
            assert await c.delete(keys[0]) is True and await c.delete(keys[0]) is False
            out = await c.delete_many(keys)
            assert out == [] and out.not_found == [keys[0]]
            res = await c.execute([Request(wire.OP_GET, ns + "a")])
            assert res[0].value == b"alpha" and res[0].status == wire.ST_OK
            with pytest.raises(KeyTooLong, match="base64"):
                await c.get(b"\n" * 187)
            return dict(c.stats), c._s
    stats, session = run(main())
    assert stats["timeouts"] == 0 and stats["sent"] == stats["replies"] == 3 + 100 + 100 + 2 + 100 + 1
    assert session.closed and session.idle == []


def test_async_concurrent_calls_each_get_their_own_reply(memcached, ns, closing):
    async def main():
        c = closing(AsyncClient(transport="proxy", proxy=memcached, window=4))
        await c.set_many({f"{ns}{i}": b"v%d" % i for i in range(200)})
        got = await asyncio.gather(*(c.get(f"{ns}{i}") for i in range(200)),
                                   *(c.get_many([f"{ns}{i}", f"{ns}{i + 1}"]) for i in range(0, 100, 2)))
        conns = c.stats["connections"]
        await c.close()
        return got, conns
    got, conns = run(main())
    assert got[:200] == [b"v%d" % i for i in range(200)]
    assert got[200:] == [{f"{ns}{i}": b"v%d" % i, f"{ns}{i + 1}": b"v%d" % (i + 1)} for i in range(0, 100, 2)]
    assert 1 <= conns <= 250


def test_async_client_moves_to_a_new_event_loop(memcached, ns, closing):
    c = closing(AsyncClient(transport="proxy", proxy=memcached))
    run(c.set(ns + "k", b"1"))
    assert run(c.get(ns + "k")) == b"1"  # a second asyncio.run: the pooled socket is not tied to a loop
    assert c.stats["connections"] == 1
    run(c.close())
    with pytest.raises(RuntimeError, match="closed"):
        run(c.get(ns + "k"))


def test_async_forked_child_opens_its_own_connection(memcached, ns, closing):
    c = closing(AsyncClient(transport="proxy", proxy=memcached))
    run(c.set(ns + "k", b"parent"))
    parent_conn = c._s.idle[0]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        signal.alarm(20)
        try:
            got = run(c.get(ns + "k"))
            run(c.set(ns + "c", b"child"))
            out = {"got": got.decode(), "connections": c.stats["connections"],
                   "parents_copy_closed": parent_conn.sock.fileno() == -1}
        except BaseException as e:  # noqa: BLE001
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert json.loads(data) == {"got": "parent", "connections": 1, "parents_copy_closed": True}
    assert run(c.get(ns + "c")) == b"child" and c._s.idle == [parent_conn]


# ================= exo-proxy's own answers (ScriptedProxy) =================
def test_the_commands_on_the_wire(scripted, closing):
    """One write per window: plain keys in classic commands, the others in meta ones with the
    base64 `b` flag; flags and exptime 0."""
    proxy = scripted()
    c = closing(Client(transport="proxy", proxy=proxy.path))
    c.set_many({b"a": b"1", b"b c": b"22"})
    c.get_many([b"a", b"b c", b"zz"])
    c.delete_many([b"a", b"b c"])
    assert proxy.sent_bytes() == (b"set a 0 0 1\r\n1\r\nms YiBj 2 b\r\n22\r\n"
                                  b"get a\r\nmg YiBj b v\r\nget zz\r\n"
                                  b"delete a\r\nmd YiBj b\r\n")
    assert proxy.connections == 1


SET_ANSWERS = [
    (b"SERVER_ERROR not stored: cluster busy", DefinitelyFailed, wire.ST_BUSY),
    (b"SERVER_ERROR not stored: cluster error", DefinitelyFailed, wire.ST_ERROR),
    (b"SERVER_ERROR not stored: cluster rejected the request", DefinitelyFailed, wire.ST_BAD_REQUEST),
    (b"SERVER_ERROR outcome unknown", UnknownOutcome, None),
    (b"SERVER_ERROR object too large for cache", DefinitelyFailed, wire.ST_BAD_REQUEST),
    (b"CLIENT_ERROR client flags not supported (flags must be 0)", DefinitelyFailed, wire.ST_BAD_REQUEST),
    (b"ERROR", DefinitelyFailed, wire.ST_BAD_REQUEST),
]


@pytest.mark.parametrize("answer,exc,status", SET_ANSWERS, ids=[a[0].decode() for a in SET_ANSWERS])
@pytest.mark.parametrize("key", [b"k", b"k k"], ids=["set", "ms"])
def test_set_maps_proxy_answers(scripted, answer, exc, status, key, closing):
    proxy = scripted({key: answer})
    c = closing(Client(transport="proxy", proxy=proxy.path))
    with pytest.raises(exc) as err:
        c.set(key, b"v")
    assert type(err.value) is exc and answer.decode() in str(err.value)
    assert err.value.outcome == ("unknown" if exc is UnknownOutcome else "failed")
    if status is not None:
        assert err.value.status == status
    c.set(b"other", b"fine")  # the connection goes on
    assert proxy.store == {b"other": b"fine"} and proxy.connections == 1


@pytest.mark.parametrize("key", [b"k", b"k\tk"], ids=["delete", "md"])
def test_delete_maps_proxy_answers(scripted, key, closing):
    proxy = scripted({key + b"1": b"SERVER_ERROR not deleted: cluster busy",
                      key + b"2": b"SERVER_ERROR outcome unknown",
                      key + b"3": b"CLIENT_ERROR md flag x not supported"})
    proxy.store[key] = b"v"
    c = closing(Client(transport="proxy", proxy=proxy.path))
    assert c.delete(key) is True and c.delete(key) is False  # DELETED/HD, NOT_FOUND/NF
    with pytest.raises(DefinitelyFailed, match="not deleted: cluster busy") as err:
        c.delete(key + b"1")
    assert err.value.status == wire.ST_BUSY
    with pytest.raises(UnknownOutcome, match="outcome unknown"):
        c.delete(key + b"2")
    with pytest.raises(DefinitelyFailed, match="not supported"):
        c.delete(key + b"3")


@pytest.mark.parametrize("key", [b"k", b"k\x00"], ids=["get", "mg"])
def test_get_maps_proxy_answers(scripted, key, closing):
    proxy = scripted({key + b"1": b"SERVER_ERROR cluster did not answer",
                      key + b"2": b"SERVER_ERROR cluster error",
                      key + b"3": b"CLIENT_ERROR bad command line format",
                      key + b"4": b"ERROR"})
    c = closing(Client(transport="proxy", proxy=proxy.path))
    with pytest.raises(Timeout, match="cluster did not answer") as err:
        c.get(key + b"1")
    assert type(err.value) is Timeout and err.value.outcome == "failed" and err.value.keys == [key + b"1"]
    with pytest.raises(ServerError, match="cluster error") as err:
        c.get(key + b"2")
    assert type(err.value) is ServerError and err.value.status == wire.ST_ERROR
    with pytest.raises(ServerError, match="CLIENT_ERROR bad command line format") as err:
        c.get(key + b"3")
    assert type(err.value) is ServerError and err.value.status == wire.ST_BAD_REQUEST
    with pytest.raises(ServerError, match='answered "ERROR"'):
        c.get(key + b"4")
    assert proxy.connections == 1


def test_get_many_keeps_what_it_read_when_some_keys_fail(scripted, closing):
    proxy = scripted({b"lost": b"SERVER_ERROR cluster did not answer", b"b\x01d": b"SERVER_ERROR cluster busy"})
    proxy.store.update({b"a": b"1", b"c c": b"3"})
    c = closing(Client(transport="proxy", proxy=proxy.path))
    with pytest.raises(PartialResult) as err:
        c.get_many([b"a", b"lost", "c c", b"b\x01d", b"none"])
    e = err.value
    assert e.values == {b"a": b"1", "c c": b"3", b"none": None}
    assert e.failed_keys == [b"lost", b"b\x01d"] and e.keys == e.failed_keys
    assert type(e.errors[b"lost"]) is Timeout and type(e.errors[b"b\x01d"]) is ServerError
    assert e.errors[b"b\x01d"].status == wire.ST_BUSY


def test_set_many_and_delete_many_sort_proxy_answers(scripted, closing):
    proxy = scripted({b"busy": b"SERVER_ERROR not stored: cluster busy", b"lost": b"SERVER_ERROR outcome unknown",
                      b"gone x": b"NF", b"nd": b"SERVER_ERROR not deleted: cluster error"})
    c = closing(Client(transport="proxy", proxy=proxy.path))
    out = c.set_many({b"a": b"1", b"busy": b"2", b"lost": b"3", "b b": b"4"})
    assert out == [b"busy", b"lost"] and out.failed == [b"busy"] and out.unknown == [b"lost"]
    assert out.succeeded == [b"a", "b b"]
    assert type(out.errors[b"busy"]) is DefinitelyFailed and type(out.errors[b"lost"]) is UnknownOutcome
    gone = c.delete_many([b"a", b"gone x", b"nd", b"lost"])
    assert gone == [b"nd", b"lost"] and gone.failed == [b"nd"] and gone.unknown == [b"lost"]
    assert gone.succeeded == [b"a", b"gone x"] and gone.not_found == [b"gone x"]


def test_a_silent_proxy_times_out_and_its_connection_is_dropped(scripted, short_grace, closing):
    proxy = scripted({b"hang": HANG, b"hang w": HANG})
    c = closing(Client(transport="proxy", proxy=proxy.path, timeout=0.05, retries=1))
    t0 = time.monotonic()
    with pytest.raises(Timeout, match="no answer from exo-proxy") as err:
        c.get(b"hang")
    # The wait covers the proxy's own BUSY retries (dispatch.BUSY_BUDGET_S), so a silent proxy
    # is noticed after about that long plus the grace, not after timeout x (1 + retries).
    assert type(err.value) is Timeout and time.monotonic() - t0 < BUSY_BUDGET_S + 2
    with pytest.raises(UnknownOutcome, match="no answer from exo-proxy"):
        c.set(b"hang w", b"v")
    assert c.stats["connections"] == 2 and c._s.idle == [] and c._s.conns == set()
    # a batch: answered before the silence ok; sent after it unknown
    out = c.set_many({b"a": b"1", b"hang w": b"2", b"b": b"3"})
    assert out.succeeded == [b"a"] and out.unknown == [b"hang w", b"b"]
    assert c.get(b"a") == b"1" and c.stats["connections"] == 4


def test_a_connection_closed_mid_batch(scripted, closing):
    proxy = scripted({b"close": CLOSE})
    c = closing(Client(transport="proxy", proxy=proxy.path, window=2))
    out = c.set_many({b"a": b"1", b"close": b"2", **{b"k%d" % i: b"v" for i in range(20)}})
    assert out.succeeded == [b"a"] and out.unknown[:2] == [b"close", b"k0"]
    not_sent = out.failed  # beyond the window: never written, so definitely not applied
    assert not_sent and all("not sent" in str(out.errors[k]) for k in not_sent)
    assert out.unknown + out.failed == out and len(out) == 21
    with pytest.raises(PartialResult, match="could not read 1 of 2") as err:
        c.get_many([b"a", b"close"])
    assert err.value.values == {b"a": b"1"} and "closed the connection" in str(err.value.errors[b"close"])


def test_an_answer_that_is_no_answer_drops_the_connection(scripted, closing):
    proxy = scripted({b"odd": b"STORED"})  # STORED to a get
    c = closing(Client(transport="proxy", proxy=proxy.path))
    with pytest.raises(Timeout, match="does not answer a get"):
        c.get(b"odd")
    assert c._s.conns == set()
    assert c.set(b"a", b"1") is None and c.stats["connections"] == 2


def test_an_idle_connection_the_proxy_closed_is_replaced(scripted, closing):
    proxy = scripted()
    c = closing(Client(transport="proxy", proxy=proxy.path))
    c.set(b"a", b"1")
    proxy.drop_connections()  # a proxy restart: our pooled connection is dead
    time.sleep(0.05)
    assert c.get(b"a") == b"1"  # not "connection lost": the dead one was not used
    assert c.stats["connections"] == 2 and proxy.connections == 2


def test_an_unreachable_proxy_fails_every_request_unsent(tmp_path, closing):
    c = closing(Client(transport="proxy", proxy=str(tmp_path / "nobody.sock")))
    with pytest.raises(Timeout, match="not sent: cannot connect to exo-proxy at unix:") as err:
        c.get(b"k")
    assert type(err.value) is Timeout
    with pytest.raises(DefinitelyFailed, match="not sent: cannot connect"):
        c.set(b"k", b"v")
    with pytest.raises(PartialResult) as err:
        c.get_many([b"a", b"b"])
    assert err.value.failed_keys == [b"a", b"b"] and err.value.values == {}
    out = c.set_many({b"a": b"1", b"b": b"2"})
    assert out.failed == [b"a", b"b"] and out.unknown == []
    assert c.stats["connections"] == 0 and c.stats["sent"] == 0


def test_async_maps_proxy_answers(scripted, short_grace, closing):
    proxy = scripted({b"busy": b"SERVER_ERROR not stored: cluster busy", b"lost": b"SERVER_ERROR outcome unknown",
                      b"slow": b"SERVER_ERROR cluster did not answer", b"hang": HANG,
                      b"nd x": b"SERVER_ERROR not deleted: cluster error"})

    async def main():
        c = closing(AsyncClient(transport="proxy", proxy=proxy.path, timeout=0.05, retries=1))
        with pytest.raises(DefinitelyFailed, match="cluster busy") as err:
            await c.set(b"busy", b"v")
        assert err.value.status == wire.ST_BUSY
        with pytest.raises(UnknownOutcome, match="outcome unknown"):
            await c.set(b"lost", b"v")
        with pytest.raises(DefinitelyFailed, match="not deleted"):
            await c.delete(b"nd x")
        with pytest.raises(PartialResult) as err:
            await c.get_many([b"slow", b"ok"])
        assert err.value.values == {b"ok": None} and type(err.value.errors[b"slow"]) is Timeout
        assert c.stats["connections"] == 1
        with pytest.raises(Timeout, match="no answer from exo-proxy"):
            await c.get(b"hang")  # the client's own wait runs out
        # cancelled by the caller: its replies are still due, so its connection is dropped
        other = closing(AsyncClient(transport="proxy", proxy=proxy.path, timeout=5))
        with pytest.raises(asyncio.TimeoutError) as err:
            await asyncio.wait_for(other.get(b"hang"), 0.05)
        assert not isinstance(err.value, ExoError)
        assert other.stats["connections"] == 1 and other._s.conns == set() and other._s.idle == []
        assert await c.set(b"fine", b"v") is None and c.stats["connections"] == 2  # the hang dropped the first
        assert c._s.conns == set(c._s.idle) and len(c._s.idle) == 1
        await c.close()
    run(main())


def test_replies_parse_however_the_bytes_arrive():
    stream = (b"VALUE a 0 3\r\nx\r\n\r\nEND\r\nEND\r\nVA 2 b\r\nyy\r\nEN\r\nSTORED\r\nHD\r\nNS\r\nDELETED\r\n"
              b"NOT_FOUND\r\nHD\r\nNF\r\nSERVER_ERROR outcome unknown\r\n")
    K = proxy_transport
    expect = [(K.K_GET, b"a", (wire.ST_OK, b"x\r\n")), (K.K_GET, b"b", (wire.ST_NOT_FOUND, b"")),
              (K.K_MG, b"", (wire.ST_OK, b"yy")), (K.K_MG, b"", (wire.ST_NOT_FOUND, b"")),
              (K.K_SET, b"", (wire.ST_OK, b"")), (K.K_MS, b"", (wire.ST_OK, b"")), (K.K_MS, b"", (wire.ST_ERROR, b"")),
              (K.K_DELETE, b"", (wire.ST_OK, b"")), (K.K_DELETE, b"", (wire.ST_NOT_FOUND, b"")),
              (K.K_MD, b"", (wire.ST_OK, b"")), (K.K_MD, b"", (wire.ST_NOT_FOUND, b"")),
              (K.K_SET, b"", (None, b""))]
    for step in (1, 2, 7, len(stream)):
        r = K.Replies()
        got = []
        for i in range(0, len(stream), step):
            r.feed(stream[i:i + step])
            while len(got) < len(expect) and (one := r.next(*expect[len(got)][:2])) is not None:
                got.append(one[:2])
        assert got == [e[2] for e in expect], step
