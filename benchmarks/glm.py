"""GLM release cost with the PyMC NUTS back-end on an Adult-sized synthetic problem.

One NUTS run per release (reruns=0, as in the reference run). Prints the compile time
(once), the time of a first certified release (model build and compile included) and of
a second one on the same data (no rebuild), peak memory, R-hat and ESS. Reference
measured before this back-end existed, on the same 2-core machine: one 2-chain NUTS run
(300 tune + 50 draws) took about 50 s.

    .venv/bin/python benchmarks/glm.py [--n 45000] [--d 100] [--tune 300] [--draws 50]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import privbayes as pb
from privbayes.sampling import pymc_backend


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=45_000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--tune", type=int, default=300)
    p.add_argument("--draws", type=int, default=50)
    p.add_argument("--chains", type=int, default=2)
    args = p.parse_args()

    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(args.n, args.d)) / np.sqrt(args.d), 1.0)
    w_true = rng.normal(size=args.d)
    y = (rng.random(args.n) < 1 / (1 + np.exp(-X @ w_true))).astype(float)
    model = pb.BayesianLogisticRegression(
        beta=1e-3, c=1.0, tune=args.tune, draws=args.draws, chains=args.chains, reruns=0
    )
    print(f"n={args.n:,} d={args.d} chains={args.chains} tune={args.tune} draws={args.draws}")

    t0 = time.perf_counter()
    pymc_backend._compiled(args.d, model.target_accept)
    compile_s = time.perf_counter() - t0
    print(f"model build + compile (once per d): {compile_s:.1f} s")

    times = []
    for i in range(2):
        t0 = time.perf_counter()
        rel = pb.sample(model, (X, y), 2.0, 1.0, rng=i, on_bad_diagnostics="warn")
        times.append(time.perf_counter() - t0)
        dg = rel.diagnostics
        print(
            f"release {i + 1}: {times[-1]:.1f} s  R-hat max {dg['rhat_max']:.4f}  "
            f"ESS bulk min {dg['ess_bulk_min']:.0f}  tail min {dg['ess_tail_min']:.0f}  "
            f"divergences {dg['divergences']}  attempts {dg['attempts']}"
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"first release incl. compile: {compile_s + times[0]:.1f} s; second: {times[1]:.1f} s "
        f"(reference before: ~50 s per 2-chain 300+50 run)"
    )
    print(f"releases per second: {1 / times[1]:.4f}; peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
