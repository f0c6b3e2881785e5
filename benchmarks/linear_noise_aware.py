"""Noise-aware Bayesian linear regression: calibration (SBC) and release speed.

* sbc: simulation-based calibration (Talts et al. 2018) of the 90% intervals per
  coefficient, on the grid n in {1000, 20000}, d in {2, 5}, eps in {0.3, 1} at
  delta = 1e-5 (and --design fixed for the sensitivity study of §N4). Each replication
  draws a population (random feature scales, correlations and means: the vague prior on
  the design's moments that §N3 assumes), w from the prior, the data, one release through
  ``pb.posterior``, and checks coverage; also the widths against the exact non-private
  conjugate posterior and the coverage of the naive plug-in (A~ taken as exact).
* speed: one release (statistic + noise + posterior) at n = 10^6, d = 20.

Not a test (tests/test_linear_noise_aware.py runs a small SBC cell).

    python benchmarks/linear_noise_aware.py [--part sbc|speed|all] [--reps 400]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def population(rng, d: int, design: str):
    """(mean, factor) of x = mean + factor z, z ~ N(0, I): random per replication."""
    if design == "fixed":
        return np.full(d, 0.1), np.eye(d) * 0.4
    scales = rng.uniform(0.05, 0.6, d)
    g = rng.normal(size=(d, d)) / np.sqrt(d)
    corr = np.eye(d) + 0.8 * g @ g.T
    corr /= np.sqrt(np.outer(np.diag(corr), np.diag(corr)))
    factor = np.linalg.cholesky(corr) * scales[:, None]
    return rng.uniform(-0.3, 0.3, d), factor


def simulate(rng, n: int, d: int, spec, design: str = "random"):
    """(x, y, w): ||x|| <= c by row rescaling, w from the prior, y = x w + e (clipped to
    +-y_bound, counted)."""
    mean, factor = population(rng, d, design)
    x = mean + rng.normal(size=(n, d)) @ factor.T
    norm = np.linalg.norm(x, axis=1) / spec.c
    x = x / np.maximum(1.0, norm)[:, None]
    p = d + int(spec.fit_intercept)
    w = rng.normal(0.0, 1.0 / np.sqrt(n * spec.beta), p)
    mu = x @ w[:d] + (w[d] if spec.fit_intercept else 0.0)
    y = mu + rng.normal(0.0, spec.noise_sd, n)
    clipped = int(np.count_nonzero(np.abs(y) > spec.y_bound))
    return x, np.clip(y, -spec.y_bound, spec.y_bound), w, clipped


def naive_interval(post, prob: float):
    """The plug-in posterior: A~ as the exact X^T X (the Z_A w term dropped)."""
    from privbayes.posterior.linear import normal_interval

    s = post.se2 * post.A_psd + post.tau2 * np.eye(post.p)
    si_a = np.linalg.solve(s, post.A)
    prec = np.diag(post.prior_prec) + post.A.T @ si_a
    cov = np.linalg.inv(prec)
    m = cov @ (si_a.T @ post.b)
    lo, hi = normal_interval(m, cov, prob)
    return lo * post.unit, hi * post.unit


def sbc_cell(n, d, eps, reps, seed, design="random", fit_intercept=False, delta=1e-5):
    import privbayes as pb
    from privbayes.posterior.linear import conjugate_posterior, normal_interval

    rng = np.random.default_rng(seed)
    beta = 1.0 / n  # prior sd 1 for every coefficient
    # |y| <= y_bound for all but a few rows (clipped rows misspecify the model: counted)
    y_bound = 1.0 * (np.sqrt(d) + 3.0 + (1.0 if fit_intercept else 0.0))
    model = pb.BayesianLinearRegression(beta, 1.0, y_bound, 0.5, fit_intercept=fit_intercept)
    spec = model.noise_aware_spec()
    cover, cover_naive, cover_np, ratio, clipped, ess = [], [], [], [], 0, []
    for _ in range(reps):
        x, y, w, k = simulate(rng, n, d, spec, design)
        clipped += k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = pb.posterior(model, (x, y), eps=eps, delta=delta, rng=rng)
        lo, hi = post.interval(0.9)
        cover.append((lo <= w) & (w <= hi))
        fam = post._family
        nlo, nhi = naive_interval(fam, 0.9)
        cover_naive.append((nlo <= w) & (w <= nhi))
        mu, cov = conjugate_posterior(spec, x, y)
        plo, phi = normal_interval(mu, cov, 0.9)
        cover_np.append((plo <= w) & (w <= phi))
        ratio.append((hi - lo) / (phi - plo))
        ess.append(fam.diagnostics["ess"])
    cover, cover_naive, cover_np = (np.array(v, float) for v in (cover, cover_naive, cover_np))
    k = cover.size
    return {
        "n": n,
        "d": d,
        "eps": eps,
        "design": design,
        "intercept": fit_intercept,
        "intervals": k,
        "coverage": float(cover.mean()),
        "se": float(np.sqrt(0.09 / k)),
        "coverage_naive": float(cover_naive.mean()),
        "coverage_nonprivate": float(cover_np.mean()),
        "width_ratio_median": float(np.median(ratio)),
        "clipped_rows": clipped,
        "min_ess": float(np.min(ess)),
    }


def sbc(reps: int, design: str, intercept: bool) -> None:
    print(
        "n      d  eps  design  icpt  intervals  coverage  (se)    naive   non-private  "
        "width/np  min ESS"
    )
    seed = 0
    for n in (1000, 20000):
        for d in (2, 5):
            for eps in (0.3, 1.0):
                seed += 1
                r = sbc_cell(n, d, eps, reps, seed, design, intercept)
                print(
                    f"{n:<6d} {d}  {eps:<4g} {design:<7s} {str(intercept):<5s} "
                    f"{r['intervals']:<10d} {r['coverage']:.3f}    ({r['se']:.3f})  "
                    f"{r['coverage_naive']:.3f}   {r['coverage_nonprivate']:.3f}        "
                    f"{r['width_ratio_median']:<9.2f} {r['min_ess']:.0f}",
                    flush=True,
                )


def speed() -> None:
    import privbayes as pb
    from privbayes.posterior.linear import LinearStatistics, linear_statistic

    rng = np.random.default_rng(0)
    n, d = 10**6, 20
    x = rng.uniform(-1, 1, (n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    y = np.clip(x @ rng.normal(size=d) + rng.normal(0, 0.5, n), -5, 5)
    model = pb.BayesianLinearRegression(1e-4, 1.0, 5.0, 0.5, fit_intercept=True)
    spec = model.noise_aware_spec()
    pb.posterior(model, (x[:1000], y[:1000]), 2.0, 1.0, rng=0)  # warm
    times = {"statistic": [], "release": []}
    for i in range(5):
        t0 = time.perf_counter()
        linear_statistic(spec, (x, y))
        times["statistic"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        post = pb.posterior(model, (x, y), 2.0, 1.0, rng=i + 1)
        times["release"].append(time.perf_counter() - t0)
    del LinearStatistics
    for k, v in times.items():
        print(f"{k}: median {np.median(v):.3f} s (min {min(v):.3f}) at n = 10^6, d = 20")
    t0 = time.perf_counter()
    post.interval(0.9)
    post.sample(4000, rng=9)
    print(f"interval + 4000 draws: {time.perf_counter() - t0:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", default="all", choices=["sbc", "speed", "all"])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--design", default="random", choices=["random", "fixed"])
    ap.add_argument("--intercept", action="store_true")
    args = ap.parse_args()
    if args.part in ("speed", "all"):
        speed()
    if args.part in ("sbc", "all"):
        sbc(args.reps, args.design, args.intercept)


if __name__ == "__main__":
    main()
