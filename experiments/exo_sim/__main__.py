"""python -m exo_sim [--quick] [--out results/sim]: Figures 4.1-4.4, then the scale study."""
import sys

from . import figures, scale


def main(argv=None) -> int:
    args = figures.parser("python -m exo_sim").parse_args(argv)
    print(figures.table(figures.run(args)))
    sargs = ["--out", str(args.out)] + (["--quick"] if args.quick else []) + (["--no-plot"] if args.no_plot else [])
    print()
    return scale.main(sargs)


if __name__ == "__main__":
    sys.exit(main())
