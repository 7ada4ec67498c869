"""Bring a whole Exoskeleton cluster up in Mininet and always tear it down.

    with EmulatedCluster(cfg, run_dir) as cl:
        with cl.client("client0") as c:
            c.set(b"k", b"v")

Start order: OVS daemons (if not running), the controller (root namespace), Mininet hosts and
the switch (which connects to the controller and gets Rulesets 1 and 3), then the db nodes (an
exo-db-node each, or one exo-emulator per wimpy emulator hosting several) and cache nodes
inside their hosts. Teardown runs in reverse from `__exit__`, so an exception or
Ctrl-C (KeyboardInterrupt) still removes every process, host and bridge this started.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence

from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController

from exo_common.config import ClusterConfig, write_resolved
from exo_controller.flows import FORWARD_TABLE, table_flow_limit
from exoskeleton import Client

from . import ovs
from .controller_group import ControllerGroup, uses_failover
from .grpc_clients import Stubs
from .lifecycle import StartStop
from .mgmt_net import MgmtNet
from .netns import in_netns
from .process import terminate
from .tls_setup import TlsSetup, openflow_protocol
from .topology import ExoTopo

log = logging.getLogger("exo.cluster")
REPO = Path(__file__).resolve().parents[2]
EMULATOR = "emulator/exo-emulator"  # relative to the build dir
MUTANT_SUFFIX = "-mutant"  # the EXO_FAULTS test build of a node binary (docs/chaos.md)


class ClusterStartError(RuntimeError):
    pass


class _QuietRemoteController(RemoteController):
    """Mininet's RemoteController probes the controller's port with `telnet` in a shell when it is
    created; the controller's binary OpenFlow hello then reaches that shell and Mininet raises
    UnicodeDecodeError (about one start in ten of `exo up`). The cluster waits for the switch to
    connect by itself (_switch_ready), so the probe is not needed."""

    def checkListening(self):
        return


class EmulatedCluster(StartStop):
    def __init__(self, cfg: ClusterConfig, run_dir: str | Path, build_dir: str | Path | None = None,
                 config_path: Optional[Path] = None, start_timeout: float = 60.0,
                 controller_args: Sequence[str] = (), node_faults: Optional[Mapping[str, str]] = None):
        """controller_args: extra exo_controller flags (tests pass --fault here).
        node_faults: {node name: fault} runs those nodes (also when restarted) from their
        mutant test build with --fault (docs/chaos.md)."""
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.build_dir = Path(build_dir or os.environ.get("EXO_BUILD", REPO / "build"))
        self.config_path = config_path
        self.start_timeout = start_timeout
        self.controller_args = list(controller_args)
        self.node_faults = dict(node_faults or {})
        # The controller's timestamped Ruleset 2 record, read by exo_topo.switch_audit.
        self.ruleset2_journal = self.run_dir / "controller-ruleset2.jsonl"
        self.net: Optional[Mininet] = None
        self.controller_proc: Optional[subprocess.Popen] = None
        self.node_procs: dict[str, subprocess.Popen] = {}
        self._started_ovs = False
        self._logs: list = []
        # With controller.instances + etcd: a failover group (controller_group.py); stubs then
        # reach the first instance (reads are served by any instance).
        self.group: Optional[ControllerGroup] = None
        self.stubs = Stubs(cfg.for_instance(cfg.controller.instances[0].name) if uses_failover(cfg) else cfg)
        self.tls = TlsSetup(cfg)  # certificates + OVS's SSL (docs/security.md)
        self.mgmt = MgmtNet(cfg)  # the hosts' /metrics reachable from the root namespace

    # ---- lifecycle (`with` runs start() and stop(): lifecycle.StartStop) ----
    def start(self) -> None:
        self._check_binaries()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for node in self.cfg.db_nodes:
            Path(node.data_dir).mkdir(parents=True, exist_ok=True)
        self.resolved = write_resolved(self.cfg, self.run_dir / "cluster.json")
        cfg_path = self.config_path or self._write_yaml()
        self._started_ovs = ovs.ensure_running()
        ovs.delete_bridge(self.cfg.switch.bridge)  # a crashed earlier run may have left it
        self.ruleset2_journal.unlink(missing_ok=True)
        self.tls.start()
        self._controller_cmd = [sys.executable, "-m", "exo_controller", "--config", str(cfg_path),
                                "--ruleset2-journal", str(self.ruleset2_journal), *self.controller_args]
        if uses_failover(self.cfg):
            self.group = ControllerGroup(self.cfg, self.run_dir, self._spawn, self._controller_cmd)
            self.group.start()
            self._wait_for(self.group.all_up, "every controller instance's gRPC")
        else:
            self.controller_proc = self._spawn(None, "controller", self._controller_cmd)
            self._wait_for(self._controller_ok, "controller gRPC")
        # The switch connects to every controller instance (OVS: one target each; one SSL
        # setting, the shared `controller` certificate's CA).
        controllers = [partial(_QuietRemoteController, ip=self.cfg.controller.openflow_host, port=i.openflow_port,
                               protocol=openflow_protocol(self.cfg)) for i in self.cfg.controller.all_instances()]
        self.net = Mininet(
            topo=ExoTopo(self.cfg),
            switch=partial(OVSSwitch, datapath="user", protocols="OpenFlow13", failMode="secure"),
            controller=controllers[0] if len(controllers) == 1 else None,
            autoSetMacs=False, autoStaticArp=True, waitConnected=False)
        if len(controllers) > 1:
            for inst, ctl in zip(self.cfg.controller.all_instances(), controllers):
                self.net.addController(f"ctl{inst.name}", controller=ctl)
        self.net.start()
        self.mgmt.start(self.net)
        # Table 0 holds the static rules plus C cache rules, like a hardware switch's L2 table.
        ovs.configure_table0(self.cfg.switch.bridge, table_flow_limit(self.cfg), table=FORWARD_TABLE)
        self._set_mtu()
        self._wait_for(self._switch_ready, "switch connected with Rulesets 1 and 3")
        for node in self.cfg.db_nodes:
            if node.emulator is None:
                self._spawn_node(node.name, "db-node/exo-db-node")
        for emu in self.emulators():
            cmd = [str(self.build_dir / EMULATOR), "--config", str(self.resolved), "--emulator", emu]
            self.node_procs[emu] = self._spawn(emu, emu, cmd)
        for node in self.cfg.db_nodes:
            self._wait_for(lambda n=node.name: self._stats_ok(n), f"{node.name} ready")
        for node in self.cfg.cache_nodes:
            self._spawn_node(node.name, "cache-node/exo-cache-node")
        for node in self.cfg.cache_nodes:
            self._wait_for(lambda n=node.name: self._stats_ok(n), f"{node.name} ready")
        log.info("cluster up: %d cache, %d db, %d clients", len(self.cfg.cache_nodes),
                 len(self.cfg.db_nodes), len(self.cfg.clients))

    def stop(self) -> None:
        """Idempotent; every step runs even if an earlier one fails (each is logged)."""
        for name, proc in list(self.node_procs.items()):
            _step(f"stop {name}", terminate, proc, name)
        self.node_procs.clear()
        if self.net is not None:
            _step("stop Mininet", self._stop_net)
            self.net = None
        _step("delete bridge", ovs.delete_bridge, self.cfg.switch.bridge)
        _step("delete management network", self.mgmt.stop)
        _step("remove OVS SSL", self.tls.stop)
        if self.controller_proc is not None:
            _step("stop controller", terminate, self.controller_proc, "controller")
            self.controller_proc = None
        if self.group is not None:
            _step("stop controller instances and etcd", self.group.stop)
        _step("close gRPC channels", self.stubs.close)
        if self._started_ovs:
            _step("stop Open vSwitch", ovs.stop)
            self._started_ovs = False
        for f in self._logs:
            f.close()
        self._logs.clear()

    def _stop_net(self) -> None:
        assert self.net is not None
        nodes = [*self.net.hosts, *self.net.switches, *self.net.controllers]
        shells = [n.shell for n in nodes if n.shell is not None]
        try:
            self.net.stop()
        except Exception as err:  # keep tearing down
            log.warning("net.stop: %s", err)
        # Mininet signals its node shells but does not wait for them; some (the controller
        # node's) ignore SIGHUP. Give them a moment, then kill what is left.
        deadline = time.monotonic() + 1.0
        for shell in shells:
            try:
                shell.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                shell.kill()
                shell.wait(timeout=5)

    def emulators(self) -> list[str]:
        """Names of the wimpy-emulator processes (and hosts) the config asks for."""
        return sorted({d.emulator for d in self.cfg.db_nodes if d.emulator is not None})

    # ---- access ----
    def host(self, name: str):
        assert self.net is not None
        return self.net.get(name)

    @contextmanager
    def client(self, name: str = "client0", **kwargs) -> Iterator[Client]:
        """A Client whose sockets live in host `name` (see netns.py)."""
        node = self.cfg.node(name)
        kwargs.setdefault("mtu", self.cfg.cluster.mtu)
        kwargs.setdefault("udp_port", self.cfg.cluster.udp_port)
        kwargs.setdefault("service_ip", self.cfg.cluster.service_ip)
        with in_netns(self.host(name).pid):
            c = Client(node.interface, **kwargs)
        try:
            yield c
        finally:
            c.close()

    def popen_in(self, host: str, cmd: list[str], log_name: str, **kw) -> subprocess.Popen:
        return self._spawn(host, log_name, cmd, **kw)

    def kill_node(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.node_procs.pop(name)
        proc.send_signal(sig)
        proc.wait(timeout=10)

    def restart_node(self, name: str, wait: bool = True) -> None:
        """Start a node killed by kill_node again, with the same command line (a db node keeps
        its data_dir; a cache node comes back empty). wait: until its gRPC Stats answers."""
        if name in self.node_procs:
            raise RuntimeError(f"{name} is still running")
        if name in self.emulators():
            raise RuntimeError(f"{name} is an emulator: restart is not supported")
        is_db = any(n.name == name for n in self.cfg.db_nodes)
        self._spawn_node(name, "db-node/exo-db-node" if is_db else "cache-node/exo-cache-node")
        if wait:
            self._wait_for(lambda: self._stats_ok(name), f"{name} ready again")

    def kill_controller(self, sig: int = signal.SIGKILL) -> None:
        """The switch (fail mode secure) keeps forwarding with the flows it has."""
        assert self.controller_proc is not None, "controller is not running"
        self.controller_proc.send_signal(sig)
        self.controller_proc.wait(timeout=10)
        self.controller_proc = None

    def restart_controller(self, wait: bool = True) -> None:
        """Start the controller again; wait: until the switch is connected and programmed."""
        if self.controller_proc is not None:
            raise RuntimeError("the controller is still running")
        self.controller_proc = self._spawn(None, "controller", self._controller_cmd)
        if wait:
            self._wait_for(self._controller_ok, "controller gRPC again")
            self._wait_for(self._switch_ready, "switch reconnected to the restarted controller")

    def set_netem(self, host: str, spec: str) -> None:
        """Impair the egress of `host`'s interface with tc netem, e.g. "loss 5% delay 2ms 1ms",
        "duplicate 5%", "delay 5ms reorder 25%". Removed by clear_netem (and with the host)."""
        intf = self.host(host).defaultIntf()
        out = self.host(host).cmd(f"tc qdisc replace dev {intf} root netem {spec} 2>&1; echo rc=$?")
        if not out.strip().endswith("rc=0"):
            raise RuntimeError(f"tc netem on {host}-{intf} ({spec}) failed: {out.strip()}")

    def clear_netem(self, host: str) -> None:
        intf = self.host(host).defaultIntf()
        self.host(host).cmd(f"tc qdisc del dev {intf} root 2>/dev/null")

    # ---- internals ----
    def _check_binaries(self) -> None:
        for rel in ("db-node/exo-db-node", "cache-node/exo-cache-node",
                    *([EMULATOR] if self.emulators() else []),
                    *([f"db-node/exo-db-node{MUTANT_SUFFIX}", f"cache-node/exo-cache-node{MUTANT_SUFFIX}"]
                      if self.node_faults else [])):
            if not (self.build_dir / rel).exists():
                raise ClusterStartError(f"{self.build_dir / rel} is missing: run `make build` first")

    def _write_yaml(self) -> Path:
        import yaml
        path = self.run_dir / "cluster.yaml"
        path.write_text(yaml.safe_dump(self.cfg.model_dump(), sort_keys=False))
        return path

    def _spawn(self, host: Optional[str], log_name: str, cmd: list[str], **kw) -> subprocess.Popen:
        logf = open(self.run_dir / f"{log_name}.log", "ab")
        self._logs.append(logf)
        kw.setdefault("stdout", logf)
        kw.setdefault("stderr", subprocess.STDOUT)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if host is None:
            return subprocess.Popen(cmd, cwd=REPO, env=env, **kw)
        return self.host(host).popen(cmd, cwd=str(REPO), env=env, **kw)

    def _spawn_node(self, name: str, rel_binary: str) -> None:
        fault = self.node_faults.get(name)
        if fault is not None:
            rel_binary += MUTANT_SUFFIX
        cmd = [str(self.build_dir / rel_binary), "--cluster", str(self.resolved), "--name", name]
        if fault is not None:
            cmd += ["--fault", fault]
        self.node_procs[name] = self._spawn(name, name, cmd)

    def _set_mtu(self) -> None:
        if self.cfg.cluster.mtu == 1500:
            return
        assert self.net is not None
        for h in self.net.hosts:
            h.cmd(f"ip link set dev {h.defaultIntf()} mtu {self.cfg.cluster.mtu}")
        for sw in self.net.switches:
            for intf in sw.intfList():
                if intf.name != "lo":
                    subprocess.run(["ovs-vsctl", "--timeout=5", "set", "Interface", intf.name,
                                    f"mtu_request={self.cfg.cluster.mtu}"], check=False)

    def _wait_for(self, check, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if check():
                return
            time.sleep(0.2)
        raise ClusterStartError(f"timed out waiting for {what}; logs in {self.run_dir}")

    def _check_alive(self) -> None:
        procs = dict(self.node_procs)
        if self.controller_proc is not None:
            procs["controller"] = self.controller_proc
        if self.group is not None:
            procs.update({f"controller-{n}": p for n, p in self.group.procs.items()})
        for name, p in procs.items():
            if p.poll() is not None:
                tail = (self.run_dir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise ClusterStartError(f"{name} exited with {p.returncode}:\n{tail}")

    def _controller_ok(self) -> bool:
        try:
            self.stubs.rules(0, timeout=1.0)
            return True
        except Exception:
            return False

    def _switch_ready(self) -> bool:
        try:
            rep = self.stubs.rules(3, timeout=2.0)
        except Exception:
            return False
        # One Ruleset 3 rule per slot, two (read and write) when chains replicate.
        per_slot = 2 if self.cfg.replication.factor > 1 else 1
        return rep.switch_connected and len(rep.flows) == per_slot << self.cfg.switch.partition_bits

    def _stats_ok(self, name: str) -> bool:
        try:
            self.stubs.stats(name, timeout=1.0)
            return True
        except Exception:
            return False


def _step(what: str, fn, *args) -> None:
    """One teardown step: a failure is logged and the next step still runs."""
    try:
        fn(*args)
    except Exception as err:
        log.warning("teardown: %s failed: %s", what, err)

