"""``privbayes demo``: private releases on data sets shipped with scikit-learn."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="private releases on data sets shipped with scikit-learn",
        description="Private releases beside the non-private values (for comparison only).",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default: OS entropy)")
    p.add_argument(
        "--no-logistic", action="store_true", help="skip the logistic-regression rows (faster)"
    )
    p.set_defaults(run=run)


def run(args) -> None:
    from ..demo import run_demo

    run_demo(seed=args.seed, logistic=not args.no_logistic)
