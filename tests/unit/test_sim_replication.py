"""exo_sim.replication: the replicated layout's figures (docs/design/replication.md, 2.1, 2.3
and Appendix A) from the cluster's own chain table, and the checker refusing bad layouts."""
import pytest

from exo_common.partitions import chain_table
from exo_sim.replication import layout_figures, names_of, study, table, throughput_by_write_share


def test_design_appendix_a_figures_with_the_tail_cap():
    """The bounded-load rows of the design's tables (2.1 and 2.3): heads, tails, flow-mods."""
    want = {(4, 8): (64, 73, 53, 128, 137), (4, 4): (4, 4, 4, 8, 8), (32, 8): (8, 8, 8, 16, 16),
            (1024, 12): (4, 4, 4, 8, 8)}
    for (n, bits), (heads_max, tails_max, tails_min, fm_mean, fm_max) in want.items():
        names = names_of(n)
        f = layout_figures(chain_table(names, bits, 64, 1.0, 3), names, 3, 50.0)
        assert f["heads"]["max"] == heads_max, (n, bits)
        assert (f["tails"]["max"], f["tails"]["min"]) == (tails_max, tails_min), (n, bits)
        assert f["flow_mods_per_db_failure"] == {"mean": fm_mean, "max": fm_max}, (n, bits)
        assert f["ruleset3_rules"] == 2 << bits
        assert f["failover_s_on_switch_model"]["max"] == pytest.approx(fm_max / 50.0, abs=0.01)


def test_by_hand_three_nodes_four_slots():
    names = ["a", "b", "c"]
    chains = [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "c", "b"]]
    f = layout_figures(chains, names, 3, 10.0)
    # a heads 2 (slots 0, 3), tails 1 (slot 1): 3 flow-mods when a dies; b: 1 + 2; c: 1 + 1.
    assert f["flow_mods_per_db_failure"] == {"mean": 2.67, "max": 3}
    assert f["failover_s_on_switch_model"]["max"] == 0.3
    assert f["heads"] == {"max": 2, "mean": pytest.approx(4 / 3, abs=1e-3), "min": 1}
    assert f["ruleset3_rules"] == 8
    # Reads only: b serves 2 of 4 slots' GETs -> the cluster saturates at 2 capacities. Writes
    # only: every node holds every slot -> each PUT costs all three, 1 capacity.
    t = throughput_by_write_share(chains, names, (0.0, 1.0))
    assert t == {"0": 2.0, "1": 1.0}


def test_rf1_moves_nothing_and_has_one_rule_per_slot():
    names = names_of(4)
    f = layout_figures(chain_table(names, 4, 64, 1.0, 1), names, 1, 50.0)
    assert f["ruleset3_rules"] == 16
    assert f["flow_mods_per_db_failure"] == {"mean": 0, "max": 0}


@pytest.mark.parametrize("chains, message", [
    ([["a", "b", "a"], ["b", "c", "a"]], "repeats db node 'a'"),      # a chain repeats a node
    ([["a", "b", "c"], []], r"chains\[1\]: empty"),
    ([["a", "b", "c", "a"], ["b", "c", "a"]], "more than replication.factor"),
    ([["a", "b", "x"], ["b", "c", "a"]], "not a member db node"),
])
def test_bad_layouts_are_refused(chains, message):
    with pytest.raises(ValueError, match=message):
        layout_figures(chains, ["a", "b", "c"], 3, 50.0)


def test_bad_rates_and_shares_are_refused():
    chains = [["a", "b"], ["b", "a"]]
    with pytest.raises(ValueError, match="rule_rate"):
        layout_figures(chains, ["a", "b"], 2, 0.0)
    with pytest.raises(ValueError, match="write share"):
        throughput_by_write_share(chains, ["a", "b"], (1.5,))


def test_study_reports_the_1024_node_layout_and_prints_it():
    doc = study(3, clusters=((1024, 12),))
    rows = {r["placement"]: r for r in doc["rows"]}
    capped = rows["bounded_tail_cap"]
    assert capped["db_nodes"] == 1024 and capped["ruleset3_rules"] == 8192
    # Balanced tails: reads-only throughput is every node's capacity, as at rf 1.
    assert capped["throughput_node_capacities_by_write_share"]["0"] == pytest.approx(1024, rel=0.01)
    assert capped["throughput_node_capacities_by_write_share_rf1"]["0"] == pytest.approx(1024, rel=0.01)
    # Without the cap the busiest read server caps reads below that.
    assert rows["plain_ring"]["tails"]["max"] > capped["tails"]["max"]
    assert "1024" in table(doc)
