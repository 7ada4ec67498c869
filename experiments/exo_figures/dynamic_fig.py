"""Figure 4.4 (thesis 4.3): throughput while the 50 hottest keys swap with 50 of the coldest
every 50 s, the cache kept by the real loop (REPORT -> selection -> FETCH -> rules at R/s).

The generator runs open loop at a fixed offered rate for the whole series, binned in 100 ms so
a sub-second recovery is visible; the first swap comes after one swap period of warm-up, in
which the loop fills the cache from nothing.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from exo_testbed.recovery import summarise, swap_recoveries
from exo_testbed.scale import Scale
from exo_testbed.thesis import THESIS
from exo_topo.switch_audit import RuleAudit, audit_problems, summary

from .runner import Workload, loadgen_cmd, run_loadgen

BIN_MS = 100


def run_dynamic(cl, scale: Scale, rate: float, swaps: int, out_dir: Path, alpha: float,
                progress: Callable[[str], None]) -> dict:
    every = THESIS["swap_every_s"]
    duration = every * (swaps + 1)
    wl = Workload(alpha=alpha, keys=scale.keys, swap_every_s=every, swap_count=THESIS["swap_keys"])
    progress(f"offered {rate:.0f} req/s for {duration:.0f} s, swaps at "
             f"{', '.join(str(every * (k + 1)) for k in range(swaps))} s")
    out = out_dir / "fig4_4-loadgen.json"
    load_before = os.getloadavg()[0]
    # The run's Ruleset 2 figures come from the switch's own record of the run window, beside
    # the controller's journal (exo_topo.switch_audit), not from the controller's lifetime Stats.
    with RuleAudit(cl, name="fig4_4-audit") as audit:
        rep = run_loadgen(cl, loadgen_cmd(cl, rate, duration, wl, out, scale, bin_ms=BIN_MS),
                          timeout=duration + 120, log_name="loadgen-fig4_4")
    rules = summary(audit.result)
    # the drain's bins (nothing sent) are not part of the series: a swap's window ends with the sending
    bins = [b for b in rep["seconds"] if b["t"] < duration]
    bin_s = BIN_MS / 1000
    t = [b["t"] for b in bins]
    answered = [b["answered"] / bin_s for b in bins]
    from_cache = [b["from_cache"] / bin_s for b in bins]
    swap_at = [every * (k + 1) for k in range(swaps)]
    per_swap = swap_recoveries(t, answered, swap_at, bin_s, from_cache_rps=from_cache)
    ctl = cl.stubs.controller_stats()
    return {"offered_rps": rate, "alpha": alpha, "bin_s": bin_s, "swap_at_s": swap_at,
            "swap_keys": THESIS["swap_keys"], "rule_updates_per_s": cl.cfg.switch.rule_update_rate,
            "t": t, "answered_rps": [round(a, 1) for a in answered],
            "from_cache_rps": [round(a, 1) for a in from_cache],
            **summarise(per_swap), "swaps": per_swap,
            **rules,  # rule_updates_per_s_max, ruleset2_max (run window) and their switch_* checks
            "rule_updates_per_s_max_lifetime": ctl.get("rule_updates_per_s_max"),
            "rule_audit_problems": audit_problems(audit.result, cl.cfg.switch.rule_update_rate,
                                                  cl.cfg.switch.cache_rule_capacity),
            "totals": rep["totals"],
            "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
