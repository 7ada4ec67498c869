"""Mutual TLS for the Python side of the control plane (docs/security.md).

Every component holds <cert_dir>/<name>.crt and <name>.key (made by `exo certs init`,
exo_common/pki.py) and trusts <cert_dir>/ca.crt. A server asks every caller for a certificate
signed by that CA; a client checks that the server's certificate carries the name of the
component it meant to reach. gRPC reaches nodes over unix sockets in the emulation, where there
is no host name to check, so the client sets the target-name override to that name
(`server_cert_name`). With security.insecure_dev_mode everything here is plaintext.

    creds = server_credentials(cfg, "controller")     # None in insecure_dev_mode
    ch = secure_channel(cfg, "operator", cfg.controller.grpc, "controller")
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

PEER_NAME_KEY = "x509_common_name"  # the auth_context property gRPC fills from the peer's certificate


class TlsFilesError(RuntimeError):
    """A certificate file a component needs is missing or unreadable; the message names it."""


def cert_paths(cert_dir: str | Path, name: str) -> tuple[Path, Path, Path]:
    """(ca.crt, <name>.crt, <name>.key) under cert_dir."""
    d = Path(cert_dir)
    return d / "ca.crt", d / f"{name}.crt", d / f"{name}.key"


def read_identity(cert_dir: str | Path, name: str) -> tuple[bytes, bytes, bytes]:
    """(CA PEM, certificate PEM, key PEM) of component `name`."""
    out = []
    for path in cert_paths(cert_dir, name):
        try:
            out.append(path.read_bytes())
        except FileNotFoundError:
            raise TlsFilesError(f"{path} is missing: run `exo certs init --config <cluster.yaml>` "
                                f"(security.cert_dir is {cert_dir})") from None
        except OSError as err:
            raise TlsFilesError(f"{path}: {err.strerror}") from None
    return out[0], out[1], out[2]


def server_cert_name(cfg, node: str) -> str:
    """The certificate name of the process that serves `node`'s gRPC: the node itself, or for a
    db node hosted by a wimpy emulator, the emulator (one process, one certificate)."""
    if node == "controller":
        return node
    for d in cfg.db_nodes:
        if d.name == node and d.emulator is not None:
            return d.emulator
    return node


def server_credentials(cfg, name: str):
    """grpc.ServerCredentials for component `name` that require a client certificate signed by
    the cluster CA; None in insecure_dev_mode.

    gRPC Python can only require a client certificate or not ask for one (the C++ servers ask,
    verify one if presented and refuse a missing one in their handlers). So a caller without a
    certificate, with another CA's or without TLS fails the handshake here and reaches no handler
    (nor rpc_refused); the controller counts it as tls_handshake_refused from gRPC's log line
    (exo_controller/grpc_handshake_counter.py)."""
    if cfg.security.insecure_dev_mode:
        return None
    import grpc
    ca, crt, key = read_identity(cfg.security.cert_dir, name)
    return grpc.ssl_server_credentials([(key, crt)], root_certificates=ca, require_client_auth=True)


def add_port(server, cfg, name: str, address: str) -> int:
    """Listen on `address` with TLS as component `name` (plaintext in insecure_dev_mode).
    Returns the bound port (0 on failure; always 0 for unix: addresses)."""
    creds = server_credentials(cfg, name)
    if creds is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, creds)


def channel_credentials(cfg, name: str):
    """grpc.ChannelCredentials presenting component `name`'s certificate; None in insecure_dev_mode."""
    if cfg.security.insecure_dev_mode:
        return None
    import grpc
    ca, crt, key = read_identity(cfg.security.cert_dir, name)
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=crt)


def secure_channel(cfg, own_name: str, address: str, server_name: str,
                   options: Sequence[tuple[str, object]] = ()):
    """A channel from component `own_name` to the server at `address` whose certificate must be
    named `server_name` (server_cert_name). Plaintext in insecure_dev_mode."""
    import grpc
    creds = channel_credentials(cfg, own_name)
    if creds is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, creds,
                               options=[*options, ("grpc.ssl_target_name_override", server_name)])


def peer_name(context) -> Optional[str]:
    """The certificate name (CN) of the caller of a gRPC handler, None without a verified
    client certificate (the server only accepts certificates signed by the cluster CA)."""
    try:
        auth = context.auth_context()
    except Exception:  # noqa: BLE001 - a context without TLS information is no identity
        return None
    names = auth.get(PEER_NAME_KEY) or []
    if len(names) != 1:
        return None
    name = names[0]
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
