"""``privbayes demo``: private releases on real data sets shipped with scikit-learn.

Each row shows the private release beside the non-private value of the same quantity.
The non-private column is printed only so the demo can show the price of privacy; a real
analysis never publishes it.
"""

from __future__ import annotations

import time

import numpy as np

from .models import BetaBernoulli, DirichletCategorical
from .release import release_query, sample
from .validation import resolve_rng

SETTINGS = [(2.0, 0.1), (2.0, 1.0), (10.0, 1.0)]
METHODS = ("diffused", "concentrated")


def _fmt(v) -> str:
    if np.ndim(v) == 0:
        return f"{float(v):.4f}"
    return "[" + " ".join(f"{x:.3f}" for x in np.asarray(v)) + "]"


def run_demo(seed: int | None = None, out=print) -> list[dict]:
    """Print the demo table; returns its rows (public values and the comparison)."""
    from sklearn import datasets

    rng = resolve_rng(seed)
    start = time.perf_counter()
    cancer = datasets.load_breast_cancer()
    wine = datasets.load_wine()
    digits = datasets.load_digits()
    malignant = (cancer.target == 0).astype(float)  # sklearn codes malignant as 0
    alcohol = wine.data[:, list(wine.feature_names).index("alcohol")]
    low, high = 8.0, 16.0  # public range of wine alcohol content, % vol

    jobs = [
        (
            "breast cancer: malignant fraction",
            "beta-bernoulli",
            malignant.size,
            lambda lam, eps, meth: sample(BetaBernoulli(1, 1), malignant, lam, eps, meth, rng=rng),
            malignant.mean(),
        ),
        (
            "wine: class distribution (K=3)",
            "dirichlet",
            wine.target.size,
            lambda lam, eps, meth: sample(
                DirichletCategorical(np.ones(3)), wine.target, lam, eps, meth, rng=rng
            ),
            np.bincount(wine.target) / wine.target.size,
        ),
        (
            "digits: class distribution (K=10)",
            "dirichlet",
            digits.target.size,
            lambda lam, eps, meth: sample(
                DirichletCategorical(np.ones(10)), digits.target, lam, eps, meth, rng=rng
            ),
            np.bincount(digits.target) / digits.target.size,
        ),
        (
            "wine: mean alcohol in [8, 16] (query)",
            "query",
            alcohol.size,
            lambda lam, eps, meth: release_query(
                (alcohol - low) / (high - low), lam, eps, method=meth, rng=rng
            ),
            (alcohol.mean() - low) / (high - low),
        ),
    ]
    rows = []
    out("privbayes demo: private posterior samples on scikit-learn's real data sets")
    out("guarantee: (lam, eps)-RDP, replace-one neighbours, n and prior public; eps in nats")
    out("the 'non-private' column is shown for comparison only and is NOT private\n")
    header = f"{'quantity':<40}{'n':>6} {'method':<13}{'lam':>5}{'eps':>6} {'knob':<12}"
    out(header + f"{'private release':<24}{'non-private':<24}{'abs err':>8}")
    out("-" * (len(header) + 56))
    for name, kind, n, job, truth in jobs:
        for lam, eps in SETTINGS:
            for meth in METHODS:
                rel = job(lam, eps, meth)
                knob = f"r={rel.r:.4g}" if meth == "diffused" else f"m={rel.m:.4g}"
                if kind == "dirichlet" and np.size(truth) > 3:
                    shown, true_shown = "(10-vector)", "(10-vector)"
                else:
                    shown, true_shown = _fmt(rel.value), _fmt(truth)
                err = float(np.abs(np.asarray(rel.value) - truth).sum())
                out(
                    f"{name:<40}{n:>6} {meth:<13}{lam:>5g}{rel.eps:>6.3g} {knob:<12}"
                    f"{shown:<24}{true_shown:<24}{err:>8.4f}"
                )
                rows.append(
                    {
                        "quantity": name,
                        "method": meth,
                        "lam": lam,
                        "eps": rel.eps,
                        "target_eps": eps,
                        "abs_error": err,
                    }
                )
        out("")
    out("abs err: |private - non-private| (L1 distance for class distributions)")
    out(f"done in {time.perf_counter() - start:.2f} s")
    return rows
