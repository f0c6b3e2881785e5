"""Noise-aware posteriors: speed against baselines measured in the same process.

* draws: 10^6 Beta-Bernoulli posterior draws from ``post.sample`` (the mixture given a
  noisy count, n = 1,000, eps(2) = 1) against numpy's ``rng.beta`` for 10^6 draws of one
  Beta law (the floor of any Beta sampler), and the mixture's 90% interval;
* scale: ``pb.posterior`` against ``pb.sample`` (the diffused release, what a release costs
  today) on the same Parquet table of ``--rows`` rows read lazily by Dask on a
  LocalCluster of ``--workers`` processes (benchmarks/scale.py's data: a 0/1 column "bit"
  and a category code "code" in 0..9), warm, alternating, median of ``--repeat``; for
  Beta-Bernoulli (on "bit") and Dirichlet-Categorical K = 10 (on "code": the posterior
  then also runs its Gibbs sampler, whose time is reported apart).

Targets (issue 20): 10^6 draws in under 1 s; pb.posterior on 10^8 Dask rows as fast as
sample (the statistic is the same one pass). Not a test: timings depend on the machine.

    python benchmarks/noise_aware.py [--rows 1e8] [--workers 2] [--dir DIR] [--part all]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def draws() -> None:
    import numpy as np

    import privbayes as pb

    rng = np.random.default_rng(0)
    x = (rng.random(1000) < 0.3).astype(float)
    post = pb.posterior(pb.BetaBernoulli(), x, 2.0, 1.0, rng=1)
    post.sample(1000, rng=2)  # warm
    base, ours, interval = [], [], []
    for i in range(5):
        g = np.random.default_rng(i)
        t0 = time.perf_counter()
        g.beta(301.0, 701.0, 10**6)
        base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        post.sample(10**6, rng=g)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        post.interval(0.9)
        interval.append(time.perf_counter() - t0)
    b, o = statistics.median(base), statistics.median(ours)
    print(
        f"10^6 posterior draws: {o:.3f} s (numpy rng.beta, one Beta law: {b:.3f} s; ratio "
        f"{o / b:.2f}); mixture of {post.components} Betas; its 90% interval "
        f"{statistics.median(interval) * 1e3:.1f} ms"
    )


def scale(rows: int, workers: int, folder: Path, repeat: int) -> None:
    import numpy as np
    from distributed import Client, LocalCluster
    from scale import write

    import privbayes as pb

    written = write(folder, rows)
    if written:
        print(f"wrote {rows:.0e} rows in {written:.1f} s")
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
        silence_logs=40,
    )  # fmt: skip
    client = Client(cluster)
    glob = str(folder / "*.parquet")
    for name, model, column in (
        ("beta-bernoulli", pb.BetaBernoulli(), "bit"),
        ("dirichlet K=10", pb.DirichletCategorical(np.ones(10)), "code"),
    ):
        times = {"sample": [], "posterior": [], "gibbs": []}
        for _ in range(repeat + 1):  # the first of each pays the imports: dropped
            for what in ("sample", "posterior"):
                table = pb.data.read(glob, columns=[column], split_row_groups=True)
                t0 = time.perf_counter()
                if what == "sample":
                    pb.sample(model, table, 2.0, 1.0, column=column)
                    times[what].append(time.perf_counter() - t0)
                else:
                    post = pb.posterior(model, table, 2.0, 1.0, column=column)
                    total = time.perf_counter() - t0
                    gibbs = 0.0
                    if post.diagnostics is not None:  # the reference run inside posterior
                        t1 = time.perf_counter()
                        pb.posterior.family_of(model, post.n, post.statistic,
                                               post.noise["sigma2"])  # fmt: skip
                        gibbs = time.perf_counter() - t1
                    times["posterior"].append(total)
                    times["gibbs"].append(gibbs)
        s = statistics.median(times["sample"][1:])
        p = statistics.median(times["posterior"][1:])
        g = statistics.median(times["gibbs"][1:])
        extra = f" (of which its Gibbs sampler ~{g:.2f} s)" if g else ""
        print(
            f"{name}, {rows:.0e} Dask rows ({workers} workers): sample {s:.2f} s, posterior "
            f"{p:.2f} s{extra}; ratio {p / s:.2f}"
        )
    client.close()
    cluster.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=float, default=1e7, help="rows of the Dask table (1e8: issue)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default=None, help="where the Parquet data go (default: a tmp dir)")
    p.add_argument("--part", choices=("all", "draws", "scale"), default="all")
    args = p.parse_args()
    if args.part in ("all", "draws"):
        draws()
    if args.part in ("all", "scale"):
        rows = int(args.rows)
        if args.dir is None:
            with tempfile.TemporaryDirectory() as tmp:
                scale(rows, args.workers, Path(tmp) / f"rows{rows}", args.repeat)
        else:
            scale(rows, args.workers, Path(args.dir) / f"rows{rows}", args.repeat)


if __name__ == "__main__":
    main()
