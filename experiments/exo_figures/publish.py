"""Writes the figure documents: results/fig4_N.json (each `testbed` record checked against the
test bed's schema first, exo_testbed.record), the PNGs, results/figures-summary.json, and prints
the table of ours against the thesis. Used by a run (__main__) and by redocument."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from exo_testbed import record
from exo_testbed.scale import Scale

from . import documents
from .plots import PLOTS


def publish(docs: dict[str, dict], out: Path, scale: Scale, elapsed_s: Optional[float]) -> list[tuple]:
    for name, d in docs.items():
        record.validate(d["testbed"])
        (out / f"{name}.json").write_text(json.dumps(d, indent=1))
        PLOTS[name](d, out / f"{name}.png")
    rows = documents.table(docs)
    (out / "figures-summary.json").write_text(json.dumps(
        {"scale": scale.as_json(),
         "rows": [{"what": r[0], "thesis": r[1], "ours": r[2], "target_met": None if r[3] == "-" else r[3],
                   "target": None if r[4] == "-" else r[4]} for r in rows],
         "elapsed_s": None if elapsed_s is None else round(elapsed_s, 1)}, indent=1))
    head = ("what", "thesis", "ours", "met", "target")
    w = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    for r in [head, tuple("-" * x for x in w), *rows]:
        print("  ".join(c.ljust(x) for c, x in zip(r, w)))
    print(scale.label())
    return rows
