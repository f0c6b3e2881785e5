"""The ``privbayes`` command line: sample, query, calibrate, demo.

Errors a user can fix (bad files, columns, arguments, infeasible targets) print one line
to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

from . import __version__
from .calibration import calibrate
from .mechanisms import CONJUGATE_METHODS
from .models import BetaBernoulli, DirichletCategorical
from .release import release_query, sample

MODELS = ("beta-bernoulli", "dirichlet-categorical")


class UsageError(Exception):
    """An error the user can fix; printed as one line, exit status 2."""


def _read_column(path: str, column: str) -> list[str]:
    """The raw strings of one column of a CSV file with a header row."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--data: no such file: {path}")
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header:
                raise UsageError(f"--data: {path} is empty (a header row is expected)")
            header = [h.strip() for h in header]
            if column not in header:
                shown = ", ".join(header[:20]) + (" ..." if len(header) > 20 else "")
                raise UsageError(f"--column: no column {column!r} in {path}; columns: {shown}")
            idx = header.index(column)
            values = []
            for line, row in enumerate(reader, start=2):
                if not row:
                    continue
                if idx >= len(row):
                    raise UsageError(f"--data: {path} line {line} has no value for {column!r}")
                values.append(row[idx].strip())
    except UnicodeDecodeError:
        raise UsageError(f"--data: {path} is not a UTF-8 text CSV file") from None
    except csv.Error as exc:
        raise UsageError(f"--data: {path} is not valid CSV: {exc}") from None
    return values


def _to_floats(values: list[str], column: str) -> np.ndarray:
    out = np.empty(len(values))
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except ValueError:
            raise UsageError(f"--column {column!r}: row {i} is {v!r}, not a number") from None
    return out


def _binary(values: list[str], column: str, positive: str | None) -> np.ndarray:
    if positive is not None:
        return np.array([v == positive for v in values], dtype=float)
    truth = {"1": 1.0, "0": 0.0, "true": 1.0, "false": 0.0, "1.0": 1.0, "0.0": 0.0}
    out = np.empty(len(values))
    for i, v in enumerate(values):
        if v.lower() not in truth:
            raise UsageError(
                f"--column {column!r}: row {i} is {v!r}; expected 0/1 or true/false "
                "(or name the value counted as 1 with --positive)"
            )
        out[i] = truth[v.lower()]
    return out


def _codes(values: list[str], column: str, categories: list[str] | None) -> np.ndarray:
    if categories is not None:
        index = {c: k for k, c in enumerate(categories)}
        out = np.empty(len(values))
        for i, v in enumerate(values):
            if v not in index:
                raise UsageError(
                    f"--column {column!r}: row {i} is {v!r}, not one of --categories "
                    f"{','.join(categories)}"
                )
            out[i] = index[v]
        return out
    return _to_floats(values, column)


def _result(rel) -> dict:
    value = rel.value if np.isscalar(rel.value) else np.asarray(rel.value).tolist()
    return {
        "value": value,
        "method": rel.method,
        "r": rel.r,
        "m": rel.m,
        "lam": rel.lam,
        "eps": rel.eps,
        "n": rel.n,
    }


def _model(args):
    if args.model == "beta-bernoulli":
        alpha = args.alpha or [1.0]
        if len(alpha) > 2:
            raise UsageError("--alpha: beta-bernoulli takes ALPHA [BETA]")
        beta = alpha[1] if len(alpha) == 2 else args.beta
        return BetaBernoulli(alpha[0], beta)
    if args.alpha is None:
        if not args.categories:
            raise UsageError("dirichlet-categorical needs --alpha a1 ... aK or --categories")
        return DirichletCategorical(np.ones(len(args.categories)))
    alpha = args.alpha
    if args.categories and len(alpha) == 1:
        alpha = alpha * len(args.categories)
    if args.categories and len(alpha) != len(args.categories):
        raise UsageError(
            f"--alpha has {len(alpha)} entries but --categories has {len(args.categories)}"
        )
    return DirichletCategorical(alpha)


def _cmd_sample(args) -> dict:
    args.categories = args.categories.split(",") if args.categories else None
    model = _model(args)
    raw = _read_column(args.data, args.column)
    if args.model == "beta-bernoulli":
        data = _binary(raw, args.column, args.positive)
    else:
        data = _codes(raw, args.column, args.categories)
    return _result(sample(model, data, args.lam, args.eps, args.method, rng=args.seed))


def _cmd_query(args) -> dict:
    lo, hi = args.range
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UsageError(f"--range: need finite LOW < HIGH; got {lo} {hi}")
    x = _to_floats(_read_column(args.data, args.column), args.column)
    outside = np.flatnonzero((x < lo) | (x > hi))
    if outside.size and not args.clip:
        i = int(outside[0])
        raise UsageError(
            f"--column {args.column!r}: row {i} = {x[i]:g} is outside --range {lo:g} {hi:g} "
            f"({outside.size} rows); widen the public range or pass --clip"
        )
    values = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    rel = release_query(
        values,
        args.lam,
        args.eps,
        method=args.method,
        alpha=args.alpha,
        beta=args.beta,
        rng=args.seed,
    )
    out = _result(rel)
    out["value_in_range"] = lo + (hi - lo) * rel.value
    return out


def _cmd_calibrate(args) -> dict:
    args.categories = None
    cal = calibrate(_model(args), args.n, args.lam, args.eps, args.method)
    return {
        "method": cal.method,
        "r": cal.r,
        "m": cal.m,
        "lam": cal.lam,
        "eps": cal.eps,
        "target_eps": cal.target_eps,
        "n": cal.n,
        "worst_pair": cal.pair,
        "iterations": cal.iterations,
    }


def _cmd_demo(args) -> None:
    from .demo import run_demo

    run_demo(seed=args.seed)


def _order(text: str) -> float:
    return float(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="privbayes",
        description="Posterior samples with a certified Rényi differential privacy guarantee.",
    )
    parser.add_argument("--version", action="version", version=f"privbayes {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def privacy_args(p):
        p.add_argument("--lam", type=_order, required=True, help="Rényi order (> 1, or inf)")
        p.add_argument("--eps", type=float, required=True, help="eps at --lam, in nats (> 0)")
        p.add_argument("--method", choices=CONJUGATE_METHODS, default="diffused")
        p.add_argument("--seed", type=int, default=None, help="seed (default: OS entropy)")

    s = sub.add_parser("sample", help="release one private posterior sample from a CSV column")
    s.add_argument("--model", choices=MODELS, required=True)
    s.add_argument("--data", required=True, help="CSV file with a header row")
    s.add_argument("--column", required=True)
    privacy_args(s)
    s.add_argument(
        "--alpha",
        type=float,
        nargs="+",
        default=None,
        help="prior: ALPHA [BETA] for beta-bernoulli; a1 ... aK for dirichlet",
    )
    s.add_argument("--beta", type=float, default=1.0, help="beta-bernoulli prior beta")
    s.add_argument(
        "--positive",
        default=None,
        help="beta-bernoulli: the column value counted as 1 (others count as 0)",
    )
    s.add_argument(
        "--categories",
        default=None,
        help="dirichlet: the public comma-separated category labels, in order",
    )
    s.set_defaults(func=_cmd_sample)

    q = sub.add_parser("query", help="private mean of a bounded numeric CSV column")
    q.add_argument("--data", required=True)
    q.add_argument("--column", required=True)
    q.add_argument(
        "--range",
        type=float,
        nargs=2,
        required=True,
        metavar=("LOW", "HIGH"),
        help="public bounds of the column; values are rescaled to [0, 1]",
    )
    q.add_argument("--clip", action="store_true", help="clip values outside --range")
    privacy_args(q)
    q.add_argument("--alpha", type=float, default=1.0)
    q.add_argument("--beta", type=float, default=1.0)
    q.set_defaults(func=_cmd_query)

    c = sub.add_parser("calibrate", help="the knob (r or m) for (lam, eps); no data needed")
    c.add_argument("--model", choices=MODELS, required=True)
    c.add_argument("--n", type=int, required=True)
    privacy_args(c)
    c.add_argument("--alpha", type=float, nargs="+", default=None)
    c.add_argument("--beta", type=float, default=1.0)
    c.set_defaults(func=_cmd_calibrate)

    d = sub.add_parser("demo", help="private releases on data sets shipped with scikit-learn")
    d.add_argument("--seed", type=int, default=None, help="seed (default: OS entropy)")
    d.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        out = args.func(args)
    except (UsageError, ValueError, TypeError) as exc:
        print(f"privbayes {args.command}: error: {exc}", file=sys.stderr)
        return 2
    if out is not None:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
