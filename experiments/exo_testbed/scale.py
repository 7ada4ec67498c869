"""The thesis's test bed (Chapter 4) and how ours is scaled down from it.

OVS in userspace on 2 cores forwards a few 10^4 frames/s, not the thesis's 2.3 M requests/s, so
rates are scaled by one factor and every ratio that shapes the results is kept:
  * each db node's limit : the cache node's limit  (cache_to_db = cache / (nodes x node)),
  * keys, key and value sizes, cache entries: unchanged (the Zipf sampler needs no table),
  * switch rule updates/s : hot-set change (50 rules/s against 50 keys every 50 s): unchanged,
    because neither is a request rate.
`Scale.as_json()` is written into every results/fig4_N.json and onto every plot; the simulator
(thesis scale, rate_factor 1) makes its own with exo_sim.common.Scale.testbed().
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from . import record
from .thesis import THESIS


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

    def testbed(self) -> dict:
        """This scale as the test bed's record (record.scale_record)."""
        return record.scale_record(self.db_nodes, self.node_rps, self.cache_rps, self.keys,
                                   self.rule_updates_per_s, round(self.rate_factor, 8))

    def label(self) -> str:
        return (f"scale: {self.db_nodes} db x {self.node_rps:g} req/s (thesis x {self.rate_factor:.4f}), "
                f"cache {self.cache_rps:g} req/s, {self.keys:.0e} keys, R={self.rule_updates_per_s:g}/s")
