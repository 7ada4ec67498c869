"""What every experiment shares: the cluster's scale, the knobs taken from the cluster config's
defaults, progress lines on stderr, and writing results (JSON + the model notes)."""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from exo_common.config import CacheFillSection, HotKeysSection, SwitchSection

from exo_testbed import record
from exo_testbed.record import alpha_key  # noqa: F401  (one definition for both result sets)
from exo_testbed.thesis import THESIS

from .throughput import Cluster

_T0 = time.monotonic()


def progress(msg: str) -> None:
    print(f"[exo_sim {time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


@dataclass
class Scale:
    """The thesis's cluster (4.1-4.2): 32 emulated wimpy nodes at 72,200 requests/s each, one
    cache node, 100 M keys, a Pica8 P3922 switch (R = 50 rule updates/s). The cache node's
    capacity is `cache_ratio` x all db nodes together; 1.0 by default, which puts the fig 4.3
    knee between 10,000 and 15,000 entries at alpha 0.99 as in the thesis (at 1.0 the cache
    becomes the bottleneck once h/(1-h) > 1, h the cached share: h(10k) = 0.49, h(15k) = 0.51)."""
    nodes: int = THESIS["db_nodes"]
    node_rps: float = float(THESIS["node_rps"])
    cache_ratio: float = 1.0
    n_keys: int = THESIS["keys"]
    R: float = field(default_factory=lambda: SwitchSection().rule_update_rate)
    C: int = 1112            # Ruleset 2 capacity: 1,000 selectable + the 10% fast-add buffer
    factor: float = 1.0      # 1.0: thesis scale, nothing scaled down

    @property
    def cache_rps(self) -> float:
        return self.cache_ratio * self.nodes * self.node_rps

    def cluster(self) -> Cluster:
        return Cluster(np.full(self.nodes, self.node_rps), self.cache_rps)

    def testbed(self) -> dict:
        """This scale as the test bed's record (exo_testbed.record.scale_record)."""
        return record.scale_record(self.nodes, self.node_rps, self.cache_rps, self.n_keys, self.R, self.factor)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(node_count=self.nodes, cache_rps=self.cache_rps, db_total_rps=self.nodes * self.node_rps)
        return d


def switch_capacity(cache_entries: int) -> int:
    """The smallest C whose fast-add buffer leaves `cache_entries` selectable (config check)."""
    frac = SwitchSection().fast_add_fraction
    c = math.ceil(cache_entries / (1 - frac))
    while int(c * (1 - frac)) < cache_entries:
        c += 1
    return c


def fill_defaults() -> dict:
    """The knobs of docs/cache-fill.md at the cluster config's defaults."""
    hk, cf, sw = HotKeysSection(), CacheFillSection(), SwitchSection()
    return {"hot_keys": hk.model_dump(), "cache_fill": cf.model_dump(),
            "switch": {"rule_update_rate": sw.rule_update_rate, "fast_add_fraction": sw.fast_add_fraction}}


MODEL_NOTES = [
    "Fluid model: each server answers min(offered, capacity) requests/s and drops the rest; no queueing delay, no retries.",
    "Zipf(alpha) over n keys with the 10^6 hottest ranks explicit (analytic probabilities; H(n) by Euler-Maclaurin past them); "
    "explicit keys are placed by the cluster's key hash (XXH64 low 40 bits of the emulator's 16-byte key names).",
    "Tail keys (rank > 10^6) are spread by each node's expected share of the hash space: a node's tail is a sum over "
    "millions of keys and concentrates (relative spread reported as tail_rel_std).",
    "Placement 'even': consistent hashing with equal arcs (owner = hash*N >> 40); 'ring': the controller's partition table.",
    "Throughput rule: answered rate at the highest offered rate with total loss <= 5% (thesis 4.2), by bisection; "
    "loss0 is the same with 0% loss (no server over capacity).",
    "Cache contents: the cache node's own select_keys (C++, via ctypes) on exact rates, so keys below min_rate are "
    "never cached (uniform traffic caches nothing).",
    "Only GETs are modelled (the thesis's evaluation is read-only); key and value sizes do not matter.",
]


def write_result(out_dir: Path, name: str, payload: dict) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=_json_default) + "\n")
    return path


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o)}")
