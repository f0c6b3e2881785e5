"""Noise-aware Bayesian linear regression with an unknown noise variance
(docs/linear_regression.md §N6): simulation-based calibration of the 90% intervals.

Each replication draws a population (random feature scales, correlations and means, as
benchmarks/linear_noise_aware.py), sigma^2 ~ IG(a0, b0) and w | sigma^2 ~ N(0, sigma^2 (n
beta)^-1 I) from the Normal-Inverse-Gamma prior, the data, one release through
``pb.posterior`` at (eps, delta = 1e-5), and checks whether each coefficient's 90% interval
and sigma's cover the truth. Not a test (tests/test_linear_nig.py runs a small cell).

    python benchmarks/linear_nig.py [--reps 500] [--intercept]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
from linear_noise_aware import population  # noqa: E402 (run from benchmarks/)

import privbayes as pb

A0, B0 = 4.0, 0.75  # sigma^2 prior mean 0.25 (sigma around 0.5)
PRIOR_W = 0.25  # n beta: w | sigma^2 has sd 2 sigma
Y_BOUND = 6.0


def simulate(rng, n, d, intercept):
    mean, factor = population(rng, d, "random")
    x = mean + rng.normal(size=(n, d)) @ factor.T
    c_x = math.sqrt(1.0 - 0.25) if intercept else 1.0  # rows [x, 1/2] of norm <= 1
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1) / c_x)[:, None]
    s2 = B0 / rng.gamma(A0)
    p = d + int(intercept)
    w = rng.normal(0.0, math.sqrt(s2 / PRIOR_W), p)
    f = x @ w[:d] + (w[d] if intercept else 0.0)
    y = f + rng.normal(0.0, math.sqrt(s2), n)
    clipped = int(np.sum(np.abs(y) > Y_BOUND))
    return x, np.clip(y, -Y_BOUND, Y_BOUND), w, math.sqrt(s2), clipped


def cell(n, d, eps, reps, seed, intercept=False):
    rng = np.random.default_rng(seed)
    model = pb.BayesianLinearRegression(
        PRIOR_W / n, 1.0, Y_BOUND, None, noise_prior=(A0, B0), fit_intercept=intercept
    )
    hits_w, hits_s, clipped, low_ess = [], [], 0, 0
    for _ in range(reps):
        x, y, w, sd, k = simulate(rng, n, d, intercept)
        clipped += k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = pb.posterior(model, (x, y), eps=eps, delta=1e-5, rng=rng)
        low_ess += not post.diagnostics["ok"]
        lo, hi = post.interval(0.9)
        hits_w.append((lo <= w) & (w <= hi))
        slo, shi = post.noise_sd_interval(0.9)
        hits_s.append(slo <= sd <= shi)
    return np.mean(hits_w), np.mean(hits_s), clipped, low_ess


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--intercept", action="store_true")
    args = ap.parse_args()
    print("| n | d | eps | reps | coefficients | sigma | clipped y | ESS < 1000 |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (2000, 20000):
        for d in (2, 3):
            t = time.time()
            cw, cs, clipped, low = cell(n, d, 1.0, args.reps, 1000 * n + d, args.intercept)
            print(
                f"| {n} | {d} | 1 | {args.reps} | {cw:.3f} | {cs:.3f} | {clipped} | {low} |"
                f"  ({time.time() - t:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
