"""``privbayes query``: a private mean of a numeric column with a public range."""

from __future__ import annotations

import math

from . import _models
from ._io import Table, UsageError, floats, is_large_source, open_source
from ._ledger import ledger_args, open_ledger
from .sample import charge_args, result


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "query",
        help="private mean of a bounded numeric CSV column",
        description="Release a private estimate of a column's mean, rescaled from the public "
        "range [LOW, HIGH] to [0, 1] (a Beta-Bernoulli statistical query).",
    )
    p.add_argument(
        "--data",
        required=True,
        metavar="PATH",
        help="a CSV file with a header row, a Parquet file, a directory of Parquet files or a "
        "quoted glob ('data/*.parquet'), reduced in Dask when installed (docs/data.md)",
    )
    p.add_argument("--column", required=True, metavar="COL", help="the numeric column")
    p.add_argument(
        "--low",
        type=float,
        required=True,
        help="public lower bound of the column (write --low=-5 for negatives)",
    )
    p.add_argument("--high", type=float, required=True, help="public upper bound of the column")
    p.add_argument(
        "--clip",
        action="store_true",
        help="clip values outside [LOW, HIGH] instead of refusing them",
    )
    _models.privacy_args(p, _models.CONJUGATE_METHODS)
    p.add_argument(
        "--alpha",
        type=float,
        nargs="+",
        default=None,
        metavar="A",
        help="the Beta prior: ALPHA [BETA] (default 1 1), as for --model beta-bernoulli",
    )
    p.add_argument(
        "--beta", type=float, default=None, metavar="B", help="the Beta prior's beta (default 1)"
    )
    ledger_args(p, charge=True)
    p.set_defaults(run=run)


def run(args) -> dict:
    import numpy as np

    from ..release import release_query

    lo, hi = args.low, args.high
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UsageError(f"--low/--high: need finite LOW < HIGH; got {lo} {hi}")
    if not math.isfinite(hi - lo):  # (x - LOW) / inf would rescale every value to 0
        raise UsageError(
            f"--low/--high: the width HIGH - LOW of [{lo:g}, {hi:g}] overflows to inf; "
            "choose a range narrower than 1.7e308"
        )
    args.alpha, args.beta = _models.beta_prior(args.alpha, args.beta, "query")
    ledger = open_ledger(args.ledger, create=False) if args.ledger is not None else None
    try:
        charge = charge_args(args, ledger)
        if is_large_source(args.data):
            rel = _large_query(args, lo, hi, charge)
            out = result(rel)
            out["value_in_range"] = lo + (hi - lo) * rel.value
            return out
        cells = Table(args.data).column(args.column)
        x = floats(cells, args.column)
        outside = np.flatnonzero((x < lo) | (x > hi))
        if outside.size and not args.clip:
            line, cell = cells[int(outside[0])]
            raise UsageError(
                f"column {args.column!r}: line {line} is {cell!r}, outside [{lo:g}, {hi:g}] "
                f"({outside.size} row(s)); widen the public range or pass --clip"
            )
        values = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
        rel = release_query(
            values,
            args.lam,
            args.eps,
            delta=args.delta,
            method=args.method,
            alpha=args.alpha,
            beta=args.beta,
            rng=args.seed,
            **charge,
        )
    finally:
        if ledger is not None:
            ledger.close()
    out = result(rel)
    out["value_in_range"] = lo + (hi - lo) * rel.value
    return out


def _large_query(args, lo: float, hi: float, charge: dict):
    """The query on a Parquet file, directory or glob: rescaled lazily, reduced in the engine
    (values outside the range are reported in the rescaled units [0, 1])."""
    from ..data import CSVError, _select, as_array, is_dask
    from ..errors import DataError
    from ..release import release_query

    source, _ = open_source(args.data, args.column)
    col, _ = _select(source, args.column, "--data")  # lazy for Dask
    if not is_dask(col):
        col = as_array(col, args.column)  # pandas or pyarrow in memory
    try:
        return release_query(
            (col - lo) / (hi - lo),
            args.lam,
            args.eps,
            delta=args.delta,
            method=args.method,
            alpha=args.alpha,
            beta=args.beta,
            clip=bool(args.clip),
            rng=args.seed,
            **charge,
        )
    except CSVError as exc:  # a file of the glob, checked when the release reads it
        raise UsageError(f"--data: {exc}") from None
    except DataError as exc:
        # name the column and its row (the values passed on are the rescaled column)
        text = str(exc).replace(f"{exc.column}[{exc.index}]", f"row {exc.index}")
        text = text.split(". Rescale by")[0]  # the Python advice; the CLI's follows
        if exc.rule == "finite":
            text = text.replace(exc.column, f"column {args.column!r}", 1)
            raise UsageError(text) from None
        raise UsageError(
            f"column {args.column!r} (rescaled from [{lo:g}, {hi:g}] to [0, 1]): {text}; widen "
            "the public range or pass --clip"
        ) from None
