"""The cluster's certificate authority: what `exo certs init` writes (docs/security.md).

    ca.crt, ca.key          an ECDSA P-256 CA, CN "exo <cluster> CA", O=exo:<cluster.name>
    <name>.crt, <name>.key  one leaf per certificate name of the config (ClusterConfig.roles()):
                            CN=<name>, O=exo:<cluster.name>, OU=<role>, SAN DNS:<name>,
                            EKU serverAuth + clientAuth (every component both serves and calls)

Keys are written with mode 0600, certificates 0644, each through a temporary file and a rename,
so a crash never leaves half a file. Running it again keeps the CA and every leaf that is still
right (signed by this CA, the same subject, its key, valid for at least RENEW_BEFORE) and issues
the rest; `force` reissues every leaf. The CA itself is never replaced here: every component
trusts it, so a new one means new certificates everywhere. To start over, delete ca.crt and
ca.key first.

etcd has its own CA (init_etcd_pki, in <cert_dir>/etcd/): etcd with --client-cert-auth trusts
every certificate its CA signed, and cache nodes, db nodes and operators hold certificates of the
cluster CA (docs/etcd.md).

Pure checks (leaf_problem, ca_problem) are separate from the file I/O (init_pki).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 825
RENEW_BEFORE = datetime.timedelta(days=30)  # a leaf that expires sooner is reissued
BACKDATE = datetime.timedelta(minutes=5)    # tolerate clocks a little behind ours
CA_NAMES = ("ca.crt", "ca.key")


class PkiError(RuntimeError):
    """The certificate directory cannot be used as it is; the message says why and what to do."""


@dataclass
class InitReport:
    out_dir: Path
    ca: str  # "created" | "kept"
    issued: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    reissued: dict[str, str] = field(default_factory=dict)  # name -> why the old one was not kept

    def rows(self, roles: dict[str, str]) -> list[tuple[str, str, str]]:
        """(name, role, what happened) for each certificate name, in config order."""
        out = []
        for name, role in roles.items():
            if name in self.issued:
                what = "issued"
            elif name in self.reissued:
                what = f"reissued ({self.reissued[name]})"
            else:
                what = "kept"
            out.append((name, role, what))
        return out


def organization(cluster_name: str) -> str:
    return f"exo:{cluster_name}"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _not_after(cert: x509.Certificate) -> datetime.datetime:
    # cryptography >= 42 has not_valid_after_utc; Debian 12's 38 only the naive UTC one.
    t = getattr(cert, "not_valid_after_utc", None)
    return t if t is not None else cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)


def _attr(name: x509.Name, oid) -> Optional[str]:
    vals = name.get_attributes_for_oid(oid)
    return vals[0].value if len(vals) == 1 else None


def _same_key(cert: x509.Certificate, key) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """cert's issuer is ca and ca's key made its signature (ECDSA CA only, as ours is)."""
    if cert.issuer != ca.subject:
        return False
    pub = ca.public_key()
    if not isinstance(pub, ec.EllipticCurvePublicKey):
        return False
    try:
        pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        return True
    except InvalidSignature:
        return False


# ---------------------------------------------------------------- making certificates

def new_ca(cluster_name: str, now: Optional[datetime.datetime] = None, common_name: Optional[str] = None):
    """(key, certificate) of a fresh self-signed CA for cluster `cluster_name` (CN "exo <cluster> CA"
    unless `common_name` is given)."""
    now = now or _now()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or f"exo {cluster_name} CA"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization(cluster_name))])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         key_cert_sign=True, crl_sign=True, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def san_names(name: str, hosts: tuple[str, ...] = ()) -> list[x509.GeneralName]:
    """subjectAltName entries: DNS:<name>, then each host as an IP address or a DNS name."""
    out: list[x509.GeneralName] = [x509.DNSName(name)]
    for h in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def issue_leaf(ca_key, ca_cert: x509.Certificate, name: str, role: str, cluster_name: str,
               now: Optional[datetime.datetime] = None, hosts: tuple[str, ...] = ()):
    """(key, certificate) for component `name` with role `role`, signed by the CA. subjectAltName:
    DNS:<name>, plus `hosts` (etcd's server certificate names the addresses clients dial)."""
    now = now or _now()
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization(cluster_name)),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role)])
    not_after = min(now + datetime.timedelta(days=LEAF_DAYS), _not_after(ca_cert))
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         key_cert_sign=False, crl_sign=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(san_names(name, hosts)), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return key, cert


# ---------------------------------------------------------------- pure checks

def ca_problem(cert: x509.Certificate, key, now: Optional[datetime.datetime] = None) -> Optional[str]:
    """Why this CA cannot issue leaves (None: it can)."""
    now = now or _now()
    try:
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return "ca.crt is not a CA certificate (no basicConstraints)"
    if not bc.ca:
        return "ca.crt is not a CA certificate (basicConstraints CA:FALSE)"
    if not _same_key(cert, key):
        return "ca.key is not the key of ca.crt"
    if _not_after(cert) <= now + RENEW_BEFORE:
        return f"ca.crt expires {_not_after(cert):%Y-%m-%d}"
    return None


def leaf_problem(cert: x509.Certificate, key, ca: x509.Certificate, name: str, role: str,
                 cluster_name: str, now: Optional[datetime.datetime] = None,
                 hosts: tuple[str, ...] = ()) -> Optional[str]:
    """Why the leaf on disk is not the one `name` (with subjectAltName hosts `hosts`) should have
    (None: keep it)."""
    now = now or _now()
    if not signed_by(cert, ca):
        return "not signed by this ca.crt"
    if not _same_key(cert, key):
        return "its .key does not match its .crt"
    subject = cert.subject
    want = {NameOID.COMMON_NAME: name, NameOID.ORGANIZATION_NAME: organization(cluster_name),
            NameOID.ORGANIZATIONAL_UNIT_NAME: role}
    for oid, value in want.items():
        got = _attr(subject, oid)
        if got != value:
            return f"subject {oid._name} is {got!r}, not {value!r}"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = san.get_values_for_type(x509.DNSName)
        ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        dns, ips = [], []
    want = san_names(name, hosts)
    want_dns = [g.value for g in want if isinstance(g, x509.DNSName)]
    want_ips = [str(g.value) for g in want if isinstance(g, x509.IPAddress)]
    if dns != want_dns:
        return f"subjectAltName DNS is {dns}, not {want_dns}"
    if ips != want_ips:
        return f"subjectAltName IP is {ips}, not {want_ips}"
    try:
        eku = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        eku = set()
    if not {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH} <= eku:
        return "extendedKeyUsage lacks serverAuth or clientAuth"
    if _not_after(cert) <= now + RENEW_BEFORE:
        return f"expires {_not_after(cert):%Y-%m-%d}"
    return None


# ---------------------------------------------------------------- files

def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def write_pair(out_dir: str | Path, stem: str, key, cert: x509.Certificate) -> None:
    """<stem>.key (0600) first, then <stem>.crt: a crash in between leaves a pair that does not
    match, which the next run reissues."""
    out_dir = Path(out_dir)
    _write_atomic(out_dir / f"{stem}.key", _key_pem(key), 0o600)
    _write_atomic(out_dir / f"{stem}.crt", _cert_pem(cert), 0o644)


def read_pair(out_dir: str | Path, stem: str):
    """(key, cert) of <stem>.key/.crt, or None if either is missing. Unreadable or not PEM:
    PkiError naming the file."""
    out_dir = Path(out_dir)
    key_path, crt_path = out_dir / f"{stem}.key", out_dir / f"{stem}.crt"
    if not key_path.exists() or not crt_path.exists():
        return None
    try:
        cert = x509.load_pem_x509_certificate(crt_path.read_bytes())
    except (ValueError, OSError) as err:
        raise PkiError(f"{crt_path}: not a PEM certificate ({err})") from None
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (ValueError, TypeError, OSError) as err:
        raise PkiError(f"{key_path}: not an unencrypted PEM private key ({err})") from None
    return key, cert


def _load_or_create_ca(out_dir: Path, cluster_name: str):
    have = [n for n in CA_NAMES if (out_dir / n).exists()]
    if len(have) == 1:
        raise PkiError(f"{out_dir / have[0]} exists without {out_dir / (set(CA_NAMES) - set(have)).pop()}: "
                       "restore it, or delete both to make a new CA (then every certificate is reissued)")
    if not have:
        key, cert = new_ca(cluster_name)
        write_pair(out_dir, "ca", key, cert)
        return key, cert, "created"
    key, cert = read_pair(out_dir, "ca")
    why = ca_problem(cert, key)
    if why:
        raise PkiError(f"{out_dir}: {why}; delete ca.crt and ca.key to make a new CA "
                       "(every certificate is then reissued)")
    return key, cert, "kept"


def init_pki(roles: dict[str, str], cluster_name: str, out_dir: str | Path, force: bool = False) -> InitReport:
    """Make out_dir hold the CA and a valid leaf for every name in `roles` (name -> role,
    ClusterConfig.roles()). Idempotent; force: reissue every leaf (the CA is kept)."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PkiError(f"cannot create {out_dir}: {err.strerror}") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise PkiError(f"{out_dir}: not writable by this user")
    ca_key, ca_cert, ca_what = _load_or_create_ca(out_dir, cluster_name)
    report = InitReport(out_dir, ca_what)
    for name, role in roles.items():
        pair = read_pair(out_dir, name)
        if pair is None:
            report.issued.append(name)
        else:
            why = "--force" if force else leaf_problem(pair[1], pair[0], ca_cert, name, role, cluster_name)
            if why is None:
                report.kept.append(name)
                continue
            report.reissued[name] = why
        key, cert = issue_leaf(ca_key, ca_cert, name, role, cluster_name)
        write_pair(out_dir, name, key, cert)
    return report


# ---------------------------------------------------------------- etcd's own CA

ETCD_DIR = "etcd"  # under the cert dir: ca.crt/.key, server.crt/.key, controller.crt/.key
ETCD_SERVER_HOSTS = ("localhost", "127.0.0.1")  # what tests and the emulation dial (docs/etcd.md)
# file stem -> (certificate name (CN, first DNS SAN), role (OU)); the server's SAN adds its hosts
ETCD_LEAVES = {"server": ("etcd", "etcd"), "controller": ("controller", "controller")}


def etcd_dir(cert_dir: str | Path) -> Path:
    return Path(cert_dir) / ETCD_DIR


def init_etcd_pki(cluster_name: str, cert_dir: str | Path, force: bool = False,
                  server_hosts: tuple[str, ...] = ETCD_SERVER_HOSTS) -> InitReport:
    """Make <cert_dir>/etcd hold etcd's own CA ("exo <cluster> etcd CA"), etcd's server
    certificate (server.crt: CN etcd, SAN DNS:etcd + server_hosts) and the controllers' client
    certificate (controller.crt). Same rules as init_pki: idempotent, keys 0600, the CA is never
    replaced, `force` reissues the leaves. The report names the leaves by file stem."""
    out_dir = etcd_dir(cert_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PkiError(f"cannot create {out_dir}: {err.strerror}") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise PkiError(f"{out_dir}: not writable by this user")
    have = [n for n in CA_NAMES if (out_dir / n).exists()]
    if not have:
        ca_key, ca_cert = new_ca(cluster_name, common_name=f"exo {cluster_name} etcd CA")
        write_pair(out_dir, "ca", ca_key, ca_cert)
        ca_what = "created"
    else:
        ca_key, ca_cert, ca_what = _load_or_create_ca(out_dir, cluster_name)
    report = InitReport(out_dir, ca_what)
    for stem, (name, role) in ETCD_LEAVES.items():
        hosts = server_hosts if stem == "server" else ()
        pair = read_pair(out_dir, stem)
        if pair is None:
            report.issued.append(stem)
        else:
            why = "--force" if force else leaf_problem(pair[1], pair[0], ca_cert, name, role, cluster_name,
                                                       hosts=hosts)
            if why is None:
                report.kept.append(stem)
                continue
            report.reissued[stem] = why
        key, cert = issue_leaf(ca_key, ca_cert, name, role, cluster_name, hosts=hosts)
        write_pair(out_dir, stem, key, cert)
    return report
