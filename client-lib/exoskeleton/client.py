"""The Exoskeleton client: GET/SET/DELETE over raw Ethernet frames.

The client keeps no cluster state: the key hash in the destination MAC (and its top 32 bits in
the IPv4 destination, keyhash.request_ip) is all the switch needs. Requests are pipelined (up to
`window` in flight); each is resent with the same (client_id, seq) after `timeout` seconds, at
most `retries` times. A db node applies a request
id at most once and answers a resend with the first outcome (docs/two-phase-commit.md).

A BUSY reply means "not applied, try again later" (e.g. the cache node holding the key did not
answer the two-phase commit). The node remembers that outcome for the id, so a delayed copy of
the request can never be applied later; the client therefore retries under a *new* seq after a
short backoff. So the outcome of a write is decided by its last id alone: a reply says applied
(OK) or not (ERROR, BUSY); no reply to the last id leaves it unknown.

Threads share a Client: the protocol is dispatch.py's Session; here is how threads wait. Every
call owns its requests (a _Waiter). One thread at a time, the receiver, reads the socket and
hands each reply to the call that sent it, waking that thread (a condition variable per call);
the others wait for their replies or their next resend deadline. A receiver whose own call needs
it no more passes the role to a waiting call. A thread alone never waits on a condition.

transport="proxy" replaces all of that with proxy_transport.ProxySession: the same calls and
Results through the host's exo-proxy (memcached text protocol), one connection per call in
progress, no capability needed.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator, Optional

from . import dispatch, proxy_transport
from .api import BaseClient
from .rawio import RawIO
from .request import Request, Result  # exoskeleton.client.Request: as before


class _Waiter:
    """One execute()/stream() call on the pure-Python path: the owner of its Entries."""

    __slots__ = ("entries", "ready", "cond")

    def __init__(self):
        self.entries: set = set()
        self.ready: list[Result] = []
        self.cond: Optional[threading.Condition] = None  # made the first time the call waits

    # called by the Session with its lock held
    def finished(self, e, res: Result) -> None:
        self.entries.discard(e)
        self.ready.append(res)
        if self.cond is not None:
            self.cond.notify()

    def rescheduled(self, e) -> None:
        if self.cond is not None:
            self.cond.notify()


class ThreadSession(dispatch.Session):
    """A Session shared by threads: `lock` guards it all; the receiver role and, on a client with
    the native path, the gate between native calls (which read every reply themselves, so run
    alone) and pure-Python ones (which dispatch replies to each other)."""

    def __init__(self, io, client_id: Optional[int], udp_port: int):
        super().__init__(io, client_id, udp_port)
        self.receiving = False                # a thread is reading replies for everyone
        self.waiters: list[_Waiter] = []      # calls blocked on their condition
        self.native = None                    # the native Pipeline over io's sockets
        self.gate = threading.Lock()          # held by a native call
        self.py_active = 0                    # pure-Python calls under way (with native only)

    # ---- with the lock held ----
    def wait(self, w: _Waiter, timeout: float) -> None:
        if w.cond is None:
            w.cond = threading.Condition(self.lock)
        self.waiters.append(w)
        try:
            w.cond.wait(timeout)
        finally:
            self.waiters.remove(w)

    def release_receiver(self) -> None:
        self.receiving = False
        if self.waiters:
            self.waiters[0].cond.notify()  # it takes the role over (or finds it taken)

    # ---- the native gate: a native call runs only when nothing else does ----
    # A native call holds `gate`, then checks py_active; a pure-Python call counts itself in
    # py_active, then waits for `gate`. Each does its first step before looking at the other's,
    # so one of them always sees the other. Alone, a native call costs two lock operations.
    def begin_native(self) -> bool:
        if not self.gate.acquire(False):
            return False  # another thread is in: go the pure-Python way beside it
        if self.py_active:
            self.gate.release()
            return False
        return True

    def end_native(self) -> None:
        self.gate.release()

    def begin_py(self) -> None:
        with self.lock:
            self.py_active += 1
        self.gate.acquire()  # wait out a native call under way
        self.gate.release()

    def end_py(self) -> None:
        with self.lock:
            self.py_active -= 1


class Client(BaseClient):
    """Talks to an Exoskeleton cluster through `iface` (needs CAP_NET_RAW), or, with
    `transport="proxy"`, through the host's exo-proxy at `proxy=` (a unix socket path such as
    "/run/exo-proxy.sock", or "127.0.0.1:11211", the default): no capability needed, same calls,
    results and exceptions (proxy_transport.py). The proxy transport takes timeout, retries
    (how long to wait for the proxy: proxy_transport.wait_budget), mtu, window and the
    serializer hooks; iface, io, client_id, history and native=True are the raw transport's.

    Thread-safe: threads may share one Client; each call gets its own replies (see the module
    doc). Fork-safe: used in a forked child, it opens its own socket under a new client_id
    (dispatch.py). For asyncio, AsyncClient (exoskeleton.aio) has the same calls as coroutines.

    Keys are bytes or str (UTF-8). Values are bytes; `serializer(key, value) -> bytes` and
    `deserializer(key, data) -> value` (pymemcache's hooks) store other objects.

    `history=History(), history_name="client0"`: record every operation for the linearizability
    checker. This only wraps `io` in exo_harness.recorder.RecordingIO (needs that package).

    `native`: run execute() (and so get, set, delete and the many-key calls) in the native hot
    path (exoskeleton.native: C++, batched sendmmsg/recvmmsg, same rules as stream()). None
    (default): when it is built and the client owns a real RawIO; False: never; True: required
    (raises RuntimeError saying why when it cannot). A fake or recording I/O always uses the
    pure-Python path, which stays the reference: both pass the same tests. A native call reads
    every reply itself, so it runs only while no other thread is in the client; a call that
    finds another one running takes the pure-Python path beside it.

    `service_ip` is accepted (and checked to be an IPv4 address) so existing callers keep
    working, but requests no longer use it: their IPv4 destination carries the key hash
    (docs/wire-format.md)."""

    def __init__(self, iface: Optional[str] = None, *, transport: str = "raw", proxy=None, timeout: float = 0.25,
                 retries: int = 4, mtu: int = 1500, udp_port: int = 7777, service_ip: str = "10.0.0.254",
                 window: int = 32, client_id: Optional[int] = None, io=None, history=None,
                 history_name: str = "", native: Optional[bool] = None, serializer=None, deserializer=None,
                 busy_budget: float = dispatch.BUSY_BUDGET_S):
        if transport == "proxy" and (history is not None or native):
            raise ValueError("history= and native=True are for transport='raw' (they work on raw frames); "
                             "transport='proxy' leaves the frames to exo-proxy")
        if history is not None:
            # A convenience kept for existing callers: recording is a wrapper around the I/O
            # (exo_harness.recorder), not part of the client. Imported only here, so the client
            # library does not depend on the harness.
            from exo_harness.recorder import RecordingIO
            io = RecordingIO(io if io is not None else RawIO(iface), history, history_name)
        self._native_wanted = native
        super().__init__(iface, timeout=timeout, retries=retries, mtu=mtu, udp_port=udp_port,
                         service_ip=service_ip, window=window, client_id=client_id, io=io,
                         serializer=serializer, deserializer=deserializer, transport=transport, proxy=proxy,
                         busy_budget=busy_budget)

    def _new_session(self, io, client_id: Optional[int]) -> ThreadSession:
        s = ThreadSession(io, client_id, self.udp_port)
        s.busy_budget = self.busy_budget
        return s

    def _new_proxy_session(self, address: proxy_transport.Address) -> proxy_transport.ProxySession:
        return proxy_transport.ProxySession(address)

    def _adopt(self, session) -> None:
        if not session.proxied:
            session.native = self._native_pipeline(session)
        self._s = session

    @property
    def native(self) -> bool:
        """Whether execute() runs in the native hot path."""
        return dispatch.current(self).native is not None

    def native_stats(self) -> Optional[dict]:
        """The native path's lifetime counters (those of self.stats plus send_calls and
        recv_calls, the system calls that carried them), or None on the pure-Python path."""
        s = dispatch.current(self)
        return None if s.native is None else s.native.stats()

    def _native_pipeline(self, s: ThreadSession):
        if self._native_wanted is False:
            return None
        from . import native
        mod, why = native.load()
        if mod is not None and type(s.io) is not RawIO:
            why = "the client's I/O is not a plain RawIO (a fake, or recording a history)"
        if mod is None or why:
            if self._native_wanted:
                raise RuntimeError(f"native client path unavailable: {why}")
            return None
        return mod.Pipeline(s.io.tx.fileno(), s.io.rx.fileno(), s.io.mac, s.io.ip, s.io.port,
                            self.service_ip, self.udp_port, s.client_id)

    # ---- running requests ----
    def _run(self, timeout: Optional[float], plan, *args):
        requests, finish = plan(*args)
        return finish(self.execute(requests, timeout))

    def execute(self, requests: list[Request], timeout: Optional[float] = None) -> list[Result]:
        """Run requests pipelined; results in request order. Never raises Timeout (status None)."""
        for req in requests:
            self.check(req)
        return self._execute(dispatch.current(self), requests, self.timeout if timeout is None else timeout)

    def stream(self, requests: Iterator[Request], on_result: Callable[[Result], None],
               timeout: Optional[float] = None, stop_at: Optional[float] = None) -> None:
        """Keep up to `window` requests in flight until `requests` is exhausted (or the
        monotonic time `stop_at` passes), calling on_result for each finished request."""
        s = dispatch.current(self)
        timeout = self.timeout if timeout is None else timeout
        if s.native is not None or s.proxied:
            return self._stream_chunks(s, requests, on_result, timeout, stop_at)
        self._run_py(s, requests, on_result, timeout, stop_at)

    def _execute(self, s: ThreadSession, requests: list[Request], timeout: float) -> list[Result]:
        if s.proxied:
            return s.execute(requests, timeout, self.retries, self.window)
        if s.native is not None and s.begin_native():
            try:
                return self._execute_native(s, requests, timeout)
            finally:
                s.end_native()
        out: list[Optional[Result]] = [None] * len(requests)
        # Positions per request object: the same (frozen) Request may be listed twice.
        slots: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            slots.setdefault(id(r), []).append(i)

        def collect(res: Result) -> None:
            pending = slots[id(res.request)]
            out[next(i for i in pending if out[i] is None)] = res

        self._run_py(s, iter(requests), collect, timeout, None)
        return out  # type: ignore[return-value]

    def _run_py(self, s: ThreadSession, requests: Iterator[Request], on_result: Callable[[Result], None],
                timeout: float, stop_at: Optional[float]) -> None:
        """The pure-Python path: this call's requests through the shared Session."""
        gated = s.native is not None
        if gated:
            s.begin_py()
        w = _Waiter()
        receiver = exhausted = False
        try:
            while True:
                new = []  # pulled and checked outside the lock (the iterator is the caller's code)
                stopped = stop_at is not None and time.monotonic() >= stop_at
                while not (exhausted or stopped) and len(w.entries) + len(new) < self.window:
                    req = next(requests, None)
                    if req is None:
                        exhausted = True
                    else:
                        self.check(req)
                        new.append(req)
                with s.lock:
                    now = time.monotonic()
                    for req in new:
                        w.entries.add(s.start(req, w, timeout, self.retries, now))
                    for e in [e for e in w.entries if e.deadline <= now]:
                        s.expire(e, now)
                    done, w.ready = w.ready, []
                    if done or not w.entries:
                        if receiver:
                            receiver = False
                            s.release_receiver()
                        if not done:
                            return  # nothing in flight, nothing more to send
                    else:
                        wait = min(e.deadline for e in w.entries) - now
                        if not receiver and s.receiving:
                            if wait > 0:
                                s.wait(w, wait)
                            continue
                        receiver = s.receiving = True
                for res in done:  # outside the lock: the callback is the caller's code
                    on_result(res)
                if done:
                    continue
                data = s.io.recv(wait)
                if data is not None:
                    with s.lock:
                        s.on_data(data, time.monotonic())
        finally:
            with s.lock:
                if receiver:
                    s.release_receiver()
                s.abandon(w.entries)
            if gated:
                s.end_py()

    def close(self) -> None:
        self._s.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- the native path ----
    # stream() on the native path (and over exo-proxy) hands the requests over in chunks of this
    # many windows: each
    # chunk ends when its slowest request does, so a chunk of 8 windows keeps the pipe full for
    # all but the last window's worth of its requests.
    NATIVE_CHUNK_WINDOWS = 8

    def _stream_chunks(self, s: ThreadSession, requests: Iterator[Request], on_result: Callable[[Result], None],
                       timeout: float, stop_at: Optional[float]) -> None:
        chunk = self.window * self.NATIVE_CHUNK_WINDOWS
        while stop_at is None or time.monotonic() < stop_at:
            batch = []
            for req in requests:
                self.check(req)
                batch.append(req)
                if len(batch) == chunk:
                    break
            if not batch:
                return
            for res in self._execute(s, batch, timeout):
                on_result(res)

    def _execute_native(self, s: ThreadSession, requests: list[Request], timeout: float) -> list[Result]:
        before = s.native.stats()
        raw, s.seq = s.native.execute([(r.op, r.key, r.value) for r in requests], timeout, self.retries,
                                      self.window, s.seq, self.busy_budget)
        after = s.native.stats()
        for k in s.stats:
            s.stats[k] += after[k] - before[k]
        return [Result(req, st, val, flags, lat, att) for req, (st, val, flags, lat, att) in zip(requests, raw)]
