"""The catalogue's web app (FastAPI). One exoskeleton.AsyncClient per worker process, talking to
the host's exo-proxy over its unix socket: the worker needs no privileges.

    uvicorn catalogue_web.app:app --workers 4        (settings: settings.py)

    GET /item/<id>   the item's page, read through the cluster (read_through.py)
    GET /            the first items, from the source of truth
    GET /healthz     200 {"ok": true, pid, uid} once a cluster read through the proxy works
"""
from __future__ import annotations

import logging
import os

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

from exoskeleton import AsyncClient, ExoError

from . import pages
from .read_through import read_item
from .settings import from_env
from .store import Store

log = logging.getLogger("catalogue_web")
app = FastAPI(title="Exoskeleton catalogue")


class _State:
    settings = None
    client: AsyncClient | None = None
    store: Store | None = None


state = _State()


@app.on_event("startup")
async def startup() -> None:
    state.settings = s = from_env(os.environ)  # a bad setting stops the worker here, named
    state.store = Store(s.db)
    state.client = AsyncClient(transport="proxy", proxy=s.proxy, mtu=s.mtu, timeout=s.timeout_ms / 1000,
                               retries=s.retries)
    log.warning("worker %d (uid %d) serving %d items through %s", os.getpid(), os.getuid(),
                state.store.count(), s.proxy)


@app.on_event("shutdown")
async def shutdown() -> None:
    if state.client is not None:
        await state.client.close()
    if state.store is not None:
        state.store.close()


def _error(status: int, message: str) -> HTMLResponse:
    return HTMLResponse(pages.error_page(status, message), status_code=status)


@app.get("/item/{item_id}", response_class=HTMLResponse)
async def item(item_id: int) -> HTMLResponse:
    if state.settings.fault_item == item_id:  # the test switch (EXO_WEB_FAULT_ITEM)
        return _error(500, f"fault injected for item {item_id}")
    try:
        found, source = await read_item(state.client, state.store, item_id)
    except ExoError as err:
        log.warning("item %d: cluster: %s", item_id, err)
        return _error(503, f"the cluster did not answer for item {item_id}: {err}")
    if found is None:
        return _error(404, f"no item {item_id}")
    return HTMLResponse(pages.item_page(found, source))


@app.get("/", response_class=HTMLResponse)
async def index() -> HTMLResponse:
    items = [i for i in (state.store.item(n) for n in range(1, 21)) if i is not None]
    return HTMLResponse(pages.index_page(items, state.store.count()))


@app.get("/healthz")
async def healthz() -> JSONResponse:
    try:
        await state.client.get("healthz")  # a real round trip: socket, proxy and cluster
    except ExoError as err:
        return JSONResponse({"ok": False, "error": str(err)}, status_code=503)
    return JSONResponse({"ok": True, "pid": os.getpid(), "uid": os.getuid()})
