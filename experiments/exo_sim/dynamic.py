"""The dynamic run (thesis 4.3, Figure 4.4): the cache fill loop end to end on a simulated clock.

Every tick (50 ms) of simulated time:
  1. traffic: each modelled key gets lambda * P(its current rank); the switch sends a key to
     the cache node iff its Ruleset 2 rule is installed; every server answers up to capacity;
  2. db nodes sample what they serve into their detectors (detector.Detectors) and REPORT every
     report_interval_ms their hottest keys with rates to the cache node (all nodes at the same
     instants; real nodes' timers are not aligned, which changes a reaction by < one interval);
  3. every interval_ms the cache node runs a fill round like Filler::run_round: own hit rates
     (an EWMA per second, HitRates), the hot-list snapshot (latest REPORT per db node within
     report_ttl_ms, highest rate per key), held keys rated max(hit rate, reported rate), the
     C++ select_keys (selector.py); victims' rules are removed at once and their entries erased
     when the switch confirms; admitted keys are fetched (instantly), inserted, and their rules
     added with their rates (AddCacheRules no_wait);
  4. the controller's own RuleUpdater (exo_controller.rule_updater, Algorithm 1) sends
     batches when next_wakeup says so; the switch applies a batch when its barrier returns,
     `barrier_ms` after the send (batch_done).
Every 0.1 s the cluster throughput under both loss rules is taken from the installed rules.

Not modelled: FETCH latency and loss (instant), writes, the retiring state (a victim's removal
is sent at once, so it is "removing" until confirmed), LRU evictions in the map, cache nodes
other than one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from exo_controller.flows import CacheRule, rule_hash
from exo_controller.rule_updater import RuleUpdater

from . import selector as sel
from .baselines import systems
from .common import Scale, fill_defaults, switch_capacity
from .detector import Detectors
from .placement import Placement, key_hashes, key_names
from .throughput import Loads, at_rate, max_rate
from .zipf import Zipf, swap_ranks

NODE = "cache0"


@dataclass
class DynConfig:
    alpha: float = 0.99
    capacity: int = 1000          # keys the cache node selects (cache_nodes[].capacity)
    duration_s: float = 300.0
    swap_every_s: float = 50.0
    swap_keys: int = 50
    tick_ms: int = 50
    out_step_s: float = 0.1
    warmup_s: float = 10.0
    modelled_ranks: int = 16384   # ranks modelled key by key (plus every swapped key)
    barrier_ms: float = 0.0       # switch delay between a batch's send and its barrier reply
    seed: int = 1
    C: Optional[int] = None       # Ruleset 2 capacity; default: capacity + the fast-add buffer
    overrides: dict = field(default_factory=dict)  # e.g. {"cache_fill": {"hysteresis": 0.1}}


class Run:
    def __init__(self, scale: Scale, cfg: DynConfig, placement: Optional[Placement] = None):
        self.scale, self.cfg = scale, cfg
        self.cluster = scale.cluster()
        self.placement = placement or Placement(scale.nodes)
        knobs = fill_defaults()
        for sec, vals in cfg.overrides.items():
            knobs[sec].update(vals)
        self.hk, self.cf = knobs["hot_keys"], knobs["cache_fill"]
        n, H = scale.n_keys, cfg.swap_keys
        self.swaps_total = int(cfg.duration_s // cfg.swap_every_s) if cfg.swap_every_s > 0 else 0
        self.zipf = Zipf(n, cfg.alpha, top=max(cfg.modelled_ranks, cfg.capacity))
        top = np.arange(min(cfg.modelled_ranks, n))
        cold = [np.arange(n - j * H, n - (j - 1) * H) for j in range(1, self.swaps_total + 1)]
        self.ids = np.unique(np.concatenate([top, *cold])) if cold else top
        self.names = key_names(self.ids)
        self.hashes = key_hashes(self.ids)
        self.owner = self.placement.owner(self.hashes)
        # Keyed like the switch's Ruleset 2 (flows.rule_hash: the hash's top 32 bits).
        self.index_of_hash = {rule_hash(int(h)): i for i, h in enumerate(self.hashes)}
        if len(self.index_of_hash) != len(self.ids):
            raise RuntimeError("Ruleset 2 hash collision among the modelled keys")
        self.rng = np.random.default_rng(cfg.seed)
        U = self.ids.size
        self.routed = np.zeros(U, dtype=bool)      # Ruleset 2 rule installed
        self.state = np.zeros(U, dtype=np.int8)    # 0 absent, 1 held, 2 removing (rule removal sent)
        self.hits = np.zeros(U, dtype=np.int64)    # the map entry's hit counter
        self.hits_due = np.zeros(U)                # expected hits not drawn yet
        self.hr_known = np.zeros(U, dtype=bool)    # HitRates state
        self.hr_hits = np.zeros(U, dtype=np.int64)
        self.hr_ms = np.zeros(U, dtype=np.int64)
        self.hr_rate = np.zeros(U)
        n_nodes = self.placement.nodes
        self.rep_idx = [np.zeros(0, dtype=np.int64)] * n_nodes  # the hot list: latest REPORT per node
        self.rep_rate = [np.zeros(0)] * n_nodes
        self.rep_ms = np.full(n_nodes, -10**12, dtype=np.int64)
        C = cfg.C or switch_capacity(cfg.capacity)
        self.upd = RuleUpdater({NODE: 1}, C, scale.R)
        self.inflight = None
        self.inflight_done = 0.0
        self.set_swaps(0)
        # The offered rate: Exoskeleton's static 5%-rule rate with the hottest keys cached.
        static = self.loads(self.rank <= cfg.capacity)
        self.lam = max_rate(static, self.cluster, 0.05).offered
        self.det = Detectors(self.owner, self.hk, self.rng, now_ms=self._ms(-cfg.warmup_s))
        self._prepopulate()

    # ------------------------------------------------------------------ traffic

    @staticmethod
    def _ms(t: float) -> int:
        return int(round(t * 1000))

    def set_swaps(self, s: int) -> None:
        self.swaps = s
        self.rank = swap_ranks(self.ids, self.scale.n_keys, self.cfg.swap_keys, s)
        self.pu = self.zipf.pmf(self.rank)
        self.tail = max(0.0, 1.0 - float(self.pu.sum()))

    def loads(self, cached: np.ndarray) -> Loads:
        db = np.bincount(self.owner, weights=np.where(cached, 0.0, self.pu), minlength=self.placement.nodes)
        hit = float(self.pu[cached].sum())
        return Loads(db=db + self.tail * self.placement.fraction, hit=hit, cache_work=hit)

    def static_systems(self) -> dict[str, Loads]:
        """The baselines with instant cache contents (the current top `capacity` ranks)."""
        cached = self.rank <= self.cfg.capacity
        base = np.bincount(self.owner, weights=self.pu, minlength=self.placement.nodes) + self.tail * self.placement.fraction
        cn = np.bincount(self.owner, weights=np.where(cached, self.pu, 0.0), minlength=self.placement.nodes)
        return systems(base, cn, float(self.pu[cached].sum()))

    def _prepopulate(self) -> None:
        """Start warm, as after a long run: the hottest `capacity` keys held, rules installed."""
        idx = np.flatnonzero(self.rank <= self.cfg.capacity)
        now = self._ms(-self.cfg.warmup_s)
        rules = [CacheRule(int(self.hashes[i]), NODE) for i in idx]
        self.upd.add(rules, loads=list(self.lam * self.pu[idx]))
        self.upd.switch_connected({int(self.hashes[i]): 1 for i in idx})
        self.routed[idx] = True
        self.state[idx] = 1
        self.hr_known[idx], self.hr_ms[idx], self.hr_rate[idx] = True, now, self.lam * self.pu[idx]

    def _tick_traffic(self, now_ms: int, dt: float) -> None:
        r = self.lam * self.pu
        to_db = ~self.routed
        off = np.bincount(self.owner, weights=np.where(to_db, r, 0.0), minlength=self.placement.nodes)
        off += self.lam * self.tail * self.placement.fraction
        served = np.minimum(1.0, self.cluster.db_cap / np.maximum(off, 1e-300))
        self.det.observe(np.where(to_db, r * served[self.owner], 0.0), dt, now_ms)
        cache_off = float(r[self.routed].sum())
        fc = min(1.0, self.cluster.cache_cap / cache_off) if cache_off > 0 else 1.0
        self.hits_due += np.where(self.routed & (self.state > 0), r * (fc * dt), 0.0)

    def _draw_hits(self) -> None:
        """Hits since the last draw (a Poisson count per entry, drawn when the filler looks)."""
        i = np.flatnonzero(self.hits_due > 0)
        self.hits[i] += self.rng.poisson(self.hits_due[i])
        self.hits_due[i] = 0.0

    # ------------------------------------------------------------------ cache node

    def _hit_rates_sample(self, now_ms: int) -> None:
        """HitRates::sample over the map's entries."""
        self._draw_hits()
        present = self.state > 0
        self.hr_known &= present
        fresh = present & ~self.hr_known
        self.hr_known[fresh], self.hr_hits[fresh], self.hr_ms[fresh] = True, self.hits[fresh], now_ms
        self.hr_rate[fresh] = self.cf["min_rate"]
        upd = present & ~fresh & (now_ms > self.hr_ms)
        i = np.flatnonzero(upd)
        dt_ms = now_ms - self.hr_ms[i]
        delta = self.hits[i] - self.hr_hits[i]
        inst = delta * 1000.0 / dt_ms
        a = 1.0 - np.power(1.0 - self.cf["hit_ewma_alpha"], dt_ms / 1000.0)
        self.hr_rate[i] = a * inst + (1 - a) * self.hr_rate[i]
        self.hr_hits[i], self.hr_ms[i] = self.hits[i], now_ms

    def _snapshot(self, now_ms: int) -> np.ndarray:
        """HotList::snapshot: highest reported rate per key (0 = not in the hot list)."""
        best = np.zeros(self.ids.size)
        for n in range(self.placement.nodes):
            if now_ms - self.rep_ms[n] <= self.cf["report_ttl_ms"] and self.rep_idx[n].size:
                np.maximum.at(best, self.rep_idx[n], self.rep_rate[n])
        return best

    def _fill_round(self, now_ms: int) -> None:
        self._hit_rates_sample(now_ms)
        reported = self._snapshot(now_ms)
        held = np.flatnonzero(self.state == 1)
        held_rate = np.maximum(self.hr_rate[held], reported[held])
        cand = np.flatnonzero((reported > 0) & (self.state == 0))
        cand = cand[np.lexsort((self.ids[cand], -reported[cand]))]
        skip = np.flatnonzero((self.state == 2) & (reported > 0))
        s = sel.get().select(self.names[cand], reported[cand], self.names[held], held_rate,
                             self.cfg.capacity, self.cf["min_rate"], self.cf["hysteresis"],
                             skip=self.names[skip])
        victims = np.concatenate((held, cand))[s.evict]
        if victims.size:
            self.state[victims] = 2
            self.upd.remove([CacheRule(int(self.hashes[v]), NODE) for v in victims])
        room = 2 * self.cfg.capacity - int((self.state > 0).sum())
        admit = cand[s.admit][:max(0, min(room, int(self.cf["max_fetch_batch"])))]
        admit = admit[self.state[admit] == 0]
        if admit.size:
            self.state[admit], self.hits[admit], self.hits_due[admit] = 1, 0, 0.0
            self.hr_known[admit], self.hr_hits[admit], self.hr_ms[admit] = True, 0, now_ms
            self.hr_rate[admit] = reported[admit]
            self.upd.add([CacheRule(int(self.hashes[a]), NODE) for a in admit], loads=list(reported[admit]))

    # ------------------------------------------------------------------ switch

    def _apply(self, batch) -> None:
        self.upd.batch_done(batch)
        for fm in batch.mods:
            if fm.rule_hash is None:
                continue
            i = self.index_of_hash.get(fm.rule_hash)
            if i is not None:
                self.routed[i] = fm.rule_hash in self.upd.installed
        # The retire thread: a removing key whose removal the switch confirmed is erased.
        gone = [i for i in np.flatnonzero(self.state == 2) if not self.upd.pending(int(self.hashes[i]))
                and rule_hash(int(self.hashes[i])) not in self.upd.installed]
        if gone:
            self.state[gone] = 0
            self.routed[gone] = False
            self.hits_due[gone] = 0.0

    def _switch(self, t0: float, t1: float) -> None:
        now = t0
        while True:
            if self.inflight is not None:
                if self.inflight_done > t1:
                    return
                now = max(now, self.inflight_done)
                batch, self.inflight = self.inflight, None
                self._apply(batch)
            w = self.upd.next_wakeup(now)
            if w is None or w >= t1:
                return
            now = max(now, w)
            batch = self.upd.next_batch(now)
            if not batch.mods:
                return
            self.inflight, self.inflight_done = batch, now + self.cfg.barrier_ms / 1000.0

    # ------------------------------------------------------------------ the loop

    def run(self, progress=None) -> dict:
        cfg = self.cfg
        dt = cfg.tick_ms / 1000.0
        rep_every = max(1, round(self.hk["report_interval_ms"] / cfg.tick_ms))
        fill_every = max(1, round(self.cf["interval_ms"] / cfg.tick_ms))
        out_every = max(1, round(cfg.out_step_s / dt))
        nodes = np.arange(self.placement.nodes)
        first = -round(cfg.warmup_s / dt)
        last = round(cfg.duration_s / dt)
        series = {k: [] for k in ("t", "loss5", "loss0", "at_offered", "cache_share", "rules_installed",
                                  "adds_queued", "deletes_queued", "updates_last_1s")}
        swap_ms = self._ms(cfg.swap_every_s)
        for tick in range(first, last):
            t = tick * dt
            now_ms = self._ms(t)
            if swap_ms > 0 and tick >= 0:
                s = min(now_ms // swap_ms, self.swaps_total)
                if s != self.swaps:
                    self.set_swaps(s)
            # [t, t + dt): traffic on the rules installed at t; the switch's batches in the
            # tick take effect for the next one (an error of at most one tick).
            self._tick_traffic(now_ms, dt)
            self._switch(t, t + dt)
            end_ms = now_ms + cfg.tick_ms
            if (tick + 1) % rep_every == 0:
                for n, (idx, rate) in self.det.reports(end_ms, nodes).items():
                    self.rep_idx[n], self.rep_rate[n], self.rep_ms[n] = idx, rate, end_ms
            if tick % fill_every == 0:
                self._fill_round(end_ms)
            if tick >= 0 and (tick + 1) % out_every == 0:
                self._record(series, t + dt)
            if progress and tick >= 0 and (tick + 1) % round(50 / dt) == 0:
                progress(f"fig4_4: {t + dt:.0f}/{cfg.duration_s:.0f} s simulated")
        return series

    def _record(self, series: dict, t: float) -> None:
        loads = self.loads(self.routed)
        series["t"].append(round(t, 3))
        series["loss5"].append(max_rate(loads, self.cluster, 0.05).answered)
        series["loss0"].append(max_rate(loads, self.cluster, 0.0).answered)
        series["at_offered"].append(at_rate(loads, self.cluster, self.lam).answered)
        series["cache_share"].append(loads.hit)
        m = self.upd.metrics(t)
        series["rules_installed"].append(m["ruleset2_installed"])
        series["adds_queued"].append(m["rule_adds_queued"])
        series["deletes_queued"].append(m["rule_deletes_queued"])
        series["updates_last_1s"].append(m["rule_updates_last_1s"])


def recovery(t: np.ndarray, thr: np.ndarray, swap_times: list[float], pre_s: float = 5.0,
             level: float = 0.95) -> list[dict]:
    """Per swap: the pre-swap throughput (mean over pre_s before it), the dip, and the time from
    the swap until the throughput is back to `level` of the pre-swap value (0 if it never fell
    below; NaN if it never came back before the next swap or the end)."""
    out = []
    for i, ts in enumerate(swap_times):
        end = swap_times[i + 1] if i + 1 < len(swap_times) else math.inf
        pre = thr[(t > ts - pre_s) & (t <= ts)]
        after = (t > ts) & (t <= end)
        if pre.size == 0 or not after.any():
            continue
        ref = float(pre.mean())
        ta, va = t[after], thr[after]
        low = va < level * ref
        if not low.any():
            rec = 0.0
        else:
            back = np.flatnonzero(~low & (np.arange(va.size) > np.flatnonzero(low)[0]))
            rec = round(float(ta[back[0]] - ts), 3) if back.size else math.nan
        out.append({"swap_s": ts, "pre": ref, "min": float(va.min()), "recovery_s": rec})
    return out
