"""Calibrations per second, privbayes vs a 500-step bisection baseline, same process.

The baseline is the paper's procedure (§3: "a binary search over (0, 1]", evaluating the
boundary pairs at each candidate) with 500 halvings, using the same float sup as
privbayes's search (``model.float_sup``), so the ratio measures the search. Precision:
both knobs must certify eps <= target; we print their relative difference.

"float ms" times the float search alone (what the calibrator did before its certificates
were proven upper bounds, docs/numerics.md); "privbayes ms" the full certified
calibration; "rdp ms" the certified curve on the accountant's 227 default orders.

    .venv/bin/python benchmarks/calibration.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from privbayes import BayesianLogisticRegression, BetaBernoulli, DirichletCategorical, calibrate
from privbayes.accounting.accountant import DEFAULT_ORDERS
from privbayes.calibration import solve_knob
from privbayes.mechanisms import KNOB, knobs

N = 10**6
SETTINGS = [(2.0, 0.1), (2.0, 1.0), (10.0, 1.0), (1.5, 1e-3)]


def bisection(model, n, lam, eps, method, steps=500):
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if model.float_sup(n, lam, *knobs(method, mid)) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def float_search(model, n, lam, eps, method):
    """The calibrator's float search alone (no certificate): Brent on the float sup."""
    cap = float(np.min(model.alpha)) / (lam - 1.0)
    slope = 2.0 if method == "diffused" else 1.0
    return solve_knob(
        lambda v: model.float_sup(n, lam, *knobs(method, v)),
        eps,
        cap,
        slope,
        KNOB[method],
        lambda v: model.knob_resolution(n, method, v),
    )


def per_call(fn, args, min_time):
    count, start = 0, time.perf_counter()
    while True:
        fn(*args)
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter timing windows")
    args = parser.parse_args()
    window = 0.05 if args.quick else 0.3
    models = [
        ("Beta-Bernoulli", BetaBernoulli(1.0, 1.0)),
        ("Dirichlet K=3", DirichletCategorical(np.ones(3))),
        ("Dirichlet K=10", DirichletCategorical(np.ones(10))),
        ("Dirichlet K=50", DirichletCategorical(np.ones(50))),
    ]
    print(f"n = {N:,}; settings (lam, eps) = {SETTINGS}; medians over settings and methods")
    head = f"{'model':<16}{'float ms':>9}{'privbayes ms':>13}{'worst ms':>9}{'rdp ms':>8}"
    head += f"{'bisect-500 ms':>15}{'ratio':>7}"
    print(head + f"{'max rel diff':>14}{'both safe':>11}")
    for name, model in models:
        ours, flt, curve, base, diffs, safe = [], [], [], [], [], True
        for method in ("diffused", "concentrated"):
            for lam, eps in SETTINGS:
                cal = calibrate(model, N, lam, eps, method)
                ours.append(per_call(calibrate, (model, N, lam, eps, method), window))
                flt.append(per_call(float_search, (model, N, lam, eps, method), window))
                curve.append(per_call(cal.rdp, (DEFAULT_ORDERS,), window))
                t0 = time.perf_counter()
                knob_b = bisection(model, N, lam, eps, method)
                base.append(time.perf_counter() - t0)
                knob = cal.r if method == "diffused" else cal.m
                diffs.append(abs(knob - knob_b) / knob_b)
                safe &= cal.eps <= eps
                safe &= model.float_sup(N, lam, *knobs(method, knob_b)) <= eps
        o, b = statistics.median(ours), statistics.median(base)
        print(
            f"{name:<16}{statistics.median(flt) * 1e3:>9.3f}{o * 1e3:>13.3f}"
            f"{max(ours) * 1e3:>9.3f}{statistics.median(curve) * 1e3:>8.1f}{b * 1e3:>15.1f}"
            f"{b / o:>7.0f}{max(diffs):>14.1e}{'yes' if safe else 'NO':>11}"
        )
    glm = BayesianLogisticRegression()
    for method in ("diffused", "concentrated", "ops"):
        times = [per_call(calibrate, (glm, N, lam, eps, method), window) for lam, eps in SETTINGS]
        cal = calibrate(glm, N, 2.0, 0.1, method)
        rdp = per_call(cal.rdp, (DEFAULT_ORDERS,), window)
        print(
            f"logistic {method:<13} calibrate {statistics.median(times) * 1e3:.3f} ms, "
            f"rdp on {DEFAULT_ORDERS.size} orders {rdp * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
