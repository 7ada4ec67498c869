"""The demo's derived figures: merged per-second series and cache_fill_s."""
from exo_cli.demo import cache_fill_seconds, merge_series


def _rows(shares, gets=100):
    return [{"ops": gets, "gets": gets, "gets_from_cache": int(s * gets), "errors": 0} for s in shares]


def test_merge_series_sums_clients_and_computes_share():
    merged = merge_series([_rows([0.0, 0.5]), _rows([0.5, 0.5, 1.0])])
    assert [r["gets"] for r in merged] == [200, 200, 100]
    assert [r["share_from_cache"] for r in merged] == [0.25, 0.5, 1.0]
    assert [r["t_s"] for r in merged] == [0, 1, 2]


def test_cache_fill_seconds_is_first_second_at_90_percent_of_final():
    shares = [0.0, 0.1, 0.3, 0.42, 0.46, 0.5, 0.5, 0.5, 0.5, 0.5, 0.2]  # last row: partial second
    series = merge_series([_rows(shares)])
    assert cache_fill_seconds(series) == 5  # 0.46 >= 0.9 * 0.5 during second 4, which ends at 5 s


def test_cache_fill_seconds_needs_a_long_enough_run():
    assert cache_fill_seconds(merge_series([_rows([0.5] * 4)])) is None
    assert cache_fill_seconds(merge_series([_rows([0.0] * 10)])) is None
