"""One adapter per model: the flags it takes on each command and how to build it.

This is the single place that decides "flag X applies to model Y only": every model flag
is registered with no default, so a flag that was given can be told from one that was
not, and :func:`resolve` refuses any given flag (or method) that the chosen model does not
use on that command, with one message format. Adding a model means adding one adapter
class to ``ADAPTERS``.

Light at import (no numpy): the library is imported inside ``build``/``read``.
"""

from __future__ import annotations

import argparse
import math
import sys

from ._io import _ZERO_ONE, UsageError, binary, codes, floats, labels, open_source

# Kept literal so that --help needs no numpy; tests/cli check them against the library's.
CONJUGATE_METHODS = ("direct", "diffused", "concentrated")
GLM_METHODS = (*CONJUGATE_METHODS, "ops")


def beta_value(text: str):
    """--beta: a number, or "auto" (logistic and multinomial: the public rule)."""
    return "auto" if text.strip().lower() == "auto" else float(text)


beta_value.__name__ = "number or 'auto'"  # argparse's "invalid ... value" message


def _number_beta(beta, name: str):
    """A conjugate prior's --beta: a number (auto is the GLMs' rule only)."""
    if beta == "auto":
        raise UsageError(
            f"--beta auto applies to --model logistic and multinomial only (the public rule "
            f"for their prior precision); {name} takes a number"
        )
    return beta


# dest -> (option strings, argparse keywords). No defaults: None means "not given".
FLAGS: dict[str, tuple[tuple[str, ...], dict]] = {
    "column": (("--column",), {"metavar": "COL", "help": "the data column"}),
    "categories": (
        ("--categories",),
        {
            "metavar": "A,B,...",
            "help": "the public category labels, in order: every record must carry one "
            "(calibrate: they give K)",
        },
    ),
    "positive": (
        ("--positive",),
        {
            "metavar": "LABEL[,...]",
            "help": "the label(s) counted as 1, with --negative: declare every label of the "
            "column (public, matched exactly); other labels are refused",
        },
    ),
    "negative": (
        ("--negative",),
        {"metavar": "LABEL[,...]", "help": "the label(s) counted as 0 (with --positive)"},
    ),
    "alpha": (
        ("--alpha",),
        {
            "type": float,
            "nargs": "+",
            "metavar": "A",
            "help": "prior weights: ALPHA [BETA] for beta-bernoulli and query (default 1 "
            "1); a1 ... aK for dirichlet-categorical; gamma-poisson, the Gamma prior's "
            "shape ALPHA (default 1)",
        },
    ),
    "beta": (
        ("--beta",),
        {
            "type": beta_value,
            "metavar": "B",
            "help": "prior: beta-bernoulli and query, its beta (default 1); gamma-poisson, "
            "the Gamma prior's rate (default 1); logistic and multinomial, the precision per "
            "record, every weight ~ N(0, (n B)^-1) (default 0.01), or auto: the public rule "
            "B = c^2 d / (n M^2) from n, d (intercept counted), c and --margin-scale M "
            "(docs/glm.md; calibrate needs --d)",
        },
    ),
    "margin_scale": (
        ("--margin-scale",),
        {
            "type": float,
            "metavar": "M",
            "help": "logistic and multinomial with --beta auto only: the rule's public scale "
            "of the margins |w.x| (default 10)",
        },
    ),
    "max_count": (
        ("--max-count",),
        {
            "type": int,
            "metavar": "M",
            "help": "the public bound on every count: records are integers in 0..M (required; "
            "choose it before seeing the data, never read it off them)",
        },
    ),
    "mu": (("--mu",), {"type": float, "metavar": "MU", "help": "the prior mean (required)"}),
    "sigma": (
        ("--sigma",),
        {"type": float, "metavar": "S", "help": "the prior standard deviation (required)"},
    ),
    "noise_sigma": (
        ("--noise-sigma",),
        {
            "type": float,
            "metavar": "S",
            "help": "the known standard deviation of each record (required)",
        },
    ),
    "low": (
        ("--low",),
        {
            "type": float,
            "metavar": "LOW",
            "help": "public lower bound of every record (required; with --high, chosen "
            "before seeing the data)",
        },
    ),
    "high": (
        ("--high",),
        {"type": float, "metavar": "HIGH", "help": "public upper bound of every record (required)"},
    ),
    "label": (
        ("--label",),
        {
            "metavar": "COL",
            "help": "the label column (logistic: two classes; multinomial: the --classes)",
        },
    ),
    "target": (
        ("--target",),
        {
            "metavar": "COL",
            "help": "linear and poisson: the response column y (required; poisson: counts)",
        },
    ),
    "y_bound": (
        ("--y-bound",),
        {
            "type": float,
            "metavar": "B",
            "help": "linear: the public bound on |y| (required; rows beyond it are refused)",
        },
    ),
    "noise_sd": (
        ("--noise-sd",),
        {
            "type": float,
            "metavar": "S",
            "help": "linear: the known sd of y around w.x (required)",
        },
    ),
    "classes": (
        ("--classes",),
        {
            "metavar": "A,B,...",
            "help": "multinomial: the public class labels, in order (required; K >= 2 of "
            "them, declared before seeing the data, never read off them): class k is the "
            "k-th label, column k of the released weights; a record with any other label is "
            "refused",
        },
    ),
    "features": (
        ("--features",),
        {"metavar": "A,B,...", "help": "feature columns (default: every column but --label)"},
    ),
    "c": (
        ("--c",),
        {
            "type": float,
            "metavar": "C",
            "help": "public bound on the row norm ||x||, or ||[x, s]|| with --intercept "
            "(default 1)",
        },
    ),
    "scale": (
        ("--scale",),
        {
            "type": float,
            "metavar": "BOUND",
            "help": "a public bound on the raw feature rows' norm: rows are multiplied by "
            "(feature bound) / BOUND, and the released weights are for the raw columns",
        },
    ),
    "clip": (
        ("--clip",),
        {
            "action": "store_true",
            "default": None,
            "help": "clip out-of-domain records instead of refusing them: logistic and "
            "multinomial, rows onto the norm bound (row-wise); gamma-poisson, counts above "
            "--max-count down to it; normal (and query, on posterior), values onto [--low, "
            "--high] (the guarantee "
            "covers the clipped data)",
        },
    ),
    "intercept": (
        ("--intercept",),
        {
            "action": "store_true",
            "default": None,
            "help": "append a constant column s (off by default, as in the library): the "
            "bound c then covers [x, s], and the value ends with the intercept",
        },
    ),
    "radius": (
        ("--radius",),
        {
            "type": float,
            "metavar": "R",
            "help": "logistic and multinomial: OPS's truncation radius on the weights (--method "
            "ops only; default c/beta, multinomial sqrt(2) c/beta); linear and poisson: the "
            "public ball ||w|| <= R of every method (linear: default from n and d, "
            "docs/linear_regression.md §5; poisson: required)",
        },
    ),
    "intercept_scaling": (
        ("--intercept-scaling",),
        {"type": float, "metavar": "S", "help": "s in (0, c) for --intercept (default c/2)"},
    ),
    "backend": (
        ("--backend",),
        {
            "choices": ("auto", "exact", "langevin", "imh", "pymc"),
            "help": "logistic and multinomial back-end: auto (default: exact or langevin, "
            "both certified, chosen from public inputs), exact "
            "(rejection sampling: exact posterior draws), langevin (certified "
            "noisy gradient descent), or the approximate MCMC back-ends imh and pymc; "
            "linear: auto, exact or langevin (projected onto the ball); poisson: auto "
            "(= langevin) or langevin",
        },
    ),
    "max_steps": (
        ("--max-steps",),
        {
            "type": int,
            "metavar": "K",
            "help": "logistic, multinomial, linear and poisson with --backend langevin or "
            "auto: the cap on "
            "Langevin's number of steps (default 10000, at most 10**7); raise it when a "
            "release warns that it hit the cap (StepCapWarning)",
        },
    ),
    "schedule": (
        ("--schedule",),
        {
            "choices": ("utility", "stationary"),
            "help": "logistic, multinomial, linear and poisson with --backend langevin or "
            "auto: Langevin's rule: utility (default: noisy gradient descent from 0 without "
            "the prior's pull, stopped early to minimise an excess-risk bound; not a "
            "posterior draw) or stationary (the posterior's chain run until it forgets its "
            "start: a draw near the posterior); docs/langevin.md §6",
        },
    ),
    "d": (
        ("--d",),
        {
            "type": int,
            "metavar": "D",
            "help": "feature dimension (audit: default 1; calibrate: lets --backend auto "
            "choose as sample would)",
        },
    ),
}

# Flags a command registers but no model of it uses, with the reason.
COMMAND_NOTES = {
    ("audit", "categories"): "--categories does not apply to audit (no data are read); give "
    "K prior weights with --alpha a1 ... aK",
}


class Adapter:
    """How one model meets the command line."""

    name: str = ""
    aliases: tuple[str, ...] = ()
    methods: tuple[str, ...] = CONJUGATE_METHODS
    flags: dict[str, frozenset[str]] = {}  # command -> flags this model takes there

    def build(self, args, command: str):
        """The model, from its flags (public choices only)."""
        raise NotImplementedError

    def read(self, args, table, model):
        """(data for privbayes.sample, details for ``finish``) from the CSV table."""
        raise NotImplementedError

    def read_source(self, args, path, model):
        """(data, column, labels) for privbayes.sample from a Parquet file, a directory or
        a glob at ``path`` (reduced in the engine: privbayes.data); ``labels`` describes
        the labels a record may carry (for the error of one that carries none), else
        None."""
        raise UsageError(
            f"--model {self.name} reads one CSV file; Parquet files, directories and globs "
            "are read for the conjugate models only"
        )

    def finish(self, out: dict, details) -> dict:
        """Adds model-specific fields to the JSON result of ``sample``."""
        return out

    def pair_note(self, model) -> str | None:
        """The audit's worst pair in words, for models whose calibration has no pair."""
        return None


_EXACT = "(labels are matched exactly, case included, after surrounding spaces are removed)"


def beta_prior(alpha: list[float] | None, beta: float | None, name: str) -> tuple[float, float]:
    """(alpha, beta) of a Beta prior from --alpha ALPHA [BETA] and --beta (default 1 1)."""
    alpha = alpha or [1.0]
    if len(alpha) > 2:
        raise UsageError(f"--alpha: {name} takes ALPHA [BETA]; got {len(alpha)} values")
    if len(alpha) == 2 and beta is not None:
        raise UsageError("--beta: the prior's beta is given twice (--alpha A B and --beta)")
    beta = _number_beta(beta, name)
    return alpha[0], alpha[1] if len(alpha) == 2 else (1.0 if beta is None else beta)


def _source_column(args, name: str) -> str:
    if args.column is None:
        raise UsageError(f"--model {name} needs --column COL")
    return args.column


def _map_labels(series, mapping: dict, fold: bool = False):
    """Declared labels -> codes (float), anything else (other labels, missing) -> NaN,
    which privbayes.data then refuses. Labels are matched as text without surrounding
    spaces, as in a single CSV file; ``fold``: case folded too (0/1 and true/false)."""
    import numpy as np

    text = series.astype(str).str.strip()
    return (text.str.lower() if fold else text).map(mapping).astype(np.float64)


def _labelled(source, column: str, mapping: dict, fold: bool = False):
    """The column of ``source`` as codes, lazily for Dask (one map per partition)."""
    from ..data import _select, is_dask

    col, _ = _select(source, column, "--data")
    if is_dask(col):
        return col.map_partitions(_map_labels, mapping, fold, meta=(column, "f8"))
    if hasattr(col, "astype") and hasattr(col, "str"):  # pandas
        return _map_labels(col, mapping, fold)
    import numpy as np  # pyarrow in memory

    def code(v):
        text = str(v).strip()
        return mapping.get(text.lower() if fold else text, np.nan)

    return np.array([np.nan if v is None else code(v) for v in col.to_pylist()])


def _two_class(args, cells, name: str, signed: bool):
    return binary(
        cells,
        name,
        labels(args.positive, "--positive"),
        labels(args.negative, "--negative"),
        signed=signed,
    )


class BetaBernoulliAdapter(Adapter):
    name = "beta-bernoulli"
    flags = {
        "sample": frozenset({"column", "positive", "negative", "alpha", "beta"}),
        "posterior": frozenset({"column", "positive", "negative", "alpha", "beta"}),
        "calibrate": frozenset({"alpha", "beta"}),
        "audit": frozenset({"alpha", "beta"}),
    }

    def build(self, args, command):
        from ..models import BetaBernoulli

        return BetaBernoulli(*beta_prior(args.alpha, args.beta, self.name))

    def read(self, args, table, model):
        if args.column is None:
            raise UsageError(f"--model {self.name} needs --column COL")
        return _two_class(args, table.column(args.column), args.column, signed=False), None

    def read_source(self, args, path, model):
        column = _source_column(args, self.name)
        positive = labels(args.positive, "--positive")
        negative = labels(args.negative, "--negative")
        if positive is None and negative is None:
            source, csv = open_source(path, column, text=True)
            if not csv:
                return source, column, None  # Parquet: a numeric 0/1 or bool column
            # 0/1 or true/false as in a single CSV file (any case, surrounding spaces)
            note = "not 0/1 or true/false (any case)"
            return _labelled(source, column, _ZERO_ONE, fold=True), None, note
        _two_class(args, [], column, signed=False)  # the flags' own checks
        mapping = {**{v: 0.0 for v in negative}, **{v: 1.0 for v in positive}}
        note = (
            f"neither --positive {','.join(positive)} nor --negative {','.join(negative)} {_EXACT}"
        )
        source, _ = open_source(path, column, text=True)
        return _labelled(source, column, mapping), None, note


class QueryAdapter(BetaBernoulliAdapter):
    """The statistical query's Beta prior (audit; `privbayes query` reads data), and the
    mean query of `privbayes posterior` (a numeric column rescaled from the public range
    [--low, --high] to [0, 1])."""

    name = "query"
    flags = {
        "audit": frozenset({"alpha", "beta"}),
        "posterior": frozenset({"column", "alpha", "beta", "low", "high", "clip"}),
    }

    def build(self, args, command):
        if command != "posterior":
            return super().build(args, command)
        from ..models import MeanQuery

        prior = super().build(args, command)
        lo, hi = args.low, args.high
        if lo is None or hi is None:
            raise UsageError(
                f"--model {self.name} needs --low and --high: the column's public range"
            )
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and math.isfinite(hi - lo)):
            raise UsageError(
                f"--low/--high: need finite LOW < HIGH with a finite width; got {lo} {hi}"
            )
        return MeanQuery(prior.alpha, prior.beta, clip=bool(args.clip))

    def read(self, args, table, model):
        import numpy as np

        if args.column is None:
            raise UsageError(f"--model {self.name} needs --column COL")
        cells = table.column(args.column)
        x = floats(cells, args.column)
        lo, hi = args.low, args.high
        if not model.clip:
            _refuse_rows(
                args.column,
                cells,
                (x < lo) | (x > hi),
                f"are outside [--low, --high] = [{lo:g}, {hi:g}]",
                "widen the public range (chosen before seeing the data) or pass --clip",
            )
        return np.clip((x - lo) / (hi - lo), 0.0, 1.0), None

    def read_source(self, args, path, model):
        from ..data import _select, as_array, is_dask

        column = _source_column(args, self.name)
        col, _ = _select(open_source(path, column)[0], column, "--data")  # lazy for Dask
        if not is_dask(col):
            col = as_array(col, column)
        return (col - args.low) / (args.high - args.low), None, None


class DirichletAdapter(Adapter):
    name = "dirichlet-categorical"
    aliases = ("dirichlet",)
    flags = {
        "sample": frozenset({"column", "categories", "alpha"}),
        "posterior": frozenset({"column", "categories", "alpha"}),
        "calibrate": frozenset({"categories", "alpha"}),
        "audit": frozenset({"alpha"}),
    }

    def build(self, args, command):
        import numpy as np

        from ..models import DirichletCategorical

        cats = labels(getattr(args, "categories", None), "--categories", minimum=2)
        alpha = args.alpha
        if alpha is None:
            if command == "audit":
                return DirichletCategorical(np.ones(3))
            if not cats:
                raise UsageError(f"--model {self.name} needs --alpha a1 ... aK or --categories")
            return DirichletCategorical(np.ones(len(cats)))
        if cats and len(alpha) == 1:
            alpha = alpha * len(cats)
        if cats and len(alpha) != len(cats):
            raise UsageError(f"--alpha has {len(alpha)} entries but --categories has {len(cats)}")
        return DirichletCategorical(alpha)

    def read(self, args, table, model):
        if args.column is None:
            raise UsageError(f"--model {self.name} needs --column COL")
        cats = labels(args.categories, "--categories", minimum=2)
        return codes(table.column(args.column), args.column, cats), None

    def read_source(self, args, path, model):
        column = _source_column(args, self.name)
        cats = labels(args.categories, "--categories", minimum=2)
        if cats is None:
            return open_source(path, column)[0], column, None  # integer codes 0..K-1
        mapping = {c: float(k) for k, c in enumerate(cats)}
        source, _ = open_source(path, column, text=True)
        note = f"not one of --categories {','.join(cats)} {_EXACT}"
        return _labelled(source, column, mapping), None, note


def _refuse_rows(name: str, cells, bad, what: str, fix: str) -> None:
    """One line naming the column, how many rows are out of the domain, and the first."""
    import numpy as np

    bad = np.flatnonzero(bad)
    if bad.size:
        line, value = cells[int(bad[0])]
        raise UsageError(
            f"column {name!r}: {bad.size} row(s) {what}, e.g. line {line} is {value!r}; {fix}"
        )


class _OneColumn(Adapter):
    """A model of one numeric column whose own checks (``clip`` included) run in the
    engine when the data are a Parquet file, folder or glob (privbayes.data)."""

    def read_source(self, args, path, model):
        column = _source_column(args, self.name)
        return open_source(path, column)[0], column, None


class GammaPoissonAdapter(_OneColumn):
    name = "gamma-poisson"
    flags = {
        "sample": frozenset({"column", "alpha", "beta", "max_count", "clip"}),
        "posterior": frozenset({"column", "alpha", "beta", "max_count", "clip"}),
        "calibrate": frozenset({"alpha", "beta", "max_count"}),
        "audit": frozenset({"alpha", "beta", "max_count"}),
    }

    def build(self, args, command):
        from ..models import GammaPoisson

        alpha = args.alpha or [1.0]
        if len(alpha) != 1:
            raise UsageError(
                f"--alpha: {self.name} takes one value, the Gamma prior's shape (its rate is "
                f"--beta); got {len(alpha)} values"
            )
        if args.max_count is None:
            raise UsageError(
                f"--model {self.name} needs --max-count M, a public bound on every count "
                "(chosen before seeing the data)"
            )
        beta = 1.0 if args.beta is None else _number_beta(args.beta, self.name)
        return GammaPoisson(alpha[0], beta, args.max_count, clip=bool(getattr(args, "clip", None)))

    def read(self, args, table, model):
        if args.column is None:
            raise UsageError(f"--model {self.name} needs --column COL")
        cells = table.column(args.column)
        x = floats(cells, args.column)
        _refuse_rows(
            args.column,
            cells,
            (x < 0) | (x != x.round()),
            "are not counts (integers >= 0)",
            "every record must be a non-negative integer count",
        )
        if not model.clip:
            _refuse_rows(
                args.column,
                cells,
                x > model.max_count,
                f"are above --max-count {model.max_count}",
                "choose --max-count as a public bound before seeing the data (never from "
                "them), or pass --clip to clip counts to it",
            )
        return x, None


class NormalAdapter(_OneColumn):
    name = "normal"
    flags = {
        "sample": frozenset({"column", "mu", "sigma", "noise_sigma", "low", "high", "clip"}),
        "posterior": frozenset({"column", "mu", "sigma", "noise_sigma", "low", "high", "clip"}),
        "calibrate": frozenset({"mu", "sigma", "noise_sigma", "low", "high"}),
        "audit": frozenset({"mu", "sigma", "noise_sigma", "low", "high"}),
    }
    needed = ("mu", "sigma", "noise_sigma", "low", "high")

    def build(self, args, command):
        from ..models import NormalKnownVariance

        missing = [FLAGS[d][0][0] for d in self.needed if getattr(args, d) is None]
        if missing:
            raise UsageError(
                f"--model {self.name} needs {' '.join(missing)}: the prior N(mu, sigma^2), the "
                "records' known noise and their public range [low, high] (no defaults)"
            )
        return NormalKnownVariance(
            args.mu,
            args.sigma,
            args.noise_sigma,
            args.low,
            args.high,
            clip=bool(getattr(args, "clip", None)),
        )

    def read(self, args, table, model):
        if args.column is None:
            raise UsageError(f"--model {self.name} needs --column COL")
        cells = table.column(args.column)
        x = floats(cells, args.column)
        if not model.clip:
            _refuse_rows(
                args.column,
                cells,
                (x < model.low) | (x > model.high),
                f"are outside [--low, --high] = [{model.low:g}, {model.high:g}]",
                "choose the range as a public bound before seeing the data (never from "
                "them), or pass --clip to clip values onto it",
            )
        return x, None


def _features(args, table, model, name: str):
    """(X, feature names, scale factor) for the GLM adapters: --features (default every
    column but --label) as floats, multiplied by (feature bound) / --scale and clipped
    row-wise onto the bound with --clip (both public choices)."""
    import numpy as np

    from ..preprocessing import clip_rows

    if args.label is None:
        raise UsageError(f"--model {name} needs --label COL (and optionally --features)")
    factor = None
    if args.scale is not None:  # public: checked before any cell is read
        if not (math.isfinite(args.scale) and args.scale > 0):
            raise UsageError(f"--scale: need a finite public bound > 0; got {args.scale}")
        factor = model.feature_bound / args.scale
        if not (math.isfinite(factor) and factor >= sys.float_info.min):
            raise UsageError(
                f"--scale: the factor (feature bound {model.feature_bound:g}) / --scale "
                f"{args.scale:g} = {factor:g} is not a finite normal number (it would scale "
                "every row to inf or to 0); choose a bound nearer to --c"
            )
    table.column(args.label, "--label")  # a missing label column is named first
    names = (
        [f.strip() for f in args.features.split(",")]
        if args.features is not None
        else [h for h in table.header if h != args.label]
    )
    if not names or any(not f for f in names):
        raise UsageError("--features: need one or more non-empty column names")
    if len(set(names)) != len(names) or args.label in names:
        raise UsageError("--features: repeated column, or the --label column among them")
    X = np.column_stack([floats(table.column(f, "--features"), f) for f in names])
    if factor is not None:
        X = X * factor
    if args.clip:
        X = clip_rows(X, model.feature_bound)
    else:  # the model's own test (privbayes.models.logistic), here with line numbers
        rows = X
        if model.fit_intercept:
            rows = np.hstack([X, np.full((len(X), 1), model.intercept_scaling)])
        over = np.linalg.norm(rows, axis=1) > model._norm_threshold(rows.shape[1])
        if over.any():
            bound = (
                f"sqrt(c^2 - s^2) = {model.feature_bound:.6g} (--intercept's column s = "
                f"{model.intercept_scaling:g} takes the rest of c = {model.c:g})"
                if model.fit_intercept
                else f"c = {model.c:g}"
            )
            line = table.rows[int(np.flatnonzero(over)[0])][0]
            raise UsageError(
                f"--features: {int(over.sum())} row(s) have norm > {bound}, e.g. line {line}"
                f"{' after --scale' if factor is not None else ''}; pass --scale BOUND (a "
                "public bound on the raw rows' norm, chosen before seeing the data) or --clip"
            )
    return X, names, factor


def _glm_options(args, command: str) -> dict:
    options = {"backend": args.backend or "auto"}
    if getattr(args, "radius", None) is not None:
        if getattr(args, "method", None) != "ops":
            raise UsageError("--radius applies to --method ops only")
        options["radius"] = args.radius
    if getattr(args, "max_steps", None) is not None:  # the model refuses other back-ends
        options["max_steps"] = args.max_steps
    if getattr(args, "schedule", None) is not None:  # the model refuses other back-ends
        options["schedule"] = args.schedule
    if getattr(args, "margin_scale", None) is not None:  # the model refuses a number --beta
        options["margin_scale"] = args.margin_scale
    if command == "sample":
        if args.intercept_scaling is not None and not args.intercept:
            raise UsageError("--intercept-scaling needs --intercept")
        options["fit_intercept"] = bool(args.intercept)
        options["intercept_scaling"] = args.intercept_scaling
    return options


# the flags both GLM adapters take (each adds its label flags)
_GLM_PUBLIC = frozenset(
    {"beta", "c", "d", "backend", "radius", "max_steps", "schedule", "margin_scale"}
)
_GLM_SAMPLE = frozenset(
    {"label", "features", "beta", "c", "scale", "clip", "intercept", "intercept_scaling"}
    | {"backend", "radius", "max_steps", "schedule", "margin_scale"}
)


class LogisticAdapter(Adapter):
    name = "logistic"
    methods = GLM_METHODS
    flags = {
        "sample": _GLM_SAMPLE | {"positive", "negative"},
        "calibrate": _GLM_PUBLIC,
        "audit": _GLM_PUBLIC,
    }

    def build(self, args, command):
        from ..models import BayesianLogisticRegression

        return BayesianLogisticRegression(
            beta=0.01 if args.beta is None else args.beta,
            c=1.0 if args.c is None else args.c,
            **_glm_options(args, command),
        )

    def read(self, args, table, model):
        X, names, factor = _features(args, table, model, self.name)
        y = _two_class(args, table.column(args.label, "--label"), args.label, signed=True)
        return (X, y), {"features": names, "factor": factor, "intercept": model.fit_intercept}

    def finish(self, out, details):
        factor = details["factor"]
        if factor is not None:  # weights for the raw columns: w . (f x) = (f w) . x
            import numpy as np

            value = np.array(out["value"], dtype=float)
            d = len(details["features"])
            value[..., :d] *= factor
            out["value"] = value.tolist()
            out["feature_scale"] = factor
        out["features"] = details["features"]
        out["intercept"] = details["intercept"]
        return out

    def pair_note(self, model):
        return f"n-1 rows x=0, one row x=c*e1 (c={model.c:g}) labelled +1 in D, -1 in D'"


class MultinomialAdapter(Adapter):
    """Softmax regression over the K public --classes (docs/multinomial.md)."""

    name = "multinomial"
    methods = GLM_METHODS
    flags = {
        "sample": _GLM_SAMPLE | {"classes"},
        "calibrate": _GLM_PUBLIC | {"classes"},
        "audit": _GLM_PUBLIC | {"classes"},
    }

    def classes(self, args) -> list[str]:
        cats = labels(args.classes, "--classes", minimum=2)
        if cats is None:
            raise UsageError(
                f"--model {self.name} needs --classes A,B,...: the public class labels, in "
                "order (K is never read off the data)"
            )
        return cats

    def build(self, args, command):
        from ..models import MultinomialLogisticRegression

        cats = self.classes(args)
        return MultinomialLogisticRegression(
            beta=0.01 if args.beta is None else args.beta,
            c=1.0 if args.c is None else args.c,
            n_classes=len(cats),
            **_glm_options(args, command),
        )

    def read(self, args, table, model):
        cats = self.classes(args)
        X, names, factor = _features(args, table, model, self.name)
        y = codes(table.column(args.label, "--label"), args.label, cats, "--classes")
        details = {
            "features": names,
            "factor": factor,
            "intercept": model.fit_intercept,
            "classes": cats,
        }
        return (X, y), details

    def finish(self, out, details):
        factor = details["factor"]
        if factor is not None:  # weights for the raw columns: W^T (f x) = (f W)^T x
            import numpy as np

            value = np.array(out["value"], dtype=float)
            value[..., : len(details["features"]), :] *= factor
            out["value"] = value.tolist()
            out["feature_scale"] = factor
        out["features"] = details["features"]
        out["intercept"] = details["intercept"]
        out["classes"] = details["classes"]
        return out

    def pair_note(self, model):
        return (
            f"n-1 rows x=0, one row x=c*e1 (c={model.c:g}) in class 0 in D, class 1 in D' "
            "(the first two --classes)"
        )


def _target_features(args, table, name: str):
    """(X, y, feature names) for the regression adapters: --target as floats, --features
    (default every other column) as floats. The model's own checks (rows over the bound,
    responses outside the domain, NaN) refuse bad records before any charge."""
    import numpy as np

    if args.target is None:
        raise UsageError(f"--model {name} needs --target COL (and optionally --features)")
    y = floats(table.column(args.target, "--target"), args.target)
    names = (
        [f.strip() for f in args.features.split(",")]
        if args.features is not None
        else [h for h in table.header if h != args.target]
    )
    if not names or any(not f for f in names):
        raise UsageError("--features: need one or more non-empty column names")
    if len(set(names)) != len(names) or args.target in names:
        raise UsageError("--features: repeated column, or the --target column among them")
    X = np.column_stack([floats(table.column(f, "--features"), f) for f in names])
    return X, y, names


def _ball_options(args, command: str) -> dict:
    """The ball GLMs' sample options: --radius, --backend, --max-steps, --schedule,
    --intercept and
    --intercept-scaling (the model checks their values)."""
    options = {"backend": args.backend or "auto"}
    if command != "sample":
        return options
    if args.radius is not None:
        options["radius"] = args.radius
    if args.max_steps is not None:
        options["max_steps"] = args.max_steps
    if getattr(args, "schedule", None) is not None:  # the model refuses other back-ends
        options["schedule"] = args.schedule
    if args.intercept_scaling is not None and not args.intercept:
        raise UsageError("--intercept-scaling needs --intercept")
    options["fit_intercept"] = bool(args.intercept)
    options["intercept_scaling"] = args.intercept_scaling
    return options


class LinearAdapter(Adapter):
    """Bayesian linear regression (docs/linear_regression.md): ``sample`` releases one
    posterior draw on the public ball (§1-§6; --radius, --backend, --method), ``posterior``
    the noise-aware route (§9): --target, --features, --c, --y-bound, --noise-sd."""

    name = "linear"
    methods = GLM_METHODS
    flags = {
        "sample": frozenset(
            {"target", "features", "beta", "c", "y_bound", "noise_sd", "intercept"}
            | {"intercept_scaling", "radius", "backend", "max_steps", "schedule"}
        ),
        "posterior": frozenset(
            {"target", "features", "beta", "c", "y_bound", "noise_sd", "intercept"}
        ),
    }

    def build(self, args, command):
        from ..models import BayesianLinearRegression

        if args.y_bound is None or args.noise_sd is None:
            raise UsageError("--model linear needs --y-bound B and --noise-sd S (public)")
        beta = 0.01 if args.beta is None else _number_beta(args.beta, self.name)
        if command == "posterior":
            options = {"fit_intercept": bool(args.intercept)}
        else:
            options = _ball_options(args, command)
        return BayesianLinearRegression(
            beta=beta,
            c=1.0 if args.c is None else args.c,
            y_bound=args.y_bound,
            noise_sd=args.noise_sd,
            **options,
        )

    def read(self, args, table, model):
        X, y, names = _target_features(args, table, self.name)
        return (X, y), {"features": names, "target": args.target, "intercept": model.fit_intercept}

    def finish(self, out, details):
        return {**out, **details}


class PoissonAdapter(LinearAdapter):
    """Bayesian Poisson regression (log link) on a public ball (docs/linear_regression.md
    §7): counts 0..--max-count in --target, --radius required, projected Langevin."""

    name = "poisson"
    methods = CONJUGATE_METHODS
    flags = {
        "sample": frozenset(
            {"target", "features", "beta", "c", "max_count", "intercept"}
            | {"intercept_scaling", "radius", "backend", "max_steps", "schedule"}
        ),
    }

    def build(self, args, command):
        from ..models import BayesianPoissonRegression

        if args.max_count is None or args.radius is None:
            raise UsageError(
                "--model poisson needs --max-count M (counts 0..M) and --radius R (the public "
                "ball ||w|| <= R)"
            )
        beta = 0.01 if args.beta is None else _number_beta(args.beta, self.name)
        return BayesianPoissonRegression(
            beta=beta,
            c=1.0 if args.c is None else args.c,
            max_count=args.max_count,
            **_ball_options(args, command),
        )


ADAPTERS: tuple[Adapter, ...] = (
    BetaBernoulliAdapter(),
    DirichletAdapter(),
    GammaPoissonAdapter(),
    NormalAdapter(),
    LogisticAdapter(),
    MultinomialAdapter(),
    QueryAdapter(),
    LinearAdapter(),
    PoissonAdapter(),
)


def names(command: str) -> list[str]:
    """--model choices of ``command`` (aliases included)."""
    out = []
    for a in ADAPTERS:
        if command in a.flags:
            out += [a.name, *a.aliases]
    return out


def add_arguments(parser, command: str) -> None:
    """--model and every flag some model takes on ``command``; none has a default."""
    parser.add_argument(
        "--model", choices=names(command), required=True, help="the model (see README)"
    )
    for dest in command_flags(command):
        options, kwargs = FLAGS[dest]
        users = ", ".join(a.name for a in ADAPTERS if dest in a.flags.get(command, ()))
        kwargs = dict(kwargs, dest=dest)
        # a flag no model of this command uses is parsed only to be refused with a reason
        if not users:
            kwargs["help"] = argparse.SUPPRESS
        elif not any(a.name in kwargs["help"] for a in ADAPTERS):
            kwargs["help"] = f"{users}: {kwargs['help']}"
        parser.add_argument(*options, **kwargs)


def command_flags(command: str) -> list[str]:
    used = {f for a in ADAPTERS for f in a.flags.get(command, ())}
    used |= {flag for cmd, flag in COMMAND_NOTES if cmd == command}
    return [dest for dest in FLAGS if dest in used]  # FLAGS order, for --help


def privacy_args(
    parser,
    methods: tuple[str, ...] | None,
    *,
    seed: bool = True,
    delta: bool = True,
    finite: bool = False,
) -> None:
    """--lam, --eps, (``methods``) --method, (``delta``) --delta and (for commands that
    draw) --seed. ``finite``: the order must be finite (the noise-aware release)."""
    orders = "> 1, finite" if finite else "> 1, or inf"
    if not delta:
        parser.add_argument(
            "--lam", type=float, required=True, metavar="L", help=f"Rényi order lam ({orders})"
        )
    else:
        parser.add_argument(
            "--lam",
            type=float,
            default=None,
            metavar="L",
            help=f"Rényi order lam ({orders}) of an RDP target; or give --delta instead",
        )
    parser.add_argument(
        "--eps",
        type=float,
        required=True,
        metavar="E",
        help="target eps at --lam (or of (eps, delta)-DP with --delta), in nats (> 0); the "
        "certified eps is never above it",
    )
    if delta:
        parser.add_argument(
            "--delta",
            type=float,
            default=None,
            metavar="D",
            help="an (eps, delta)-DP target instead of --lam, delta in [0, 1): the order is "
            "chosen from public inputs (docs/dp_target.md)",
        )
    if methods is not None:
        parser.add_argument(
            "--method",
            choices=methods,
            default="diffused",
            help="mechanism (default diffused)"
            + ("; ops: logistic and multinomial" if "ops" in methods else ""),
        )
    if seed:
        parser.add_argument(
            "--seed", type=int, default=None, help="random seed (default: fresh OS entropy)"
        )


def check_target(args) -> None:
    """--lam (an RDP target) or --delta (an (eps, delta) target): exactly one."""
    lam, delta = getattr(args, "lam", None), getattr(args, "delta", None)
    if lam is None and delta is None:
        raise UsageError(
            "give --lam L (an RDP target: eps at order L) or --delta D (an (eps, delta)-DP "
            "target; the order is then chosen for you)"
        )
    if lam is not None and delta is not None:
        raise UsageError(
            "give --lam (an RDP target) or --delta (an (eps, delta)-DP target), not both"
        )


def _listed(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def resolve(args, command: str) -> Adapter:
    """The adapter of ``args.model``; refuses every given flag or method it does not use."""
    adapter = next(a for a in ADAPTERS if args.model in (a.name, *a.aliases))
    mine = adapter.flags[command]
    for dest in command_flags(command):
        value = getattr(args, dest, None)
        if value is None or value is False or dest in mine:  # not `in (None, False)`: 0 == False
            continue
        flag = FLAGS[dest][0][0]
        users = [a.name for a in ADAPTERS if dest in a.flags.get(command, ())]
        if not users:
            raise UsageError(COMMAND_NOTES[(command, dest)])
        raise UsageError(
            f"{flag} does not apply to --model {adapter.name}: {flag} applies to --model "
            f"{_listed(users)} only"
        )
    method = getattr(args, "method", None)
    if method is not None and method not in adapter.methods:
        users = [a.name for a in ADAPTERS if command in a.flags and method in a.methods]
        raise UsageError(
            f"--method {method} does not apply to --model {adapter.name}: --method {method} "
            f"applies to --model {_listed(users)} only"
        )
    return adapter
