"""`exo certs init --config FILE [--out DIR] [--force]`: the cluster CA and one certificate per
component named in the config (docs/security.md; the work is exo_common/pki.py).

Writes to DIR (default security.cert_dir): ca.crt, ca.key and <name>.crt + <name>.key for
the controller, the switch, every cache node, db node (and wimpy emulator), proxy and operator.
DIR/etcd gets etcd's own CA, etcd's server certificate and the controllers' client certificate
(exo_common/pki.py init_etcd_pki; docs/etcd.md).
Run again, it keeps the CA and every certificate that is still right and issues the others;
--force reissues every certificate (the CA stays: delete ca.crt and ca.key for a new one).
Prints one line per certificate. Exit 0; 2 for a bad config (the message names the field) or a
directory it cannot use.
"""
from __future__ import annotations

import sys
from pathlib import Path


def add_parser(sub) -> None:
    c = sub.add_parser("certs", help="make the cluster's certificates (mutual TLS, docs/security.md)")
    csub = c.add_subparsers(dest="action", required=True)
    i = csub.add_parser("init", help="a CA and one certificate per component of the config")
    i.add_argument("--config", required=True, help="the cluster YAML whose components get certificates")
    i.add_argument("--out", default=None, help="directory to write (default: the config's security.cert_dir)")
    i.add_argument("--force", action="store_true", help="reissue every certificate (the CA is kept)")
    i.set_defaults(func=cmd_init)


def cmd_init(args) -> int:
    from exo_common.config import load_config
    from exo_common.pki import PkiError, init_etcd_pki, init_pki

    cfg = load_config(args.config)  # a ConfigError reaches main(), which prints it and exits 2
    out = Path(args.out or cfg.security.cert_dir)
    roles = cfg.roles()
    try:
        report = init_pki(roles, cfg.cluster.name, out, force=args.force)
        etcd = init_etcd_pki(cfg.cluster.name, out, force=args.force)
    except PkiError as err:
        print(f"exo certs init: {err}", file=sys.stderr)
        return 2
    print(f"{out}: CA {report.ca} (ca.crt, ca.key); cluster {cfg.cluster.name!r}")
    rows = report.rows(roles)
    width = max(len(n) for n, _, _ in rows)
    for name, role, what in rows:
        print(f"  {name:<{width}}  {role:<10}  {what}")
    print(f"{len(report.issued)} issued, {len(report.reissued)} reissued, {len(report.kept)} kept")
    leaves = ", ".join(f"{stem}.crt {what}" for stem, _, what in etcd.rows({"server": "", "controller": ""}))
    print(f"{etcd.out_dir}: etcd CA {etcd.ca}; {leaves}")
    return 0
