"""`exo demo-web`'s figures, from what wrk, exo-proxy and /proc said (pure: no I/O, unit-tested
in tests/unit/test_demo_web_report.py).

A run is a sequence of wrk segments (warm-up, before, kill). The headline figures cover the
measured segments (before and kill); each segment also keeps its own.

  http_requests     responses wrk received + requests that failed on the socket
  http_errors       responses other than 2xx + socket errors (connect, read, write, timeout);
                    wrk never retries, so each failed request counts once
  requests_per_s    responses / seconds wrk ran
  p50_ms, p99_ms    from the merged latency histograms of the segments (wrk's own, microseconds)
  cache_share       of the GETs the app sent through exo-proxy, the share a cache node answered:
                    the proxy's get_hits_from_cache / cmd_get, as deltas over the segments
"""
from __future__ import annotations

import json
import math
from typing import Iterable, Mapping

WRK_MARKER = "EXO_WRK_JSON "
SOCKET_ERRORS = ("connect", "read", "write", "timeout")


class WrkOutputError(ValueError):
    pass


def parse_wrk(stdout: str) -> tuple[dict, str]:
    """(the JSON line zipf.lua's done() printed, wrk's own summary text without it)."""
    found = None
    text = []
    for line in stdout.splitlines():
        if line.startswith(WRK_MARKER):
            try:
                found = json.loads(line[len(WRK_MARKER):])
            except json.JSONDecodeError as err:
                raise WrkOutputError(f"wrk: the {WRK_MARKER.strip()} line is not JSON: {err}") from None
        else:
            text.append(line)
    if found is None:
        raise WrkOutputError(f"wrk printed no {WRK_MARKER.strip()} line (did it run zipf.lua's done()?)")
    for field in ("duration_us", "requests", "errors", "non2xx", "histogram_us"):
        if field not in found:
            raise WrkOutputError(f"wrk: {WRK_MARKER.strip()} has no '{field}'")
    return found, "\n".join(text)


def merge_histograms(histograms: Iterable[list]) -> list[list[int]]:
    """[[value_us, count], ...] from several runs, summed per value, by value."""
    total: dict[int, int] = {}
    for hist in histograms:
        for value, count in hist:
            total[int(value)] = total.get(int(value), 0) + int(count)
    return [[v, total[v]] for v in sorted(total)]


def percentile(hist: list[list[int]], p: float) -> float | None:
    """The smallest value with at least p% of the counts at or below it (wrk's definition);
    None for an empty histogram."""
    n = sum(c for _, c in hist)
    if n == 0:
        return None
    target = max(1, math.ceil(p / 100.0 * n))
    seen = 0
    for value, count in hist:
        seen += count
        if seen >= target:
            return float(value)
    return float(hist[-1][0])


def numeric_delta(after: Mapping[str, object], before: Mapping[str, object]) -> dict[str, int]:
    """after - before for every integer counter in both (exo-proxy `stats` values)."""
    out = {}
    for k, v in after.items():
        if isinstance(v, int) and isinstance(before.get(k), int):
            out[k] = v - before[k]
    return out


def cache_share(proxy_delta: Mapping[str, int]) -> float:
    gets = proxy_delta.get("cmd_get", 0)
    return proxy_delta.get("get_hits_from_cache", 0) / gets if gets else 0.0


def segment_figures(wrk: dict, proxy_delta: Mapping[str, int]) -> dict:
    """One wrk run's figures (the keys of the headline, for that run alone)."""
    socket_errors = sum(int(wrk["errors"].get(k, 0)) for k in SOCKET_ERRORS)
    responses = int(wrk["requests"])
    seconds = wrk["duration_us"] / 1e6
    p50, p99 = percentile(wrk["histogram_us"], 50), percentile(wrk["histogram_us"], 99)
    return {
        "http_requests": responses + socket_errors,
        "http_errors": int(wrk["non2xx"]) + socket_errors,
        "non2xx": int(wrk["non2xx"]),
        "socket_errors": {k: int(wrk["errors"].get(k, 0)) for k in SOCKET_ERRORS},
        "requests_per_s": responses / seconds if seconds > 0 else 0.0,
        "p50_ms": p50 / 1000 if p50 is not None else None,
        "p99_ms": p99 / 1000 if p99 is not None else None,
        "cache_share": cache_share(proxy_delta),
        "app_gets": proxy_delta.get("cmd_get", 0),
        "app_gets_from_cache": proxy_delta.get("get_hits_from_cache", 0),
        "duration_s": seconds,
    }


def headline(segments: Mapping[str, dict], measured: Iterable[str]) -> dict:
    """The named figures over the `measured` segments together. Each segment: {"wrk": parsed
    JSON, "proxy_delta": stats delta}."""
    names = list(measured)
    wrks = [segments[n]["wrk"] for n in names]
    merged = {
        "duration_us": sum(w["duration_us"] for w in wrks),
        "requests": sum(w["requests"] for w in wrks),
        "errors": {k: sum(int(w["errors"].get(k, 0)) for w in wrks) for k in SOCKET_ERRORS},
        "non2xx": sum(w["non2xx"] for w in wrks),
        "histogram_us": merge_histograms(w["histogram_us"] for w in wrks),
    }
    delta: dict[str, int] = {}
    for n in names:
        for k, v in segments[n]["proxy_delta"].items():
            delta[k] = delta.get(k, 0) + v
    return segment_figures(merged, delta)


def parse_proc_status(text: str) -> dict:
    """The identity lines of /proc/<pid>/status: Uid/Gid (real, effective, saved, fs), Groups,
    and the capability sets as integers."""
    out: dict = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if key in ("Uid", "Gid"):
            out[key] = [int(x) for x in value.split()]
        elif key == "Groups":
            out[key] = [int(x) for x in value.split()]
        elif key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            out[key] = int(value, 16)
        elif key in ("Name", "NoNewPrivs"):
            out[key] = value
    return out


def unprivileged(status: Mapping) -> bool:
    """No root identity (real, effective, saved, fs uid all non-zero) and no effective,
    permitted or ambient capability."""
    return (all(u != 0 for u in status.get("Uid", [0]))
            and status.get("CapEff", 1) == 0 and status.get("CapPrm", 1) == 0 and status.get("CapAmb", 1) == 0)
