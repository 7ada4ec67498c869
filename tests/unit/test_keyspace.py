"""The workload's key space: Zipf ranks and hot-set swaps."""
import pytest

from exo_harness.keyspace import HotSetSwap, ZipfRanks, key_name


def test_swap_exchanges_hottest_and_coldest():
    m = HotSetSwap(1000, 50)
    assert m.hottest(3) == [b"key:0", b"key:1", b"key:2"]
    m.swap()
    assert m.hottest(3) == [b"key:999", b"key:998", b"key:997"]
    assert m.key(999) == b"key:0"          # the old hottest is now the coldest
    assert m.key(500) == b"key:500"        # the middle does not move
    assert set(m.hottest(50)).isdisjoint({key_name(r) for r in range(50)})
    m.swap()
    assert m.hottest(3) == [b"key:0", b"key:1", b"key:2"]


def test_swap_is_a_permutation():
    m = HotSetSwap(200, 100)
    m.swap()
    assert sorted(m.rank_of_key(r) for r in range(200)) == list(range(200))


def test_swap_count_checked():
    with pytest.raises(ValueError, match="swap count"):
        HotSetSwap(10, 6)


def test_zipf_share_of_top():
    z = ZipfRanks(1000, 0.99)
    assert 0 < z.share_of_top(10) < z.share_of_top(100) < 1
    assert z.share_of_top(1000) == pytest.approx(1.0)
