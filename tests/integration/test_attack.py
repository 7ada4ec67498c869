"""The short attack suite (`make attack` runs the full one; docs/security.md): every attack on a
cluster with TLS on is refused and counted while the honest clients' history stays
linearizable; and the same suite against `security.insecure_dev_mode` (the fault switch) sees
attacks get through and the checker report the poisoned reads, so neither verdict is vacuous.
Writes results/security-quick.json and results/security-insecure-quick.json."""
from pathlib import Path

import pytest

from exo_attack.suite import print_table, run_suite

pytestmark = pytest.mark.mininet

RESULTS = Path(__file__).resolve().parents[2] / "results"
# What the issue names; each must be in the suite (as a prefix of an attack's name).
REQUIRED = ("poison_prepare_commit/", "pending_forever_prepare/", "forget_cache_node/",
            "add_cache_rules_exhaustion/", "reset_cache_node/", "openflow_claims_switch_dpid/",
            "spoofed_source_mac_ip", "forwarded_frames_from_client", "write_to_wrong_db_node",
            "flood_above_meter")


def test_every_attack_is_refused_and_counted_and_reads_stay_linearizable():
    r = run_suite(RESULTS / "security-quick.json", quick=True, openflow_port=6669,
                  run_dir=Path("/tmp/exo/test/attack"))
    print_table(r)
    names = [a["name"] for a in r["attacks"]]
    for prefix in REQUIRED:
        assert any(n.startswith(prefix) for n in names), prefix
    for a in r["attacks"]:
        assert set(a) >= {"name", "refused", "refused_by", "counter"}
        assert a["refused"], a
        assert a["counted"], a
    assert r["linearizability_violations"] == 0, r["violations_detail"]
    assert r["lost_acked_writes"] == 0, r["lost_acked_writes_detail"]
    assert r["undecided_keys"] == 0
    assert r["switch_still_connected"]
    assert r["honest_ops"] > 1000
    assert r["exit_status"] == 0


def test_the_suite_notices_an_open_cluster():
    r = run_suite(RESULTS / "security-insecure-quick.json", quick=True, insecure=True, openflow_port=6669,
                  run_dir=Path("/tmp/exo/test/attack-insecure"))
    print_table(r)
    through = {a["name"] for a in r["attacks"] if not a["refused"]}
    assert "poison_prepare_commit/proxy" in through and "reset_cache_node/nocert" in through, through
    # the poisoned value reached honest readers: the linearizability checker rejects that history
    assert r["linearizability_violations"] >= 1
    # the data plane's defences do not depend on TLS
    assert not through & {"spoofed_source_mac_ip", "write_to_wrong_db_node", "flood_above_meter"}
    assert r["exit_status"] == 0
