"""The thesis's test bed (Chapter 4) and how ours is scaled down from it.

OVS in userspace on 2 cores forwards a few 10^4 frames/s, not the thesis's 2.3 M requests/s, so
rates are scaled by one factor and every ratio that shapes the results is kept:
  * each db node's limit : the cache node's limit  (cache_to_db = cache / (nodes x node)),
  * keys, key and value sizes, cache entries: unchanged (the Zipf sampler needs no table),
  * switch rule updates/s : hot-set change (50 rules/s against 50 keys every 50 s): unchanged,
    because neither is a request rate.
`Scale.as_json()` is written into every results/fig4_N.json and onto every plot.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

THESIS = {
    "db_nodes": 32,
    "node_rps": 72_200,          # each emulated wimpy's limit (4.2)
    "keys": 100_000_000,
    "key_size": 16,
    "value_size": 512,
    "rule_updates_per_s": 50,    # Pica8 P3922 L2 updates (4.1.2)
    "cache_entries": 1000,       # Figures 4.1 and 4.2
    "swap_keys": 50,             # Figure 4.4
    "swap_every_s": 50,
    "max_loss": 0.05,            # "a constant packet loss of approximately 5%"
}


@dataclass(frozen=True)
class Scale:
    db_nodes: int = THESIS["db_nodes"]
    node_rps: float = 250.0        # our emulated wimpy's limit
    cache_to_db: float = 1.0       # cache node limit / total db limit ("faster than all together")
    keys: int = THESIS["keys"]
    key_size: int = THESIS["key_size"]
    value_size: int = THESIS["value_size"]
    rule_updates_per_s: float = THESIS["rule_updates_per_s"]

    @property
    def db_capacity(self) -> float:
        return self.db_nodes * self.node_rps

    @property
    def cache_rps(self) -> float:
        return self.cache_to_db * self.db_capacity

    @property
    def rate_factor(self) -> float:
        return self.node_rps / THESIS["node_rps"]

    def as_json(self) -> dict:
        d = asdict(self)
        d.update(
            rate_factor=round(self.rate_factor, 8),
            thesis_node_rps=THESIS["node_rps"],
            cache_rps=self.cache_rps,
            db_capacity_rps=self.db_capacity,
            key_factor=self.keys / THESIS["keys"],
            rule_rate_factor=self.rule_updates_per_s / THESIS["rule_updates_per_s"],
            note="request rates x rate_factor; ratios of capacities, keys, sizes and switch "
                 "update rate to hot-set change as in the thesis",
        )
        return d

    def label(self) -> str:
        return (f"scale: {self.db_nodes} db x {self.node_rps:g} req/s (thesis x {self.rate_factor:.4f}), "
                f"cache {self.cache_rps:g} req/s, {self.keys:.0e} keys, R={self.rule_updates_per_s:g}/s")
