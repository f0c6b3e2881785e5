"""``privbayes audit``: an empirical lower bound on eps at the mechanism's worst-case pair."""

from __future__ import annotations

import math
import os
from pathlib import Path

from . import _models
from ._io import UsageError

_RENYI_NOTE = (
    "histogram (binned) estimate of D_lam between the output laws at the worst pair; "
    "binning loses information, so it is a lower estimate of the true divergence, and the "
    "interval is for the binned divergence, not the true one (docs/audit.md)"
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "audit",
        help="measure a mechanism's privacy loss at its worst-case pair (lower bound)",
        description="Run the calibrated mechanism on its worst-case neighbouring pair many "
        "times and bound eps from below; a bound above the certificate means a bug.",
    )
    _models.add_arguments(p, "audit")
    p.add_argument("--n", type=int, default=100, help="public data set size (default 100)")
    p.add_argument("--trials", type=int, required=True, help="runs per data set (>= 100)")
    p.add_argument(
        "--delta", type=float, default=1e-5, help="delta of (eps, delta)-DP (default 1e-5)"
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="confidence of the lower bound, in [0.5, 1) (default 0.95)",
    )
    p.add_argument(
        "--plot", default=None, metavar="FILE.png", help="also plot audits across eps (PNG)"
    )
    _models.privacy_args(p, _models.GLM_METHODS, delta=False)
    p.set_defaults(run=run)


def _plot_path(path: str) -> Path:
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


def run(args) -> dict:
    adapter = _models.resolve(args, "audit")
    if args.trials < 100:
        raise UsageError(f"--trials must be >= 100 per data set; got {args.trials}")
    model = adapter.build(args, "audit")
    plot = _plot_path(args.plot) if args.plot else None

    import numpy as np

    from ..audit import audit_curve, audit_model, renyi_estimate
    from ..calibration import calibrate

    options = dict(
        delta=args.delta,
        confidence=args.confidence,
        rng=args.seed,
        query=adapter.name == "query",
        d=1 if getattr(args, "d", None) is None else args.d,
    )
    res = audit_model(model, args.n, args.lam, args.eps, args.method, args.trials, **options)
    glm_d = options["d"] if hasattr(model, "_resolve") else None  # the back-end audited
    cal = calibrate(model, args.n, args.lam, args.eps, args.method, d=glm_d)
    out = {
        "model": adapter.name,
        "method": cal.method,
        "n": cal.n,
        "lam": cal.lam,
        "eps_rdp": cal.eps,
        "r": None if cal.method == "ops" else cal.r,
        "m": cal.m,
        "t": cal.t,
        "delta": res.delta,
        "confidence": res.confidence,
        "trials": res.trials,
        "eps_certified": res.eps_certified,
        "eps_lower": res.eps_lower,
        "eps_point": res.eps_point,
        "interval": list(res.interval),
        "eps_ceiling": res.eps_ceiling,
        "fraction_of_certified": res.fraction,
        "violation": res.violation,
        "fpr": res.fpr,
        "fnr": res.fnr,
        "worst_pair": cal.pair or adapter.pair_note(model),
        "seconds": round(res.seconds, 3),
    }
    if res.projection is None and math.isfinite(cal.lam):  # scalar output
        ren = renyi_estimate(*res.scores, cal.lam, rng=args.seed, certified=cal.eps)
        out["renyi_binned"] = {
            "order": cal.lam,
            "estimate": float(ren.estimate[0]),
            "interval": [float(ren.lower[0]), float(ren.upper[0])],
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
        from ..audit import plot_audits

        title = f"{adapter.name} ({cal.method}), n={cal.n}, {args.trials} trials"
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
