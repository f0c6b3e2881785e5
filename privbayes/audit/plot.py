"""A PNG of audits across target eps, beside the certified eps."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .blackbox import AuditResult


def plot_audits(
    eps_grid: Sequence[float],
    results: Sequence[AuditResult],
    path,
    *,
    lam: float,
    title: str = "",
) -> None:
    """Write a PNG of audits against the target eps: certified eps, lower bound, interval.

    Drawn at each target: the certified eps at delta (when the results carry one), the
    empirical lower bound ``eps_lower``, the point estimate ``eps_point`` (where finite), the
    two-sided ``interval`` as a vertical bar (an arrow where its upper end is inf), and the
    ceiling ``eps_ceiling`` (dashed: the most an audit of this size can show).

    ``eps_grid``: the RDP targets at ``lam`` the audits were run at (x, log axis: finite and
    > 0), one per result; ``results``: AuditResult objects (e.g. from ``audit_curve``).
    Uses matplotlib without pyplot (no global backend change). Raises ValueError / TypeError
    for empty or mismatched inputs.
    """
    results = list(results)
    if not results:
        raise ValueError("nothing to plot: no audit results")
    bad = [type(r).__name__ for r in results if not isinstance(r, AuditResult)]
    if bad:
        raise TypeError(f"results must be AuditResult objects; got {bad[0]}")
    try:
        x = np.asarray(eps_grid, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"eps_grid must be numbers; got {eps_grid!r}") from None
    if x.ndim != 1 or x.size != len(results):
        raise ValueError(
            f"eps_grid and results must have the same length; got {x.size} target(s) for "
            f"{len(results)} result(s)"
        )
    if not (np.isfinite(x).all() and (x > 0).all()):
        raise ValueError(f"eps_grid must hold finite eps > 0 (log axis); got {x.tolist()}")
    if isinstance(lam, bool) or not isinstance(lam, int | float | np.integer | np.floating):
        raise TypeError(f"lam must be a number; got {lam!r}")
    if not float(lam) > 1:
        raise ValueError(f"lam must be > 1; got {lam!r}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    order = np.argsort(x)
    x = x[order]
    results = [results[i] for i in order]
    lower = np.array([r.eps_lower for r in results])
    point = np.array([r.eps_point for r in results])
    lo = np.array([r.interval[0] for r in results])
    hi = np.array([r.interval[1] for r in results])
    ceiling = np.array([r.eps_ceiling for r in results])
    cert = np.array([np.nan if r.eps_certified is None else r.eps_certified for r in results])
    delta, conf = results[0].delta, results[0].confidence
    shown = np.concatenate([lower, point, lo, hi, ceiling, cert])
    shown = shown[np.isfinite(shown)]
    top = 1.12 * max(float(shown.max()) if shown.size else 1.0, 1e-3)

    fig = Figure(figsize=(6.4, 4.4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if np.isfinite(cert).any():
        ax.plot(x, cert, "-o", color="C0", label=f"certified ε at δ={delta:g}")
    ax.plot(x, lower, "-s", color="C3", label=f"empirical lower bound ({conf:.0%})")
    finite = np.isfinite(point)
    ax.plot(x[finite], point[finite], "x", color="C3", alpha=0.6, label="empirical point estimate")
    ax.vlines(
        x,
        lo,
        np.minimum(hi, top),
        color="C3",
        alpha=0.35,
        linewidth=4,
        label=f"{conf:.0%} interval of the test's ε",
    )
    open_top = ~np.isfinite(hi)
    if open_top.any():
        ax.plot(x[open_top], np.full(open_top.sum(), top), "^", color="C3", alpha=0.5)
    if np.isfinite(ceiling).any():
        ax.plot(x, ceiling, "--", color="0.4", label="ceiling of an audit this size")
    ax.set_ylim(0.0, top * 1.04)
    ax.set_xscale("log")
    lam_text = "∞" if math.isinf(float(lam)) else f"{float(lam):g}"
    ax.set_xlabel(f"target RDP ε at λ={lam_text} (nats)")
    ax.set_ylabel(f"ε of (ε, δ={delta:g})-DP (nats)")
    ax.set_title(title or f"privacy audit, {results[0].trials} trials per data set")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
