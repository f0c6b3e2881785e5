"""(eps, delta) calibration time, privbayes's order search vs brute force over every order.

The baseline is what a user would otherwise write: calibrate at (lam, E(lam)) for every
order of the grid (E the inverse of the improved conversion) and keep the largest knob.
Same process, same models; we print both times, their ratio and the knob ratio (1.0000:
the search found the brute-force optimum).

    .venv/bin/python benchmarks/dp_target.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import privbayes as pb
from privbayes.dp_target import ORDERS, inverse_conversion
from privbayes.errors import InfeasiblePrivacyError

TARGETS = [(1.0, 1e-6), (0.1, 1e-5), (5.0, 1e-9)]


def brute(model, n, eps, delta, method, step):
    targets = inverse_conversion(ORDERS, eps, delta)
    best = 0.0
    for lam, e in zip(ORDERS[::step], targets[::step], strict=True):
        if e > 0:
            try:
                cal = pb.calibrate(model, n, float(lam), float(e), method)
            except InfeasiblePrivacyError:
                continue
            best = max(best, cal.r * cal.m)
    return best


def timed(fn, repeat, *a, **kw):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*a, **kw)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeat, step = (1, 4) if args.quick else (3, 1)
    warnings.simplefilter("ignore")
    cases = [
        ("BetaBernoulli(1,1) diffused n=1e3", pb.BetaBernoulli(1, 1), 1000, "diffused"),
        ("BetaBernoulli(1,1) concentrated n=1e3", pb.BetaBernoulli(1, 1), 1000, "concentrated"),
        ("Dirichlet([1]*5) diffused n=1e4", pb.DirichletCategorical([1.0] * 5), 10**4, "diffused"),
        ("GammaPoisson(2,1,M=10) diffused n=1e3", pb.GammaPoisson(2, 1, max_count=10), 1000,
         "diffused"),
        ("Logistic beta=0.01 diffused n=1e4 (no d)", pb.BayesianLogisticRegression(0.01, 1.0),
         10**4, "diffused"),
    ]  # fmt: skip
    pb.calibrate(pb.BetaBernoulli(1, 1), 10, 2.0, 1.0)  # warm up imports
    print(f"{'case':42s} {'(eps, delta)':14s} {'search ms':>10s} {'brute ms':>10s} "
          f"{'speed-up':>9s} {'knob/brute':>10s} {'order':>7s}")  # fmt: skip
    for name, model, n, method in cases:
        for eps, delta in TARGETS:
            t_s, cal = timed(pb.calibrate, repeat, model, n, eps=eps, delta=delta, method=method)
            t_b, best = timed(brute, 1, model, n, eps, delta, method, step)
            print(f"{name:42s} ({eps:g}, {delta:g}){'':3s} {t_s * 1e3:10.1f} {t_b * 1e3:10.1f} "
                  f"{t_b / t_s:9.1f} {cal.r * cal.m / best:10.4f} {cal.lam:7.3g}")  # fmt: skip
    if args.quick:
        print(f"(quick: brute force over every {step}th order, one repeat)")


if __name__ == "__main__":
    main()
