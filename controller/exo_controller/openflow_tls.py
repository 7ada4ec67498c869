"""OpenFlow over TLS: only the switch's certificate gets a datapath (docs/security.md).

os-ken is configured with its own SSL options (ofp-ssl-listen-port, ctl-privkey, ctl-cert,
ca-certs: `configure`), so the switch must present a certificate signed by the cluster CA. That
alone would let any component of the cluster (a cache node's certificate, say) claim the
switch's datapath id and replace the switch's connection. So the listener here replaces
os-ken's: it completes the handshake (with a deadline), refuses every peer whose certificate
name (CN) is not `switch`, and only then hands the connection to os-ken as a Datapath. Every
refusal (no TLS, no or a foreign certificate, the wrong name, a handshake that never ends) is
reported through `on_refused(address, why)`, which the controller counts as `openflow_refused`.

ExoOFPHandler is os-ken's OFPHandler (the `ofp_event` service) with that listener; main.py
instantiates it in place of os_ken.controller.ofp_handler. With security.insecure_dev_mode
nothing here changes os-ken's plain TCP listener.
"""
from __future__ import annotations

import functools
import logging
import ssl
from typing import Callable, Optional

from os_ken.base import app_manager
from os_ken.controller.controller import CONF, OpenFlowController, datapath_connection_factory
from os_ken.controller.ofp_handler import OFPHandler
from os_ken.lib import hub

from exo_common import tls

from .tls_socket import SerializedTlsSocket

LOG = logging.getLogger("exo_controller.openflow_tls")
SWITCH_NAME = "switch"     # the certificate name of the OpenFlow switch (config.RESERVED_NAMES)
HANDSHAKE_TIMEOUT = 5.0    # seconds a peer has to complete the TLS handshake

OnRefused = Callable[[tuple, str], None]


def switch_refusal(peercert: Optional[dict]) -> Optional[str]:
    """Why a verified peer certificate (ssl.SSLSocket.getpeercert()) is not the switch's; None if it is."""
    if not peercert:
        return "no client certificate"
    names = [value for rdn in peercert.get("subject", ()) for key, value in rdn if key == "commonName"]
    if names != [SWITCH_NAME]:
        return f"certificate name {', '.join(names) or '(none)'} is not {SWITCH_NAME!r}"
    return None


def _tls_reason(err: BaseException) -> str:
    return (getattr(err, "verify_message", None) or getattr(err, "reason", None) or str(err)
            or type(err).__name__)


def server_context(certfile: str, keyfile: str, cafile: str) -> ssl.SSLContext:
    """TLS 1.2+, our certificate, and a client certificate signed by the cluster CA required."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    ctx.load_verify_locations(cafile)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def accept_switch(ctx: ssl.SSLContext, sock, timeout: float = HANDSHAKE_TIMEOUT):
    """Handshake on an accepted TCP socket. (None, tls socket) for the switch, else (why, None)
    with the socket closed."""
    sock.settimeout(timeout)
    try:
        conn = ctx.wrap_socket(sock, server_side=True)
    except (ssl.SSLError, OSError) as err:  # socket.timeout included
        sock.close()
        return f"TLS handshake failed: {_tls_reason(err)}", None
    why = switch_refusal(conn.getpeercert())
    if why is not None:
        conn.close()
        return why, None
    return None, conn


class TlsOpenFlowController(OpenFlowController):
    """os-ken's OpenFlowController with the switch-only TLS listener (plain TCP when os-ken has
    no ctl-privkey/ctl-cert, as in insecure_dev_mode)."""

    def __init__(self, on_refused: OnRefused):
        super().__init__()
        self.on_refused = on_refused

    def server_loop(self, ofp_tcp_listen_port, ofp_ssl_listen_port):
        if CONF.ctl_privkey is None or CONF.ctl_cert is None:
            return super().server_loop(ofp_tcp_listen_port, ofp_ssl_listen_port)
        if CONF.ca_certs is None:
            raise RuntimeError("OpenFlow over TLS needs ca-certs: without it any certificate would do")
        ctx = server_context(CONF.ctl_cert, CONF.ctl_privkey, CONF.ca_certs)
        server = hub.StreamServer((CONF.ofp_listen_host, ofp_ssl_listen_port), functools.partial(self._accept, ctx))
        server.serve_forever()

    def _accept(self, ctx: ssl.SSLContext, sock, address) -> None:
        """One accepted connection, on its own hub thread."""
        why, conn = accept_switch(ctx, sock)
        if why is not None:
            self.on_refused(address, why)
            return
        datapath_connection_factory(SerializedTlsSocket(conn), address)


class ExoOFPHandler(OFPHandler):
    """The `ofp_event` service with TlsOpenFlowController. on_refused(address, why): called for
    every refused OpenFlow peer (the controller app counts it)."""

    def __init__(self, *args, on_refused: Optional[OnRefused] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_refused = on_refused or (lambda address, why: LOG.warning("refused OpenFlow peer %s: %s",
                                                                          address, why))

    def start(self):
        app_manager.OSKenApp.start(self)  # OFPHandler.start would make os-ken's own listener
        self.controller = TlsOpenFlowController(self.on_refused)
        return hub.spawn(self.controller)


def configure(conf, cfg) -> str:
    """Set os-ken's OpenFlow listener options from the cluster config; returns how it listens.
    TLS: ofp-ssl-listen-port, ctl-privkey, ctl-cert, ca-certs (the controller's pair and the
    cluster CA; a missing file raises tls.TlsFilesError naming it)."""
    conf.set_override("ofp_listen_host", cfg.controller.openflow_host)
    if cfg.security.insecure_dev_mode:
        conf.set_override("ofp_tcp_listen_port", cfg.controller.openflow_port)
        return "plain TCP (security.insecure_dev_mode)"
    tls.read_identity(cfg.security.cert_dir, "controller")  # fail now, naming the missing file
    ca, crt, key = tls.cert_paths(cfg.security.cert_dir, "controller")
    conf.set_override("ofp_ssl_listen_port", cfg.controller.openflow_port)
    conf.set_override("ctl_privkey", str(key))
    conf.set_override("ctl_cert", str(crt))
    conf.set_override("ca_certs", str(ca))
    return f"TLS, switch certificate `{SWITCH_NAME}` required"
