"""Accuracy across the certified Langevin family, beyond the two public schedules.

docs/langevin.md §6 ("Open"): Theorem 1 certifies noisy gradient descent with a data step
eta_D on the mean loss, noise sigma on w, a shrink b per step and K steps, at
rho = (eta_D G / n)^2 / (2 sigma^2) * F(1 - b, K). This script runs that iteration (the
product's ``privbayes.sampling.langevin.run_chains``, parameters set in DP-GD's units) on the peers
study's splits, with sigma the smallest noise whose certificate
(``privbayes.sampling.langevin.certificate``) meets the zCDP budget rho that converts to
(eps, delta), and prints test accuracy for K = f T with b = 0 (T: the study's DP-GD rule,
uncapped) and for stationary runs at b = g b* (b* = 8 sqrt(d / rho) / (n B), B = M / c).

``--momenta`` adds heavy-ball runs at b = 0 (docs/langevin.md §6, "Open"): the gradient is
taken at the extrapolated point v = w_k + beta (w_k - w_{k-1}), then
w_{k+1} = v - eta_D grad F(v) + sigma xi. Each step is still one Gaussian mechanism on the
gradient sum at a point computed from earlier outputs, and the first is taken at 0, so the
certificate of the K-step run at b = 0 (the K-fold composition with the first step charged
a quarter) covers it unchanged; only the law of w_K differs. They run at K = T and at
K = k(beta) T with k(beta) = (1 - beta) sqrt((1 + 2 beta) / (1 + beta)), the K at which the
quadratic worst case of the bound (every direction saturated at eta_D h = 1) is smallest for
that beta.

It is a measurement for choosing a rule, not a release path: nothing here is a product API.

    python experiments/langevin_family.py --datasets abalone --trials 12
"""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import logistic_regression as LR  # noqa: E402
import peers  # noqa: E402
from _peers import rules, targets  # noqa: E402

from privbayes.sampling import langevin  # noqa: E402

C_BOUND = 1.0  # the study's feature bound c
SLACK = 1.0 + 1e-12  # the models' validation slack on c (docs/glm.md)


def sampler_of(n: int, steps: int, eta_d: float, sigma: float, b: float) -> tuple[dict, float]:
    """(sampler, r) of ``privbayes.sampling.langevin`` for the run in DP-GD's units: its
    iteration w <- (1 - eta prec) w + eta r sum_i (-grad loss_i) + noise xi is
    w <- (1 - b) w - eta_D grad F(w) + sigma xi with eta r n = eta_D, eta prec = b."""
    eta = 1.0 / n  # any step: only eta r n and eta prec enter the iteration
    sampler = {"algorithm": langevin.ALGORITHM, "step": eta, "noise": sigma,
               "prec": b / eta, "steps": steps, "start": 0.0}  # fmt: skip
    return sampler, eta_d / (eta * n)


def certified_rho(n: int, steps: int, eta_d: float, sigma: float, b: float) -> float:
    """rho of the run, for the doubles it uses, rounded up: ``langevin.certificate``
    (Theorem 1 and the first-step bound from the start 0; at b = 0, kappa = 1, the K-fold
    Gaussian composition with the first step charged a quarter, in exact rationals)."""
    sampler, r = sampler_of(n, steps, eta_d, sigma, b)
    return langevin.certificate(sampler, n, r, C_BOUND * SLACK)


def noise_for(n: int, steps: int, eta_d: float, b: float, rho: float) -> float:
    """The smallest sigma (to a relative 1e-12, bisection in log sigma) certified at rho.

    Raises ValueError when the bracket [1e-12, 1e6] does not contain it."""
    lo, hi = 1e-12, 1e6
    if certified_rho(n, steps, eta_d, hi, b) > rho or certified_rho(n, steps, eta_d, lo, b) <= rho:
        raise ValueError(f"no noise in [{lo:g}, {hi:g}] is certified at exactly rho = {rho!r}")
    while hi / lo > 1.0 + 1e-12:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if certified_rho(n, steps, eta_d, mid, b) <= rho else (mid, hi)
    return hi


def run(x, y, steps: int, eta_d: float, sigma: float, b: float, rng) -> np.ndarray:
    """w_K of the run, shape (d,), by the product's own sampler (``langevin.run_chains``)."""
    sampler, r = sampler_of(len(y), steps, eta_d, sigma, b)
    return langevin.run_chains(x, np.where(y > 0.5, 1.0, -1.0), r, sampler, 1, rng)[0]


def run_momentum(x, y, steps: int, eta_d: float, sigma: float, beta: float, rng) -> np.ndarray:
    """w_K of the heavy-ball run (module docstring), shape (d,); y in {0, 1}."""
    z = x * np.where(y > 0.5, 1.0, -1.0)[:, None]  # rows y_i x_i, labels in {-1, +1}
    n, d = x.shape
    w, prev = np.zeros(d), np.zeros(d)
    for _ in range(steps):
        v = w + beta * (w - prev)
        g = z.T @ special.expit(-(z @ v)) / n  # -grad F(v), F the mean logistic loss
        prev, w = w, v + eta_d * g + sigma * rng.standard_normal(d)
    return w


def k_factor(beta: float) -> float:
    """k(beta) = (1 - beta) sqrt((1 + 2 beta) / (1 + beta)) (module docstring)."""
    return (1.0 - beta) * math.sqrt((1.0 + 2.0 * beta) / (1.0 + beta))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", type=lambda s: s.split(","), default=["abalone"])
    p.add_argument("--eps", type=lambda s: [float(e) for e in s.split(",")],
                   default=[0.1, 0.3, 1.0, 3.0, 10.0])  # fmt: skip
    p.add_argument("--trials", type=int, default=12)
    p.add_argument("--factors", type=lambda s: [float(f) for f in s.split(",")],
                   default=[1, 2, 4, 8], help="K = f T at b = 0")  # fmt: skip
    p.add_argument("--shrinks", type=lambda s: [float(g) for g in s.split(",") if g],
                   default=[1, 0.25], help="stationary runs at b = g b*")  # fmt: skip
    p.add_argument("--momenta", type=lambda s: [float(g) for g in s.split(",") if g],
                   default=[], help="heavy-ball runs at b = 0 with these momenta")  # fmt: skip
    p.add_argument("--cap", type=int, default=20_000, help="at most this many steps")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--max-train", type=int, default=0)
    a = p.parse_args(argv)
    study = peers.parse_args(
        ["--data-dir", a.data_dir] * bool(a.data_dir)
        + ["--max-train", str(a.max_train)] * bool(a.max_train)
    )
    margin = rules.MARGIN_SCALE
    out: dict[tuple, list[float]] = {}
    for name in a.datasets:
        for trial in range(a.trials):
            xtr, ytr, xte, yte = LR.split(name, study, C.task_rng(a.seed, 1000 + trial))
            n, d = xtr.shape
            for eps in a.eps:
                rho = targets.max_rho(eps, a.delta)[0]
                t, eta_d = rules.dpgd_schedule(n, d, C_BOUND, rho, margin, 10**9)
                b_star = 8.0 * math.sqrt(d / rho) / (n * margin / C_BOUND)
                runs = {f"b=0, K={f:g}T": (max(1, round(f * t)), 0.0) for f in a.factors}
                for g in a.shrinks:
                    runs[f"stationary, b={g:g}b*"] = (math.ceil(math.log(100) / (g * b_star)),
                                                      g * b_star)  # fmt: skip
                for g in a.momenta:
                    runs[f"momentum {g:g}, K=T"] = (t, 0.0, g)
                    runs[f"momentum {g:g}, K={k_factor(g):.2g}T"] = (
                        max(1, round(k_factor(g) * t)), 0.0, g)  # fmt: skip
                for i, (label, (steps, b, *mom)) in enumerate(runs.items()):
                    steps = min(steps, a.cap)
                    key = zlib.crc32(repr((name, trial, eps, i)).encode())
                    rng = C.task_rng(a.seed, key)
                    sigma = noise_for(n, steps, eta_d, b, rho)
                    if mom:
                        w = run_momentum(xtr, ytr, steps, eta_d, sigma, mom[0], rng)
                    else:
                        w = run(xtr, ytr, steps, eta_d, sigma, b, rng)
                    out.setdefault((name, label, eps), []).append(LR.accuracy(w, xte, yte))
    labels = list(dict.fromkeys(k[1] for k in out))
    print("| data set | run | " + " | ".join(f"ε={e:g}" for e in a.eps) + " |")
    print("|---|---|" + "---|" * len(a.eps))
    for name in a.datasets:
        for label in labels:
            cells = []
            for eps in a.eps:
                v = np.asarray(out[(name, label, eps)])
                se = v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else 0.0
                cells.append(f"{v.mean():.3f} ± {se:.3f}")
            print(f"| {name} | {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
