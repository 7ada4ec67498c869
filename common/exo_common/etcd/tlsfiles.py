"""The certificate files a TLS connection to etcd uses: etcd's own CA (not the cluster's: see
exo_common/pki.py init_etcd_pki and docs/etcd.md) and one identity it signed.

    EtcdTls.client(cert_dir)   the controllers' identity:  <cert_dir>/etcd/ca.crt, controller.crt/.key
                               (also EtcdTls.from_dir)
    EtcdTls.server(cert_dir)   etcd's own (EtcdServer):    <cert_dir>/etcd/ca.crt, server.crt/.key
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from exo_common.tls import cert_paths

from .ops import EtcdError

ETCD_SUBDIR = "etcd"        # = exo_common.pki.ETCD_DIR (pki imports cryptography; this must not)
SERVER_CERT_NAME = "etcd"   # the DNS name in every etcd server certificate: clients check it


@dataclass(frozen=True)
class EtcdTls:
    ca: str
    cert: str
    key: str

    @classmethod
    def of_identity(cls, cert_dir: str | Path, stem: str) -> "EtcdTls":
        ca, crt, key = cert_paths(Path(cert_dir) / ETCD_SUBDIR, stem)
        return cls(str(ca), str(crt), str(key))

    @classmethod
    def client(cls, cert_dir: str | Path) -> "EtcdTls":
        return cls.of_identity(cert_dir, "controller")

    from_dir = client  # the name /tmp/helpers/etcd-interface.md promised first

    @classmethod
    def server(cls, cert_dir: str | Path) -> "EtcdTls":
        return cls.of_identity(cert_dir, "server")

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(CA PEM, certificate PEM, key PEM); a missing or unreadable file is an EtcdError naming it."""
        out = []
        for what, path in (("ca", self.ca), ("cert", self.cert), ("key", self.key)):
            try:
                out.append(Path(path).read_bytes())
            except FileNotFoundError:
                raise EtcdError(f"etcd TLS {what} file {path} is missing: run `exo certs init --config "
                                "<cluster.yaml>` (it writes <cert_dir>/etcd/)") from None
            except OSError as err:
                raise EtcdError(f"etcd TLS {what} file {path}: {err.strerror}") from None
        return out[0], out[1], out[2]
