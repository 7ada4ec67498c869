"""Db node failover, rejoin and live membership at replication.factor 3 (docs/replication.md,
"Failover"; design steps 10 and 11): four db nodes, three members and a spare (member: false),
16 slots, one client writing unique keys (every acknowledged write recorded) while:

1. kill_db_disk: db0 is killed with SIGKILL and its data directory deleted. The controller
   declares it DOWN, removes it from every chain and moves the rules: `failover_s` is kill ->
   every slot writable and readable again (a probe writes and reads one key per slot). Then
   the cache nodes follow the new heads (CacheNode.SetHeads, design step 6): a key of a slot
   db0 headed is cached from the slot's new head (db0 is dead: with the config's owners the
   Fetch fails), and a write of it through the new head reaches the cached copy (its Prepare
   and Commit accepted from the new head).
2. rejoin: db0 restarts on an empty disk, a new incarnation: it joins every chain as a learner,
   copies each slot from its read server and takes over as its tail: `rejoin_s` is restart ->
   db0 a node (and read server) of every slot again, no learner left.
3. remove: Controller.RemoveNode(db1) (what `exo node remove db1` calls): `remove_s` is the
   call -> every slot writable and readable, db1 in no chain and no member.
4. add: Controller.AddNode(db3), the spare: `add_s` is the call -> db3 a node of every slot.

Then every acknowledged write is read back (none may be lost), and every chain's members
report the same SlotDigest for their slot. Known-bad (the checkers can fail): a RemoveNode
that would leave a slot with no node is refused FAILED_PRECONDITION naming the slot, and a
digest comparison with one value changed reports that slot as diverged.
Writes results/replication_failover.json and prints a table.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import grpc
import pytest

from exo_chaos.convergence import chain_digests, diverged_slots
from exo_common.config import parse_config
from exo_common.partitions import slot_of
from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config_dict
from exoproto import control_pb2 as pb
from exoskeleton.keyhash import key_hash

pytestmark = pytest.mark.mininet
RUN_DIR = Path("/tmp/exo/test/test_replication_failover")
RESULTS = Path(__file__).resolve().parents[2] / "results" / "replication_failover.json"
OPENFLOW_PORT = 6679
BITS = 4
STEP_TIMEOUT_S = 60.0   # each phase must finish within this


def build_cfg():
    data = emulation_config_dict(
        n_cache=2, n_db=4, n_clients=2, run_dir=RUN_DIR, cache_capacity=40, controller={"openflow_port": OPENFLOW_PORT},
        switch={"partition_bits": BITS, "cache_rule_capacity": 256}, replication={"factor": 3},
        cache_fill={"enabled": False})
    data["db_nodes"][3]["member"] = False  # db3: the spare `exo node add` brings in
    return parse_config(data, "<test_replication_failover>")


def slot_keys() -> dict[int, bytes]:
    """One probe key per slot."""
    out: dict[int, bytes] = {}
    i = 0
    while len(out) < 1 << BITS:
        k = f"probe-{i}".encode()
        out.setdefault(slot_of(key_hash(k), BITS), k)
        i += 1
    return out


class Writer(threading.Thread):
    """Unique keys, one write at a time; acked: key -> value of every write answered OK."""

    def __init__(self, cl):
        super().__init__(daemon=True, name="writer")
        self.cl = cl
        self.stop = threading.Event()
        self.acked: dict[bytes, bytes] = {}
        self.unknown = 0
        self.failed = 0
        self.error: BaseException | None = None

    def run(self):
        from exoskeleton.errors import ExoError
        try:
            with self.cl.client("client0", timeout=0.2) as c:
                i = 0
                while not self.stop.is_set():
                    k, v = f"w{i}".encode(), f"value-{i}".encode()
                    i += 1
                    try:
                        c.set(k, v)
                        self.acked[k] = v
                    except ExoError as err:
                        if type(err).__name__ == "UnknownOutcome":
                            self.unknown += 1
                        else:
                            self.failed += 1
                    time.sleep(0.01)
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err


def all_slots_served(cl, since: float, timeout: float = STEP_TIMEOUT_S) -> dict:
    """Probe every slot (write a fresh value, read it back) until each has answered once; the
    time from `since` to the last slot's success."""
    from exoskeleton.errors import ExoError
    keys = slot_keys()
    done: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    with cl.client("client1", timeout=0.1, retries=2) as c:
        n = 0
        while len(done) < len(keys) and time.monotonic() < deadline:
            for slot, k in keys.items():
                if slot in done:
                    continue
                n += 1
                v = f"{slot}-{n}".encode()
                try:
                    c.set(k, v)
                    if c.get(k) == v:
                        done[slot] = time.monotonic()
                except ExoError:
                    pass
    if len(done) < len(keys):
        raise AssertionError(f"slots {sorted(set(keys) - set(done))} not served within {timeout}s")
    return {"s": round(max(done.values()) - since, 3), "slowest_slot": max(done, key=done.get)}


def cache_follows_new_head(cl, dead: str) -> dict:
    """A key of a slot `dead` headed in the config: cached through the CacheNode `Cache` RPC (a
    Fetch from the slot's head) and then written; the GET must return the new value from the
    cache node. Raises AssertionError when either does not happen."""
    chains = cl.cfg.chains()
    slot, key = next((s, k) for s, k in sorted(slot_keys().items()) if chains[s][0] == dead)
    node = cl.cfg.cache_nodes[0].name
    before = cl.stubs.stats(node)
    with cl.client("client1", timeout=0.2, retries=3) as c:
        c.set(key, b"before-cache")
        rep = cl.stubs.cache(node).Cache(pb.KeysRequest(keys=[key]), timeout=10)
        assert rep.done == 1, f"slot {slot}: {key!r} not cached from its new head: {rep}"
        c.set(key, b"after-cache")
        got = c.get(key)
    after = cl.stubs.stats(node)
    held = key in cl.stubs.cached_keys(node)
    out = {"slot": slot, "config_head": dead, "head_now": chains_now(cl, chains[slot][1])[slot][0],
           "cached": held, "read_after_write": (got or b"").decode(),
           "commits": after.get("commits", 0) - before.get("commits", 0),
           "cache_hits": after.get("hits", 0) - before.get("hits", 0)}
    assert got == b"after-cache" and held and out["commits"] >= 1, out
    return out


def chain_status(cl, node: str):
    return cl.stubs.db(node).ChainStatus(pb.StatsRequest(), timeout=5)


def list_nodes(cl):
    return {n.name: n for n in cl.stubs.controller().ListNodes(pb.StatsRequest(), timeout=5).nodes}


def wait_until(what: str, check, timeout: float = STEP_TIMEOUT_S) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic()
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout}s")


def in_every_chain(cl, node: str) -> bool:
    n = list_nodes(cl)[node]
    return len(n.nodes) == 1 << BITS and not n.learners


def chains_now(cl, ask: str) -> list[list[str]]:
    t = chain_status(cl, ask).table
    return [list(s.nodes) for s in t.slots]


@pytest.fixture(scope="module")
def rf3_cluster():
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    with EmulatedCluster(build_cfg(), RUN_DIR) as cl:
        yield cl


def test_kill_rejoin_remove_add_lose_nothing(rf3_cluster):
    cl = rf3_cluster
    res: dict = {"replication_factor": 3, "slots": 1 << BITS, "db_nodes": 4, "spares": ["db3"]}
    wait_until("the controller pushed a chain table",
               lambda: cl.stubs.controller_stats().get("chain_table_version", 0) >= 1, 30)
    res["startup_s"] = all_slots_served(cl, time.monotonic())["s"]
    writer = Writer(cl)
    writer.start()
    try:
        time.sleep(2.0)

        # 1. kill_db_disk: db0 and its data directory are gone
        t0 = time.monotonic()
        cl.kill_node("db0")
        data_dir = Path(cl.cfg.node("db0").data_dir)
        shutil.rmtree(data_dir)
        data_dir.mkdir(parents=True)
        served = all_slots_served(cl, t0)
        res["failover_s"] = served["s"]
        wait_until("db0 out of every chain", lambda: not list_nodes(cl)["db0"].nodes, 10)
        st = cl.stubs.controller_stats()
        res["controller_last_failover_s"] = st.get("last_failover_ms", 0) / 1000.0  # Stats are whole numbers
        res["db_node_downs"] = st.get("db_node_downs", 0)
        res["cache_follows_new_head"] = cache_follows_new_head(cl, "db0")
        time.sleep(1.0)

        # 2. rejoin on an empty disk: learner, copy, hand-over
        t1 = time.monotonic()
        cl.restart_node("db0")
        res["rejoin_s"] = round(wait_until("db0 back in every chain", lambda: in_every_chain(cl, "db0")) - t1, 3)
        res["rejoin_reads"] = len(list_nodes(cl)["db0"].reads)

        # 3. remove db1 (exo node remove db1)
        t2 = time.monotonic()
        v = cl.stubs.controller().RemoveNode(pb.NodeRequest(name="db1"), timeout=30).version
        res["remove_s"] = all_slots_served(cl, t2)["s"]
        db1 = list_nodes(cl)["db1"]
        assert not db1.member and not db1.nodes and not db1.learners, db1
        res["table_version_after_remove"] = v

        # known-bad: removing one more member of a two-node chain is allowed, the last is refused
        cl.stubs.controller().RemoveNode(pb.NodeRequest(name="db2"), timeout=30)
        with pytest.raises(grpc.RpcError) as exc:
            cl.stubs.controller().RemoveNode(pb.NodeRequest(name="db0"), timeout=30)
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "slot" in exc.value.details()
        res["refused_removal"] = exc.value.details()[:200]
        cl.stubs.controller().AddNode(pb.NodeRequest(name="db2"), timeout=30)
        wait_until("db2 back in every chain", lambda: in_every_chain(cl, "db2"))

        # 4. add the spare db3 (exo node add db3)
        t3 = time.monotonic()
        cl.stubs.controller().AddNode(pb.NodeRequest(name="db3"), timeout=30)
        res["add_s"] = round(wait_until("db3 in every chain", lambda: in_every_chain(cl, "db3")) - t3, 3)
        time.sleep(1.0)
    finally:
        writer.stop.set()
        writer.join(10)
    assert writer.error is None, writer.error

    # every acknowledged write is there
    lost = []
    with cl.client("client0", timeout=0.3) as c:
        for k, v in writer.acked.items():
            got = c.get(k)
            if got != v:
                lost.append((k.decode(), None if got is None else got.decode()))
    res.update(acked_writes=len(writer.acked), unknown_outcomes=writer.unknown, failed_writes=writer.failed,
               lost_acked_writes=len(lost), lost_detail=lost[:20])

    # every chain's members hold the same data
    time.sleep(0.5)
    chains = chains_now(cl, "db0")
    conv = chain_digests(chains, cl.stubs.slot_digests)
    res["chains"] = chains
    res["chain_convergence"] = conv
    # known-bad for the comparison: one member's digest changed must show as that slot diverged
    digests = {m: cl.stubs.slot_digests(m) for m in sorted({m for c in chains for m in c})}
    victim = chains[0][-1]
    keys, dig = digests[victim].get(0, (0, 0))
    digests[victim] = {**digests[victim], 0: (keys + 1, dig ^ 1)}
    assert 0 in [d["slot"] for d in diverged_slots(chains, digests)]

    st = cl.stubs.controller_stats()
    res["controller"] = {k: st.get(k, 0) for k in ("chain_table_version", "chain_reconfigurations", "db_node_downs",
                                                   "db_node_restarts", "chain_handovers", "chain_plans_refused",
                                                   "chain_plans_aborted", "chain_cache_resets", "learners_catching_up")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=1) + "\n")
    print_table(res)

    assert res["lost_acked_writes"] == 0, lost[:20]
    assert res["failover_s"] < 5.0, res  # detection is 5 x 100 ms; the rest is one push and ~10 flow-mods
    assert res["rejoin_reads"] == 1 << BITS  # the rejoined node took over as every slot's tail
    assert conv["converged"], conv
    assert res["acked_writes"] > 100
    assert res["controller"]["learners_catching_up"] == 0


def print_table(r: dict) -> None:
    rows = [("phase", "seconds")]
    for k in ("startup_s", "failover_s", "rejoin_s", "remove_s", "add_s"):
        rows.append((k, f"{r.get(k, '-')}"))
    rows += [("acked writes", str(r.get("acked_writes"))), ("lost acked writes", str(r.get("lost_acked_writes"))),
             ("unknown outcomes", str(r.get("unknown_outcomes"))),
             ("chains converged", str(r.get("chain_convergence", {}).get("converged")))]
    w = max(len(a) for a, _ in rows)
    print("\n" + "\n".join(f"{a.ljust(w)}  {b}" for a, b in rows))
