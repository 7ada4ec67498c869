"""The rehearsal's results: results/rehearsal.json (its fields are an interface: steps, ops, errors,
acked_writes, bad_reads, lost_acked_writes, tls, ...) and the table printed at the end."""
from __future__ import annotations

import json

from run_state import Run


def report(r: Run, steps: list[dict], ok: bool) -> dict:
    """ok: every step passed; the report's own `ok` also needs nothing lost."""
    return {
        "ok": ok and r.summary["lost_acked_writes"] == 0 and r.summary["bad_reads"] == 0,
        "steps": steps,
        "ops": r.summary["ops"],
        "errors": r.summary["errors"],
        "acked_writes": r.summary["acked"],
        "bad_reads": r.summary["bad_reads"],
        "lost_acked_writes": r.summary["lost_acked_writes"],
        "tls": bool(r.tls_checks) and all(r.tls_checks.values()),
        "tls_checks": r.tls_checks,
        "metrics": r.metrics,
        "deb": {"path": str(r.deb) if r.deb else None, "files": len(r.deb_files)},
        "services": {n: {"starts": s.starts, "log": str(s.log_path)} for n, s in r.services.items()},
        "seconds": round(r.elapsed(), 1),
        "work_dir": str(r.work),
    }


def write(r: Run, steps: list[dict], ok: bool) -> dict:
    out = report(r, steps, ok)
    r.args.out.parent.mkdir(parents=True, exist_ok=True)
    r.args.out.write_text(json.dumps(out, indent=1) + "\n")
    print_table(out)
    print(f"wrote {r.args.out}")
    return out


def print_table(report: dict) -> None:
    print(f"\n{'step':>5}  {'what':44s} {'s':>6}  outcome")
    for s in report["steps"]:
        outcome = s["outcome"] if len(s["outcome"]) < 90 else s["outcome"][:87] + "..."
        print(f"{s['step']:>5}  {s['title'][:44]:44s} {s['seconds']:6.1f}  {outcome}")
    print(f"\nops {report['ops']:,} (acknowledged writes {report['acked_writes']:,}), errors {report['errors']:,}, "
          f"lost acknowledged writes {report['lost_acked_writes']}, bad reads {report['bad_reads']}, "
          f"tls {report['tls']}, {report['seconds']} s: {'PASSED' if report['ok'] else 'FAILED'}")
