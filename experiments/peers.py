"""privbayes against the mechanisms users would pick instead, at equal (eps, delta)-DP.

Neighbours: replace-one with n public, for every method (privbayes' relation; the peers'
theorems are stated for it, or converted: see experiments/README.md, "Peers"). Every
privbayes release is calibrated from its RDP curve with the library's accountant to the
(eps, delta) target and verified on the release actually made.

Part ``logistic`` (Abalone, Adult, MNIST 3-vs-8 with the features and splits of
``logistic_regression.py``; test accuracy):

* privbayes diffused / concentrated / OPS per back-end (``--backends``), prior precision,
  OPS radius and every peer's hyper-parameters from public rules (``_peers/rules.py``);
* DP gradient descent (full batch, Gaussian noise, clipping at c; RDP accountant);
* objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Alg. 2);
* IBM diffprivlib's LogisticRegression (rule C and its default C = 1), in its own venv;
* references: the non-private MAP at the same prior, the majority class.

Part ``counts`` (Adult: income > 50K and race; error |theta - truth|, total variation for
race): privbayes diffused / concentrated (exact conjugate draws) vs the Laplace and
analytic Gaussian mechanisms on counts, the noisy-statistics posterior and diffprivlib's
``tools.mean`` / ``tools.histogram``.

Run ``python experiments/peers.py --help``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
import warnings
import zlib
from functools import cache, partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import logistic_regression as LR  # noqa: E402
from _peers import bridge, counts, dpgd, objpert, report, rules, targets  # noqa: E402
from _peers.labels import (  # noqa: E402
    COUNT_GUARANTEE,
    COUNT_METHODS,
    PB_METHODS,
    PEER_GUARANTEE,
    PEERS,
    guarantee,
)

import privbayes as pb  # noqa: E402
from privbayes import datasets, mechanisms  # noqa: E402
from privbayes.accounting import gaussian_rdp  # noqa: E402
from privbayes.errors import ConvergenceError, SamplingError  # noqa: E402
from privbayes.sampling.conjugate import sample_dirichlet_log, simplex_from_log  # noqa: E402
from privbayes.sampling.exact import DELTA_F as EXACT_DELTA_F  # noqa: E402

NAME = "peers"
PARTS = ("logistic", "counts")
COLUMNS_OF_ADULT = ("income", "race")  # income: the 0/1 column income > 50K
QUICK = dict(
    datasets=["abalone"],
    eps_grid=[0.3, 3.0],
    trials=2,
    count_ns=[100],
    count_trials=40,
    max_train=1500,
    max_test=500,
)
LOGISTIC_COLUMNS = (
    "dataset method backend guarantee n d eps delta trial accuracy knob lam eps_rdp eps_dp "
    "seconds status detail"
).split()
COUNT_COLUMNS = (
    "column n method guarantee eps delta trial truth error error_pop knob lam eps_dp".split()
)


def _list(text: str) -> list[str]:
    return [] if text.strip() in ("", "none") else [v.strip() for v in text.split(",")]


def parse_args(argv: list[str] | None = None):
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--parts", type=_list, default=list(PARTS), help="logistic,counts")
    p.add_argument("--datasets", type=_list, default=list(LR.DATASETS))
    p.add_argument("--eps-grid", type=C.floats, default=[0.1, 0.3, 1.0, 3.0, 10.0])
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--trials", type=int, default=20, help="splits / seeds per data set")
    p.add_argument("--backends", type=_list, default=["imh"], help="privbayes GLM back-ends")
    p.add_argument("--methods", type=_list, default=list(PB_METHODS), help="privbayes methods")
    p.add_argument("--peers", type=_list, default=list(PEERS), help="peer mechanisms or none")
    p.add_argument("--margin-scale", type=float, default=rules.MARGIN_SCALE, help="M of the rules")
    p.add_argument("--c", type=float, default=1.0, help="public bound on ||x||_2")
    p.add_argument("--dpgd-max-steps", type=int, default=rules.DPGD_MAX_STEPS)
    p.add_argument("--dpl-python", default=None, help="interpreter with diffprivlib")
    p.add_argument("--count-columns", type=_list, default=list(COLUMNS_OF_ADULT))
    p.add_argument("--count-ns", type=C.ints, default=[100, 1000, 10000])
    p.add_argument("--count-trials", type=int, default=200)
    p.add_argument("--abalone-threshold", type=int, default=9)
    p.add_argument("--abalone-test", type=float, default=0.3)
    p.add_argument("--mnist-digits", type=C.ints, default=[3, 8])
    p.add_argument("--mnist-pool", type=int, default=2)
    p.add_argument("--max-train", type=int, default=0, help="subsample train sets (0 = all)")
    p.add_argument("--max-test", type=int, default=0, help="subsample test sets (0 = all)")
    p.add_argument(
        "--model-option", action="append", default=[], metavar="KEY=VALUE",
        help="extra BayesianLogisticRegression keyword (sampler settings), repeatable",
    )  # fmt: skip
    p.add_argument("--on-bad", choices=("raise", "warn"), default="raise", help="MCMC checks")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the last run's logistic rows of other (method, back-end) pairs (e.g. to "
        "add back-ends: --parts logistic --backends exact --peers none --merge)",
    )
    p.add_argument("--report-only", action="store_true", help="redraw from the saved CSVs")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    for opt, given, allowed in (
        ("--parts", args.parts, PARTS),
        ("--datasets", args.datasets, LR.DATASETS),
        ("--methods", args.methods, PB_METHODS),
        ("--peers", args.peers, PEERS),
        ("--count-columns", args.count_columns, COLUMNS_OF_ADULT),
    ):
        bad = set(given) - set(allowed)
        if bad:
            p.error(f"{opt}: unknown {sorted(bad)}; choose from {list(allowed)}")
    if not 0 < args.delta < 1:
        p.error("--delta must lie in (0, 1)")
    return args


def _stream(seed: int, index: int, *key) -> np.random.Generator:
    """An independent generator per (task, mechanism, setting): adding a method or a
    back-end changes no other row."""
    tag = zlib.crc32(repr(key).encode())
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index, tag)))


def _seed_int(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


# -- calibration to (eps, delta) (public inputs only; cached per process) -------------------


@cache
def privbayes_target(model, n: int, eps: float, delta: float, method: str) -> dict:
    """Largest knob of ``method`` whose certified curve converts to (eps, delta)-DP.

    Returns {"knob", "eps_dp", "lam", "eps_rdp"}: the release is asked for (lam, eps_rdp),
    where eps_rdp is the certified curve at the conversion's optimal order.
    """
    knob_name = "r" if method == "ops" else mechanisms.KNOB[method]

    def curve_of(v: float):
        r, m = (v, 1.0) if knob_name == "r" else (1.0, v)
        # a partial of the model's rdp: the accountant keeps it exact at every order
        return partial(model.rdp, n, r=r, m=m, method=method)

    knob, eps_dp, lam = targets.max_knob(curve_of, eps, delta)
    eps_rdp = float(curve_of(knob)(np.array([lam]))[0])
    if knob == 1.0 and model.backend == "langevin" and method != "ops":
        # r = m = 1 with budget to spare: Langevin's curve is rho-zCDP (linear in lam), so
        # ask for the largest rho the target allows; the utility schedule then runs longer
        # at r = m = 1 (docs/langevin.md §6). The release is re-converted as every other.
        rho, eps_dp, lam = targets.max_rho(eps, delta)
        eps_rdp = rho * lam
    return {"knob": knob, "eps_dp": eps_dp, "lam": lam, "eps_rdp": eps_rdp}


@cache
def rho_target(eps: float, delta: float) -> float:
    return targets.max_rho(eps, delta)[0]


@cache
def gaussian_sigma(eps: float, delta: float, sensitivity: float) -> float:
    return targets.analytic_gaussian_sigma(eps, delta, sensitivity)


# -- part 1: logistic regression --------------------------------------------------------------


def logistic_task(index: int, name: str, trial: int, args, dpl_python: str | None) -> list[dict]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):  # results must not depend on --jobs
        return _logistic_task(index, name, trial, args, dpl_python)


def _logistic_task(index, name, trial, args, dpl_python) -> list[dict]:
    from sklearn.linear_model import LogisticRegression

    xtr, ytr, xte, yte = LR.split(name, args, C.task_rng(args.seed, index))
    n, d = xtr.shape
    c, M, delta = args.c, args.margin_scale, args.delta
    beta = rules.prior_beta(n, d, c, M)
    base = {"dataset": name, "n": n, "d": d, "trial": trial, "delta": delta, "eps": ""}
    base |= {"knob": "", "lam": "", "eps_rdp": "", "eps_dp": "", "status": "ok", "detail": ""}
    base |= {"backend": "", "guarantee": ""}
    rows = []
    majority = max(yte.mean(), 1.0 - yte.mean())
    rows.append(base | {"method": "majority-class", "accuracy": float(majority), "seconds": 0.0})
    t0 = time.perf_counter()
    clf = LogisticRegression(C=1.0 / (n * beta), fit_intercept=False, tol=1e-8, max_iter=10**4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(xtr, ytr)
    rows.append(
        base
        | {
            "method": "map",
            "accuracy": LR.accuracy(clf.coef_.ravel(), xte, yte),
            "seconds": time.perf_counter() - t0,
            "detail": f"beta={beta:.4g}",
        }
    )

    # privbayes, every back-end and method
    options = LR.model_options(args.model_option)
    for backend in args.backends:
        guarantee_ = guarantee("diffused", backend)
        # the diagnostics gate exists only for the MCMC back-ends (others refuse it)
        mcmc_options = {"on_bad_diagnostics": args.on_bad} if backend in ("imh", "pymc") else {}
        try:
            # the OPS radius applies to method="ops" only (refused with the others)
            models = {
                "ops": pb.BayesianLogisticRegression(
                    beta, c, radius=rules.ops_radius(c, M), backend=backend, **options
                ),
                "other": pb.BayesianLogisticRegression(beta, c, backend=backend, **options),
            }
        except (TypeError, ValueError) as exc:
            for eps in args.eps_grid:
                for method in args.methods:
                    rows.append(
                        base
                        | {"method": method, "backend": backend, "guarantee": guarantee_}
                        | {"eps": eps, "accuracy": np.nan, "seconds": 0.0}
                        | {"status": "backend-unavailable", "detail": str(exc)[:120]}
                    )
            continue
        for eps in args.eps_grid:
            for method in args.methods:
                model = models["ops" if method == "ops" else "other"]
                row = base | {"method": method, "backend": backend, "guarantee": guarantee_}
                row |= {"eps": eps, "accuracy": np.nan}
                t = time.perf_counter()
                try:
                    # the exact back-end's failure probability delta_f costs delta_f in
                    # delta and about delta_f in eps (docs/accounting.md §8): aim below
                    exact_ = backend == "exact"
                    tv = EXACT_DELTA_F * (1 + np.exp(eps)) if exact_ else 0.0
                    aim = eps * (1 - 1e-8) if exact_ else eps
                    rng = _stream(args.seed, index, "privbayes", backend, method, eps)
                    if backend == "langevin":  # the product's own (eps, delta) route: RDP
                        # search or the exact GDP conversion, the larger knob (docs/gdp.md §7)
                        rel = pb.sample(
                            model, (xtr, ytr), eps=aim, delta=delta, method=method, rng=rng
                        )
                    else:
                        tgt = privbayes_target(model, n, aim, delta - tv, method)
                        rel = pb.sample(
                            model,
                            (xtr, ytr),
                            tgt["lam"],
                            tgt["eps_rdp"],
                            method,
                            rng=rng,
                            **mcmc_options,
                        )
                except ConvergenceError:
                    row["status"] = "no-convergence"
                except SamplingError:
                    row["status"] = "sampling-error"
                except (TypeError, ValueError, NotImplementedError) as exc:
                    row["status"], row["detail"] = "unsupported", str(exc)[:120]
                else:
                    eps_dp, lam = targets.converted_eps(rel, delta)  # what was released
                    # ... or its proven GDP bound's exact conversion, when smaller
                    eps_dp = min(eps_dp, float(rel.epsilon(delta)))
                    row |= {"knob": rel.m if method == "concentrated" else rel.r}
                    row |= {"lam": rel.lam, "eps_rdp": rel.eps, "eps_dp": eps_dp}
                    if eps_dp > eps:  # never expected: calibration aims below the target
                        row["status"] = "over-target"
                    else:
                        row["accuracy"] = LR.accuracy(np.asarray(rel.value), xte, yte)
                row["seconds"] = time.perf_counter() - t
                rows.append(row)

    # peers
    for eps in args.eps_grid:
        if "dpgd" in args.peers:
            t = time.perf_counter()
            rho = rho_target(eps, delta)
            steps, eta = rules.dpgd_schedule(n, d, c, rho, M, args.dpgd_max_steps)
            sigma = dpgd.noise_sigma(rho, steps, n, c)
            # steps Gaussian steps (dpgd.dpgd_rdp), composed exactly at every order
            step = partial(gaussian_rdp, sigma=sigma, sensitivity=dpgd.sensitivity(n, c))
            eps_dp, lam = targets.converted_eps(step, delta, steps)
            rng = _stream(args.seed, index, "dpgd", eps)
            w = dpgd.dp_gradient_descent(xtr, ytr, steps, eta, sigma, c, rng)
            rows.append(
                base
                | {"method": "dpgd", "guarantee": PEER_GUARANTEE["dpgd"], "eps": eps}
                | {"knob": steps, "lam": lam, "eps_rdp": rho * lam, "eps_dp": eps_dp}
                | {"accuracy": LR.accuracy(w, xte, yte) if eps_dp <= eps else np.nan}
                | {"status": "ok" if eps_dp <= eps else "over-target"}
                | {"seconds": time.perf_counter() - t, "detail": f"T={steps} sigma={sigma:.4g}"}
            )
        if "objpert" in args.peers:
            t = time.perf_counter()
            lam_op = rules.objpert_lambda(n, d, eps, M)
            rng = _stream(args.seed, index, "objpert", eps)
            w, info = objpert.objective_perturbation(xtr, ytr, eps, lam_op, c, rng)
            rows.append(
                base
                | {"method": "objpert", "guarantee": PEER_GUARANTEE["objpert"], "eps": eps}
                | {"knob": lam_op, "eps_dp": eps, "accuracy": LR.accuracy(w, xte, yte)}
                | {"seconds": time.perf_counter() - t}
                | {
                    "detail": f"eps'={info['eps_prime']:.4g} Delta={info['Delta']:.3g} "
                    f"|grad|={info['grad_norm']:.2g} dist<={info['distance_bound']:.2g}"
                }
            )
    dpl = [p for p in args.peers if p.startswith("diffprivlib")]
    if dpl and dpl_python:
        jobs = []
        for eps in args.eps_grid:
            for peer in dpl:
                cc = (
                    rules.diffprivlib_C(n, d, eps, M)
                    if peer == "diffprivlib"
                    else rules.DIFFPRIVLIB_DEFAULT_C
                )
                rng = _stream(args.seed, index, peer, eps)
                jobs.append(
                    {"id": f"{peer}|{eps!r}", "kind": "logreg", "eps": eps, "data_norm": 1.0}
                    | {"C": cc, "seed": _seed_int(rng)}
                )
        t = time.perf_counter()
        # rows scaled by the public c so that diffprivlib's data_norm is 1 (see README)
        out = bridge.run(dpl_python, jobs, {"x": xtr / (c * (1 + 1e-12)), "y": ytr})
        per = (time.perf_counter() - t) / max(len(jobs), 1)
        for job in jobs:
            peer, _ = job["id"].split("|")
            res = out[job["id"]]
            rows.append(
                base
                | {"method": peer, "guarantee": PEER_GUARANTEE[peer], "eps": job["eps"]}
                | {"knob": job["C"], "eps_dp": job["eps"], "seconds": per}
                | {"accuracy": LR.accuracy(np.asarray(res["w"]), xte, yte)}
                | {"detail": f"C={job['C']:.4g} n_iter={res['n_iter']}"}
            )
    return rows


# -- part 2: counts and proportions ------------------------------------------------------------

_ADULT: dict = {}


def _adult_column(column: str, data_dir) -> tuple[np.ndarray, int]:
    """Codes of ``column`` for all 48,842 Adult records (train + test): (codes, K).

    income: 1 for > 50K (K = 1 means one count of ones); race: index into the codebook.
    Neither column has missing values, so no record is dropped.
    """
    key = (column, data_dir)
    if key not in _ADULT:
        data = datasets.load_adult(data_dir, "all", drop_missing=False)
        if column == "income":
            _ADULT[key] = (data.income.astype(int), 1)
        else:
            levels = datasets.ADULT_CATEGORICAL[column]
            values = data.categorical[column]
            if (values == "").any():
                raise ValueError(f"Adult column {column!r} has missing values")
            codes = np.array([levels.index(v) for v in values])
            _ADULT[key] = (codes, len(levels))
    return _ADULT[key]


def count_task(index: int, column: str, n: int, args, dpl_python: str | None) -> dict:
    """One (column, n): ``count_trials`` subsamples, every method and eps on each."""
    codes, k = _adult_column(column, args.data_dir)
    rng = C.task_rng(args.seed, index)
    trials, delta = args.count_trials, args.delta
    idx = np.stack([rng.choice(codes.size, n, replace=False) for _ in range(trials)])
    if k == 1:
        cnt = codes[idx].sum(axis=1, keepdims=True).astype(float)  # (trials, 1)
        model, prior, sens = pb.BetaBernoulli(1.0, 1.0), np.ones(2), counts.COUNT_SENSITIVITY
    else:
        cnt = np.stack([np.bincount(row, minlength=k) for row in codes[idx]]).astype(float)
        model, prior, sens = pb.DirichletCategorical([1.0] * k), np.ones(k), None
        sens = counts.HISTOGRAM_SENSITIVITY
    truth = cnt / n
    pop = (
        np.array([codes.mean()]) if k == 1 else np.bincount(codes, minlength=k) / codes.size
    )  # the population (all records) proportion(s): what a posterior estimates
    eps_grid = list(args.eps_grid)
    est = {m: np.full((len(eps_grid), trials, cnt.shape[1]), np.nan) for m in COUNT_METHODS}
    info = {m: [dict() for _ in eps_grid] for m in COUNT_METHODS}
    full = cnt if k > 1 else np.concatenate([cnt, n - cnt], axis=1)  # Dirichlet counts
    for j, eps in enumerate(eps_grid):
        for method in ("diffused", "concentrated"):
            tgt = privbayes_target(model, n, eps, delta, method)
            r, m = (tgt["knob"], 1.0) if method == "diffused" else (1.0, tgt["knob"])
            params = np.asarray(model_alpha(model)) / m + r * full
            rs = _stream(args.seed, index, method, eps)
            draw = simplex_from_log(sample_dirichlet_log(params, rs))
            est[method][j] = draw[:, :1] if k == 1 else draw
            info[method][j] = {"knob": tgt["knob"], "lam": tgt["lam"], "eps_dp": tgt["eps_dp"]}
        b = counts.laplace_scale(eps, sens["l1"])
        rs = _stream(args.seed, index, "laplace", eps)
        est["laplace"][j] = counts.proportion(cnt + rs.laplace(0.0, b, cnt.shape), n)
        info["laplace"][j] = {"knob": b, "eps_dp": eps}
        sigma = gaussian_sigma(eps, delta, sens["l2"])
        rs = _stream(args.seed, index, "gaussian", eps)
        est["gaussian"][j] = counts.proportion(cnt + sigma * rs.standard_normal(cnt.shape), n)
        info["gaussian"][j] = {"knob": sigma, "eps_dp": eps}
        rs = _stream(args.seed, index, "noisy-stats", eps)
        noisy = cnt + sigma * rs.standard_normal(cnt.shape)
        est["noisy-stats"][j] = counts.posterior_draw(noisy, n, prior, rs)
        info["noisy-stats"][j] = {"knob": sigma, "eps_dp": eps}
    if dpl_python:
        jobs = []
        for eps in eps_grid:
            rs = _stream(args.seed, index, "diffprivlib", eps)
            if k == 1:
                jobs.append({"id": repr(eps), "kind": "mean", "eps": eps, "n": n})
                jobs[-1] |= {"ks": cnt[:, 0].astype(int).tolist(), "seed": _seed_int(rs)}
            else:  # eps-DP per bin count under add/remove = 2 eps under replace-one: halve
                jobs.append({"id": repr(eps), "kind": "histogram", "eps": eps / 2.0})
                jobs[-1] |= {"counts": cnt.astype(int).tolist(), "seed": _seed_int(rs)}
        out = bridge.run(dpl_python, jobs)
        for j, eps in enumerate(eps_grid):
            vals = np.asarray(out[repr(eps)]["values"], dtype=float)
            est["diffprivlib"][j] = vals[:, None] if k == 1 else counts.proportion(vals, n)
            info["diffprivlib"][j] = {"eps_dp": eps}
    rs = _stream(args.seed, index, "non-private")
    nonpriv = counts.posterior_draw(cnt, n, prior, rs)
    return {"truth": truth, "pop": pop, "est": est, "info": info, "nonpriv": nonpriv, "k": k}


def model_alpha(model) -> np.ndarray:
    """The Dirichlet prior of a conjugate model (Beta(a, b) as Dirichlet(a, b))."""
    if isinstance(model, pb.BetaBernoulli):
        return np.array([model.alpha, model.beta])
    return np.asarray(model.alpha, dtype=float)


# -- outputs --------------------------------------------------------------------------------


def _save_counts(out: Path, res_by: dict) -> None:
    """Estimates, truths and knobs of the counts part (for --report-only)."""
    arrays, info = {}, {}
    for (col, n), res in res_by.items():
        arrays[f"{col}|{n}|truth"] = res["truth"]
        arrays[f"{col}|{n}|pop"] = res["pop"]
        arrays[f"{col}|{n}|nonpriv"] = res["nonpriv"]
        for m in COUNT_METHODS:
            arrays[f"{col}|{n}|{m}"] = res["est"][m]
        info[f"{col}|{n}"] = {"info": res["info"], "k": res["k"]}
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / f"{NAME}_counts.npz", **arrays)
    (out / f"{NAME}_counts_knobs.json").write_text(json.dumps(info) + "\n")


def _load_counts(out: Path, args) -> dict:
    arrays = np.load(out / f"{NAME}_counts.npz")
    info = json.loads((out / f"{NAME}_counts_knobs.json").read_text())
    res_by = {}
    for col in args.count_columns:
        for n in args.count_ns:
            key = f"{col}|{n}"
            res_by[col, n] = {
                "truth": arrays[f"{key}|truth"],
                "pop": arrays[f"{key}|pop"],
                "nonpriv": arrays[f"{key}|nonpriv"],
                "est": {m: arrays[f"{key}|{m}"] for m in COUNT_METHODS},
                "info": info[key]["info"],
                "k": info[key]["k"],
            }
    return res_by


def _read_logistic(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _count_rows(args, res_by, eps_grid):
    for column in args.count_columns:
        for n in args.count_ns:
            res = res_by[column, n]
            for m, (err, err_pop) in report.count_errors(res).items():
                for j, eps in enumerate(eps_grid):
                    d = res["info"][m][j]
                    for t in range(err.shape[1]):
                        truth = res["truth"][t]
                        yield (
                            column, n, m, COUNT_GUARANTEE[m], eps, args.delta, t,
                            float(truth[0]) if truth.size == 1 else "",
                            float(err[j, t]), float(err_pop[j, t]), d.get("knob", ""),
                            d.get("lam", ""), d.get("eps_dp", ""),
                        )  # fmt: skip


_SETTINGS = {
    "logistic": (
        "datasets eps_grid delta trials backends methods peers margin_scale c dpgd_max_steps "
        "abalone_threshold abalone_test mnist_digits mnist_pool max_train max_test "
        "model_option on_bad seed quick"
    ).split(),
    "counts": "count_columns count_ns count_trials eps_grid delta seed quick".split(),
}


def _settings(args, part: str) -> dict:
    return {k: getattr(args, k) for k in _SETTINGS[part]}


def _run_logistic(args, out: Path, python, old: dict | None) -> tuple[list[dict], dict]:
    """Run the logistic part (merging with the last run's rows under --merge)."""
    timer = C.Timer()
    import arviz  # noqa: F401  (imported once before the workers fork; see LR)

    csv_path = out / f"{NAME}_logistic.csv"
    if args.merge and old:  # the merged report covers the old rows' methods too
        for key in ("datasets", "backends", "methods", "peers"):
            setattr(args, key, list(dict.fromkeys(old["args"][key] + getattr(args, key))))
        run_args = argparse.Namespace(**vars(args))
        for key in ("datasets", "backends", "methods", "peers"):
            setattr(run_args, key, getattr(args, f"_new_{key}"))
    else:
        run_args = args
    # task index fixed by (data set, run): the same splits whatever else is run
    tasks = [
        (100_000 * (1 + LR.DATASETS.index(name)) + t, name, t, run_args, python)
        for name in run_args.datasets
        for t in range(run_args.trials)
    ]
    results = C.run_tasks(logistic_task, tasks, args.jobs, f"{NAME} logistic", args.progress)
    rows = [r for rs in results for r in rs]
    if args.merge and csv_path.exists():
        new = {(r["dataset"], r["method"], r["backend"]) for r in rows}
        kept = [
            r
            for r in _read_logistic(csv_path)
            if (r["dataset"], r["method"], r["backend"]) not in new
        ]
        rows = kept + rows
    C.write_csv(csv_path, LOGISTIC_COLUMNS, ([r[c] for c in LOGISTIC_COLUMNS] for r in rows))
    rows = _read_logistic(csv_path)  # the report reads what --report-only will read
    info = {"args": _settings(args, "logistic"), "wall_time": str(timer), "jobs": args.jobs}
    if args.merge and old:
        info["wall_time"] = f"{old['wall_time']} + {timer} (merged run)"
    return rows, info


def _run_counts(args, out: Path, python) -> tuple[dict, dict]:
    timer = C.Timer()
    settings = [(col, n) for col in args.count_columns for n in args.count_ns]
    tasks = [
        (zlib.crc32(f"counts|{col}|{n}".encode()) % 2**31, col, n, args, python)
        for col, n in settings
    ]
    results = C.run_tasks(count_task, tasks, args.jobs, f"{NAME} counts", args.progress)
    res_by = dict(zip(settings, results, strict=True))
    eps_grid = [float(e) for e in args.eps_grid]
    C.write_csv(out / f"{NAME}_counts.csv", COUNT_COLUMNS, _count_rows(args, res_by, eps_grid))
    _save_counts(out, res_by)
    return res_by, {"args": _settings(args, "counts"), "wall_time": str(timer), "jobs": args.jobs}


def main(argv: list[str] | None = None) -> None:
    """Run the parts asked for; the report also shows the saved results of the others."""
    args = parse_args(argv)
    args.progress = not args.no_progress
    for key in ("datasets", "backends", "methods", "peers"):
        setattr(args, f"_new_{key}", list(getattr(args, key)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / f"{NAME}_run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    run = [] if args.report_only else list(args.parts)
    python = versions = None
    if run:
        python, versions = bridge.find_python(args.dpl_python)
        runs_dpl = any(p.startswith("diffprivlib") for p in args.peers)
        if versions is not None or runs_dpl or not args.merge:
            meta["diffprivlib"] = versions
        # else: a merge without diffprivlib keeps the versions its saved rows were made with
        if python is None:
            print("diffprivlib unavailable: its rows are skipped (see `make peers-env`)")

    log_rows, res_by = [], {}
    if "logistic" in run:
        log_rows, meta["logistic"] = _run_logistic(args, out, python, meta.get("logistic"))
    elif "logistic" in meta and (out / f"{NAME}_logistic.csv").exists():
        log_rows = _read_logistic(out / f"{NAME}_logistic.csv")
    if "counts" in run:
        res_by, meta["counts"] = _run_counts(args, out, python)
    elif "counts" in meta and (out / f"{NAME}_counts.npz").exists():
        res_by = _load_counts(out, argparse.Namespace(**meta["counts"]["args"]))
    if run:
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")

    sections, figures = [], []
    if log_rows:
        for r in log_rows:
            for k in ("n", "d", "trial"):
                r[k] = int(r[k])
        largs = argparse.Namespace(**meta["logistic"]["args"])
        grid = [float(e) for e in largs.eps_grid]
        acc = report.acc_cube(log_rows, largs.datasets, grid, largs.trials)
        figs = report.logistic_figures(largs, acc, grid, out)
        figures += figs
        section_meta = meta["logistic"] | {"diffprivlib": meta.get("diffprivlib")}
        sections.append(report.logistic_report(largs, log_rows, grid, figs, section_meta))
    if res_by:
        cargs = argparse.Namespace(**meta["counts"]["args"])
        grid = [float(e) for e in cargs.eps_grid]
        figs = report.count_figures(cargs, res_by, grid, out)
        figures += figs
        section_meta = meta["counts"] | {"diffprivlib": meta.get("diffprivlib")}
        sections.append(report.count_report(cargs, res_by, grid, figs, section_meta))
    if log_rows or res_by:
        sections.append(
            report.discussion(
                largs if log_rows else None, log_rows, res_by, cargs if res_by else None
            )
        )
    body = f"## privbayes against its peers at equal (ε, δ) (`experiments/{NAME}.py`)\n\n"
    body += _intro(args) + "\n\n" + "\n\n".join(sections)
    C.replace_report_section(out / "REPORT.md", NAME, body)
    print(f"{NAME}: {len(log_rows)} logistic rows, {len(figures)} figures, REPORT.md in {out}")


def _intro(args) -> str:
    return (
        "Every method is (ε, δ)-DP under the same neighbour relation — replace one record, n\n"
        "public — at δ = "
        f"{args.delta:g}. privbayes releases are calibrated from their RDP curves with\n"
        "`privbayes.accounting.RdpAccountant` (improved conversion, optimal order) and\n"
        "re-verified on the release made; the peers use their own theorems (pure ε-DP for\n"
        "objective perturbation, diffprivlib and Laplace; the exact Gaussian calibration;\n"
        "DP-GD through the same accountant). Every hyper-parameter comes from the public rules\n"
        'in `experiments/_peers/rules.py` (derivations: experiments/README.md, "Peers"): no\n'
        "method is tuned on the data, let alone on the test set. Guarantee marks: *exact* (the\n"
        "certificate covers the law of what is released), *algorithm* (it covers the algorithm\n"
        "as run), *approximate* (it assumes an idealised computation — exact posterior\n"
        "sampling, an exact minimiser — that the implementation only approximates)."
    )


if __name__ == "__main__":
    main()
