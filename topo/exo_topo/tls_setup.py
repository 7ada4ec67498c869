"""TLS for an emulated cluster (docs/security.md): certificates, and OpenFlow over TLS on OVS.

EmulatedCluster calls `TlsSetup(cfg).start()` before the controller starts and `stop()` on
teardown:

    certificates   what `exo certs init --config <cluster.yaml>` does (exo_common/pki.py), into
                   security.cert_dir (configgen puts it under the run dir): keeps what is there
                   and still right, issues the rest
    OVS            `ovs-vsctl set-ssl <cert_dir>/switch.key switch.crt ca.crt`, so the switch
                   presents the `switch` certificate and trusts only the cluster CA; the Mininet
                   switch's controller target is then ssl:IP:PORT (`openflow_protocol`)

OVS keeps one SSL configuration per ovsdb, shared by every bridge on the machine: one TLS
cluster at a time per OVS (the last one started wins). stop() removes the setting only while
it is still ours. With security.insecure_dev_mode nothing here runs and OpenFlow stays plain TCP.
"""
from __future__ import annotations

import logging
import subprocess
from pathlib import Path

from exo_common.pki import InitReport, init_pki
from exo_common.tls import cert_paths

log = logging.getLogger("exo.tls_setup")
SWITCH_NAME = "switch"


def openflow_protocol(cfg) -> str:
    """The OVS controller target's protocol: ssl, or tcp in insecure_dev_mode."""
    return "tcp" if cfg.security.insecure_dev_mode else "ssl"


def issue_certificates(cfg) -> InitReport:
    report = init_pki(cfg.roles(), cfg.cluster.name, cfg.security.cert_dir)
    log.info("certificates in %s: CA %s, %d issued, %d reissued, %d kept", report.out_dir, report.ca,
             len(report.issued), len(report.reissued), len(report.kept))
    return report


def _vsctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ovs-vsctl", "--timeout=5", *args], capture_output=True, text=True)


def switch_ssl_args(cert_dir: str | Path) -> list[str]:
    """set-ssl's PRIVATE-KEY CERTIFICATE CA-CERT for the switch."""
    ca, crt, key = cert_paths(cert_dir, SWITCH_NAME)
    return [str(key), str(crt), str(ca)]


def ssl_is(cert_dir: str | Path) -> bool:
    """Whether OVS's SSL setting is the one switch_ssl_args(cert_dir) made."""
    out = _vsctl("get-ssl")
    if out.returncode != 0:
        return False
    key, crt, ca = switch_ssl_args(cert_dir)
    return (f"Private key: {key}" in out.stdout and f"Certificate: {crt}" in out.stdout
            and f"CA Certificate: {ca}" in out.stdout)


class TlsSetup:
    def __init__(self, cfg):
        self.cfg = cfg
        self.enabled = not cfg.security.insecure_dev_mode
        self._ovs_set = False

    def start(self) -> None:
        """Issue the certificates and give the switch its TLS identity (OVS must be running)."""
        if not self.enabled:
            log.warning("security.insecure_dev_mode: plaintext gRPC and OpenFlow, no caller checks")
            return
        issue_certificates(self.cfg)
        out = _vsctl("set-ssl", *switch_ssl_args(self.cfg.security.cert_dir))
        if out.returncode != 0:
            raise RuntimeError(f"ovs-vsctl set-ssl failed: {out.stderr.strip()}")
        self._ovs_set = True
        log.info("OVS: SSL with the `switch` certificate of %s", self.cfg.security.cert_dir)

    def stop(self) -> None:
        """Remove OVS's SSL setting if it is still ours (another cluster may have set its own)."""
        if self._ovs_set and ssl_is(self.cfg.security.cert_dir):
            _vsctl("del-ssl")
        self._ovs_set = False
