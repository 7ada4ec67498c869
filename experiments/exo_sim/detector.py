"""The db nodes' hot-key detectors and REPORTs (docs/cache-fill.md section 1), vectorised over
every db node and every modelled key at once.

What is modelled as in db-node/src/hot_keys/hot_key_detector.cc:
  * sampling: each GET a db node serves is sampled with probability sample_rate (1/16), so a
    key's sampled count over a stretch of time is Poisson(integral of served rate * sample_rate)
    (drawn lazily, when a segment closes or a REPORT is built: sums of Poissons are Poisson);
  * one estimator per time segment (segment_ms), `segments` of them kept, rotated like
    HotKeyDetector::rotate;
  * rate(key) = sum_i w_i * count_i / (sample_rate * len_i) / sum_i w_i, the current segment's
    weight scaled by how full it is and its length the time elapsed;
  * count_i is Space-Saving's *guaranteed* count, and the reported rate is the lower confidence
    bound rate * (1 - z / sqrt(samples)) (a key sampled once is not reported);
  * a REPORT carries each node's report_keys hottest keys.
What is approximated: Space-Saving itself. A segment's estimator is modelled as tracking the
node's top_k keys by sampled count exactly (guaranteed count = true sampled count) and nothing
else (guaranteed count 0). Real Space-Saving tracks those keys too (every key above N/k is
tracked) but keys near the k-th count carry some error, so this is slightly optimistic for keys
near the cut; the hot keys that matter have counts far above it. Keys outside the modelled set
(the tail) are not sampled at all; their counts are far below any reported key's.
"""
from __future__ import annotations

import math

import numpy as np


def top_per_group(values: np.ndarray, groups: np.ndarray, k: int, candidates: np.ndarray) -> np.ndarray:
    """Indices (into values) of the k largest positive values of each group among `candidates`;
    ties by index, as a deterministic stand-in for the C++ tie-breaks."""
    c = candidates[values[candidates] > 0]
    if c.size == 0:
        return c
    order = c[np.lexsort((c, -values[c], groups[c]))]
    g = groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    pos = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    return order[pos < k]


class Detectors:
    """Every db node's HotKeyDetector over the modelled keys 0..U-1 (owner[u] = its db node)."""

    def __init__(self, owner: np.ndarray, hot_keys: dict, rng: np.random.Generator, now_ms: int = 0):
        self.owner = np.asarray(owner)
        self.nodes = int(self.owner.max()) + 1 if self.owner.size else 0
        self.rng = rng
        self.p = float(hot_keys["sample_rate"])
        self.z = float(hot_keys["confidence_z"])
        self.seg_ms = max(int(hot_keys["segment_ms"]), 1)
        self.weights = list(hot_keys["weights"])
        self.top_k = int(hot_keys["top_k"])
        self.report_keys = int(hot_keys["report_keys"])
        n_seg = max(int(hot_keys["segments"]), 1)
        self.weights += [0.0] * (n_seg - len(self.weights))
        self.counts = np.zeros((n_seg, self.owner.size), dtype=np.int64)
        self.guaranteed: list[np.ndarray | None] = [None] * n_seg  # closed segments, computed once
        self.cur = 0
        self.cur_start = now_ms
        self.live = 1
        self.pending = np.zeros(self.owner.size)  # expected samples not drawn yet (current segment)

    def rotate(self, now_ms: int) -> None:
        if now_ms < self.cur_start + self.seg_ms:
            return
        steps = (now_ms - self.cur_start) // self.seg_ms
        n = len(self.counts)
        self._draw()
        for _ in range(min(steps, n)):
            self.guaranteed[self.cur] = self._space_saving(self.counts[self.cur])
            self.cur = (self.cur + 1) % n
            self.counts[self.cur] = 0
            self.guaranteed[self.cur] = None
        self.cur_start += steps * self.seg_ms
        self.live = min(self.live + min(steps, n), n)

    def observe(self, served_rate: np.ndarray, dt_s: float, now_ms: int) -> None:
        """Samples of the GETs served in [now_ms, now_ms + dt): served_rate per key (req/s)."""
        self.rotate(now_ms)
        self.pending += served_rate * (dt_s * self.p)

    def _draw(self) -> None:
        hot = np.flatnonzero(self.pending > 0)
        if hot.size:
            self.counts[self.cur, hot] += self.rng.poisson(self.pending[hot])
            self.pending[hot] = 0.0

    def _space_saving(self, counts: np.ndarray) -> np.ndarray:
        """Guaranteed counts of one segment: each node's top_k keys by count keep theirs."""
        g = np.zeros_like(counts)
        keep = top_per_group(counts, self.owner, self.top_k, np.flatnonzero(counts))
        g[keep] = counts[keep]
        return g

    def rates(self, now_ms: int) -> np.ndarray:
        """HotKeyDetector::hottest's rate (lower confidence bound) for every key; 0 = not reported."""
        self.rotate(now_ms)
        self._draw()
        elapsed = max(now_ms - self.cur_start, 0)
        n = len(self.counts)
        weighted = np.zeros(self.owner.size)
        samples = np.zeros(self.owner.size)
        weight_sum = 0.0
        for age in range(self.live):
            w, len_s = self.weights[age], self.seg_ms / 1000.0
            if age == 0:
                w *= elapsed / self.seg_ms
                len_s = elapsed / 1000.0
            if w <= 0 or len_s <= 0:
                continue
            weight_sum += w
            i = (self.cur - age) % n
            g = self._space_saving(self.counts[i]) if age == 0 else self.guaranteed[i]
            if g is None:  # a segment entered by a jump (never filled): no samples
                continue
            weighted += (w / (self.p * len_s)) * g
            samples += g
        if weight_sum <= 0:
            return weighted
        keep = np.zeros_like(samples)
        pos = samples > 0
        keep[pos] = 1.0 - self.z / np.sqrt(samples[pos]) if self.z > 0 else 1.0
        return np.where(keep > 0, weighted * keep / weight_sum, 0.0)

    def reports(self, now_ms: int, nodes: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """REPORTs of `nodes` at now_ms: node -> (key indices, rates), hottest first."""
        r = self.rates(now_ms)
        want = np.zeros(self.nodes, dtype=bool)
        want[nodes] = True
        cand = np.flatnonzero(want[self.owner] & (r > 0))
        top = top_per_group(r, self.owner, self.report_keys, cand)
        out = {int(n): (np.zeros(0, dtype=np.int64), np.zeros(0)) for n in nodes}
        if top.size:
            g = self.owner[top]
            for n in np.unique(g):
                idx = top[g == n]
                out[int(n)] = (idx, r[idx])
        return out


def confidence_keep(samples: float, z: float) -> float:
    """The share of a rate that survives the lower confidence bound (for tests and docs)."""
    return 1.0 - z / math.sqrt(samples) if samples > 0 and z > 0 else (1.0 if samples > 0 else 0.0)
