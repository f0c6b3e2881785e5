"""Accounting benchmarks, each against a baseline run in the same process.

1. Subsampled-Gaussian RDP curves and a 10,000-step composition: privbayes vs Google's
   dp-accounting (install it with `pip install -e ".[bench]"`). Prints both times, their
   ratio, and the largest relative difference on integer orders (dp-accounting bounds
   fractional orders conservatively since 2024, so those differ).
2. Composing one release into the process-wide default accountant (exact sum, a lock)
   vs a bare numpy float addition of the same curve (what an unguarded accountant does).

    .venv/bin/python benchmarks/accounting.py
"""

from __future__ import annotations

import functools
import logging
import time

import numpy as np

from privbayes.accounting import (
    DEFAULT_ORDERS,
    RdpAccountant,
    SharedAccountant,
    gaussian_rdp,
    subsampled_gaussian_rdp,
)

PAIRS = [(q, s) for q in (0.001, 0.01, 0.05, 0.1, 0.3) for s in (0.8, 2.0)]
STEPS, DELTA = 10_000, 1e-6


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def versus_dp_accounting() -> None:
    try:
        import dp_accounting
        from dp_accounting.rdp import rdp_privacy_accountant as google
    except ImportError:
        print("dp-accounting is not installed (pip install -e '.[bench]'): part 1 skipped")
        return
    logging.getLogger("absl").setLevel(logging.ERROR)  # its per-order "failed to converge"
    orders = DEFAULT_ORDERS[np.isfinite(DEFAULT_ORDERS)]
    ints = np.isclose(orders, np.round(orders))
    print(
        f"{len(PAIRS)} (q, sigma) pairs on {orders.size} orders "
        f"({int(ints.sum())} integer), then eps after {STEPS:,} steps at delta={DELTA:g}"
    )

    ours, t_ours = timed(lambda: [subsampled_gaussian_rdp(orders, q, s) for q, s in PAIRS])
    theirs, t_theirs = timed(
        lambda: [google._compute_rdp_poisson_subsampled_gaussian(q, s, orders) for q, s in PAIRS]
    )
    rel = max(
        float(np.max(np.abs(a[ints] - b[ints]) / np.maximum(np.abs(b[ints]), 1e-300)))
        for a, b in zip(ours, theirs, strict=True)
    )
    print(
        f"curves:      privbayes {t_ours:8.3f} s   dp-accounting {t_theirs:8.3f} s   "
        f"ratio {t_theirs / t_ours:6.2f}x   max rel diff (integer orders) {rel:.2e}"
    )

    q, s = 0.01, 1.1

    def ours_eps():
        acc = RdpAccountant(orders)  # a partial is kept with its parameters, as an event
        acc.compose(functools.partial(subsampled_gaussian_rdp, q=q, sigma=s), STEPS)
        return acc.get_epsilon(DELTA, refine=False)

    def theirs_eps():
        acc = google.RdpAccountant(list(orders))
        event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s))
        acc.compose(event, STEPS)
        return acc.get_epsilon(DELTA)

    e1, t1 = timed(ours_eps)
    e2, t2 = timed(theirs_eps)
    print(
        f"composition: privbayes {t1:8.3f} s   dp-accounting {t2:8.3f} s   ratio {t2 / t1:6.2f}x"
        f"   eps {e1:.6f} vs {e2:.6f}"
    )


def default_accountant_compose(repeats: int = 2000) -> None:
    """Cost of one compose on the default grid: a privbayes release (what every release
    costs), a curve already evaluated (an array) and one evaluated by the accountant (a
    closed-form curve, as a function: frozen on the fine grid too), vs a bare float
    addition."""
    import privbayes as pb

    rel = pb.sample(pb.BetaBernoulli(), [0, 1, 1, 0], 2.0, 0.5, rng=0)
    acc = SharedAccountant()
    _, t_rel = timed(lambda: [acc.compose(rel) for _ in range(repeats)])
    curve = gaussian_rdp(DEFAULT_ORDERS, 10.0)
    acc = SharedAccountant()
    total = np.zeros(DEFAULT_ORDERS.shape)

    def bare():
        nonlocal total
        for _ in range(repeats):
            total = total + curve

    _, t_bare = timed(bare)
    _, t_array = timed(lambda: [acc.compose(curve) for _ in range(repeats)])
    acc = SharedAccountant()
    fn = lambda o: gaussian_rdp(o, 10.0)  # noqa: E731
    _, t_fn = timed(lambda: [acc.compose(fn) for _ in range(repeats)])
    _, t_eps = timed(lambda: [acc.get_epsilon(DELTA) for _ in range(20)])
    per = 1e6 / repeats
    print(
        f"default accountant, {DEFAULT_ORDERS.size} orders: compose a release "
        f"{t_rel * per:5.1f} us, an array {t_array * per:7.1f} us, a function "
        f"{t_fn * per:7.1f} us; bare float add "
        f"{t_bare * per:5.1f} us (ratio {t_array / t_bare:5.1f}x); get_epsilon (refined) "
        f"{t_eps / 20 * 1e3:6.1f} ms after {acc.releases:,} releases"
    )


def main() -> None:
    versus_dp_accounting()
    default_accountant_compose()


if __name__ == "__main__":
    main()
