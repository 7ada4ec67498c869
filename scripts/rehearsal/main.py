"""`make rehearsal`: a deployment rehearsed without Mininet (docs/deploy.md).

Builds the .deb, unpacks it into a scratch root, and follows docs/deploy.md's steps (steps.py) on
a stand-in rack: one bare network namespace per machine, veth cables to an Open vSwitch bridge
that plays the hardware switch (userspace datapath, fail mode secure, OpenFlow 1.3 over TLS),
and a Linux bridge for the management network. Every service is started from its installed
unit file's ExecStart, as its unit's user with its unit's capabilities (units.py, launcher.py),
in the order the guide gives. Then a memcached client works through exo-proxy while every
service is restarted once, and every acknowledged write is read back.

    python scripts/rehearsal/main.py [--out results/rehearsal.json] [--deb PKG] [--keep]

Writes results/rehearsal.json (steps with their outcome, ops, errors, lost_acked_writes, tls, ...)
and prints a table. Exit 0 when every step passed and nothing was lost; 1 otherwise; 2 for a
missing prerequisite (root, OVS, setpriv). Everything it makes is removed in `finally`, also on
Ctrl-C; logs stay in the work directory (default /tmp/exo-rehearsal).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import prom  # noqa: E402
import units  # noqa: E402
from launcher import Service  # noqa: E402
from netlab import Lab, run  # noqa: E402
from prom import Prometheus  # noqa: E402
from steps import STEPS  # noqa: E402

log = logging.getLogger("rehearsal")
PREFIX = "exo-rh"              # namespaces exo-rh-<machine>, bridges exo-rh and exo-rh-m
SWITCH_BRIDGE = "exo-rh"
MGMT_BRIDGE = "exo-rh-m"
ADMIN_IP = "172.30.0.254"      # the admin host (root namespace): operator tools, Prometheus, the switch's mgmt port
MGMT_PREFIX_LEN = 24
CONTROLLER_HOST = "ctl"        # the controller's machine (namespace exo-rh-ctl)
SERVICE_USER = "exo"
READY_TIMEOUT = 30.0


class StepFailed(RuntimeError):
    pass


def wait_for(check, what: str, timeout: float = READY_TIMEOUT, alive=None) -> float:
    """Polls check() until true; returns the seconds it took. alive(): raises if a process died."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if alive is not None:
            alive()
        try:
            if check():
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        time.sleep(0.2)
    raise StepFailed(f"timed out after {timeout:.0f} s waiting for {what}")


class Rehearsal:
    def __init__(self, args):
        self.args = args
        self.work: Path = args.work
        self.root = self.work / "root"       # stands in for "/" of every machine
        self.lab = Lab(PREFIX)
        self.services: dict[str, Service] = {}
        self.steps: list[dict] = []
        self.cfg = None
        self.stubs = None
        self.prometheus: Prometheus | None = None
        self.deb: Path | None = None
        self.deb_files: list[str] = []
        self.summary: dict = {"ops": 0, "errors": 0, "acked": 0, "bad_reads": 0, "lost_acked_writes": None}
        self.tls_checks: dict[str, bool] = {}
        self.metrics: dict = {}
        self.started = time.monotonic()

    # ---------------------------------------------------------------- driver
    def run(self) -> int:
        ok = True
        if self.work.exists():  # the previous run's logs and scratch root
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        os.chmod(self.work, 0o755)
        try:
            ok = self.do("0", "rack", "Cable the stand-in rack (namespaces, veths)", self.prepare_rack, ok)
            for n, step in enumerate(STEPS, 1):
                ok = self.do(f"{n}", step.key, step.title, getattr(self, f"step_{step.key}"), ok)
            ok = self.do("check", "restarts", "Restart every service once under load", self.check_restarts, ok)
            ok = self.do("check", "read_back", "Read back every acknowledged write", self.check_read_back, ok)
        except KeyboardInterrupt:
            self.steps.append({"step": "-", "key": "interrupted", "title": "Ctrl-C", "outcome": "failed: interrupted",
                               "seconds": 0.0})
            ok = False
        finally:
            failed = self.teardown()
            if failed:
                self.steps.append({"step": "-", "key": "teardown", "title": "Tear everything down",
                                   "outcome": "failed: " + "; ".join(failed), "seconds": 0.0})
                ok = False
            self.write_report(ok)
        lost = self.summary["lost_acked_writes"]
        return 0 if ok and lost == 0 and self.summary["bad_reads"] == 0 else 1

    def do(self, number: str, key: str, title: str, fn, previous_ok: bool) -> bool:
        entry = {"step": number, "key": key, "title": title}
        if not previous_ok:
            entry.update(outcome="skipped (an earlier step failed)", seconds=0.0)
            self.steps.append(entry)
            return False
        print(f"[{time.monotonic() - self.started:6.1f} s] step {number}: {title} ...", flush=True)
        t0 = time.monotonic()
        try:
            detail = fn() or {}
            entry.update(outcome="ok", detail=detail)
        except (StepFailed, RuntimeError, OSError, subprocess.SubprocessError, units.UnitError) as err:
            entry.update(outcome=f"failed: {err}")
        entry["seconds"] = round(time.monotonic() - t0, 2)
        print(f"[{time.monotonic() - self.started:6.1f} s]   {entry['outcome']}", flush=True)
        self.steps.append(entry)
        return entry["outcome"] == "ok"

    # ---------------------------------------------------------------- the rack (before any step)
    def prepare_rack(self) -> dict:
        """The machines and their cables, as they stand before the deployment starts: one netns per
        machine, each with a data-plane cable (not yet plugged into the switch) and a management
        cable on the management bridge. The config (cluster.yaml) says which machine is what."""
        closed = [str(d) for d in [self.work, *self.work.parents] if not os.stat(d).st_mode & 0o001]
        if closed:
            raise StepFailed(f"--work {self.work}: the services' user cannot enter {closed[0]} "
                             f"(mode {oct(os.stat(closed[0]).st_mode & 0o777)}); use a directory every user may enter")
        from exo_common.config import load_config
        self.cfg = load_config(self.rendered_config(write_to=self.work / "plan.yaml"))
        self.lab.linux_bridge(MGMT_BRIDGE, f"{ADMIN_IP}/{MGMT_PREFIX_LEN}")
        for machine, mgmt_ip, data in self.machines():
            self.lab.host(machine)
            self.lab.veth(machine, f"{machine}-mgmt", f"rhm-{machine}")
            self.lab.enslave(f"rhm-{machine}", MGMT_BRIDGE)
            self.lab.address(machine, f"{machine}-mgmt", f"{mgmt_ip}/{MGMT_PREFIX_LEN}")
            if data is not None:
                self.lab.veth(machine, data.interface, f"rh-{machine}", mac=data.mac)
                self.lab.address(machine, data.interface, f"{data.ip}/8")
        return {"machines": {m: ip for m, ip, _ in self.machines()}}

    def machines(self):
        """(machine, management IP, data-plane node or None) for every machine of the config."""
        cfg = self.cfg
        out = [(CONTROLLER_HOST, host_of(cfg.controller.grpc), None)]
        out += [(n.name, host_of(n.grpc), n) for n in [*cfg.cache_nodes, *cfg.db_nodes]]
        for c in cfg.clients:
            proxy = next((p for p in cfg.proxies if p.client == c.name), None)
            if proxy is None or not proxy.metrics:
                raise StepFailed(f"clients[{c.name}]: the rehearsal needs a proxy with a metrics address on it")
            out.append((c.name, host_of(proxy.metrics), c))
        return out

    def rendered_config(self, write_to: Path) -> Path:
        text = self.args.config.read_text().replace("@ROOT@", str(self.root))
        write_to.parent.mkdir(parents=True, exist_ok=True)
        write_to.write_text(text)
        return write_to

    # ---------------------------------------------------------------- step 1
    def step_install(self) -> dict:
        self.deb = self.args.deb or self.build_deb()
        self.deb_files = [line.split()[-1] for line in run("dpkg", "-c", str(self.deb)).stdout.splitlines()]
        want = ["./usr/bin/exo-cache-node", "./usr/bin/exo-db-node", "./usr/bin/exo-proxy", "./usr/bin/exo-controller",
                "./usr/bin/exo", *(f"./usr/lib/systemd/system/{u}" for u in UNIT_FILES)]
        missing = [f for f in want if f not in self.deb_files]
        if missing:
            raise StepFailed(f"{self.deb} lacks {missing}")
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        run("dpkg", "-x", str(self.deb), str(self.root), timeout=120)
        self.run_postinst()
        self.verify_units()
        return {"deb": str(self.deb), "bytes": self.deb.stat().st_size, "files": len(self.deb_files),
                "systemd_analyze_verify": "clean"}

    def verify_units(self) -> None:
        """systemd-analyze verify on the installed units. It checks that ExecStart's program exists,
        so it reads copies whose /usr/bin paths point into the scratch root (nothing else changed)."""
        copies = self.work / "verify"
        copies.mkdir(parents=True, exist_ok=True)
        for u in UNIT_FILES:
            text = (self.root / "usr/lib/systemd/system" / u).read_text()
            (copies / u).write_text(text.replace("=/usr/bin/", f"={self.root}/usr/bin/"))
        verify = run("systemd-analyze", "verify", *(str(copies / u) for u in UNIT_FILES), check=False)
        if verify.returncode != 0 or verify.stderr.strip():
            raise StepFailed(f"systemd-analyze verify: {verify.stderr.strip() or verify.returncode}")

    def build_deb(self) -> Path:
        out = self.work / "deb"
        out.mkdir(parents=True, exist_ok=True)
        build = Path(self.args.build)
        if not (build / "CPackConfig.cmake").exists():
            raise StepFailed(f"{build}/CPackConfig.cmake is missing: run `make build` first")
        run("cpack", "--config", str(build / "CPackConfig.cmake"), "-B", str(out), timeout=600)
        debs = sorted(out.glob("exoskeleton_*.deb"))
        if not debs:
            raise StepFailed(f"cpack wrote no exoskeleton_*.deb into {out}")
        return debs[-1]

    def run_postinst(self) -> None:
        """The package's own postinst (from the .deb), with /etc/exo mapped into the scratch root:
        it creates the exo user (on this machine: setpriv needs it) and /etc/exo{,/pki}."""
        ctrl = self.work / "deb-control"
        run("dpkg-deb", "-e", str(self.deb), str(ctrl))
        script = (ctrl / "postinst").read_text().replace("/etc/exo", f"{self.root}/etc/exo")
        self.user_existed = _user_exists(SERVICE_USER)
        res = subprocess.run(["sh", "-s", "configure"], input=script, capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise StepFailed(f"postinst configure: exit {res.returncode}: {res.stderr.strip()}")
        if not self.user_existed:
            self.lab.on_teardown(f"user {SERVICE_USER}", _remove_service_user)

    # ---------------------------------------------------------------- step 2
    def step_config(self) -> dict:
        etc = self.root / "etc/exo"
        yaml_path = self.rendered_config(write_to=etc / "cluster.yaml")
        exo = str(self.root / "usr/bin/exo")
        check = run(exo, "config", "check", str(yaml_path))
        run(exo, "config", "resolve", str(yaml_path), "-o", str(etc / "cluster.json"))
        proxy_env = etc / "exo-proxy.env"
        proxy_env.write_text("".join(f"EXO_PROXY_CLIENT={p.client}\n" for p in self.cfg.proxies[:1]))
        for f in (yaml_path, etc / "cluster.json", proxy_env):
            os.chmod(f, 0o644)
        return {"check": check.stdout.strip()}

    # ---------------------------------------------------------------- step 3
    def step_certs(self) -> dict:
        if self.cfg.security.insecure_dev_mode:
            raise StepFailed("security.insecure_dev_mode is true: the rehearsal runs with TLS")
        exo = str(self.root / "usr/bin/exo")
        out = run(exo, "certs", "init", "--config", str(self.root / "etc/exo/cluster.yaml"))
        pki = Path(self.cfg.security.cert_dir)
        pw = pwd.getpwnam(SERVICE_USER)
        owned = []
        for name, role in self.cfg.roles().items():
            if role in ("controller", "cache", "db", "proxy"):
                os.chown(pki / f"{name}.key", pw.pw_uid, pw.pw_gid)
                owned.append(name)
        return {"issued": out.stdout.strip().splitlines()[-1], "keys_for_service_user": owned}

    # ---------------------------------------------------------------- step 4
    def step_firewall(self) -> dict:
        """firewall.py's ruleset on every machine's management interface (nft -f in its
        namespace); then one connection it must allow and one it must drop."""
        import firewall
        applied = {}
        for machine, _, _ in self.machines():
            component = self.component_on(machine)
            text = firewall.ruleset(self.cfg, component, f"{machine}-mgmt", [ADMIN_IP], [ADMIN_IP], [ADMIN_IP])
            res = subprocess.run(["ip", "netns", "exec", self.lab.netns(machine), "nft", "-f", "-"], input=text,
                                 capture_output=True, text=True, timeout=15)
            if res.returncode != 0:
                raise StepFailed(f"nft -f in {machine}: {res.stderr.strip()}")
            (self.work / "firewall").mkdir(exist_ok=True)
            (self.work / "firewall" / f"{machine}.nft").write_text(text)
            applied[machine] = component
        db = self.cfg.db_nodes[0]
        cache = self.cfg.cache_nodes[0]
        client = self.cfg.clients[0]
        allowed = self.tcp_probe(cache.name, db.grpc)
        forbidden = self.tcp_probe(client.name, db.grpc)
        if allowed == "dropped" or forbidden != "dropped":
            raise StepFailed(f"{cache.name} -> {db.name} gRPC: {allowed} (want answered); "
                             f"{client.name} -> {db.name} gRPC: {forbidden} (want dropped)")
        return {"rulesets": applied, f"{cache.name}->{db.name} gRPC": allowed,
                f"{client.name}->{db.name} gRPC": forbidden}

    def component_on(self, machine: str) -> str:
        if machine == CONTROLLER_HOST:
            return "controller"
        proxy = next((p.name for p in self.cfg.proxies if p.client == machine), None)
        return proxy or machine

    def tcp_probe(self, machine: str, address: str, timeout: float = 1.0) -> str:
        """From `machine`: "connected", "refused" (reached, nothing listening) or "dropped"."""
        from exo_topo.netns import in_named_netns
        host, port = firewall_split(address)
        with in_named_netns(self.lab.netns(machine)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect((host, port))
            return "connected"
        except ConnectionRefusedError:
            return "refused"
        except (socket.timeout, TimeoutError):
            return "dropped"
        finally:
            s.close()

    # ---------------------------------------------------------------- step 5
    def step_switch(self) -> dict:
        from exo_topo import ovs
        if ovs.ensure_running():
            self.lab.on_teardown("Open vSwitch", ovs.stop)
        cfg = self.cfg
        rate = self.measure_update_rate()
        if rate < cfg.switch.rule_update_rate:
            raise StepFailed(f"the switch takes {rate:.0f} flow-mods/s, below switch.rule_update_rate "
                             f"{cfg.switch.rule_update_rate:g}")
        self.lab.ovs_bridge(SWITCH_BRIDGE, "--", "set", "Bridge", SWITCH_BRIDGE, "datapath_type=netdev",
                            "fail_mode=secure", "protocols=OpenFlow13",
                            f"other-config:datapath-id={cfg.switch.dpid:016x}",
                            "other-config:disable-in-band=true")
        table, limit = forward_table_limit(cfg)
        run("ovs-vsctl", "--timeout=5", "--", "--id=@ft", "create", "Flow_Table", f"flow_limit={limit}",
            "overflow_policy=refuse", "name=exo_forward", "prefixes=ip_dst", "--", "set", "Bridge", SWITCH_BRIDGE,
            f"flow_tables:{table}=@ft")
        for machine, _, data in self.machines():
            if data is not None:
                self.lab.ovs_port(SWITCH_BRIDGE, f"rh-{machine}", data.switch_port)
        pki = Path(cfg.security.cert_dir)
        ssl = [str(pki / "switch.key"), str(pki / "switch.crt"), str(pki / "ca.crt")]
        run("ovs-vsctl", "--timeout=5", "set-ssl", *ssl)
        self.lab.on_teardown("OVS SSL", lambda: _del_ssl_if_ours(ssl))
        target = f"ssl:{cfg.controller.openflow_host}:{cfg.controller.openflow_port}"
        run("ovs-vsctl", "--timeout=5", "set-controller", SWITCH_BRIDGE, target)
        return {"flow_mods_per_s": round(rate), "controller_target": target, f"table{table}_flow_limit": limit}

    def measure_update_rate(self, n: int = 2000) -> float:
        """Flow-mods per second the switch takes: n adds on a scratch bridge, timed (docs/deploy.md)."""
        scratch = f"{PREFIX}-rate"
        self.lab.ovs_bridge(scratch, "--", "set", "Bridge", scratch, "datapath_type=netdev", "fail_mode=secure",
                            "protocols=OpenFlow13")
        flows = self.work / "rate-flows.txt"
        flows.write_text("".join(f"priority=200,ip,nw_dst=10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255},"
                                 f"actions=drop\n" for i in range(n)))
        t0 = time.monotonic()
        run("ovs-ofctl", "-O", "OpenFlow13", "add-flows", scratch, str(flows), timeout=60)
        run("ovs-ofctl", "-O", "OpenFlow13", "dump-aggregate", scratch)  # after the adds are in
        rate = n / (time.monotonic() - t0)
        run("ovs-vsctl", "--timeout=5", "del-br", scratch)
        return rate

    # ---------------------------------------------------------------- steps 6-9: services
    def start_unit(self, unit_file: str, instance: str, machine: str) -> Service:
        env_files = {}
        env_path = "/etc/exo/exo-proxy.env"
        if (self.root / env_path.lstrip("/")).exists():
            env_files[env_path] = (self.root / env_path.lstrip("/")).read_text()
        unit = units.parse(self.root / "usr/lib/systemd/system" / unit_file)
        svc = Service(units.launch(unit, instance, self.root, env_files), self.lab.netns(machine),
                      self.work / "logs" / f"{unit_file.replace('@.service', '@' + instance)}.log")
        svc.log_path.parent.mkdir(parents=True, exist_ok=True)
        svc.start()
        self.services[svc.name] = svc
        if len(self.services) == 1:
            self.lab.on_teardown("services", self.stop_services)
        return svc

    def check_identity(self, svc: Service) -> dict:
        """The running service is the unit's user with exactly the unit's capabilities."""
        got = svc.identity()
        want_uid = pwd.getpwnam(svc.launch.user).pw_uid
        caps = sorted(svc.launch.ambient_caps)
        if (got["uid"], got["cap_eff"], got["cap_bnd"], got["no_new_privs"]) != (want_uid, caps, caps, True):
            raise StepFailed(f"{svc.name} runs as uid {got['uid']} with CapEff {got['cap_eff']}, CapBnd "
                             f"{got['cap_bnd']}, NoNewPrivs {got['no_new_privs']}; its unit says uid {want_uid}, {caps}")
        lowered = svc.lowered_limits()
        return {**got, **({"limits_lowered": lowered} if lowered else {})}

    def alive(self, *names: str):
        def check():
            for n in names or list(self.services):
                s = self.services[n]
                if not s.running():
                    raise StepFailed(f"{n} exited with {s.exit_code()}; its log ends:\n{s.log_tail()}")
        return check

    def step_controller(self) -> dict:
        from exo_topo.grpc_clients import Stubs
        self.stubs = Stubs(self.cfg)
        svc = self.start_unit("exo-controller.service", "", CONTROLLER_HOST)
        took = wait_for(self.switch_ready, "the switch to connect and get Rulesets 1 and 3", alive=self.alive(svc.name))
        return {"ready_s": round(took, 1), "argv": svc.launch.argv, "runs_as": self.check_identity(svc)}

    def switch_ready(self) -> bool:
        rep = self.stubs.rules(3, timeout=2.0)
        return rep.switch_connected and len(rep.flows) == (1 << self.cfg.switch.partition_bits)

    def node_ready(self, name: str) -> bool:
        self.stubs.stats(name, timeout=1.0)
        return True

    def start_nodes(self, unit_file: str, nodes) -> dict:
        out, runs_as = {}, {}
        for n in nodes:
            self.start_unit(unit_file, n.name, n.name)
        for n in nodes:
            svc = unit_file.replace("@.", f"@{n.name}.")
            out[n.name] = round(wait_for(lambda: self.node_ready(n.name), f"{n.name} to answer Stats",
                                         alive=self.alive(svc)), 1)
            runs_as[n.name] = self.check_identity(self.services[svc])
        return {"ready_s": out, "runs_as": runs_as}

    def step_db_nodes(self) -> dict:
        return self.start_nodes("exo-db-node@.service", self.cfg.db_nodes)

    def step_cache_nodes(self) -> dict:
        return self.start_nodes("exo-cache-node@.service", self.cfg.cache_nodes)

    def step_proxies(self) -> dict:
        out, runs_as = {}, {}
        for p in self.cfg.proxies:
            svc = self.start_unit("exo-proxy.service", "", p.client)
            out[p.name] = round(wait_for(lambda: self.proxy_ready(p.client), "exo-proxy on 127.0.0.1:11211",
                                         alive=self.alive(svc.name)), 1)
            runs_as[p.name] = self.check_identity(svc)
        return {"ready_s": out, "runs_as": runs_as}

    def proxy_ready(self, machine: str) -> bool:
        from exo_topo.netns import in_named_netns
        with in_named_netns(self.lab.netns(machine)):
            s = socket.create_connection(("127.0.0.1", 11211), timeout=1.0)
        s.close()
        return True

    # ---------------------------------------------------------------- step 10
    def step_metrics(self) -> dict:
        self.prometheus = Prometheus(self.cfg, self.work / "prometheus")
        self.lab.on_teardown("prometheus", self.prometheus.stop)
        self.prometheus.start()
        up = self.prometheus.wait_up()
        down = sorted(n for n in prom.targets(self.cfg) if up.get(n) != 1)
        self.metrics["up"] = up
        if down:
            raise StepFailed(f"Prometheus cannot scrape {', '.join(down)} (up = {up})")
        return {"targets_up": up}

    # ---------------------------------------------------------------- step 11
    def workload(self, cmd: str, *extra: str) -> list[str]:
        client = self.cfg.proxies[0].client
        return ["ip", "netns", "exec", self.lab.netns(client), sys.executable, str(HERE / "workload.py"), cmd,
                "--state", str(self.work / "acked.json"), *extra]

    def step_smoke(self) -> dict:
        res = run(*self.workload("run", "--duration", "4", "--rate", "300"), timeout=60)
        out = json.loads(res.stdout.strip().splitlines()[-1])
        self.add_ops(out)
        if out["acked"] == 0 or out["bad_reads"]:
            raise StepFailed(f"through the proxy: {out}")
        # The hot keys were cached: the cache node answered GETs (its counter, through Prometheus).
        wait_for(lambda: self.cache_hits() > 0, "cache hits in Prometheus (exo_cache_hits_total)",
                        timeout=10)
        self.metrics["cache_hits_after_smoke"] = self.cache_hits()
        # The operator's own check: the installed `exo` through the proxy's unix socket.
        exo, sock = str(self.root / "usr/bin/exo"), str(self.root / "run/exo-proxy/proxy.sock")
        run(exo, "set", "rehearsal:hello", "world", "--socket", sock)
        got = run(exo, "get", "rehearsal:hello", "--socket", sock).stdout.strip()
        if got != "world":
            raise StepFailed(f"exo get rehearsal:hello through {sock}: {got!r}, want 'world'")
        self.tls_checks = self.check_tls()
        if not all(self.tls_checks.values()):
            raise StepFailed(f"TLS checks: {self.tls_checks}")
        return {"workload": out, "cache_hits": self.metrics["cache_hits_after_smoke"], "exo_get": got,
                "tls": self.tls_checks}

    def cache_hits(self) -> int:
        res = self.prometheus.query("sum(exo_cache_hits_total)") if self.prometheus else []
        return int(float(res[0]["value"][1])) if res else 0

    def add_ops(self, out: dict) -> None:
        for k in ("ops", "errors", "acked", "bad_reads"):
            self.summary[k] += out.get(k, 0)

    def check_tls(self) -> dict:
        """TLS is on where it matters: the switch's controller connection is ssl: and up; gRPC
        refuses plaintext; a client without a certificate is refused."""
        import grpc
        from exoproto import control_pb2 as pb
        from exoproto import control_pb2_grpc as rpc
        conn = run("ovs-vsctl", "--timeout=5", "--columns=target,is_connected", "list", "Controller").stdout
        out = {"openflow_ssl_connected": "ssl:" in conn and "is_connected        : true" in conn}
        ch = grpc.insecure_channel(self.cfg.controller.grpc)
        try:
            rpc.ControllerStub(ch).Stats(pb.StatsRequest(), timeout=2)
            out["grpc_plaintext_refused"] = False
        except grpc.RpcError:
            out["grpc_plaintext_refused"] = True
        finally:
            ch.close()
        return out

    # ---------------------------------------------------------------- checks after the steps
    def check_restarts(self) -> dict:
        """A workload runs through the proxy while every service is stopped (SIGTERM, as systemctl
        restart does) and started again from its unit, one at a time, in the start order."""
        load = subprocess.Popen(self.workload("run", "--duration", "300", "--rate", "200"),
                                stdout=subprocess.PIPE, text=True)
        detail = {}
        try:
            time.sleep(1.0)
            for name in list(self.services):
                svc = self.services[name]
                t0 = time.monotonic()
                code = svc.stop(sig=self.args.restart_signal)
                svc.start()
                self.wait_service(name)
                detail[name] = {"exit_status": code, "back_in_s": round(time.monotonic() - t0, 1)}
                time.sleep(1.0)
        finally:
            load.send_signal(signal.SIGTERM)
            stdout, _ = load.communicate(timeout=30)
        out = json.loads(stdout.strip().splitlines()[-1])
        self.add_ops(out)
        detail["workload"] = out
        detail["signal"] = signal.Signals(self.args.restart_signal).name
        if out["bad_reads"]:
            raise StepFailed(f"{out['bad_reads']} reads lost an acknowledged write during the restarts")
        if self.prometheus is not None:
            # Every restarted component is scraped again, and the counters are there.
            up = self.prometheus.wait_up()
            series = self.prometheus.query('count({__name__=~"exo_.+"})')
            self.metrics["up_after_restarts"] = up
            self.metrics["exo_series"] = int(float(series[0]["value"][1])) if series else 0
            down = sorted(n for n in prom.targets(self.cfg) if up.get(n) != 1)
            if down or not self.metrics["exo_series"]:
                raise StepFailed(f"after the restarts Prometheus scrapes {up}, {self.metrics['exo_series']} exo_ series")
            detail["metrics"] = {"up": up, "exo_series": self.metrics["exo_series"]}
        return detail

    def wait_service(self, name: str) -> None:
        svc = self.services[name]
        alive = self.alive(name)
        if name == "exo-controller.service":
            wait_for(self.switch_ready, "the switch to reconnect to the controller", alive=alive)
        elif name == "exo-proxy.service":
            wait_for(lambda: self.proxy_ready(svc.netns.removeprefix(PREFIX + "-")), "exo-proxy", alive=alive)
        else:
            node = name.split("@", 1)[1].split(".", 1)[0]
            wait_for(lambda: self.node_ready(node), f"{node} to answer Stats", alive=alive)

    def check_read_back(self) -> dict:
        res = run(*self.workload("verify"), timeout=120)
        out = json.loads(res.stdout.strip().splitlines()[-1])
        self.summary["lost_acked_writes"] = out["lost_acked_writes"]
        self.summary["errors"] += out["errors"]
        if out["lost_acked_writes"] or out["errors"]:
            raise StepFailed(f"read back {out['ops']} acknowledged keys: {out}")
        return out

    # ---------------------------------------------------------------- teardown and report
    def stop_services(self) -> None:
        for svc in reversed(list(self.services.values())):
            svc.stop(grace=3.0)

    def teardown(self) -> list[str]:
        print(f"[{time.monotonic() - self.started:6.1f} s] tearing down", flush=True)
        if self.stubs is not None:
            self.stubs.close()
        return self.lab.teardown()

    def write_report(self, ok: bool) -> None:
        report = {
            "ok": ok and self.summary["lost_acked_writes"] == 0 and self.summary["bad_reads"] == 0,
            "steps": self.steps,
            "ops": self.summary["ops"],
            "errors": self.summary["errors"],
            "acked_writes": self.summary["acked"],
            "bad_reads": self.summary["bad_reads"],
            "lost_acked_writes": self.summary["lost_acked_writes"],
            "tls": bool(self.tls_checks) and all(self.tls_checks.values()),
            "tls_checks": self.tls_checks,
            "metrics": self.metrics,
            "deb": {"path": str(self.deb) if self.deb else None, "files": len(self.deb_files)},
            "services": {n: {"starts": s.starts, "log": str(s.log_path)} for n, s in self.services.items()},
            "seconds": round(time.monotonic() - self.started, 1),
            "work_dir": str(self.work),
        }
        self.args.out.parent.mkdir(parents=True, exist_ok=True)
        self.args.out.write_text(json.dumps(report, indent=1) + "\n")
        print_table(report)
        print(f"wrote {self.args.out}")


UNIT_FILES = ("exo-controller.service", "exo-cache-node@.service", "exo-db-node@.service", "exo-proxy.service")


def host_of(address: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep or address.startswith("unix:"):
        raise StepFailed(f"{address!r}: the rehearsal's machines talk over the management network (IP:port)")
    return host


def firewall_split(address: str) -> tuple[str, int]:
    import firewall
    return firewall.split_address(address)


def forward_table_limit(cfg) -> tuple[int, int]:
    """(OpenFlow table whose size is the switch's limit, its flow_limit), as the emulation sets it."""
    from exo_controller import flows
    return getattr(flows, "FORWARD_TABLE", 0), flows.table_flow_limit(cfg)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _remove_service_user() -> None:
    """Undo what the postinst did on this machine (a real install keeps the user)."""
    run("deluser", "--system", "--quiet", SERVICE_USER, check=False)
    run("delgroup", "--system", "--quiet", SERVICE_USER, check=False)


def _del_ssl_if_ours(ssl: list[str]) -> None:
    out = run("ovs-vsctl", "--timeout=5", "get-ssl", check=False).stdout
    if all(p in out for p in ssl):
        run("ovs-vsctl", "--timeout=5", "del-ssl", check=False)


def print_table(report: dict) -> None:
    print(f"\n{'step':>5}  {'what':44s} {'s':>6}  outcome")
    for s in report["steps"]:
        outcome = s["outcome"] if len(s["outcome"]) < 90 else s["outcome"][:87] + "..."
        print(f"{s['step']:>5}  {s['title'][:44]:44s} {s['seconds']:6.1f}  {outcome}")
    print(f"\nops {report['ops']:,} (acknowledged writes {report['acked_writes']:,}), errors {report['errors']:,}, "
          f"lost acknowledged writes {report['lost_acked_writes']}, bad reads {report['bad_reads']}, "
          f"tls {report['tls']}, {report['seconds']} s: {'PASSED' if report['ok'] else 'FAILED'}")


def prerequisites() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, Open vSwitch, setpriv)"
    for tool in ("ovs-vsctl", "ovs-ofctl", "setpriv", "prlimit", "ip", "nft", "dpkg-deb", "cpack", "systemd-analyze"):
        if shutil.which(tool) is None:
            return f"{tool} not found (make deps)"
    return None


def stop_signal(text: str) -> int:
    name = text.upper().removeprefix("SIG")
    if name not in ("TERM", "KILL"):
        raise argparse.ArgumentTypeError(f"want TERM or KILL, got {text!r}")
    return int(getattr(signal, "SIG" + name))


def _sigterm_as_interrupt(*_):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "results" / "rehearsal.json")
    ap.add_argument("--config", type=Path, default=HERE / "cluster.yaml",
                    help="the cluster config to deploy (@ROOT@ stands for the scratch root)")
    ap.add_argument("--deb", type=Path, default=None, help="use this .deb instead of building one with cpack")
    ap.add_argument("--build", default=os.environ.get("EXO_BUILD", str(REPO / "build")), help="CMake build dir")
    ap.add_argument("--restart-signal", type=stop_signal,
                    default=int(signal.SIGTERM), metavar="TERM|KILL",
                    help="how each service is stopped before its restart: TERM as systemctl restart does "
                         "(default), KILL for a crash")
    ap.add_argument("--work", type=Path, default=Path("/tmp/exo-rehearsal"), help="scratch root, logs")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    why = prerequisites()
    if why:
        print(f"rehearsal: {why}", file=sys.stderr)
        return 2
    # Ctrl-C and SIGTERM both end in run()'s teardown; SIGINT explicitly, since a shell that
    # starts us in the background leaves it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    return Rehearsal(args).run()


if __name__ == "__main__":
    sys.exit(main())
