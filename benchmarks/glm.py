"""Certified logistic-regression releases per second: IMH (default) against PyMC's NUTS.

Adult-sized synthetic problem (n = 45,000, d = 100) and an MNIST-sized one
(n = 12,000, d = 784, sparse non-negative "pixel" rows), both with rows on ||x|| <= 1.
For each back-end, in the same process:

* time to the first release (one ``sample`` call: mode, pilot, chains, diagnostics);
* releases per second when many are wanted: one ``sample(..., size=k)`` call releases k
  independent draws (one chain each), each at (lam = 2, eps = 1) — eps = k in total;
* the diagnostics reached (R-hat must be <= 1.01 for a release to count) and peak RSS.

NUTS releases one draw per run, with the default gating (R-hat <= 1.01, reruns that
double the draws). Its settings are printed; a NUTS run that does not reach R-hat 1.01
is counted at its time, so the ratio is then a lower bound on the speed-up.

    .venv/bin/python benchmarks/glm.py [--skip-pymc] [--skip-mnist] [--k 64]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import privbayes as pb


def adult_like(n: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    X = pb.preprocessing.clip_rows(rng.normal(size=(n, d)) / np.sqrt(d), 1.0)
    w_true = rng.normal(size=d)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ w_true))).astype(float)
    return X, y


def mnist_like(n: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    # ~19% non-zero pixels in [0, 1], rows scaled by the public bound sqrt(d) * 1 / 8
    X = np.where(rng.random((n, d)) < 0.19, rng.random((n, d)), 0.0)
    X = pb.preprocessing.clip_rows(X / (np.sqrt(d) / 8.0), 1.0)
    w_true = rng.normal(size=d) * 3 / np.sqrt(d)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X - X.mean(0)) @ w_true * 8))).astype(float)
    return X, y


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_imh(X, y, k: int) -> dict:
    model = pb.BayesianLogisticRegression(beta=1e-3, c=1.0)
    t0 = time.perf_counter()
    first = pb.sample(model, (X, y), 2.0, 1.0, rng=1)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    many = pb.sample(model, (X, y), 2.0, float(k), size=k, rng=2)
    t_many = time.perf_counter() - t0
    dg = many.diagnostics
    assert abs(many.calibration.target_eps - 1.0) < 1e-12  # each draw at eps = 1
    print(
        f"  imh : first release {t_first:6.2f} s (R-hat {first.diagnostics['rhat_max']:.4f}, "
        f"tune {first.diagnostics['tune']}, chains {first.diagnostics['chains']}); "
        f"{k} releases in {t_many:6.2f} s = {k / t_many:7.2f} /s  "
        f"(R-hat {dg['rhat_max']:.4f}, ESS bulk min {dg['ess_bulk_min']:.0f}, acceptance "
        f"{dg['acceptance']:.2f}, Pareto k {dg['pareto_k']:.2f}, "
        f"est. M {dg['weight_ratio_max']:.2f}, attempts {dg['attempts']}); "
        f"peak RSS so far {peak_mb():.0f} MB"
    )
    ok = dg["rhat_max"] <= 1.01 and first.diagnostics["rhat_max"] <= 1.01
    return {"first": t_first, "rate": k / t_many, "ok": ok}


def run_pymc(X, y, tune: int, draws: int, chains: int) -> dict:
    from privbayes.sampling import pymc_backend

    model = pb.BayesianLogisticRegression(
        beta=1e-3, c=1.0, backend="pymc", tune=tune, draws=draws, chains=chains
    )
    t0 = time.perf_counter()
    pymc_backend._compiled(X.shape[1], model.target_accept)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    rel = pb.sample(model, (X, y), 2.0, 1.0, rng=1, on_bad_diagnostics="warn")
    t_run = time.perf_counter() - t0
    dg = rel.diagnostics
    print(
        f"  nuts: compile {t_compile:.1f} s; first release {t_compile + t_run:6.1f} s "
        f"({chains} chains, {dg['tune']} tune + {dg['draws']} draws, attempts "
        f"{dg['attempts']}, R-hat {dg['rhat_max']:.4f}, divergences {dg['divergences']}) "
        f"= {1 / t_run:.5f} releases/s; peak RSS so far {peak_mb():.0f} MB"
    )
    return {"first": t_compile + t_run, "rate": 1 / t_run, "ok": dg["rhat_max"] <= 1.01}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--k", type=int, default=64, help="releases per IMH call")
    p.add_argument("--skip-pymc", action="store_true")
    p.add_argument("--skip-mnist", action="store_true")
    p.add_argument("--nuts-tune", type=int, default=500)
    p.add_argument("--nuts-draws", type=int, default=500)
    p.add_argument("--nuts-chains", type=int, default=2)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    problems = [("Adult-sized", *adult_like(45_000, 100, rng))]
    if not args.skip_mnist:
        problems.append(("MNIST-sized", *mnist_like(12_000, 784, rng)))
    for name, X, y in problems:
        print(f"{name}: n={X.shape[0]:,} d={X.shape[1]}, lam=2, eps=1 per release, beta=1e-3")
        imh = run_imh(X, y, args.k)
        if args.skip_pymc:
            continue
        nuts = run_pymc(X, y, args.nuts_tune, args.nuts_draws, args.nuts_chains)
        note = "" if nuts["ok"] else " (NUTS missed R-hat 1.01: a lower bound)"
        print(
            f"  ratio imh/nuts: releases per second {imh['rate'] / nuts['rate']:.0f}x, "
            f"time to first release {nuts['first'] / imh['first']:.0f}x{note}"
        )


if __name__ == "__main__":
    main()
