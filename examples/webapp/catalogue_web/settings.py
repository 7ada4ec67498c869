"""The app's settings, from its environment (uvicorn's workers inherit it). Each bad value is an
error naming the variable, raised at startup, before the worker serves a request.

    EXO_WEB_PROXY           exo-proxy's unix socket (or host:port)          required
    EXO_WEB_DB              the catalogue's SQLite file (store.py)          required
    EXO_WEB_MTU             the cluster's MTU (the largest item it stores)  1500
    EXO_WEB_TIMEOUT_MS      exo-proxy's --timeout-ms                        250
    EXO_WEB_RETRIES         exo-proxy's --retries                           4
    EXO_WEB_FAULT_ITEM      test switch: /item/<this id> answers 500        unset

The client waits for the proxy up to timeout x (1 + retries) + 1 s (docs/client.md, "Waiting for
the proxy"), so giving it the proxy's own resend settings makes it wait out every resend the proxy
makes before it gives up on a request.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    proxy: str
    db: str
    mtu: int = 1500
    timeout_ms: int = 250
    retries: int = 4
    fault_item: Optional[int] = None


def _int(env: Mapping[str, str], name: str, default: Optional[int], lo: int, hi: int) -> Optional[int]:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{name}: want an integer (got {text!r})") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name}: must be in {lo}..{hi} (got {value})")
    return value


def from_env(env: Mapping[str, str]) -> Settings:
    missing = [n for n in ("EXO_WEB_PROXY", "EXO_WEB_DB") if not env.get(n, "").strip()]
    if missing:
        raise SettingsError(f"{', '.join(missing)}: not set (see catalogue_web/settings.py)")
    return Settings(proxy=env["EXO_WEB_PROXY"].strip(), db=env["EXO_WEB_DB"].strip(),
                    mtu=_int(env, "EXO_WEB_MTU", 1500, 68, 9000),
                    timeout_ms=_int(env, "EXO_WEB_TIMEOUT_MS", 250, 1, 60_000),
                    retries=_int(env, "EXO_WEB_RETRIES", 4, 0, 100),
                    fault_item=_int(env, "EXO_WEB_FAULT_ITEM", None, 1, 2**31))
