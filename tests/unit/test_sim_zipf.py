"""exo_sim.zipf: analytic Zipf shares and the hot-set swap's rank mapping."""
import numpy as np
import pytest

from exo_sim.zipf import Zipf, power_sum, swap_ranks


@pytest.mark.parametrize("alpha", [0.0, 0.5, 0.9, 0.99, 1.0, 1.2])
def test_power_sum_matches_exact(alpha):
    for lo, hi in [(1, 10), (1, 200_000), (1000, 3_000_000), (17, 1_234_567)]:
        exact = float(np.sum(np.arange(hi, lo - 1, -1, dtype=np.float64) ** -alpha))
        assert power_sum(lo, hi, alpha) == pytest.approx(exact, rel=1e-11)


def test_shares_sum_to_one_and_top_share():
    z = Zipf(10**7, 0.99, top=10_000)
    assert float(z.p.sum()) + z.tail_mass == pytest.approx(1.0, rel=1e-12)
    w = np.arange(1, 10**7 + 1, dtype=np.float64) ** -0.99
    assert z.top_share(1000) == pytest.approx(w[:1000].sum() / w.sum(), rel=1e-10)
    assert z.top_share(50_000) == pytest.approx(w[:50_000].sum() / w.sum(), rel=1e-10)  # beyond `top`
    assert z.pmf(np.array([1, 10**7, 10**7 + 1])) == pytest.approx([z.p[0], w[-1] / w.sum(), 0.0])


def key_for_rank(rank, swaps, n, hot):
    """Direct port of emulator/loadgen/hot_set_swap.h HotSetSwap::key_for_rank."""
    r = rank - 1
    if swaps == 0:
        return r
    cold_start = lambda j: n - j * hot  # noqa: E731
    if r < hot:
        return cold_start(swaps) + (hot - 1 - r)
    j = (n - 1 - r) // hot + 1
    if j > swaps:
        return r
    off = r - cold_start(j)
    return hot - 1 - off if j == 1 else cold_start(j - 1) + off


@pytest.mark.parametrize("n,hot", [(40, 4), (53, 5), (1000, 50)])
def test_swap_ranks_inverts_the_emulators_key_for_rank(n, hot):
    ids = np.arange(n)
    for s in range(0, n // hot):
        ranks = swap_ranks(ids, n, hot, s)
        assert sorted(ranks) == list(range(1, n + 1))  # a bijection
        for key, rank in zip(ids, ranks):
            assert key_for_rank(int(rank), s, n, hot) == key
