"""Who the attacker is on the control plane: the gRPC channel credentials of each identity.

    nocert      TLS that trusts the cluster CA but shows no client certificate (a host on the
                management network with no certificate)
    rogue       a client certificate named like a db node but signed by a CA the attacker made
    proxy       the certificate of a proxy (role proxy): what a compromised web host holds
    plaintext   no TLS at all
    peer:NAME   a real component's own certificate, used beyond its rights

The attacker dials the server's unix socket with the target-name override set to the server's
certificate name, as an honest peer does (docs/security.md).
"""
from __future__ import annotations

import datetime
from pathlib import Path

import grpc

IDENTITIES = ("nocert", "rogue", "proxy", "plaintext")


def channel(identity: str, cert_dir: Path, address: str, server_name: str, proxy_name: str,
            rogue_dir: Path) -> grpc.Channel:
    if identity == "plaintext":
        return grpc.insecure_channel(address)
    ca = (cert_dir / "ca.crt").read_bytes()
    if identity == "nocert":
        creds = grpc.ssl_channel_credentials(root_certificates=ca)
    elif identity == "proxy" or identity.startswith("peer:"):
        name = proxy_name if identity == "proxy" else identity.split(":", 1)[1]
        creds = grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=(cert_dir / f"{name}.key").read_bytes(),
            certificate_chain=(cert_dir / f"{name}.crt").read_bytes())
    elif identity == "rogue":
        key, crt = rogue_certificate(rogue_dir, "db0")
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=crt)
    else:
        raise ValueError(f"unknown identity {identity!r} (known: {', '.join(IDENTITIES)})")
    return grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", server_name)])


def rogue_certificate(out_dir: Path, name: str) -> tuple[bytes, bytes]:
    """A self-made CA and a leaf named `name` (a real db node's name) signed by it: the cluster
    must refuse it because its CA is not the cluster's."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key_path, crt_path = out_dir / f"rogue-{name}.key", out_dir / f"rogue-{name}.crt"
    if key_path.exists() and crt_path.exists():
        return key_path.read_bytes(), crt_path.read_bytes()
    out_dir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "exo rogue CA")])
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH,
                                                  ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
    key_path.write_bytes(key_pem)
    crt_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    return key_path.read_bytes(), crt_path.read_bytes()
