"""AsyncClient: the Client's calls as coroutines, for asyncio (FastAPI, uvicorn, aiohttp).

    from exoskeleton.aio import AsyncClient
    async with AsyncClient("eth0") as c:
        await c.set("user:1", b"alice")
        values = await c.get_many(["user:1", "user:2"])

Same protocol, same Session (dispatch.py), same calls (api.py) as Client; only the waiting
differs. The reply socket is registered with the event loop (loop.add_reader): whenever it is
readable the loop hands each reply to the future of the call that sent the request, by request
id. Every request in flight has a timer (loop.call_later) for its resend deadline. No threads.

transport="proxy" (AsyncClient(transport="proxy", proxy="/run/exo-proxy.sock")): the same calls
through the host's exo-proxy instead, on the loop's socket calls (proxy_transport.AsyncProxySession:
one connection per call in progress); no capability needed.

One AsyncClient belongs to one event loop at a time (it moves to another loop when used from
there, e.g. a new asyncio.run); it is not for sharing between threads (use Client). In a forked
child it opens its own socket under a new client_id, as Client does; create the child's event
loop after the fork (gunicorn and uvicorn workers do).
"""
from __future__ import annotations

import asyncio
import time
from typing import Optional

from . import dispatch, proxy_transport
from .api import BaseClient
from .request import Request, Result


class _Batch:
    """One execute() call: the owner of its Entries; `future` gets the Results in order."""

    def __init__(self, session: dispatch.Session, loop: asyncio.AbstractEventLoop, requests: list[Request],
                 timeout: float, retries: int, window: int):
        self.s = session
        self.loop = loop
        self.todo = iter(enumerate(requests))
        self.out: list[Optional[Result]] = [None] * len(requests)
        self.timers: dict = {}  # Entry in flight -> the TimerHandle of its deadline
        self.timeout = timeout
        self.retries = retries
        self.window = window
        self.future = loop.create_future()

    def fill(self) -> None:
        """Send until `window` are in flight; resolve the future when nothing is left."""
        if self.future.done():
            return
        now = time.monotonic()
        while len(self.timers) < self.window:
            item = next(self.todo, None)
            if item is None:
                break
            e = self._guard(self.s.start, item[1], self, self.timeout, self.retries, now)
            if e is None:
                return
            e.tag = item[0]
            self._arm(e)
        if not self.timers:
            self.future.set_result(self.out)

    def _guard(self, fn, *args):
        """fn(*args), or None after failing the call with its exception (e.g. a closed socket)."""
        try:
            return fn(*args)
        except Exception as exc:
            if not self.future.done():
                self.future.set_exception(exc)
            return None

    def _arm(self, e) -> None:
        self.timers[e] = self.loop.call_later(max(0.0, e.deadline - time.monotonic()), self._due, e)

    def _due(self, e) -> None:
        if e in self.timers:
            self._guard(self.s.expire, e, time.monotonic())

    # ---- the Session's owner interface ----
    def finished(self, e, res: Result) -> None:
        self.timers.pop(e).cancel()
        self.out[e.tag] = res
        self.fill()

    def rescheduled(self, e) -> None:
        self.timers.pop(e).cancel()
        self._arm(e)

    def abandon(self) -> None:
        for handle in self.timers.values():
            handle.cancel()
        self.s.abandon(list(self.timers))
        self.timers.clear()


class AsyncClient(BaseClient):
    """Client's API as coroutines: get, set, delete, get_many, set_many, delete_many and
    execute are awaited; close() too (or `async with`). The arguments are Client's, less
    `native` and `history`; the I/O must have fileno() (RawIO's reply socket).
    transport="proxy", proxy=...: through exo-proxy, as Client's."""

    DRAIN = 256  # replies read per readable event at most, to keep the loop fair

    def __init__(self, iface: Optional[str] = None, *, transport: str = "raw", proxy=None, timeout: float = 0.25,
                 retries: int = 4, mtu: int = 1500, udp_port: int = 7777, service_ip: str = "10.0.0.254",
                 window: int = 32, client_id: Optional[int] = None, io=None, serializer=None, deserializer=None,
                 busy_budget: float = dispatch.BUSY_BUDGET_S):
        self._reader: Optional[tuple] = None  # (loop, session, fd) the reply socket is registered with
        super().__init__(iface, timeout=timeout, retries=retries, mtu=mtu, udp_port=udp_port,
                         service_ip=service_ip, window=window, client_id=client_id, io=io,
                         serializer=serializer, deserializer=deserializer, transport=transport, proxy=proxy,
                         busy_budget=busy_budget)
        if not self._s.proxied and not callable(getattr(self._s.io, "fileno", None)):
            raise TypeError("AsyncClient needs an I/O with fileno() (a descriptor readable when a reply is there)")

    def _new_proxy_session(self, address: proxy_transport.Address) -> proxy_transport.AsyncProxySession:
        return proxy_transport.AsyncProxySession(address)

    async def _run(self, timeout: Optional[float], plan, *args):
        requests, finish = plan(*args)
        for req in requests:
            self.check(req)
        return finish(await self._execute(requests, timeout))

    async def execute(self, requests: list[Request], timeout: Optional[float] = None) -> list[Result]:
        """Run requests pipelined; results in request order. Never raises Timeout (status None)."""
        requests = list(requests)
        for req in requests:
            self.check(req)
        return await self._execute(requests, timeout)

    async def _execute(self, requests: list[Request], timeout: Optional[float]) -> list[Result]:
        if not requests:
            return []
        s = dispatch.current(self)
        if s.proxied:
            return await s.execute(requests, self.timeout if timeout is None else timeout, self.retries,
                                   self.window)
        loop = asyncio.get_running_loop()
        self._listen(s, loop)
        batch = _Batch(s, loop, requests, self.timeout if timeout is None else timeout, self.retries, self.window)
        batch.fill()
        try:
            return await batch.future
        finally:
            batch.abandon()  # cancelled (e.g. asyncio.wait_for): forget what is still in flight

    # ---- the reply socket on the event loop ----
    def _listen(self, s: dispatch.Session, loop: asyncio.AbstractEventLoop) -> None:
        if self._reader is not None and self._reader[0] is loop and self._reader[1] is s:
            return
        self._unlisten()
        fd = s.io.fileno()
        loop.add_reader(fd, self._readable, s)
        self._reader = (loop, s, fd)

    def _unlisten(self) -> None:
        if self._reader is None:
            return
        loop, s, fd = self._reader
        self._reader = None
        # A parent's loop is not ours to touch from a forked child (its epoll set is shared).
        if s.generation == dispatch.generation() and not loop.is_closed():
            loop.remove_reader(fd)

    def _readable(self, s: dispatch.Session) -> None:
        for _ in range(self.DRAIN):
            data = s.io.recv(0)
            if data is None:
                return
            s.on_data(data, time.monotonic())

    async def close(self) -> None:
        self._unlisten()
        self._s.close()

    aclose = close

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
