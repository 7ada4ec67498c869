"""`python -m exo_proxy` (`make proxy-conformance`): a small Mininet cluster with exo-proxy in
client0, the conformance suites against it (conformance.py), results/proxy_conformance.json and
a table. Everything is torn down at the end, also on error or Ctrl-C."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config

from . import conformance, rig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m exo_proxy", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--run-dir", type=Path, default=Path("/tmp/exo/proxy"))
    args = ap.parse_args(argv)
    shutil.rmtree(args.run_dir, ignore_errors=True)
    cfg = emulation_config(n_cache=1, n_db=2, n_clients=1, run_dir=args.run_dir,
                           controller={"openflow_port": 6671})
    t0 = time.monotonic()
    with EmulatedCluster(cfg, args.run_dir) as cl, rig.proxy(cl, "client0"):
        print(f"cluster and exo-proxy up in {time.monotonic() - t0:.1f} s; running the suites",
              file=sys.stderr, flush=True)
        suites = conformance.run_all(rig.run_in(cl, "client0"), "127.0.0.1", rig.PORT, args.run_dir)
    doc = {"schema": "exo-proxy-conformance/1", "suites": suites,
           "pymemcache_version": conformance.PYMEMCACHE_VERSION, "elapsed_s": round(time.monotonic() - t0, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "proxy_conformance.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'suite':<16}{'passed':>8}{'failed':>8}{'unexplained':>13}")
    for name, s in suites.items():
        print(f"{name:<16}{s['passed']:>8}{s['failed']:>8}{s['unexplained']:>13}" + (f"  ERROR {s['error']}" if s["error"] else ""))
        for f in s["failures"]:
            print(f"    {f['test']}: {f['reason']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
