"""A run's Ruleset 2 figures (exo_topo.rule_window): the busiest 1 s, the largest size, and the
xid match between the controller's journal and the switch's record."""
import random

from exo_topo.rule_window import busiest_window, figures, level_at, match_xids, peak_level


def brute_busiest(times, t0, t1, width=1.0):
    ts = [t for t in times if t0 <= t <= t1]
    return max([sum(1 for u in ts if s <= u < s + width) for s in ts] or [0])


def test_busiest_window_is_half_open():
    assert busiest_window([0.0, 0.5, 1.0], 0, 10) == 2  # 1.0 is not in [0, 1)
    assert busiest_window([0.0, 0.5, 0.999], 0, 10) == 3
    assert busiest_window([], 0, 10) == 0


def test_busiest_window_only_counts_inside_the_run():
    # start-up programming (before t0) and anything after t1 do not count
    startup = [0.001 * i for i in range(300)]
    run = [10 + 0.05 * i for i in range(40)]
    assert busiest_window(startup + run + [30.0, 30.1], 5.0, 20.0) == 20
    assert busiest_window(startup + run, 0.0, 20.0) == 300


def test_busiest_window_matches_brute_force():
    rng = random.Random(3)
    for _ in range(200):
        times = [rng.uniform(0, 5) for _ in range(rng.randint(0, 60))]
        t0, t1 = sorted([rng.uniform(-1, 6), rng.uniform(-1, 6)])
        assert busiest_window(times, t0, t1) == brute_busiest(times, t0, t1)


def test_levels():
    levels = [(1.0, 5), (2.0, 9), (3.0, 4), (4.0, 7)]
    assert level_at(levels, 0.5) == 0 and level_at(levels, 0.5, initial=3) == 3
    assert level_at(levels, 2.0) == 9 and level_at(levels, 2.5) == 9
    assert peak_level(levels, 2.5, 3.5) == 9   # the size it had at t0 counts
    assert peak_level(levels, 3.0, 3.9) == 4
    assert peak_level(levels, 3.5, 10) == 7


def test_figures():
    f = figures([0.1, 0.2, 5.0, 5.1, 5.2, 9.0], [(0.1, 1), (0.2, 2), (5.0, 3), (5.2, 1)], 1.0, 8.0)
    assert f == {"flow_mods": 3, "rule_updates_per_s_max": 3, "ruleset2_max": 3,
                 "ruleset2_at_start": 2, "ruleset2_at_end": 1}


def test_match_xids():
    ctl = [(1.0, 10), (2.0, 11), (3.0, 12), (9.0, 13)]
    sw = [(1.001, 10), (2.004, 11), (3.5, 99), (9.0, 13)]
    a = match_xids(ctl, sw, 0.5, 5.0)
    assert (a["matched"], a["missing_at_switch"], a["unknown_to_controller"]) == (2, 1, 1)
    assert a["delay_ms_max"] == 4.0 and a["delay_ms_p50"] in (1.0, 4.0)
    assert match_xids([], [], 0, 1)["delay_ms_max"] is None
