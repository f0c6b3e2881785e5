"""Conjugate releases on data beyond memory (docs/data.md): Parquet data sets of 1e5 .. 1e8
rows, one release from a Dask DataFrame on a LocalCluster beside one from an in-memory
NumPy array.

The benchmark writes its own data (seeded; a "bit" column of 0/1 and a "code" column of
category codes 0..9, int8, in Parquet files of at most 1e7 rows with row groups of 1e6)
and times, for Beta-Bernoulli (on "bit") and Dirichlet-Categorical K = 10 (on "code"):

* dask: ``pb.sample(model, pb.data.read(glob), ..., column=...)`` with a Client on a
  LocalCluster of ``--workers`` processes (one thread each), one partition per row group
  (``split_row_groups=True``): wall time of a release (the
  read of the files is part of it: it happens in the engine), warm ("dask s") and the
  first one ("first s", which also pays the imports of pandas/pyarrow/privbayes on the
  client and the workers), the client process's peak RSS (it hosts the scheduler too)
  and the workers' largest peak RSS; "startup s" is the cluster's start;
* numpy: the column read into a NumPy array (pyarrow), then ``pb.sample`` on it: the
  read time, the (warm) release time and the process's peak RSS.

Each measurement runs in a fresh interpreter, so a peak RSS is that one release's.
Targets on a 2-core machine (issue 14): 1e8 rows in under 60 s with client peak RSS
under 1 GB, time linear in n. Not a test: timings depend on the machine and its load.

    python benchmarks/scale.py [--max-rows 1e7] [--dir DIR] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (10**5, 10**6, 10**7, 10**8)
FILE_ROWS = 10**7
GROUP_ROWS = 10**6
K = 10
MODELS = {"beta-bernoulli": "bit", "dirichlet-K10": "code"}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def write(folder: Path, n: int) -> float:
    """Write n rows (seeded) into folder/part-*.parquet; returns seconds (0 if present)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = folder / "_done"
    if done.exists():
        return 0.0
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng(n)
    for f, start in enumerate(range(0, n, FILE_ROWS)):
        rows = min(FILE_ROWS, n - start)
        schema = pa.schema([("bit", pa.int8()), ("code", pa.int8())])
        with pq.ParquetWriter(folder / f"part-{f:04d}.parquet", schema) as writer:
            for g in range(0, rows, GROUP_ROWS):
                m = min(GROUP_ROWS, rows - g)
                bit = (rng.random(m) < 0.3).astype(np.int8)
                code = rng.integers(0, K, m, dtype=np.int8)
                writer.write_table(pa.table({"bit": bit, "code": code}, schema=schema))
    done.touch()
    return time.perf_counter() - t0


def _model(name: str):
    import numpy as np

    import privbayes as pb

    if name == "beta-bernoulli":
        return pb.BetaBernoulli()
    return pb.DirichletCategorical(np.ones(K))


def child_dask(folder: Path, model_name: str, workers: int) -> dict:
    import resource as res

    from distributed import Client, LocalCluster

    import privbayes as pb

    t0 = time.perf_counter()
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=40,
    )
    client = Client(cluster)
    startup = time.perf_counter() - t0
    model = _model(model_name)
    times = []
    for _ in range(2):  # the first pays the imports (client and workers); then warm
        t0 = time.perf_counter()
        table = pb.data.read(
            str(folder / "*.parquet"), columns=[MODELS[model_name]], split_row_groups=True
        )
        rel = pb.sample(model, table, 2.0, 1.0, column=MODELS[model_name], rng=0)
        times.append(time.perf_counter() - t0)
    worker_peak = client.run(lambda: res.getrusage(res.RUSAGE_SELF).ru_maxrss / 1024.0)
    out = {
        "n": rel.n,
        "startup_s": startup,
        "first_s": times[0],
        "release_s": times[1],
        "client_peak_mb": _peak_mb(),
        "worker_peak_mb": max(worker_peak.values()),
    }
    client.close()
    cluster.close()
    return out


def child_numpy(folder: Path, model_name: str) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    import privbayes as pb

    model = _model(model_name)
    t0 = time.perf_counter()
    files = sorted(folder.glob("*.parquet"))
    col = MODELS[model_name]
    x = np.concatenate([pq.read_table(f, columns=[col]).column(0).to_numpy() for f in files])
    load = time.perf_counter() - t0
    pb.sample(model, x[:10], 2.0, 1.0, rng=0)  # imports and first-call costs, not timed
    t0 = time.perf_counter()
    rel = pb.sample(model, x, 2.0, 1.0, rng=0)
    release = time.perf_counter() - t0
    return {"n": rel.n, "load_s": load, "release_s": release, "peak_mb": _peak_mb()}


def _run_child(*argv: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [sys.executable, __file__, "--child", *argv], capture_output=True, text=True, env=env
    )
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-rows", type=float, default=1e7, help="largest n (default 1e7)")
    p.add_argument("--dir", default=None, help="where the Parquet data go (default: a tmp dir)")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    p.add_argument("--skip-numpy-above", type=float, default=1e8, help="no NumPy run above n")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        kind, folder, model = args.child[:3]
        if kind == "dask":
            out = child_dask(Path(folder), model, int(args.child[3]))
        else:
            out = child_numpy(Path(folder), model)
        print(json.dumps(out))
        return
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="privbayes-scale-"))
    print(f"data in {base}; {args.workers} Dask worker processes, 1 thread each")
    header = (
        f"{'model':15} {'n':>9} | {'dask s':>7} {'first s':>7} {'client MB':>9} "
        f"{'worker MB':>9} {'startup s':>9} | {'numpy load s':>12} {'release s':>9} "
        f"{'peak MB':>8}"
    )
    print(header)
    print("-" * len(header))
    for n in SIZES:
        if n > args.max_rows:
            break
        folder = base / f"rows-{n}"
        wrote = write(folder, n)
        if wrote:
            print(f"(wrote {n:.0e} rows in {wrote:.1f} s)")
        for model in MODELS:
            d = _run_child("dask", str(folder), model, str(args.workers))
            line = (
                f"{model:15} {n:9.0e} | {d['release_s']:7.2f} {d['first_s']:7.2f} "
                f"{d['client_peak_mb']:9.0f} {d['worker_peak_mb']:9.0f} "
                f"{d['startup_s']:9.2f} |"
            )
            if n <= args.skip_numpy_above:
                m = _run_child("numpy", str(folder), model)
                line += f" {m['load_s']:12.2f} {m['release_s']:9.3f} {m['peak_mb']:8.0f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
