"""Run one attack and judge it: did it get through, and did the component that stopped it count it?

The counter is read before and after the attack; `counted` means it moved. Whether the attack
got through is decided from what the attacker could observe or the cluster now holds, never
from the defender's own counter (a defence that counts but lets the frame pass is not a
defence): a gRPC call that returned OK, a controller that programmed the rogue OpenFlow peer, a
spoofed write that became readable, a forwarded GET or misrouted write that was answered, more
frames through the meter than its rate allows.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from . import switch_counters
from .openflow_attack import claim_dpid
from .plan import Attack


class Judge:
    def __init__(self, cl, run_dir: Path, config_yaml: Path, attacker: str, proxy: str, progress=print):
        self.cl, self.cfg = cl, cl.cfg
        self.run_dir, self.config_yaml = run_dir, config_yaml
        self.attacker, self.proxy, self.progress = attacker, proxy, progress
        self.n = 0

    # ---- counters ----
    def counter(self, attack: Attack) -> int | None:
        name = attack.counter
        try:
            if name.startswith("switch:"):
                return switch_counters.rule_packets(self.cl, name.split(":", 1)[1], self.attacker)
            if name.startswith("meter:"):
                return switch_counters.meter_drops(self.cl, self.attacker)
            if ":" in name:
                node, counter = name.split(":", 1)
                return self.cl.stubs.stats(node).get(counter)
            if attack.refuser == "controller":
                return self.cl.stubs.controller_stats().get(name)
            return self.cl.stubs.stats(attack.refuser).get(name)
        except Exception as err:  # a counter we cannot read is reported as such, not as 0
            self.progress(f"attack: cannot read {name} of {attack.refuser}: {err}")
            return None

    # ---- one attack ----
    def run(self, attack: Attack) -> dict:
        before = self.counter(attack)
        got_through, evidence = getattr(self, f"_{attack.kind}")(attack)
        if attack.counter.startswith(("switch:", "meter:")):
            switch_counters.settle()  # the controller reads the switch's counters once a second
        else:
            time.sleep(0.3)
        after = self.counter(attack)
        delta = None if before is None or after is None else after - before
        counted = bool(delta and delta > 0)
        # refused_by names a component only when its own counter shows it did the refusing
        return {"name": attack.name, "refused": not got_through,
                "refused_by": attack.refuser if not got_through and counted else None,
                "counter": f"{attack.refuser}.{attack.counter}" if ":" not in attack.counter else attack.counter,
                "counter_delta": delta, "counted": counted,
                "evidence": evidence}

    def _out(self) -> Path:
        self.n += 1
        return self.run_dir / f"attack-{self.n:02d}.json"

    def _in_attacker_host(self, module: str, args: list[str]) -> dict:
        out = self._out()
        cmd = [sys.executable, "-m", module, *args, "--out", str(out)]
        p = self.cl.popen_in(self.attacker, cmd, f"attack-{self.n:02d}")
        rc = p.wait(timeout=60)
        if rc != 0 or not out.exists():
            raise RuntimeError(f"{module} exited with {rc}; log {self.run_dir}/attack-{self.n:02d}.log")
        return json.loads(out.read_text())

    def _grpc(self, attack: Attack) -> tuple[bool, dict]:
        a = attack.args
        r = self._in_attacker_host("exo_attack.grpc_attack", [
            "--config", str(self.config_yaml), "--attack", a["attack"], "--identity", a["identity"],
            "--target", a["target"], "--key", a.get("key", ""), "--rogue-dir", str(self.run_dir / "rogue")])
        return r["succeeded"], {"code": r["code"], "details": r["details"]}

    def _openflow(self, attack: Attack) -> tuple[bool, dict]:
        c = self.cfg.controller
        # against an insecure_dev_mode cluster (plaintext OpenFlow, no CA) every attacker speaks plaintext
        identity = "plaintext" if self.cfg.security.insecure_dev_mode else attack.args["identity"]
        r = claim_dpid(identity, c.openflow_host, c.openflow_port, self.cfg.switch.dpid,
                       Path(self.cfg.security.cert_dir), self.proxy, self.run_dir / "rogue")
        r["switch_connected_after"] = self.cl.stubs.rules(0).switch_connected
        return r["succeeded"] or not r["switch_connected_after"], r

    def _frame(self, attack: Attack) -> tuple[bool, dict]:
        a = attack.args
        node = self.cfg.node(self.attacker)
        args = ["--iface", node.interface, "--attack", a["attack"], "--key", a.get("key", "attack:key"),
                "--udp-port", str(self.cfg.cluster.udp_port)]
        if a["attack"] == "spoof":
            victim = self.cfg.clients[0]
            args += ["--victim-mac", victim.mac, "--victim-ip", victim.ip]
        if a["attack"] == "wrong_owner":
            args += ["--route-key", a["route_key"]]
        if a["attack"] == "flood":
            args += ["--seconds", str(a["seconds"]), "--listen-s", "0.2"]
        if a.get("dscp"):
            args += ["--dscp", str(a["dscp"])]
        if a.get("prefix"):
            args += ["--prefix", str(a["prefix"])]
        flood = a["attack"] == "flood"
        meter_before = switch_counters.meter_in_and_dropped(self.cfg, self.attacker) if flood else None
        r = self._in_attacker_host("exo_attack.frame_attack", args)
        if a["attack"] == "spoof":
            with self.cl.client(self.cfg.clients[0].name, retries=6) as c:
                value = c.get(a["key"].encode())
            r["value_after"] = None if value is None else value.decode(errors="replace")
            return value == b"SPOOFED", r
        if a["attack"] in ("forwarded", "wrong_owner"):
            return r["ok_replies"] > 0, r
        # flood: what passed the meter (frames that reached it minus its drops, read from the
        # switch: many frames sent never reach it, the host's and the switch's queues overflow
        # first), against what the meter allows in that time
        reached0, dropped0 = meter_before
        reached1, dropped1 = switch_counters.meter_in_and_dropped(self.cfg, self.attacker)
        reached, dropped = reached1 - reached0, dropped1 - dropped0
        allowed = switch_counters.meter_allowance(self.cfg, a["seconds"] + 1.0)
        r.update(meter_reached=reached, meter_dropped=dropped, passed=reached - dropped, allowed=allowed,
                 # a flood the meter never had to cut proves nothing (suite.exit_status fails it)
                 flood_exceeded_meter=reached > 2 * allowed)
        return reached - dropped > allowed, r
