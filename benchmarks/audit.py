"""Audit throughput: trials per second, vectorised vs one release per call, same process;
and the wall time of a whole audit (both data sets, distinguisher, bounds) per mechanism.

Trials per second counts releases of one calibrated mechanism at its worst-case data set:
``vectorised`` draws them in one call (``CalibratedMechanism(..., size=k)``), ``per call``
loops over single draws of the same mechanism (the calibration made once), and
``sample()`` loops over ``privbayes.sample`` (what a naive audit would call: it calibrates
every time). Logistic regression runs the library's GLM back-end, so its audit time is
that of the sampler. Last, the binned Rényi estimate (``renyi_estimate``) at the Beta worst
pair against the exact D_lam (``privbayes.renyi_beta``): a lower estimate, since binning
loses information (docs/audit.md).

    .venv/bin/python benchmarks/audit.py [--quick] [--glm-trials T] [--no-glm]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import privbayes as pb
from privbayes.audit import CalibratedMechanism, audit_model, renyi_estimate, worst_case_pair

N, LAM, EPS = 100, 2.0, 1.0
BATCH = 10**5
CONJUGATE = [
    ("beta-bernoulli", pb.BetaBernoulli(), False),
    ("dirichlet (K=3)", pb.DirichletCategorical([1.0, 1.0, 1.0]), False),
    ("dirichlet (K=20)", pb.DirichletCategorical(np.ones(20)), False),
    ("query", pb.BetaBernoulli(), True),
]


def rate(fn, count: int, min_time: float) -> float:
    """Calls of ``fn`` (each making ``count`` releases) per second, as releases per second."""
    done, start = 0, time.perf_counter()
    while True:
        fn()
        done += count
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return done / elapsed


def sample_loop(model, data, query: bool, rng) -> None:
    if query:
        pb.release_query(data, LAM, EPS, rng=rng)
    else:
        pb.sample(model, data, LAM, EPS, rng=rng)


def renyi_table(draws: int, seeds: int) -> None:
    """Binned estimate of D_2 at the Beta worst pair vs the exact value, over seeds."""
    model = pb.BetaBernoulli()
    print(f"\nbinned Renyi estimate of D_2 at the Beta worst pair, {draws} draws per law")
    print(f"{'eps=exact':>9} {'method':<13} {'estimate min-max':>18} {'saturated':>10}")
    for eps in (0.1, 1.0, 10.0):
        for method in ("diffused", "concentrated"):
            mech = CalibratedMechanism(model, N, LAM, eps, method)
            d0, d1 = worst_case_pair(model, N, LAM, eps, method)
            est, sat = [], 0
            for seed in range(seeds):
                g = np.random.default_rng(seed)
                x0, x1 = mech(d0, size=draws, rng=g), mech(d1, size=draws, rng=g)
                r = renyi_estimate(x0, x1, LAM, rng=seed)
                sat += r.saturated
                if not r.saturated:
                    est.append(r.estimate[0])
            span = f"{min(est):.3f}-{max(est):.3f}" if est else "-"
            print(f"{eps:>9g} {method:<13} {span:>18} {sat:>5}/{seeds}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter timing windows")
    parser.add_argument("--glm-trials", type=int, default=10**5, help="logistic audit trials")
    parser.add_argument("--no-glm", action="store_true", help="skip the logistic audits")
    args = parser.parse_args()
    window = 0.3 if args.quick else 2.0
    rng = np.random.default_rng(0)

    print(f"trials per second at the worst-case pair, n={N}, (lam, eps)=({LAM:g}, {EPS:g})")
    print(f"{'mechanism':<18} {'vectorised':>12} {'per call':>10} {'sample()':>10} {'ratio':>8}")
    for name, model, query in CONJUGATE:
        mech = CalibratedMechanism(model, N, LAM, EPS, query=query)
        data, _ = worst_case_pair(model, N, LAM, EPS)
        vec = rate(lambda mech=mech, data=data: mech(data, size=BATCH, rng=rng), BATCH, window)
        one = rate(lambda mech=mech, data=data: mech(data, rng=rng), 1, window)
        naive = rate(
            lambda model=model, data=data, query=query: sample_loop(model, data, query, rng),
            1,
            window,
        )
        print(f"{name:<18} {vec:>12.3g} {one:>10.3g} {naive:>10.3g} {vec / one:>7.0f}x")

    print("\nwhole audit at 1e5 trials per data set (delta=1e-5, confidence 0.95), seconds")
    print(f"{'mechanism':<18} {'method':<13} {'seconds':>8} {'eps_lower':>10} {'certified':>10}")
    runs = [(name, model, query, m) for name, model, query in CONJUGATE for m in ("diffused",)]
    runs += [("beta-bernoulli", pb.BetaBernoulli(), False, "concentrated")]
    for name, model, query, method in runs:
        start = time.perf_counter()
        res = audit_model(model, N, LAM, EPS, method, 10**5, rng=1, query=query)
        secs = time.perf_counter() - start
        print(
            f"{name:<18} {method:<13} {secs:>8.2f} {res.eps_lower:>10.3f} "
            f"{res.eps_certified:>10.3f}"
        )
    renyi_table(10**5, 5 if args.quick else 20)
    if not args.no_glm:
        print(f"logistic: n=20, beta=0.1, c=1, IMH back-end, {args.glm_trials} trials per data set")
        glm = pb.BayesianLogisticRegression(beta=0.1, c=1.0)
        for method in ("diffused", "ops"):
            start = time.perf_counter()
            res = audit_model(glm, 20, LAM, EPS, method, args.glm_trials, rng=1, d=1)
            secs = time.perf_counter() - start
            print(
                f"{'logistic d=1':<18} {method:<13} {secs:>8.2f} {res.eps_lower:>10.3f} "
                f"{res.eps_certified:>10.3f}"
            )


if __name__ == "__main__":
    main()
