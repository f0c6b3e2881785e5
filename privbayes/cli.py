"""The ``privbayes`` command line: sample, query, calibrate, audit, budget, demo.

Every error a user can fix (bad files, columns, arguments, infeasible targets) prints one
line to stderr and exits with status 2. Outputs are one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import sqlite3
import sys
from pathlib import Path

import numpy as np

from . import __version__
from .accounting.ledger import Ledger
from .audit import AuditError
from .calibration import calibrate
from .errors import BudgetExceededError, ConvergenceError, SamplingError
from .models import BayesianLogisticRegression, BetaBernoulli, DirichletCategorical
from .models.logistic import GLM_METHODS
from .preprocessing import clip_rows
from .release import release_query, sample

MODELS = ("beta-bernoulli", "dirichlet-categorical", "logistic")


class UsageError(Exception):
    """An error the user can fix; printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage text stays behind --help)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class _Table:
    """A CSV file with a header row, read once; cells are stripped strings."""

    def __init__(self, path: str) -> None:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"--data: no such file: {path}")
        try:
            with p.open(newline="", encoding="utf-8-sig") as fh:  # -sig: Excel's BOM
                reader = csv.reader(fh)
                header = next(reader, None)
                self.rows = [(n, row) for n, row in enumerate(reader, start=2) if row]
        except UnicodeDecodeError:
            raise UsageError(f"--data: {path} is not a UTF-8 text CSV file") from None
        except csv.Error as exc:
            raise UsageError(f"--data: {path} is not valid CSV: {exc}") from None
        if not header:
            raise UsageError(f"--data: {path} is empty (a header row is expected)")
        self.header = [h.strip() for h in header]
        dupes = sorted({h for h in self.header if self.header.count(h) > 1})
        if dupes:
            raise UsageError(f"--data: {path} has duplicate column name(s): {', '.join(dupes)}")
        self.path = path

    def column(self, name: str, flag: str = "--column") -> list[tuple[int, str]]:
        """(file line number, stripped cell) for every data row."""
        if name not in self.header:
            shown = ", ".join(self.header[:20]) + (" ..." if len(self.header) > 20 else "")
            raise UsageError(f"{flag}: no column {name!r} in {self.path}; columns: {shown}")
        idx = self.header.index(name)
        out = []
        for line, row in self.rows:
            if idx >= len(row):
                raise UsageError(f"{flag} {name!r}: line {line} has no value")
            out.append((line, row[idx].strip()))
        return out


def _floats(cells: list[tuple[int, str]], name: str) -> np.ndarray:
    out = np.empty(len(cells))
    for i, (line, v) in enumerate(cells):
        try:
            out[i] = float(v)
        except ValueError:
            raise UsageError(f"column {name!r}: line {line} is {v!r}, not a number") from None
    return out


def _binary(cells, name: str, positive: str | None, signed: bool = False) -> np.ndarray:
    truth = {"1": 1.0, "0": 0.0, "true": 1.0, "false": 0.0, "1.0": 1.0, "0.0": 0.0}
    if signed:  # logistic labels may be -1/+1
        truth.update({"-1": 0.0, "+1": 1.0, "-1.0": 0.0, "+1.0": 1.0})
    out = np.empty(len(cells))
    for i, (line, v) in enumerate(cells):
        if v == "":
            raise UsageError(f"column {name!r}: line {line} is empty")
        if positive is not None:
            out[i] = float(v == positive)
        elif v.lower() in truth:
            out[i] = truth[v.lower()]
        else:
            raise UsageError(
                f"column {name!r}: line {line} is {v!r}; expected 0/1"
                + (" (or -1/+1)" if signed else "")
                + " or true/false "
                "(or name the value counted as 1 with --positive)"
            )
    return out


def _codes(cells, name: str, categories: list[str] | None) -> np.ndarray:
    if categories is None:
        return _floats(cells, name)
    index = {c: k for k, c in enumerate(categories)}
    out = np.empty(len(cells))
    for i, (line, v) in enumerate(cells):
        if v not in index:
            raise UsageError(
                f"column {name!r}: line {line} is {v!r}, not one of --categories "
                f"{','.join(categories)}"
            )
        out[i] = index[v]
    return out


def _categories(text: str | None) -> list[str] | None:
    if text is None:
        return None
    labels = [c.strip() for c in text.split(",")]
    if len(labels) < 2 or any(not c for c in labels):
        raise UsageError(f"--categories: need at least two non-empty labels; got {text!r}")
    if len(set(labels)) != len(labels):
        raise UsageError(f"--categories: duplicate labels in {text!r}")
    return labels


def _json_number(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    return v


def _result(rel) -> dict:
    value = rel.value if np.isscalar(rel.value) else np.asarray(rel.value).tolist()
    return {
        "value": value,
        "method": rel.method,
        "r": rel.r,
        "m": rel.m,
        "lam": _json_number(rel.lam),
        "eps": rel.eps,
        "n": rel.n,
    }


def _conjugate_model(args):
    if args.model == "beta-bernoulli":
        if args.categories:
            raise UsageError("--categories applies to dirichlet-categorical only")
        alpha = args.alpha or [1.0]
        if len(alpha) > 2:
            raise UsageError("--alpha: beta-bernoulli takes ALPHA [BETA]")
        beta = alpha[1] if len(alpha) == 2 else (1.0 if args.beta is None else args.beta)
        return BetaBernoulli(alpha[0], beta)
    if args.beta is not None:
        raise UsageError("--beta applies to beta-bernoulli only (dirichlet takes --alpha)")
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


def _logistic(args, table: _Table) -> dict:
    if args.label is None:
        raise UsageError("--model logistic needs --label COL (and optionally --features)")
    for flag, value in (
        ("--column", args.column),
        ("--alpha", args.alpha),
        ("--categories", args.categories),
    ):
        if value is not None:
            raise UsageError(f"{flag} does not apply to --model logistic")
    names = (
        [f.strip() for f in args.features.split(",")]
        if args.features is not None
        else [h for h in table.header if h != args.label]
    )
    if not names or any(not f for f in names):
        raise UsageError("--features: need one or more non-empty column names")
    if len(set(names)) != len(names) or args.label in names:
        raise UsageError("--features: repeated column, or the --label column among them")
    X = np.column_stack([_floats(table.column(f, "--features"), f) for f in names])
    y = _binary(table.column(args.label, "--label"), args.label, args.positive, signed=True)
    beta = 0.01 if args.beta is None else args.beta
    model = BayesianLogisticRegression(beta=beta, c=args.c, backend=args.backend or "imh")
    if args.clip:
        X = clip_rows(X, args.c)
    rel = sample(
        model, (X, y), args.lam, args.eps, args.method, rng=args.seed, **_ledger_args(args)
    )
    out = _result(rel)
    out["features"] = names
    return out


def _ledger_args(args) -> dict:
    """ledger/dataset keyword arguments for sample() from --ledger/--dataset."""
    if args.ledger is None:
        if args.dataset is not None:
            raise UsageError("--dataset needs --ledger PATH")
        return {}
    return {
        "ledger": Ledger(args.ledger, create=False),
        "dataset": args.dataset or Path(args.data).stem,
        "note": f"privbayes {args.command} {Path(args.data).name}",
    }


def _cmd_sample(args) -> dict:
    if args.backend is not None and args.model != "logistic":
        raise UsageError("--backend applies to --model logistic only")
    args.categories = _categories(args.categories)
    table = _Table(args.data)
    if args.model == "logistic":
        return _logistic(args, table)
    if args.method == "ops":
        raise UsageError("--method ops applies to --model logistic only")
    if args.column is None:
        raise UsageError(f"--model {args.model} needs --column COL")
    model = _conjugate_model(args)
    cells = table.column(args.column)
    if args.model == "beta-bernoulli":
        data = _binary(cells, args.column, args.positive)
    else:
        data = _codes(cells, args.column, args.categories)
    return _result(
        sample(model, data, args.lam, args.eps, args.method, rng=args.seed, **_ledger_args(args))
    )


def _cmd_query(args) -> dict:
    lo, hi = args.low, args.high
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UsageError(f"--low/--high: need finite LOW < HIGH; got {lo} {hi}")
    x = _floats(_Table(args.data).column(args.column), args.column)
    outside = np.flatnonzero((x < lo) | (x > hi))
    if outside.size and not args.clip:
        i = int(outside[0])
        raise UsageError(
            f"column {args.column!r}: data row {i} = {x[i]!r} is outside [{lo:g}, {hi:g}] "
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
        **_ledger_args(args),
    )
    out = _result(rel)
    out["value_in_range"] = lo + (hi - lo) * rel.value
    return out


def _cmd_calibrate(args) -> dict:
    args.categories = _categories(args.categories)
    if args.model == "logistic":
        model = BayesianLogisticRegression(beta=0.01 if args.beta is None else args.beta, c=args.c)
    else:
        if args.method == "ops":
            raise UsageError("--method ops applies to --model logistic only")
        model = _conjugate_model(args)
    cal = calibrate(model, args.n, args.lam, args.eps, args.method)
    return {
        "method": cal.method,
        "r": cal.r,
        "m": cal.m,
        "lam": _json_number(cal.lam),
        "eps": cal.eps,
        "target_eps": cal.target_eps,
        "n": cal.n,
        "worst_pair": cal.pair,
        "iterations": cal.iterations,
    }


_RENYI_NOTE = (
    "histogram (binned) estimate of D_lam between the output laws at the worst pair; "
    "binning loses information, so it is a lower estimate of the true divergence, and the "
    "interval is for the binned divergence, not the true one (docs/audit.md)"
)


def _audit_plot_path(path: str) -> Path:
    """--plot FILE checked before any audit runs: a .png file we can create or overwrite."""
    p = Path(path)
    if p.suffix.lower() not in ("", ".png"):
        raise UsageError(f"--plot: {path} must be a .png file name")
    if p.is_dir():
        raise UsageError(f"--plot: {path} is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--plot: no such directory: {parent}")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"--plot: cannot write {path} (permission denied)")
    return p


def _cmd_audit(args) -> dict:
    from .audit import audit_curve, audit_model, renyi_estimate

    kind = "dirichlet-categorical" if args.model == "dirichlet" else args.model
    if args.trials < 100:
        raise UsageError(f"--trials must be >= 100 per data set; got {args.trials}")
    if kind == "logistic":
        for flag, value in (("--alpha", args.alpha), ("--categories", args.categories)):
            if value is not None:
                raise UsageError(f"{flag} does not apply to --model logistic")
        beta = 0.01 if args.beta is None else args.beta
        c = 1.0 if args.c is None else args.c
        model = BayesianLogisticRegression(beta=beta, c=c, backend=args.backend or "imh")
    else:
        for flag, value in (("--d", args.d), ("--c", args.c)):
            if value is not None:
                raise UsageError(f"{flag} applies to --model logistic only")
        if args.categories is not None:
            raise UsageError(
                "--categories does not apply to audit (no data are read); give K prior "
                "weights with --alpha a1 ... aK"
            )
        if args.backend is not None:
            raise UsageError("--backend applies to --model logistic only")
        if args.method == "ops":
            raise UsageError("--method ops applies to --model logistic only")
        if kind == "dirichlet-categorical" and args.alpha is None:
            args.alpha = [1.0, 1.0, 1.0]
        args.model = "beta-bernoulli" if kind == "query" else kind
        model = _conjugate_model(args)
    plot = _audit_plot_path(args.plot) if args.plot else None
    options = dict(
        delta=args.delta,
        confidence=args.confidence,
        rng=args.seed,
        query=kind == "query",
        d=1 if args.d is None else args.d,
    )
    res = audit_model(model, args.n, args.lam, args.eps, args.method, args.trials, **options)
    cal = calibrate(model, args.n, args.lam, args.eps, args.method)
    out = {
        "model": kind,
        "method": cal.method,
        "n": cal.n,
        "lam": _json_number(cal.lam),
        "eps_rdp": cal.eps,
        "r": cal.r,
        "m": cal.m,
        "delta": res.delta,
        "confidence": res.confidence,
        "trials": res.trials,
        "eps_certified": _json_number(res.eps_certified),
        "eps_lower": res.eps_lower,
        "eps_point": _json_number(res.eps_point),
        "interval": [_json_number(v) for v in res.interval],
        "eps_ceiling": _json_number(res.eps_ceiling),
        "fraction_of_certified": _json_number(res.fraction),
        "violation": res.violation,
        "fpr": res.fpr,
        "fnr": res.fnr,
        "worst_pair": cal.pair
        or f"n-1 rows x=0, one row x=c*e1 (c={model.c:g}) labelled +1 in D, -1 in D'",
        "seconds": round(res.seconds, 3),
    }
    if res.projection is None and math.isfinite(cal.lam):  # scalar output
        ren = renyi_estimate(*res.scores, cal.lam, rng=args.seed, certified=cal.eps)
        out["renyi_binned"] = {
            "order": cal.lam,
            "estimate": _json_number(float(ren.estimate[0])),
            "interval": [_json_number(float(ren.lower[0])), _json_number(float(ren.upper[0]))],
            "saturated": ren.saturated,
            "certified": cal.eps,
            "note": _RENYI_NOTE
            + (
                f"; saturated: {ren.unmatched:.2%} of the draws on D fall in bins with no "
                "draw on D', so the data cannot bound it from above"
                if ren.saturated
                else ""
            ),
        }
    if plot is not None:
        from .audit import plot_audits

        title = f"{kind} ({cal.method}), n={cal.n}, {args.trials} trials"
        if cal.method == "direct":
            # direct has no knob: every feasible target gives the same mechanism
            done, results = [args.eps], [res]
            out["plot_note"] = (
                "method direct is not tunable: every target eps gives the same mechanism, "
                "so the plot shows this one audit instead of a grid across eps"
            )
        else:
            grid = args.eps * 10.0 ** np.linspace(-1.0, 1.0, 7)
            others = [e for i, e in enumerate(grid) if i != 3]  # grid[3] is --eps itself
            done, results = audit_curve(
                model, args.n, args.lam, others, args.method, args.trials, **options
            )
            done, results = [*done, args.eps], [*results, res]
        plot_audits(done, results, plot, lam=args.lam, title=title)
        out["plot"] = str(args.plot)
    return out


def _cmd_budget(args):
    ledger = Ledger(args.ledger, create=args.action == "init")
    if args.action == "init":
        if args.name is None or args.eps is None or args.delta is None:
            raise UsageError("budget init needs NAME --eps E --delta D")
        ledger.init_budget(args.name, args.eps, args.delta)
        return {
            "dataset": args.name,
            "eps_budget": args.eps,
            "delta": args.delta,
            "ledger": str(ledger.path),
        }
    try:
        status = ledger.status(args.name)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    if not status:
        print(f"no budgets in {ledger.path}")
    for b in status:
        print(
            f"{b['dataset']}: spent eps={b['eps_spent']:.6g} of {b['eps_budget']:g} "
            f"at delta={b['delta']:g} ({len(b['charges'])} charges)"
        )
        if b["charges"]:
            print(f"  {'id':>4}  {'time (UTC)':<19}  {'eps after':>10}  mechanism / note")
        for c in b["charges"]:
            when = datetime.datetime.fromtimestamp(c["time"], datetime.UTC)
            print(
                f"  {c['id']:>4}  {when:%Y-%m-%d %H:%M:%S}  {c['eps_after']:>10.6g}  "
                f"{c['mechanism']}" + (f" / {c['note']}" if c["note"] else "")
            )
    return None


def _cmd_demo(args) -> None:
    from .demo import run_demo

    run_demo(seed=args.seed, logistic=not args.no_logistic)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="privbayes",
        description="Posterior samples with a certified Rényi differential privacy guarantee.",
    )
    parser.add_argument("--version", action="version", version=f"privbayes {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def privacy_args(p, methods=("direct", "diffused", "concentrated")):
        p.add_argument(
            "--lam", type=float, required=True, metavar="L", help="Rényi order (> 1, or inf)"
        )
        p.add_argument(
            "--eps", type=float, required=True, metavar="E", help="eps at --lam, in nats (> 0)"
        )
        p.add_argument("--method", choices=methods, default="diffused")
        p.add_argument("--seed", type=int, default=None, help="seed (default: OS entropy)")

    def ledger_arg(p):
        p.add_argument(
            "--ledger",
            default=os.environ.get("PRIVBAYES_LEDGER"),
            help="SQLite privacy ledger to charge (default: $PRIVBAYES_LEDGER)",
        )
        p.add_argument(
            "--dataset",
            default=None,
            help="the budget's name in the ledger (default: the data file's stem)",
        )

    def prior_args(p):
        p.add_argument(
            "--alpha",
            type=float,
            nargs="+",
            default=None,
            help="prior: ALPHA [BETA] for beta-bernoulli; a1 ... aK for dirichlet",
        )
        p.add_argument(
            "--beta",
            type=float,
            default=None,
            help="beta-bernoulli prior beta (default 1); logistic prior precision "
            "per record (default 0.01)",
        )
        p.add_argument(
            "--categories",
            default=None,
            help="dirichlet: the public comma-separated category labels, in order",
        )
        p.add_argument("--c", type=float, default=1.0, help="logistic: public bound on ||x||")

    s = sub.add_parser("sample", help="release one private posterior sample from a CSV file")
    s.add_argument("--model", choices=MODELS, required=True)
    s.add_argument("--data", required=True, help="CSV file with a header row")
    s.add_argument("--column", default=None, help="the data column (conjugate models)")
    s.add_argument("--label", default=None, help="logistic: the 0/1 (or ±1) label column")
    s.add_argument(
        "--features",
        default=None,
        help="logistic: comma-separated feature columns (default: all but --label)",
    )
    s.add_argument(
        "--clip",
        action="store_true",
        help="logistic: clip rows to norm --c instead of refusing them",
    )
    s.add_argument(
        "--backend",
        choices=("imh", "pymc"),
        default=None,
        help="logistic: MCMC back-end, independence Metropolis-Hastings (default) or PyMC NUTS",
    )
    s.add_argument(
        "--positive", default=None, help="the label value counted as 1 (others count as 0)"
    )
    privacy_args(s, GLM_METHODS)
    prior_args(s)
    ledger_arg(s)
    s.set_defaults(func=_cmd_sample)

    q = sub.add_parser("query", help="private mean of a bounded numeric CSV column")
    q.add_argument("--data", required=True)
    q.add_argument("--column", required=True)
    q.add_argument(
        "--low",
        type=float,
        required=True,
        help="public lower bound of the column (use --low=-5 for negatives)",
    )
    q.add_argument("--high", type=float, required=True, help="public upper bound")
    q.add_argument("--clip", action="store_true", help="clip values outside [low, high]")
    privacy_args(q)
    q.add_argument("--alpha", type=float, default=1.0)
    q.add_argument("--beta", type=float, default=1.0)
    ledger_arg(q)
    q.set_defaults(func=_cmd_query)

    c = sub.add_parser("calibrate", help="the knob (r or m) for (lam, eps); no data needed")
    c.add_argument("--model", choices=MODELS, required=True)
    c.add_argument("--n", type=int, required=True)
    privacy_args(c, GLM_METHODS)
    prior_args(c)
    c.set_defaults(func=_cmd_calibrate)

    a = sub.add_parser(
        "audit", help="measure a mechanism's privacy loss at its worst-case pair (lower bound)"
    )
    a.add_argument(
        "--model",
        choices=("beta-bernoulli", "dirichlet", "dirichlet-categorical", "query", "logistic"),
        required=True,
    )
    a.add_argument("--n", type=int, default=100, help="public data set size (default 100)")
    a.add_argument("--trials", type=int, required=True, help="runs per data set (>= 100)")
    a.add_argument("--delta", type=float, default=1e-5, help="delta of (eps, delta)-DP")
    a.add_argument("--confidence", type=float, default=0.95, help="of the lower bound")
    a.add_argument("--d", type=int, default=None, help="logistic: feature dimension (1)")
    a.add_argument("--plot", default=None, metavar="FILE", help="PNG: audits across eps")
    a.add_argument("--backend", choices=("imh", "pymc"), default=None, help="logistic: MCMC")
    privacy_args(a, GLM_METHODS)
    prior_args(a)
    a.set_defaults(func=_cmd_audit, c=None)  # None: tell a given --c from the default

    b = sub.add_parser("budget", help="privacy budgets in an SQLite ledger: init, show")
    b.add_argument("action", choices=("init", "show"))
    b.add_argument("name", nargs="?", default=None, help="the data set's budget name")
    b.add_argument("--eps", type=float, default=None)
    b.add_argument("--delta", type=float, default=None)
    b.add_argument(
        "--ledger", default=os.environ.get("PRIVBAYES_LEDGER", "privbayes-ledger.sqlite")
    )
    b.set_defaults(func=_cmd_budget)

    d = sub.add_parser("demo", help="private releases on data sets shipped with scikit-learn")
    d.add_argument("--seed", type=int, default=None, help="seed (default: OS entropy)")
    d.add_argument("--no-logistic", action="store_true", help="skip the MCMC row (faster)")
    d.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        out = args.func(args)
    except (
        UsageError,
        ValueError,
        TypeError,
        OverflowError,
        ConvergenceError,
        SamplingError,
        BudgetExceededError,
        AuditError,
        KeyError,
        OSError,
        sqlite3.Error,
        ArithmeticError,
    ) as exc:
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        message = " ".join(str(text).split())  # one line
        print(f"privbayes {args.command}: error: {message}", file=sys.stderr)
        return 2
    if out is not None:
        print(json.dumps(out, allow_nan=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
