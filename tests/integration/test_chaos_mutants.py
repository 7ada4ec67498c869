"""The chaos campaign's checker catches a broken two-phase commit (issue 11, item 4).

The mutant test builds (docs/chaos.md, "Mutants") break the cached-write path on purpose:
exo-db-node-mutant --fault skip-prepare commits a write to a cached key without telling the
cache node; exo-cache-node-mutant --fault serve-stale turns a Commit into an Abort. Either way a
cache node keeps serving a value older than an acknowledged write. A short campaign round with
no faults (the workers' load on cached keys is all it takes) must report at least one
linearizability violation against each; test_chaos.py's normal round must report none.
Writes results/chaos-mutant-<name>-quick.json.

The first tests need only the build: the mutants refuse a fault they do not know, and the
production binaries have no fault switch at all.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from exo_chaos.campaign import MUTANTS, N_KEYS, print_table, run_campaign

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build"
RESULTS = REPO / "results"
BINARIES = {"db": "db-node/exo-db-node", "cache": "cache-node/exo-cache-node"}


def binary(rel: str) -> Path:
    path = BUILD / rel
    assert path.exists(), f"{path} missing: run `make build`"
    return path


@pytest.mark.parametrize("kind", sorted(BINARIES))
def test_mutant_rejects_an_unknown_fault_by_name(kind):
    p = subprocess.run([binary(BINARIES[kind] + "-mutant"), "--cluster", "/nonexistent.json",
                        "--name", "x", "--fault", "no-such-fault"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    own = next(m for m, k in MUTANTS.items() if k == kind)
    assert "unknown fault 'no-such-fault'" in p.stderr and own in p.stderr, p.stderr


@pytest.mark.parametrize("kind", sorted(BINARIES))
def test_production_binary_has_no_fault_switch(kind):
    path = binary(BINARIES[kind])
    p = subprocess.run([path, "--cluster", "/nonexistent.json", "--name", "x", "--fault",
                        next(iter(MUTANTS))], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--fault" in p.stderr, p.stderr
    data = path.read_bytes()
    assert not any(name.encode() in data for name in MUTANTS)


@pytest.mark.mininet
@pytest.mark.parametrize("mutant,port", [("skip-prepare", 6672), ("serve-stale", 6673),
                                         ("ack-at-head", 6676)])
def test_short_round_catches_the_mutant(mutant, port):
    # ack-at-head breaks chain replication (replication factor 3): with nothing cached every
    # GET goes to a chain's tail, where an acknowledged write may not be yet.
    chain_mutant = mutant == "ack-at-head"
    r = run_campaign(RESULTS / f"chaos-mutant-{mutant}-quick.json", repeats=0, quick=True,
                     openflow_port=port, run_dir=Path(f"/tmp/exo/test/chaos-mutant-{mutant}"),
                     mutant=mutant, faults=[], load_s=1.0 if not chain_mutant else 4.0,
                     cache_fill=not chain_mutant)
    print_table(r)
    if chain_mutant:
        assert r["replication_factor"] == 3
    else:
        assert r["keys_seen_cached_in_warmup"] == N_KEYS  # the stale reads need cached keys
    assert r["checker"]["budget_exceeded"] == 0
    assert r["linearizability_violations"] >= 1, "the mutant was not caught"
    assert r["exit_status"] == 0
