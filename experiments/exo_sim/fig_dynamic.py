"""Figure 4.4 (thesis 4.3, dynamic distributions): the payload for results/sim/fig4_4.json."""
from __future__ import annotations

import math

import numpy as np
from exo_testbed import record

from .baselines import NOTES, SYSTEMS
from .common import MODEL_NOTES, Scale, fill_defaults, progress
from .dynamic import DynConfig, Run, recovery
from .placement import Placement
from .throughput import DYNAMIC_RULES, LOSS_RULES, max_rate


def _stats(rec: list[dict]) -> dict:
    vals = [r["recovery_s"] for r in rec]
    ok = [v for v in vals if not math.isnan(v)]
    return {"recovery_s_mean": round(float(np.mean(ok)), 3) if ok else None,
            "recovery_s_max": round(float(max(ok)), 3) if ok else None,
            "never_recovered": len(vals) - len(ok)}


def fig4_4(scale: Scale, cfg: DynConfig, placement: Placement | None = None) -> dict:
    progress(f"fig4_4: {cfg.duration_s:.0f} s, swap of the {cfg.swap_keys} hottest keys every "
             f"{cfg.swap_every_s:.0f} s, R = {scale.R:g}/s")
    run = Run(scale, cfg, placement)
    series = run.run(progress)
    t = np.array(series["t"])
    swaps = [k * cfg.swap_every_s for k in range(1, run.swaps_total + 1) if k * cfg.swap_every_s < cfg.duration_s]
    rec = {r: recovery(t, np.array(series[r]), swaps) for r in DYNAMIC_RULES}
    # The baselines with instant cache contents, per hot-set state (they change only at swaps).
    states = list(range(len(swaps) + 1))
    base = {s: {r: [] for r in LOSS_RULES} for s in (*SYSTEMS, "oracle_exoskeleton")}
    for st in states:
        run.set_swaps(st)
        loads = run.static_systems()
        for s in SYSTEMS:
            for r, ml in LOSS_RULES.items():
                v = max_rate(loads[s], run.cluster, ml).answered
                base["oracle_exoskeleton" if s == "exoskeleton" else s][r].append(v)
    del base["exoskeleton"]
    out = {"figure": "4.4", "title": "Cluster throughput while the %d hottest keys swap with cold keys every %g s"
           % (cfg.swap_keys, cfg.swap_every_s),
           "alpha": cfg.alpha, "cache_entries": cfg.capacity, "duration_s": cfg.duration_s,
           "swap_every_s": cfg.swap_every_s, "swap_keys": cfg.swap_keys, "swap_times_s": swaps,
           "offered_rps": run.lam, "switch": {"R": scale.R, "C": run.upd.capacity, "barrier_ms": cfg.barrier_ms,
                                              "rule_updates_per_s_max": run.upd.max_per_s,
                                              "flow_mods_sent": run.upd.flow_mods_sent},
           "series": {k: (np.round(v, 1).tolist() if k not in ("t", "cache_share") else
                          np.round(v, 6).tolist()) for k, v in series.items()},
           "recovery": rec["loss5"], "recovery_loss0": rec["loss0"],
           **_stats(rec["loss5"]),
           "loss0": _stats(rec["loss0"]),
           "baselines": {"state_start_s": [0.0, *swaps], **base},
           # the test bed's record: the answered rate at the fixed offered rate (what the Mininet
           # figure measures), its recovery by the same two criteria (exo_testbed.recovery)
           "testbed": record.fig4_4(record.header("fig4_4", "simulator", scale.testbed(), []), cfg.out_step_s,
                                    run.lam, cfg.capacity, swaps,
                                    [round(x - cfg.out_step_s, 6) for x in series["t"]],  # bin starts
                                    series["at_offered"]),
           "model": {"notes": [*MODEL_NOTES,
                               "Dynamic loop: traffic and detectors every %d ms tick, REPORTs every report_interval_ms, "
                               "selection (C++ select_keys) every interval_ms, the controller's RuleUpdater paces "
                               "flow-mods at R; a batch's rules take effect when its barrier returns." % cfg.tick_ms,
                               "series.loss5/loss0: the throughput rule applied to the rules installed at that "
                               "instant (a client that keeps its loss at 5% / 0%); at_offered: answered at the fixed "
                               "offered rate (Exoskeleton's static 5%-rule rate)",
                               "recovery_s: from a swap until loss5 throughput is back to 95% of its mean over the "
                               "5 s before the swap (0 if it never fell below)",
                               "baselines: instant cache contents (the current top-k) per hot-set state; "
                               "oracle_exoskeleton is the static Exoskeleton value, i.e. R = infinity"],
                     "systems": NOTES, "detector": "detector.py (sampled Space-Saving model)",
                     "knobs": fill_defaults(), "overrides": cfg.overrides, "tick_ms": cfg.tick_ms,
                     "modelled_ranks": cfg.modelled_ranks, "warmup_s": cfg.warmup_s, "seed": cfg.seed}}
    return out
