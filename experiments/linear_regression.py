"""Bayesian linear regression against its peers at equal (eps, delta)-DP.

Neighbours: replace one record, n public, for every method (as in ``peers.py``). Rows
have ||x|| <= c = 1 and labels |y| <= y_bound after public, row-wise maps
(``_linreg/data.py``); nothing is clipped.

Part ``accuracy`` (UCI Abalone: rings; UCI Adult: hours-per-week; synthetic n = 20,000,
d = 5 with w from the prior): test MSE and R^2 of

* privbayes ``posterior(BayesianLinearRegression(...), (X, y), eps=, delta=)``: the
  noise-aware posterior's mean (one discrete Gaussian release of (X^T X, X^T y, y^T y));
* privbayes ``sample(..., eps=, delta=, method=)`` diffused / concentrated / OPS: one
  posterior draw (back-end ``auto``), on the public ball ||w|| <= y_bound / c (the study's
  rule) and on the library's default ball (``*-default``);
* AdaSSP (Wang 2018, Algorithm 2) and naive sufficient-statistics perturbation, with the
  exact Gaussian-DP calibration (``_linreg/ssp.py``);
* IBM diffprivlib's ``LinearRegression`` (functional mechanism, pure eps-DP) in its own
  environment (``make peers-env``), given the public bounds;
* references: least squares (OLS) and the exact non-private posterior mean at the same
  prior and noise_sd.

Part ``coverage`` (synthetic, w drawn from the prior for every data set): coverage and
width of the 90% interval of each coefficient for the noise-aware posterior, k posterior
draws at a k-fold share of the budget (diffused and concentrated; interval from the
draws' 5% and 95% quantiles), the naive plug-in posterior of the naive-SSP statistics and
the exact non-private posterior.

Run ``python experiments/linear_regression.py --help``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from _linreg import data, report, ssp  # noqa: E402
from _peers import bridge  # noqa: E402

import privbayes as pb  # noqa: E402
from privbayes.errors import (  # noqa: E402
    ConvergenceError,
    InfeasiblePrivacyError,
    SamplingError,
)

NAME = "linear_regression"
PARTS = ("accuracy", "coverage")
DATASETS = ("abalone", "adult", "synthetic")
PB_SAMPLERS = ("diffused", "concentrated", "ops")  # on the rule's ball R = y_bound / c
PB_DEFAULT = tuple(f"{m}-default" for m in PB_SAMPLERS)  # on the library's default ball
METHODS = ("noise-aware",) + PB_SAMPLERS + PB_DEFAULT + ("adassp", "naive-ssp", "diffprivlib")
REFS = ("ols", "bayes")
COVERAGE_METHODS = ("noise-aware", "diffused", "concentrated", "naive-plugin", "non-private")
PROB = 0.9
QUICK = dict(
    datasets=["abalone", "synthetic"],
    eps_grid=[0.3, 3.0],
    trials=2,
    synthetic_n=2000,
    coverage_n=2000,
    coverage_trials=8,
    coverage_chunk=4,
    ks=[10],
    max_train=1500,
    max_test=500,
)
ACC_COLUMNS = (
    "dataset method backend guarantee n d eps delta trial mse r2 eps_dp knob detail seconds status"
).split()
COV_COLUMNS = "method k eps delta trial coef truth lo hi covered width eps_dp status".split()


def _list(text: str) -> list[str]:
    return [] if text.strip() in ("", "none") else [v.strip() for v in text.split(",")]


def parse_args(argv: list[str] | None = None):
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--parts", type=_list, default=list(PARTS), help="accuracy,coverage")
    p.add_argument("--datasets", type=_list, default=list(DATASETS))
    p.add_argument("--methods", type=_list, default=list(METHODS), help="private methods")
    p.add_argument("--eps-grid", type=C.floats, default=[0.1, 0.3, 1.0, 3.0, 10.0])
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--trials", type=int, default=20, help="paired splits / data sets")
    p.add_argument(
        "--noise-scale",
        type=float,
        default=0.25,
        help="real data: public noise_sd = this x y_bound",
    )
    p.add_argument(
        "--prior-scale",
        type=float,
        default=1.0,
        help="real data: prior E||w||^2 = (this x y_bound / c)^2, i.e. beta = c^2 d/(n (s y_b)^2)",
    )
    p.add_argument(
        "--radius-scale",
        type=float,
        default=1.0,
        help="posterior sampling on the ball ||w|| <= this x y_bound / c ('-default' methods: "
        "the library's default radius)",
    )
    p.add_argument("--synthetic-n", type=int, default=20000)
    p.add_argument("--synthetic-d", type=int, default=5)
    p.add_argument("--synthetic-noise-sd", type=float, default=0.5)
    p.add_argument("--synthetic-test", type=int, default=5000)
    p.add_argument("--coverage-n", type=int, default=20000)
    p.add_argument("--coverage-trials", type=int, default=400, help="data sets per eps")
    p.add_argument("--coverage-chunk", type=int, default=25, help="data sets per task")
    p.add_argument("--ks", type=C.ints, default=[10, 100], help="draws per interval (samplers)")
    p.add_argument(
        "--coverage-ball",
        choices=("default", "rule"),
        default="default",
        help="ball of the samplers' coverage draws: the library's default radius (exact "
        "back-end, ~0.1 s per data set) or R = y_bound/c (Langevin: 4-37 s per data set)",
    )
    p.add_argument("--abalone-test", type=float, default=0.3)
    p.add_argument("--max-train", type=int, default=0, help="subsample real train sets")
    p.add_argument("--max-test", type=int, default=0)
    p.add_argument("--dpl-python", default=None, help="interpreter with diffprivlib")
    p.add_argument("--report-only", action="store_true", help="redraw from the saved CSVs")
    args = C.parse_quick(p, argv, QUICK)
    for opt, given, allowed in (
        ("--parts", args.parts, PARTS),
        ("--datasets", args.datasets, DATASETS),
        ("--methods", args.methods, METHODS),
    ):
        bad = set(given) - set(allowed)
        if bad:
            p.error(f"{opt}: unknown {sorted(bad)}; choose from {list(allowed)}")
    if not 0 < args.delta < 1:
        p.error("--delta must lie in (0, 1)")
    if args.trials < 1 or args.coverage_trials < 1:
        p.error("--trials and --coverage-trials must be >= 1")
    return args


def _stream(seed: int, index: int, *key) -> np.random.Generator:
    """An independent generator per (task, mechanism, setting)."""
    tag = zlib.crc32(repr(key).encode())
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index, tag)))


# -- public rules -----------------------------------------------------------------------------


def synthetic_bounds(d: int) -> float:
    """y_bound of the synthetic design: sqrt(d) + 3 (|w.x| <= ||w|| rarely exceeds it)."""
    return float(np.sqrt(d) + 3.0)


def public_model(design: data.Design, n: int, d: int, args) -> tuple[float, float]:
    """(beta, noise_sd) from public inputs only.

    Synthetic: the generating prior (beta = 1/n: prior sd 1 per coefficient) and noise.
    Real data: noise_sd = noise_scale * y_bound; beta = c^2 d / (n (prior_scale y_bound)^2),
    so that E||w||^2 = d/(n beta) = (prior_scale y_bound / c)^2: the prior believes a
    prediction w.x stays within about prior_scale * y_bound for rows of norm c.
    """
    if design.name == "synthetic":
        return 1.0 / n, args.synthetic_noise_sd
    s = args.prior_scale * design.y_bound
    return design.c**2 * d / (n * s * s), args.noise_scale * design.y_bound


def public_radius(design: data.Design, args) -> float:
    """R = radius_scale * y_bound / c: the ball of the w with |w.x| <= y_bound on every row
    of norm <= c (radius_scale = 1), the belief the real-data prior states too."""
    return args.radius_scale * design.y_bound / design.c


def feature_box(design: data.Design) -> list[float]:
    """Public per-feature bounds |x_j| <= b_j for diffprivlib (symmetric: see README)."""
    if design.name == "abalone":
        return [1.0 / 3.0] * design.xtr.shape[1]
    if design.name == "adult":
        return [1.0 / np.sqrt(11.0)] * design.xtr.shape[1]
    return [design.c] * design.xtr.shape[1]


# -- part 1: accuracy --------------------------------------------------------------------


def _design(name: str, trial: int, args, rng) -> data.Design:
    if name == "synthetic":
        n, d = args.synthetic_n, args.synthetic_d
        return data.synthetic(
            rng, n, d, 1.0, args.synthetic_noise_sd, synthetic_bounds(d), args.synthetic_test
        )
    return data.real_split(
        name, rng, args.abalone_test, args.max_train, args.max_test, args.data_dir
    )


def scores(w: np.ndarray, design: data.Design) -> tuple[float, float]:
    """(test MSE, test R^2 = 1 - MSE / Var(y_test))."""
    w = np.asarray(w, dtype=float)
    if not np.all(np.isfinite(w)):
        return np.nan, np.nan
    mse = float(np.mean((design.yte - design.xte @ w) ** 2))
    return mse, 1.0 - mse / float(np.var(design.yte))


def accuracy_task(index: int, name: str, trial: int, args, dpl_python: str | None) -> list[dict]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _accuracy_task(index, name, trial, args, dpl_python)


def _accuracy_task(index, name, trial, args, dpl_python) -> list[dict]:
    design = _design(name, trial, args, C.task_rng(args.seed, index))
    x, y = design.xtr, design.ytr
    n, d = x.shape
    c, yb, delta = design.c, design.y_bound, args.delta
    beta, noise_sd = public_model(design, n, d, args)
    base = {"dataset": name, "n": n, "d": d, "trial": trial, "delta": delta, "eps": ""}
    base |= {"backend": "", "guarantee": "", "eps_dp": "", "knob": "", "detail": ""}
    base |= {"status": "ok"}
    rows = []

    def add(method, w, seconds, **extra):
        mse, r2 = scores(w, design)
        rows.append(base | {"method": method, "mse": mse, "r2": r2, "seconds": seconds} | extra)

    t = time.perf_counter()
    add("ols", ssp.ols(x, y), time.perf_counter() - t)
    t = time.perf_counter()
    mean, _ = ssp.conjugate_posterior(x, y, n * beta, noise_sd)
    add("bayes", mean, time.perf_counter() - t, detail=f"beta={beta:.4g} noise_sd={noise_sd:.4g}")

    model = pb.BayesianLinearRegression(beta, c, yb, noise_sd)  # the default radius
    ball = pb.BayesianLinearRegression(beta, c, yb, noise_sd, radius=public_radius(design, args))
    for eps in args.eps_grid:
        at = {"eps": eps}
        if "noise-aware" in args.methods:
            t = time.perf_counter()
            rng = _stream(args.seed, index, "noise-aware", eps)
            try:
                post = pb.posterior(model, (x, y), eps=eps, delta=delta, rng=rng)
            except (SamplingError, ConvergenceError) as exc:
                add("noise-aware", np.full(d, np.nan), time.perf_counter() - t, **at,
                    status="sampling-error", detail=str(exc)[:120])  # fmt: skip
            else:
                add(
                    "noise-aware", post.mean(), time.perf_counter() - t, **at,
                    guarantee=post.guarantee, eps_dp=post.dp_eps, backend="",
                    knob=post.noise["sigma2"], detail=f"ess={post.diagnostics.get('ess', 0):.0f}",
                )  # fmt: skip
        for method in PB_SAMPLERS + PB_DEFAULT:
            if method not in args.methods:
                continue
            t = time.perf_counter()
            rng = _stream(args.seed, index, "privbayes", method, eps)
            kind = method.removesuffix("-default")
            mod = model if method.endswith("-default") else ball
            try:
                rel = pb.sample(mod, (x, y), eps=eps, delta=delta, method=kind, rng=rng)
            except InfeasiblePrivacyError as exc:
                add(method, np.full(d, np.nan), time.perf_counter() - t, **at,
                    status="infeasible", detail=str(exc)[:120])  # fmt: skip
            except (SamplingError, ConvergenceError) as exc:
                add(method, np.full(d, np.nan), time.perf_counter() - t, **at,
                    status="sampling-error", detail=str(exc)[:120])  # fmt: skip
            except (TypeError, ValueError, NotImplementedError) as exc:
                add(method, np.full(d, np.nan), time.perf_counter() - t, **at,
                    status="unsupported", detail=str(exc)[:120])  # fmt: skip
            else:
                knob = rel.m if kind == "concentrated" else rel.r
                add(
                    method, np.asarray(rel.value), time.perf_counter() - t, **at,
                    guarantee=rel.guarantee, eps_dp=rel.dp_eps, knob=knob,
                    backend=(rel.diagnostics or {}).get("backend", ""),
                    detail=f"R={mod.resolve_beta(n, d).radius:.4g}",
                )  # fmt: skip
        if "adassp" in args.methods:
            t = time.perf_counter()
            w, rel = ssp.adassp(x, y, eps, delta, c, yb, _stream(args.seed, index, "adassp", eps))
            detail = f"sigma_xx={rel.sigmas['xx']:.4g}"
            add("adassp", w, time.perf_counter() - t, **at, guarantee="exact",
                eps_dp=rel.eps_dp, knob=rel.ridge, detail=detail)  # fmt: skip
        if "naive-ssp" in args.methods:
            t = time.perf_counter()
            rng = _stream(args.seed, index, "naive-ssp", eps)
            w, rel = ssp.naive_ssp(x, y, eps, delta, c, yb, rng)
            add("naive-ssp", w, time.perf_counter() - t, **at, guarantee="exact",
                eps_dp=rel.eps_dp, knob=rel.sigmas["xx"])  # fmt: skip
    if "diffprivlib" in args.methods and dpl_python:
        jobs = []
        for eps in args.eps_grid:
            seed = int(_stream(args.seed, index, "diffprivlib", eps).integers(2**31 - 1))
            jobs.append({"id": repr(eps), "kind": "linreg", "eps": eps, "seed": seed})
            jobs[-1] |= {"bounds_x": feature_box(design), "y_bound": yb}
        t = time.perf_counter()
        out = bridge.run(dpl_python, jobs, {"x": x, "y": y})
        per = (time.perf_counter() - t) / len(jobs)
        for eps in args.eps_grid:
            res = out[repr(eps)]
            add("diffprivlib", np.asarray(res["w"]), per, eps=eps, guarantee="approximate",
                eps_dp=eps, detail=" ".join(res["warnings"]))  # fmt: skip
    return rows


# -- part 2: coverage ---------------------------------------------------------------------


def _interval_rows(method, k, eps, delta, trial, truth, lo, hi, eps_dp, status="ok"):
    for j in range(truth.size):
        ok = status == "ok"
        yield {
            "method": method, "k": k, "eps": eps, "delta": delta, "trial": trial, "coef": j,
            "truth": float(truth[j]), "lo": float(lo[j]) if ok else np.nan,
            "hi": float(hi[j]) if ok else np.nan,
            "covered": int(lo[j] <= truth[j] <= hi[j]) if ok else "",
            "width": float(hi[j] - lo[j]) if ok else np.nan, "eps_dp": eps_dp, "status": status,
        }  # fmt: skip


def coverage_task(index: int, eps: float, first: int, count: int, args) -> list[dict]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _coverage_task(index, eps, first, count, args)


def _coverage_task(index, eps, first, count, args) -> list[dict]:
    n, d, delta = args.coverage_n, args.synthetic_d, args.delta
    yb, noise_sd = synthetic_bounds(d), args.synthetic_noise_sd
    beta = 1.0 / n
    model = pb.BayesianLinearRegression(beta, 1.0, yb, noise_sd)
    # the samplers' ball: the library's default, or the rule's R = y_bound / c
    # (P(||w|| > R) = P(chi2_5 > 27.4) ~ 5e-5 under the prior at d = 5: truncation barely
    # changes the posterior)
    radius = None if args.coverage_ball == "default" else args.radius_scale * yb
    ball = pb.BayesianLinearRegression(beta, 1.0, yb, noise_sd, radius=radius)
    rows = []
    q = [(1 - PROB) / 2, (1 + PROB) / 2]
    for trial in range(first, first + count):
        rng = _stream(args.seed, index, "data", trial)
        design = data.synthetic(rng, n, d, 1.0 / np.sqrt(n * beta), noise_sd, yb)
        x, y, w = design.xtr, design.ytr, design.w
        mean, cov = ssp.conjugate_posterior(x, y, n * beta, noise_sd)
        rows += _interval_rows("non-private", "", eps, delta, trial, w,
                               *ssp.normal_interval(mean, cov, PROB), "")  # fmt: skip
        if "naive-ssp" in args.methods:
            _, rel = ssp.naive_ssp(x, y, eps, delta, 1.0, yb, _stream(args.seed, index, "n", trial))
            mean, cov = ssp.plugin_posterior(rel, n * beta, noise_sd)
            rows += _interval_rows("naive-plugin", "", eps, delta, trial, w,
                                   *ssp.normal_interval(mean, cov, PROB), rel.eps_dp)  # fmt: skip
        if "noise-aware" in args.methods:
            rs = _stream(args.seed, index, "noise-aware", trial)
            try:
                post = pb.posterior(model, (x, y), eps=eps, delta=delta, rng=rs)
                lo, hi = post.interval(PROB)
                rows += _interval_rows("noise-aware", "", eps, delta, trial, w, lo, hi,
                                       post.dp_eps)  # fmt: skip
            except (SamplingError, ConvergenceError):
                rows += _interval_rows("noise-aware", "", eps, delta, trial, w, w, w, "",
                                       "sampling-error")  # fmt: skip
        for method in ("diffused", "concentrated"):
            if method not in args.methods:
                continue
            for k in args.ks:
                rs = _stream(args.seed, index, method, k, trial)
                try:
                    rel = pb.sample(ball, (x, y), eps=eps, delta=delta, method=method,
                                    size=k, rng=rs)  # fmt: skip
                except (SamplingError, ConvergenceError, ValueError) as exc:
                    status = "unsupported" if isinstance(exc, ValueError) else "sampling-error"
                    rows += _interval_rows(method, k, eps, delta, trial, w, w, w, "", status)
                    continue
                lo, hi = np.quantile(np.asarray(rel.value), q, axis=0)
                rows += _interval_rows(method, k, eps, delta, trial, w, lo, hi, rel.dp_eps)
    return rows


# -- driver ----------------------------------------------------------------------------------


def _read(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


_SETTINGS = (
    "datasets methods eps_grid delta trials noise_scale prior_scale radius_scale synthetic_n "
    "synthetic_d coverage_ball "
    "synthetic_noise_sd synthetic_test coverage_n coverage_trials ks abalone_test max_train "
    "max_test seed quick"
).split()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    progress = not args.no_progress
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / f"{NAME}_run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    run = [] if args.report_only else list(args.parts)
    if run:
        meta["args"] = {k: getattr(args, k) for k in _SETTINGS}
    python = None
    if "accuracy" in run and "diffprivlib" in args.methods:
        python, meta["diffprivlib"] = bridge.find_python(args.dpl_python)
        if python is None:
            print("diffprivlib unavailable: its rows are skipped (see `make peers-env`)")
    import arviz  # noqa: F401  (imported once before the workers fork)

    if "accuracy" in run:
        timer = C.Timer()
        tasks = [
            (100_000 * (1 + DATASETS.index(name)) + t, name, t, args, python)
            for name in args.datasets
            for t in range(args.trials)
        ]
        results = C.run_tasks(accuracy_task, tasks, args.jobs, f"{NAME} accuracy", progress)
        rows = [r for rs in results for r in rs]
        C.write_csv(out / f"{NAME}.csv", ACC_COLUMNS, ([r[k] for k in ACC_COLUMNS] for r in rows))
        meta["accuracy"] = {"wall_time": str(timer), "jobs": args.jobs}
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    if "coverage" in run:
        timer = C.Timer()
        tasks = [
            (500_000 + 1000 * j + first // args.coverage_chunk, eps, first,
             min(args.coverage_chunk, args.coverage_trials - first), args)
            for j, eps in enumerate(args.eps_grid)
            for first in range(0, args.coverage_trials, args.coverage_chunk)
        ]  # fmt: skip
        results = C.run_tasks(coverage_task, tasks, args.jobs, f"{NAME} coverage", progress)
        rows = [r for rs in results for r in rs]
        C.write_csv(
            out / f"{NAME}_coverage.csv", COV_COLUMNS, ([r[k] for k in COV_COLUMNS] for r in rows)
        )
        meta["coverage"] = {"wall_time": str(timer), "jobs": args.jobs}
    if run:
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")

    acc = _read(out / f"{NAME}.csv") if (out / f"{NAME}.csv").exists() else []
    cov = _read(out / f"{NAME}_coverage.csv") if (out / f"{NAME}_coverage.csv").exists() else []
    settings = argparse.Namespace(**meta["args"])
    figures = report.figures(settings, acc, cov, out)
    body = report.section(settings, acc, cov, figures, meta)
    C.replace_report_section(out / "REPORT.md", NAME, body)
    print(f"{NAME}: {len(acc)} accuracy rows, {len(cov)} interval rows, REPORT.md in {out}")


if __name__ == "__main__":
    main()
