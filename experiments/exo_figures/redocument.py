"""Rewrite results/fig4_N.json (and the PNGs, the summary and the table) from the runs the
documents already hold, with the current documents code, without running the cluster again:

    python -m exo_figures.redocument [--out results]

Each document keeps its raw material: fig4_1's `series` are the static runs without and with the
cache, fig4_3's `series.points` the cache-size runs, fig4_4's `series` the dynamic run. Use it
after the documents code changed (a new field, such as the test bed's `testbed` record); the
figures' numbers do not change, since no run is repeated.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from exo_testbed.scale import Scale

from . import documents
from .publish import publish

SCALE_FIELDS = ("db_nodes", "node_rps", "cache_to_db", "keys", "key_size", "value_size", "rule_updates_per_s")


def load(out: Path) -> tuple[dict[str, dict], Scale]:
    old = {n: json.loads((out / f"{n}.json").read_text()) for n in ("fig4_1", "fig4_2", "fig4_3", "fig4_4")
           if (out / f"{n}.json").exists()}
    if not old:
        raise FileNotFoundError(f"no fig4_N.json in {out}")
    first = next(iter(old.values()))
    scale = Scale(**{k: first["scale"][k] for k in SCALE_FIELDS})
    quick = bool(first.get("quick"))
    docs: dict[str, dict] = {}
    if "fig4_1" in old:
        static = {**old["fig4_1"]["series"],
                  "cache_sizes": old["fig4_3"]["series"]["points"] if "fig4_3" in old else {}}
        docs["fig4_1"] = documents.fig4_1(static, scale, quick)
        docs["fig4_2"] = documents.fig4_2(static, scale, quick)
        if "fig4_3" in old:
            docs["fig4_3"] = documents.fig4_3(static, scale, quick)
    if "fig4_4" in old:
        docs["fig4_4"] = documents.fig4_4(old["fig4_4"]["series"], scale, quick)
    return docs, scale


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m exo_figures.redocument", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    args = ap.parse_args(argv)
    try:
        docs, scale = load(args.out)
    except (FileNotFoundError, KeyError, json.JSONDecodeError) as e:
        print(f"exo_figures.redocument: {e}", file=sys.stderr)
        return 2
    publish(docs, args.out, scale, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
