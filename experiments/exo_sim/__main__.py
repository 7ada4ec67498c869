"""python -m exo_sim [--quick] [--out results/sim] [--replication 3]: Figures 4.1-4.4, the scale
study, then the replicated layout (replication.py: chains of --replication db nodes, 1,024
nodes included)."""
import sys

from . import figures, replication, scale


def main(argv=None) -> int:
    ap = figures.parser("python -m exo_sim")
    ap.add_argument("--replication", type=int, default=3,
                    help="db nodes per chain in the replicated layout study (default 3; results/sim/replication.json)")
    args = ap.parse_args(argv)
    if args.replication < 1:
        ap.error(f"--replication: must be >= 1 (got {args.replication})")
    print(figures.table(figures.run(args)))
    sargs = ["--out", str(args.out)] + (["--quick"] if args.quick else []) + (["--no-plot"] if args.no_plot else [])
    print()
    status = scale.main(sargs)
    print()
    print(replication.table(replication.run(args.replication, args.rule_rate, args.out, args.no_plot)))
    return status


if __name__ == "__main__":
    sys.exit(main())
