"""The deployment rehearsal's pure parts (scripts/rehearsal/) and the files it runs: the systemd
units (what they grant, that systemd accepts them), the steps docs/deploy.md and
docs/operations.md list, the firewall rules, and the lost-write check. `make rehearsal` runs the
whole thing (docs/deploy.md)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest_ci import missing_or_fail

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "rehearsal"))
import firewall  # noqa: E402
import steps  # noqa: E402
import units  # noqa: E402
from acked import AckedWrites  # noqa: E402

UNITS = REPO / "packaging" / "systemd"
ROOT = Path("/tmp/scratch-root")
# What each service may do, found by running it without (docs/deploy.md, "Capabilities").
CAPS = {
    "exo-controller.service": [],
    "exo-db-node@.service": ["net_raw"],
    "exo-cache-node@.service": ["net_raw", "net_admin"],
    "exo-proxy.service": ["net_raw"],
}
PROXY_ENV = {"/etc/exo/exo-proxy.env": "# the web host's client\nEXO_PROXY_CLIENT=client0\n"}


def launch_of(name: str, instance: str = "") -> units.Launch:
    return units.launch(units.parse(UNITS / name), instance, ROOT, PROXY_ENV)


def test_the_four_units_exist_and_grant_exactly_their_capabilities():
    assert sorted(p.name for p in UNITS.glob("*.service")) == sorted(CAPS)
    for name, caps in CAPS.items():
        la = launch_of(name, "x1" if "@." in name else "")
        assert la.ambient_caps == caps and la.bounding_caps == caps, name
        assert la.user == "exo" and la.group == "exo" and la.no_new_privs, name
        assert la.umask == 0o077, name
        u = units.parse(UNITS / name)
        assert u.value("ProtectSystem") == "strict", name


def test_templates_run_with_the_cluster_config_and_their_instance_name():
    la = launch_of("exo-db-node@.service", "db0")
    assert la.unit == "exo-db-node@db0.service"
    assert la.argv == [f"{ROOT}/usr/bin/exo-db-node", "--cluster", f"{ROOT}/etc/exo/cluster.json", "--name", "db0"]
    assert Path(f"{ROOT}/var/lib/exo") in la.make_dirs
    cache = launch_of("exo-cache-node@.service", "cache0")
    assert cache.env["XDG_RUNTIME_DIR"] == f"{ROOT}/run/exo-cache-node/cache0"
    argv = cache.setpriv_argv()
    assert argv[:4] == ["prlimit", "--nofile=65536", "--memlock=unlimited", "--"]
    # Never above the caller's hard limit (raising it needs CAP_SYS_RESOURCE).
    opts, lowered = cache.prlimit_options({"nofile": 20000, "memlock": 8192})
    assert opts == ["--nofile=20000", "--memlock=8192"] and set(lowered) == {"nofile", "memlock"}
    assert cache.prlimit_options({"nofile": -1, "memlock": -1}) == (["--nofile=65536", "--memlock=unlimited"], {})
    setpriv = argv[argv.index("setpriv"):]
    assert setpriv[1] == "--reuid=exo" and "--ambient-caps=-all,+net_raw,+net_admin" in setpriv
    assert setpriv[setpriv.index("--") + 1:] == cache.argv


def test_proxy_takes_its_client_from_the_environment_file():
    la = launch_of("exo-proxy.service")
    assert la.argv[:5] == [f"{ROOT}/usr/bin/exo-proxy", "--config", f"{ROOT}/etc/exo/cluster.json", "--client", "client0"]
    with pytest.raises(units.UnitError, match="EnvironmentFile=/etc/exo/exo-proxy.env is missing"):
        units.launch(units.parse(UNITS / "exo-proxy.service"), "", ROOT, {})


def test_a_unit_with_a_setting_the_rehearsal_cannot_run_is_refused(tmp_path):
    bad = tmp_path / "bad.service"
    bad.write_text((UNITS / "exo-controller.service").read_text().replace(
        "[Service]\n", "[Service]\nExecStartPre=/bin/rm -rf /var/lib/exo\n"))
    with pytest.raises(units.UnitError, match="ExecStartPre"):
        units.parse(bad)
    with pytest.raises(units.UnitError, match="a template needs an instance"):
        units.launch(units.parse(UNITS / "exo-db-node@.service"), "", ROOT)


def test_systemd_accepts_the_units_and_rejects_a_broken_one(tmp_path):
    if shutil.which("systemd-analyze") is None:
        missing_or_fail("systemd-analyze not found (Debian's systemd package)")
    # ExecStart's program must exist for verify: point the copies at /bin/true, nothing else changes.
    for u in UNITS.glob("*.service"):
        (tmp_path / u.name).write_text(u.read_text().replace("=/usr/bin/exo-controller ", "=/bin/true ")
                                       .replace("=/usr/bin/exo-db-node ", "=/bin/true ")
                                       .replace("=/usr/bin/exo-cache-node ", "=/bin/true ")
                                       .replace("=/usr/bin/exo-proxy ", "=/bin/true "))
    good = subprocess.run(["systemd-analyze", "verify", *sorted(str(p) for p in tmp_path.glob("*.service"))],
                          capture_output=True, text=True)
    assert good.returncode == 0 and good.stderr.strip() == "", good.stderr
    broken = tmp_path / "exo-broken.service"
    broken.write_text((tmp_path / "exo-controller.service").read_text().replace(
        "CapabilityBoundingSet=\n", "CapabilityBoundingSet=CAP_NOT_A_CAP\nProtectSystem=sometimes\n"))
    bad = subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True, text=True)
    assert "CAP_NOT_A_CAP" in bad.stderr or "sometimes" in bad.stderr, bad.stderr


def test_deploy_doc_and_operations_start_order_match_the_rehearsal_steps():
    assert steps.deploy_doc_problems((REPO / "docs" / "deploy.md").read_text()) == []
    assert steps.start_order_problems((REPO / "docs" / "operations.md").read_text()) == []
    keys = [s.key for s in steps.STEPS]
    assert [keys.index(k) for k, _ in steps.START_ORDER] == sorted(keys.index(k) for k, _ in steps.START_ORDER)
    import main  # every step has a function in the rehearsal, and nothing else does
    assert list(main.STEP_FUNCTIONS) == keys


def test_doc_checks_reject_a_guide_that_drifted():
    good = "".join(f"## Step {i}: {s.title}\n\ntext\n\n" for i, s in enumerate(steps.STEPS, 1))
    assert steps.deploy_doc_problems(good) == []
    swapped = good.replace("Start the db nodes", "@@").replace("Start the cache nodes", "Start the db nodes") \
        .replace("@@", "Start the cache nodes")
    assert steps.deploy_doc_problems(swapped)
    assert any("missing" in p for p in steps.deploy_doc_problems(good.replace("## Step 4", "## Step 40")))
    ops = "## Start order on real hardware\n\n1. **Controller**: x\n2. **Switch**: y\n\n## Next\n"
    assert steps.start_order_problems(ops)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    from exo_common.config import load_config
    path = tmp_path_factory.mktemp("cfg") / "cluster.yaml"
    path.write_text((REPO / "scripts" / "rehearsal" / "cluster.yaml").read_text().replace("@ROOT@", "/x"))
    return load_config(path)


def test_firewall_opens_each_port_only_to_the_roles_that_call_it(cfg):
    db = firewall.ruleset(cfg, "db0", "eno2", ["172.30.0.254"], ["172.30.0.200"], ["172.30.0.1"])
    # DbNode: Fetch/Evict (cache), Stats/ForgetCacheNode (controller), Stats/HotKeys (operator);
    # not Replicate (db) at replication.factor 1
    assert "ip saddr { 172.30.0.10, 172.30.0.11, 172.30.0.254 } tcp dport 7000 accept" in db
    assert "ip saddr { 172.30.0.200 } tcp dport 9100 accept" in db
    assert "172.30.0.22" not in db and "172.30.0.31" not in db  # another db node, the proxy host
    assert db.rstrip().endswith("counter drop\n  }\n}".rstrip())
    ctl = firewall.ruleset(cfg, "controller", "eno2", ["172.30.0.254"], [], ["172.30.0.1"])
    assert "ip saddr { 172.30.0.1 } tcp dport 6653 accept" in ctl
    assert "ip saddr { 172.30.0.11, 172.30.0.254 } tcp dport 7000 accept" in ctl  # cache nodes, operators
    proxy = firewall.ruleset(cfg, "proxy0", "eno2", [], ["172.30.0.200"], [])
    assert "7000" not in proxy
    with pytest.raises(ValueError, match="not in the config"):
        firewall.ruleset(cfg, "db9", "eno2", [], [], [])


def test_firewall_lets_db_nodes_call_each_other_only_when_they_replicate(cfg):
    # DbNode.Replicate (allowed_roles db) is called only along chains of more than one node.
    rf3 = cfg.model_copy(update={"replication": cfg.replication.model_copy(update={"factor": 2})})
    db = firewall.ruleset(rf3, "db0", "eno2", ["172.30.0.254"], [], [])
    assert "gRPC exo.DbNode: cache, controller, db, operator" in db
    assert "172.30.0.22" in db  # the other db node


def test_prometheus_scrapes_every_metrics_address(cfg):
    from exo_topo.prometheus import scrape_config  # what `exo config prometheus` prints (step 10)
    conf = scrape_config(cfg)
    targets = {t["labels"]["instance"]: t["targets"][0] for job in conf["scrape_configs"]
               for t in job["static_configs"]}
    assert targets == {"controller": "172.30.0.10:9100", "cache0": "172.30.0.11:9100", "db0": "172.30.0.21:9100",
                       "db1": "172.30.0.22:9100", "proxy0": "172.30.0.31:9100"}


def test_lost_acknowledged_writes_are_caught():
    w = AckedWrites()
    w.wrote("a", "a:1", acked=True)
    w.wrote("a", "a:2", acked=False)          # failed: may or may not have been applied
    assert w.read_ok("a", "a:1") and w.read_ok("a", "a:2")
    w.wrote("b", "b:1", acked=True)
    w.wrote("b", "b:2", acked=True)
    assert not w.read_ok("b", "b:1")           # an older value: the acknowledged b:2 was lost
    assert not w.read_ok("b", None)            # gone altogether
    w.wrote("c", "c:1", acked=False)
    assert w.read_ok("c", None) and w.read_ok("c", "c:1")
    w.saw("a", "a:2")                          # a:2 was applied after all
    assert not w.read_ok("a", "a:1")
    again = AckedWrites(w.to_json())
    assert again.allowed("b") == {"b:2"} and sorted(again.acked_keys()) == ["a", "b"]


def test_capability_masks_from_proc_are_named():
    from launcher import cap_names
    assert cap_names("0000000000003000") == ["net_admin", "net_raw"]
    assert cap_names("0000000000002000") == ["net_raw"]
    assert cap_names("0000000000000000") == []
    assert "sys_admin" in cap_names("000001ffffffffff")  # root's full set is not mistaken for none
