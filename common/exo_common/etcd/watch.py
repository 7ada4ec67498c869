"""One etcd watch on its own thread: Watch(stub, create request, callback). start() returns once
etcd has created the watch, so every change after that point reaches the callback; cancel() ends
it. etcd cancelling the watch (its start revision was compacted) or the stream breaking (etcd
gone) ends it too: `error` says why and `on_error` is called. It does not reconnect."""
from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, Optional

import grpc

from etcd import kv_pb2, rpc_pb2

from .ops import EtcdError, EtcdRpcError, KeyValue, WatchEvent

log = logging.getLogger("exo.etcd")

_EVENT_TYPES = {kv_pb2.Event.PUT: "PUT", kv_pb2.Event.DELETE: "DELETE"}


class Watch:
    def __init__(self, stub, create: rpc_pb2.WatchCreateRequest, callback: Callable[[list[WatchEvent]], None],
                 on_error: Optional[Callable[[EtcdError], None]] = None, what: str = "watch"):
        self._stub = stub
        self._create = create
        self._callback = callback
        self._on_error = on_error
        self._what = what
        self._requests: "queue.Queue[Optional[rpc_pb2.WatchRequest]]" = queue.Queue()
        self._created = threading.Event()
        self._done = threading.Event()
        self._cancelled = False
        self._call = None
        self._thread: Optional[threading.Thread] = None
        self.revision = 0      # the store revision when etcd created the watch
        self.error: Optional[EtcdError] = None

    def _request_stream(self):
        yield rpc_pb2.WatchRequest(create_request=self._create)
        while self._requests.get() is not None:  # nothing else is sent; None ends the stream
            pass

    def start(self, timeout_s: float) -> "Watch":
        self._call = self._stub.Watch(self._request_stream())
        self._thread = threading.Thread(target=self._run, name=f"etcd-{self._what}", daemon=True)
        self._thread.start()
        if not self._created.wait(timeout_s) and self.error is None:
            self.cancel()
            raise EtcdError(f"etcd {self._what}: not created within {timeout_s} s")
        if self.error is not None:
            raise self.error
        return self

    def _run(self) -> None:
        try:
            for resp in self._call:
                if resp.created:
                    self.revision = resp.header.revision
                    self._created.set()
                if resp.canceled:
                    reason = resp.cancel_reason or "no reason given"
                    if resp.compact_revision:
                        reason += f"; history before revision {resp.compact_revision} is compacted"
                    self._fail(EtcdError(f"etcd {self._what} cancelled by etcd: {reason}"))
                    return
                if resp.events:
                    events = [WatchEvent(_EVENT_TYPES.get(e.type, str(e.type)), KeyValue.of(e.kv))
                              for e in resp.events]
                    try:
                        self._callback(events)
                    except Exception:  # noqa: BLE001 - a broken callback must not kill the watch
                        log.exception("etcd %s: callback failed", self._what)
            if not self._cancelled:
                self._fail(EtcdError(f"etcd {self._what}: the stream ended"))
        except grpc.RpcError as err:
            if not self._cancelled:
                self._fail(EtcdRpcError(f"etcd {self._what}: {err.code().name}: {err.details()}", err.code().name))
        finally:
            self._requests.put(None)  # lets gRPC's request-stream thread finish
            self._done.set()
            self._created.set()

    def _fail(self, err: EtcdError) -> None:
        self.error = err
        self._created.set()
        log.warning("%s", err)
        if self._on_error is not None:
            try:
                self._on_error(err)
            except Exception:  # noqa: BLE001
                log.exception("etcd %s: on_error failed", self._what)

    @property
    def active(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    def cancel(self) -> None:
        """Ends the watch; waits for its thread unless called from it (from the callback)."""
        self._cancelled = True
        self._requests.put(None)
        if self._call is not None:
            self._call.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
