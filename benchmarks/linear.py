"""Time an exact linear-regression release at n = 10^6, d = 20 (docs/linear_regression.md §8).

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/linear.py`` (BLAS threads spin on a busy
machine: docs/exact.md §9).
"""

from __future__ import annotations

import time

import numpy as np

import privbayes as pb


def main(n: int = 10**6, d: int = 20, repeats: int = 3) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    w = 0.3 * rng.normal(size=d)
    y = np.clip(x @ w + 0.5 * rng.normal(size=n), -3, 3)
    model = pb.BayesianLinearRegression(beta=1e-3, c=1.0, y_bound=3.0, noise_sd=0.5)
    pb.sample(model, (x, y), lam=2.0, eps=1.0)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        rel = pb.sample(model, (x, y), lam=2.0, eps=1.0)
        times.append(time.perf_counter() - start)
    public = rel.diagnostics["public"]
    print(
        f"n={n} d={d}: release {min(times):.3f} s (best of {repeats}; all {times}), backend "
        f"{rel.calibration.model.backend}, r={rel.calibration.r:.4g}, R={public['radius']:.4g}, "
        f"allowance {public['log_density_error']:.3g}, proposals {public['proposals']}"
    )


if __name__ == "__main__":
    main()
