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

Logistic regression (``--part logistic``, also run by the default ``--part all``): d = 20
features, n in {1e5, 1e6} (1e7 with ``--logistic-max-rows 1e7``), backend="exact", on a
LocalCluster of ``--workers`` processes (the data generated and persisted on the workers)
beside the same size in memory: seconds per pass over X (a Newton pass: gradient and
Hessian; the log-likelihoods of a batch of 256 proposals (Dask sends up to 32 batches per
graph); a Langevin gradient, one chain), the time to the first release (validation,
persist, Newton fit, proposals), the fit's share, warm releases per second, and the
client's peak RSS.

    python benchmarks/scale.py [--max-rows 1e7] [--dir DIR] [--workers 2]
                               [--part all|conjugate|logistic] [--logistic-max-rows 1e6]
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


# -- logistic regression (d = 20): passes over X on the workers vs in memory ----------------
LOGISTIC_SIZES = (10**5, 10**6, 10**7)
LOGISTIC_D = 20
LOGISTIC_ROWS = 262_144  # rows per chunk of the generated Dask array


def _logistic_model():
    import privbayes as pb

    return pb.BayesianLogisticRegression(beta=0.01, c=1.0, backend="exact")


def _time(fn, repeat: int = 3) -> float:
    """Best of ``repeat`` calls fn(i), each on fresh inputs (a Dask result of the same
    inputs could be reused by the scheduler)."""
    best = float("inf")
    for i in range(repeat):
        t0 = time.perf_counter()
        fn(i)
        best = min(best, time.perf_counter() - t0)
    return best


def _logistic_passes(prob, fam_data, rng) -> dict:
    """Seconds per pass: a Newton pass (gradient + Hessian), the log-likelihoods of a batch
    of 256 proposals, a Langevin gradient (one chain)."""
    from privbayes.glm.family import BINARY_LOGISTIC

    d = prob.d
    ws = [rng.normal(size=d) * 0.1 for _ in range(3)]
    vts = [rng.normal(size=(d, 256)) * 0.01 for _ in range(3)]
    z0, _, _ = prob.grad_hess(ws[0] * 0.5)
    sp0 = prob.base(z0)
    return {
        "newton_s": _time(lambda i: prob.grad_hess(ws[i])),
        "proposals_256_s": _time(lambda i: prob.loglik_diffs(z0, sp0, [vts[i]])),
        "langevin_s": _time(
            lambda i: BINARY_LOGISTIC.neg_grad_sums(fam_data, ws[i][:, None], None, 1)
        ),
    }


def child_logistic(kind: str, n: int, workers: int) -> dict:
    import numpy as np

    import privbayes as pb
    from privbayes.glm.passes import check_arrays, dask_rows
    from privbayes.sampling import exact

    model = _logistic_model()
    truth = np.linspace(-1.0, 1.0, LOGISTIC_D)
    rng = np.random.default_rng(0)
    out: dict = {"n": n, "kind": kind}
    if kind == "dask":
        import dask.array as da
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
            silence_logs=40,
        )  # fmt: skip
        client = Client(cluster)
        drng = da.random.default_rng(n)  # the data are made on the workers, never here
        x = drng.normal(size=(n, LOGISTIC_D), chunks=(LOGISTIC_ROWS, LOGISTIC_D))
        x = x / da.maximum(1.0, da.sqrt((x * x).sum(axis=1)) * 1.0001)[:, None] * 0.999
        y = (drng.random(n, chunks=LOGISTIC_ROWS) < 1.0 / (1.0 + da.exp(-(x @ truth)))) * 1.0
        x, y = client.persist([x, y])  # the source data, in the engine
        data = (x, y)
    else:
        x = rng.normal(size=(n, LOGISTIC_D))
        x /= (np.maximum(1.0, np.linalg.norm(x, axis=1) * 1.0001) / 0.999)[:, None]
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(x @ truth)))).astype(float)
        data = (x, y)
    t0 = time.perf_counter()
    rel = pb.sample(model, data, 2.0, 1.0, rng=1)
    out["first_release_s"] = time.perf_counter() - t0
    out["proposals"] = rel.diagnostics["public"]["proposals"]
    out["seconds_fit"] = rel.diagnostics["seconds_fit"]
    t0 = time.perf_counter()
    reps = 3
    for i in range(reps):
        pb.sample(model, data, 2.0, 1.0, rng=2 + i)
    out["releases_per_s"] = reps / (time.perf_counter() - t0)
    # the rows the release uses, validated as it validates them (privbayes.glm.passes)
    if kind == "dask":
        rows, _ = dask_rows(model, x, y)
        prob = exact.DaskProblem(rows, 1.0, n * model.beta)
        fam_data = rows
    else:
        rows = check_arrays(model, x, y)
        prob = exact.Problem(rows, np.where(y > 0, 1.0, -1.0), 1.0, n * model.beta)
        fam_data = prob.xy
    out.update(_logistic_passes(prob, fam_data, rng))
    out["client_peak_mb"] = _peak_mb()
    if kind == "dask":
        client.close()
        cluster.close()
    return out


def logistic(args) -> None:
    print(f"\nlogistic regression, d = {LOGISTIC_D}, backend='exact'; seconds per pass (best of 3)")
    header = (
        f"{'n':>9} {'engine':>6} | {'newton':>7} {'256 prop':>9} {'langevin':>8} | "
        f"{'first rel s':>11} {'fit s':>6} {'rel/s':>6} {'proposals':>9} {'client MB':>9}"
    )
    print(header)
    print("-" * len(header))
    for n in LOGISTIC_SIZES:
        if n > args.logistic_max_rows:
            break
        for kind in ("numpy", "dask"):
            r = _run_child("logistic", kind, str(n), str(args.workers))
            print(
                f"{n:9.0e} {kind:>6} | {r['newton_s']:7.3f} {r['proposals_256_s']:9.3f} "
                f"{r['langevin_s']:8.3f} | {r['first_release_s']:11.2f} {r['seconds_fit']:6.2f} "
                f"{r['releases_per_s']:6.2f} {r['proposals']:9d} {r['client_peak_mb']:9.0f}",
                flush=True,
            )


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
    p.add_argument(
        "--part", choices=("all", "conjugate", "logistic"), default="all", help="what to run"
    )
    p.add_argument(
        "--logistic-max-rows", type=float, default=1e6, help="largest logistic n (default 1e6)"
    )
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child and args.child[0] == "logistic":
        _, kind, n, workers = args.child
        print(json.dumps(child_logistic(kind, int(n), int(workers))))
        return
    if args.part == "logistic":
        logistic(args)
        return
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
    if args.part == "all":
        logistic(args)


if __name__ == "__main__":
    main()
