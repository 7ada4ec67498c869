"""The emulation's controller failover group (docs/design/replication.md, 5.4): one etcd
(exo_topo.etcd.EtcdServer, root namespace, free ports) and one exo_controller process per
controller.instances[] entry, each started with `--instance NAME --etcd-endpoints <the etcd's
URL>` (the config's controller.etcd names a deployment's etcd; the emulation's picks a free port).

Used by EmulatedCluster when the config lists instances and etcd; stop() ends every process it
started (controllers first, then etcd), also after a failed start.
"""
from __future__ import annotations

import logging
import signal
import subprocess
from pathlib import Path
from typing import Callable, Optional

from exoproto import control_pb2 as pb

from .grpc_clients import Stubs
from .process import terminate

log = logging.getLogger("exo.controllers")


def uses_failover(cfg) -> bool:
    return bool(cfg.controller.instances) and bool(cfg.controller.etcd)


class ControllerGroup:
    def __init__(self, cfg, run_dir: Path, spawn: Callable[..., subprocess.Popen], base_cmd: list[str]):
        """spawn(host, log_name, cmd): EmulatedCluster._spawn; base_cmd: the controller command
        without --instance."""
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.spawn = spawn
        self.base_cmd = list(base_cmd)
        self.etcd = None
        self.procs: dict[str, subprocess.Popen] = {}
        self.stubs = {i.name: Stubs(cfg.for_instance(i.name)) for i in cfg.controller.instances}

    def start(self) -> None:
        from exo_common.etcd import EtcdTls
        from .etcd import EtcdServer
        etcd_tls = None
        if not self.cfg.security.insecure_dev_mode:
            from exo_common.pki import init_etcd_pki
            init_etcd_pki(self.cfg.cluster.name, self.cfg.security.cert_dir)
            etcd_tls = EtcdTls.server(self.cfg.security.cert_dir)
        self.etcd = EtcdServer(self.run_dir / "etcd", tls=etcd_tls)
        self.etcd.start()
        log.info("etcd for the controller election: %s", ", ".join(self.etcd.endpoints))
        for inst in self.cfg.controller.instances:
            self.start_instance(inst.name)

    def command(self, name: str) -> list[str]:
        return [*self.base_cmd, "--instance", name, "--etcd-endpoints", ",".join(self.etcd.endpoints)]

    def start_instance(self, name: str) -> subprocess.Popen:
        if name in self.procs:
            raise RuntimeError(f"controller instance {name} is still running")
        self.procs[name] = self.spawn(None, f"controller-{name}", self.command(name))
        return self.procs[name]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        proc.wait(timeout=10)

    def stats(self, name: str, timeout: float = 1.0) -> dict[str, float]:
        rep = self.stubs[name].controller().Stats(pb.StatsRequest(), timeout=timeout)
        return {c.name: c.value for c in rep.counters}

    def master(self, timeout: float = 1.0) -> Optional[str]:
        """The running instance whose Stats say it is master (and has programmed the switch)."""
        for name in self.procs:
            try:
                s = self.stats(name, timeout)
            except Exception:  # noqa: BLE001 - not up (yet), or just killed
                continue
            if s.get("controller_master") == 1 and s.get("switch_programmed") == 1:
                return name
        return None

    def all_up(self) -> bool:
        for name in self.procs:
            try:
                self.stats(name, 1.0)
            except Exception:  # noqa: BLE001
                return False
        return True

    def stop(self) -> None:
        for name, proc in list(self.procs.items()):
            try:
                terminate(proc, f"controller-{name}")
            except Exception as err:  # noqa: BLE001 - keep tearing down
                log.warning("stop controller %s: %s", name, err)
        self.procs.clear()
        for s in self.stubs.values():
            s.close()
        if self.etcd is not None:
            self.etcd.stop()
            self.etcd = None
