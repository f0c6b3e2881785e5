"""A PNG of audits across target eps, beside the certified eps."""

from __future__ import annotations

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
    """Write a PNG: empirical lower bound (with interval) and certified eps at delta, vs eps.

    ``eps_grid``: the RDP targets at ``lam`` the audits were run at (x, log axis);
    ``results``: one AuditResult each (with ``eps_certified``). Uses matplotlib (Agg).
    """
    if not results:
        raise ValueError("nothing to plot: no audit results")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.asarray(eps_grid, float)
    lower = np.array([r.eps_lower for r in results])
    point = np.array([r.eps_point for r in results])
    cert = np.array([np.nan if r.eps_certified is None else r.eps_certified for r in results])
    delta, conf = results[0].delta, results[0].confidence
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.plot(x, cert, "-o", color="C0", label=f"certified ε at δ={delta:g}")
    ax.plot(x, lower, "-s", color="C3", label=f"empirical lower bound ({conf:.0%})")
    finite = np.isfinite(point)
    ax.plot(x[finite], point[finite], "x", color="C3", alpha=0.6, label="empirical point estimate")
    ax.set_xscale("log")
    ax.set_xlabel(f"target RDP ε at λ={lam:g} (nats)")
    ax.set_ylabel(f"ε of (ε, δ={delta:g})-DP (nats)")
    ax.set_title(title or f"privacy audit, {results[0].trials} trials per data set")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
