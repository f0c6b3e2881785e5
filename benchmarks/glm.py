"""Logistic-regression releases per second, per back-end: the approximate IMH against PyMC's
NUTS, the exact rejection back-end (``--exact``) and the certified Langevin mechanism
(``--langevin``) against IMH.

Adult-sized synthetic problem (n = 45,000, d = 100) and an MNIST-sized one
(n = 12,000, d = 784, sparse non-negative "pixel" rows), both with rows on ||x|| <= 1.
For each back-end, in the same process:

* time to the first release (one ``sample`` call: mode, pilot, chains, diagnostics);
* releases per second when many are wanted: one ``sample(..., size=k)`` call releases k
  independent draws (one chain each), each at (lam = 2, eps = 1) — eps = k in total;
* the diagnostics reached (R-hat must be <= 1.01 for a release to count) and peak RSS.

NUTS releases one draw per run, with the default gating (R-hat <= 1.01, reruns that
double the draws). Its settings are printed; a NUTS run that does not reach R-hat 1.01
is counted at its time, so the ratio is then a lower bound on the speed-up.

Langevin section (``--langevin``; ``--langevin-only`` skips the rest): the certified noisy
gradient descent (``backend="langevin"``, docs/langevin.md) against IMH on the real Abalone,
Adult and MNIST 3-vs-8 data (features as in experiments/logistic_regression.py; files from
``--data-dir`` or $PRIVBAYES_DATA) at lam = 2, eps in {0.1, 1} per release: time to a first
release, releases per second with ``size=k``, mean test accuracy over the k releases, the
Langevin certificate over the exact-posterior one at the same (r, m), peak numpy memory of a
release (tracemalloc), where a Langevin step spends its time; then time to a first release
on synthetic n = 1e5 and 1e6, d = 20, and the Adult-sized synthetic problem.

    .venv/bin/python benchmarks/glm.py [--skip-pymc] [--skip-mnist] [--k 64]

``--schedules``: Langevin's default ``schedule="utility"`` (an early stop, docs/langevin.md
§6) against ``"stationary"`` on the same three data sets and, for softmax regression, on
scikit-learn's digits (10 classes), in the same process: releases per second, their ratio,
K, r and test accuracy (beta="auto", lam = 2, eps in {0.1, 1}).

``--exact`` instead measures the exact back-end (docs/exact.md), in the same process as IMH:

* the public log envelope log(W / Z_low) (expected proposals per exact draw <= its exp) per
  data set shape, against the bound the same proof gives today's IMH proposal (0.9 N + 0.1
  t5) and the figures of a first prototype that used that mixture proposal;
* n = 10^6, d = 20 (synthetic, beta = 1e-3): time to a first certified release, split into
  the public plan (envelope), the Newton fit and the proposals, against IMH;
* Abalone, Adult and MNIST 3-vs-8 with the experiments' features (``privbayes.datasets``;
  set $PRIVBAYES_DATA or --data-dir), lam = 2, eps in {0.1, 1}: time to a first release,
  releases per second with size=64, proposals per exact draw (public bound and observed),
  peak RSS and mean test accuracy over the 64 releases against IMH's. Infeasible settings
  print the number of proposals they would need and the time that would take.

``--multinomial`` instead measures multinomial (softmax) regression
(``pb.MultinomialLogisticRegression``, docs/multinomial.md): the exact back-end's public log
envelope on a table of shapes, then the certified exact and Langevin back-ends against IMH,
lam = 2, eps = 1 per release: time to a first release, releases per second with
``size=8`` (one call, eps = 8 in total), and test accuracy (argmax of x.W, mean over the 8
releases) beside the non-private MAP (scikit-learn), on

* synthetic n = 2 x 10^5 (+ 20,000 test rows), d = 10, K = 4, beta = 1e-3, and n = 10^4
  (+ 2,000 test rows), d = 20, K = 5, beta = 1e-3; rows on ||x|| <= 1;
* Abalone's sex (M / F / infant) from its 7 measurements (/ 3, clipped to norm 0.9, and a
  constant), 3,177 training and 1,000 test rows, beta in {1e-2, 1e-3};
* 10-class MNIST with the features of experiments/mnist_multiclass.py (pixels / 255,
  k x k average pooling, rows of norm 1/sqrt(2) and a constant 1/sqrt(2)), on a random
  subsample of ``--mnist-train`` training rows (default 5,000, pooling ``--mnist-pool`` 4:
  d = 50, K = 10), all 10,000 test rows, beta = 3e-3; skipped when the files are absent.

    .venv/bin/python benchmarks/glm.py --exact [--blas-threads 1] [--data-dir DIR]
    .venv/bin/python benchmarks/glm.py --langevin-only [--data-dir DIR]
    .venv/bin/python benchmarks/glm.py --multinomial [--blas-threads 1] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import time

import numpy as np

import privbayes as pb
from privbayes import datasets
from privbayes.sampling import exact


def adult_like(n: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    X = pb.preprocessing.clip_rows(rng.normal(size=(n, d)) / np.sqrt(d), 1.0)
    w_true = rng.normal(size=d)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ w_true))).astype(float)
    return X, y


def mnist_like(n: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    # ~19% non-zero pixels in [0, 1], rows scaled by the public bound sqrt(d) * 1 / 8
    X = np.where(rng.random((n, d)) < 0.19, rng.random((n, d)), 0.0)
    X = pb.preprocessing.clip_rows(X / (np.sqrt(d) / 8.0), 1.0)
    w_true = rng.normal(size=d) * 3 / np.sqrt(d)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X - X.mean(0)) @ w_true * 8))).astype(float)
    return X, y


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_imh(X, y, k: int) -> dict:
    model = pb.BayesianLogisticRegression(beta=1e-3, c=1.0, backend="imh")
    t0 = time.perf_counter()
    first = pb.sample(model, (X, y), 2.0, 1.0, rng=1)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    many = pb.sample(model, (X, y), 2.0, float(k), size=k, rng=2)
    t_many = time.perf_counter() - t0
    dg = many.diagnostics
    assert abs(many.calibration.target_eps - 1.0) < 1e-12  # each draw at eps = 1
    print(
        f"  imh : first release {t_first:6.2f} s (R-hat {first.diagnostics['rhat_max']:.4f}, "
        f"tune {first.diagnostics['tune']}, chains {first.diagnostics['chains']}); "
        f"{k} releases in {t_many:6.2f} s = {k / t_many:7.2f} /s  "
        f"(R-hat {dg['rhat_max']:.4f}, ESS bulk min {dg['ess_bulk_min']:.0f}, acceptance "
        f"{dg['acceptance']:.2f}, Pareto k {dg['pareto_k']:.2f}, "
        f"est. M {dg['weight_ratio_max']:.2f}, attempts {dg['attempts']}); "
        f"peak RSS so far {peak_mb():.0f} MB"
    )
    ok = dg["rhat_max"] <= 1.01 and first.diagnostics["rhat_max"] <= 1.01
    return {"first": t_first, "rate": k / t_many, "ok": ok}


def run_pymc(X, y, tune: int, draws: int, chains: int) -> dict:
    from privbayes.sampling import pymc_backend

    model = pb.BayesianLogisticRegression(
        beta=1e-3, c=1.0, backend="pymc", tune=tune, draws=draws, chains=chains
    )
    t0 = time.perf_counter()
    pymc_backend.compiled(X.shape[1], model.target_accept)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    rel = pb.sample(model, (X, y), 2.0, 1.0, rng=1, on_bad_diagnostics="warn")
    t_run = time.perf_counter() - t0
    dg = rel.diagnostics
    print(
        f"  nuts: compile {t_compile:.1f} s; first release {t_compile + t_run:6.1f} s "
        f"({chains} chains, {dg['tune']} tune + {dg['draws']} draws, attempts "
        f"{dg['attempts']}, R-hat {dg['rhat_max']:.4f}, divergences {dg['divergences']}) "
        f"= {1 / t_run:.5f} releases/s; peak RSS so far {peak_mb():.0f} MB"
    )
    return {"first": t_compile + t_run, "rate": 1 / t_run, "ok": dg["rhat_max"] <= 1.01}


# -- the exact back-end ------------------------------------------------------------------------
# log sup (proposals per draw ~ e^value) measured on a first prototype with the 0.9 N + 0.1 t5
# proposal (data-dependent eigenvalues); None where it was not measured
PROTOTYPE = {
    "Abalone b=1e-3": 2.5,
    "Adult b=1e-3": 15.2,
    "Adult b=1e-2": 5.2,
    "Adult b=1e-3 m=0.1": 5.2,
    "MNIST b=1e-3": 53.5,
    "MNIST b=1e-2": 20.0,
    "synthetic n=3e5 d=20": 0.48,
    "synthetic n=1e6 d=20": 0.26,
    "synthetic n=1e6 d=100": 2.9,
}
SHAPES = [  # name, n, d, beta, m (direct/diffused at r = 1: the largest envelope)
    ("Abalone b=1e-3", 2924, 11, 1e-3, 1.0),
    ("Adult b=1e-3", 30162, 105, 1e-3, 1.0),
    ("Adult b=1e-2", 30162, 105, 1e-2, 1.0),
    ("Adult b=1e-3 m=0.1", 30162, 105, 1e-3, 0.1),
    ("MNIST b=1e-3", 11982, 197, 1e-3, 1.0),
    ("MNIST b=1e-2", 11982, 197, 1e-2, 1.0),
    ("synthetic n=3e5 d=20", 300_000, 20, 1e-3, 1.0),
    ("synthetic n=1e6 d=20", 10**6, 20, 1e-3, 1.0),
    ("synthetic n=1e6 d=100", 10**6, 100, 1e-3, 1.0),
]


def envelope_table() -> None:
    from privbayes.sampling import envelope, exact

    print("Public log envelope log(W / Z_low) per shape (r = 1, c = 1): expected proposals per")
    print("exact draw <= e^value for EVERY data set of that shape; N = proposals per release at")
    print("delta_f = 1e-12 (size=1). 'IMH mixture' is the same proof's bound for 0.9 N + 0.1 t5.")
    print(f"  {'shape':24s} {'matched':>8s} {'IMH mixture':>12s} {'prototype':>10s} {'N':>14s}")
    for name, n, d, beta, m in SHAPES:
        plan = exact.exact_plan(n, d, beta, 1.0, 1.0, m, max_proposals=10**300)
        log_z = plan.envelope.log_total - plan.log_envelope
        mix = envelope.mixture_log_sup(plan.envelope) - log_z
        proto = PROTOTYPE.get(name)
        print(
            f"  {name:24s} {plan.log_envelope:8.2f} {mix:12.2f} "
            f"{'' if proto is None else f'{proto:.2f}':>10s} {plan.proposals:14.3g}"
        )


def _phase_times(model, X, y, rng_seed) -> tuple[float, dict]:
    t0, c0 = time.perf_counter(), time.process_time()
    rel = pb.sample(model, (X, y), 2.0, 1.0, rng=rng_seed)
    dg = dict(rel.diagnostics)
    dg["cpu"] = time.process_time() - c0  # all threads: comparable across machine loads
    return time.perf_counter() - t0, dg


def exact_large(n: int, d: int, rng) -> None:
    from privbayes.sampling import exact

    X, y = adult_like(n, d, rng)
    print(f"Synthetic n={n:,} d={d}, beta=1e-3, lam=2, eps=1 (rows on ||x|| <= 1):")
    model = pb.BayesianLogisticRegression(beta=1e-3, c=1.0, backend="exact")
    exact.clear_plan_cache()
    t_all, dg = _phase_times(model, X, y, 1)
    pub = dg["public"]
    t_plan = t_all - dg["seconds_fit"] - dg["seconds_proposals"]
    print(
        f"  exact: first release {t_all:6.2f} s = plan/validation {t_plan:.2f} s + Newton fit "
        f"({exact.WARM_ITERATIONS} warm + {dg['newton_steps']} certified steps, public bound "
        f"{pub['newton_step_bound']:,}) {dg['seconds_fit']:.2f} s + "
        f"{pub['proposals']} proposals in {pub['passes']} pass(es) "
        f"{dg['seconds_proposals']:.2f} s; accepted {dg['accepted']}/{pub['proposals']} "
        f"(public a_min {pub['acceptance_lower_bound']:.3f}); CPU {dg['cpu']:.2f} s"
    )
    t_again, dg2 = _phase_times(model, X, y, 2)
    print(f"  exact: a second release (plan cached) {t_again:6.2f} s (CPU {dg2['cpu']:.2f} s)")
    imh = pb.BayesianLogisticRegression(beta=1e-3, c=1.0, backend="imh")
    t_imh, dgi = _phase_times(imh, X, y, 1)
    print(
        f"  imh  : first release {t_imh:6.2f} s (CPU {dgi['cpu']:.1f} s; tune {dgi['tune']}, "
        f"chains {dgi['chains']}); "
        f"ratio imh/exact {t_imh / t_all:.1f}x; peak RSS so far {peak_mb():.0f} MB"
    )


# -- real data sets -------------------------------------------------------------------------
def _real_data(name: str, data_dir):
    """(x_train, y_train, x_test, y_test) with the experiments' public feature maps."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
    import logistic_regression as lr

    from privbayes import datasets

    if name == "abalone":
        x, y = lr.abalone_features(datasets.load_abalone(data_dir))
        idx = np.random.default_rng(0).permutation(len(y))
        test, train = idx[: round(0.3 * len(y))], idx[round(0.3 * len(y)) :]
        return x[train], y[train], x[test], y[test]
    if name == "adult":
        tr, te = (lr.adult_features(datasets.load_adult(data_dir, s)) for s in ("train", "test"))
    else:
        tr, te = (lr.mnist_features(*datasets.load_mnist(data_dir, s)) for s in ("train", "test"))
    return (*tr, *te)


def _real_sets(data_dir) -> list:
    """[(name, x_train, y_train, x_test, y_test)] for Abalone, Adult and MNIST 3-vs-8."""
    return [(name, *_real_data(name, data_dir)) for name in ("abalone", "adult", "mnist")]


def _accuracy(values, x, y) -> float:
    w = np.atleast_2d(np.asarray(values))
    return float(np.mean((x @ w.T > 0) == (y[:, None] > 0.5)))


def exact_real(data_dir, k: int, betas) -> None:
    from privbayes.sampling import exact

    for name, xtr, ytr, xte, yte in _real_sets(data_dir):
        n, d = xtr.shape
        for beta in betas:
            for eps in (0.1, 1.0):
                model = pb.BayesianLogisticRegression(beta=beta, c=1.0, backend="exact")
                cal = pb.calibrate(model, n, 2.0, eps)
                head = f"{name} n={n} d={d} beta={beta:g} eps={eps:g} (r={cal.r:.3g}):"
                try:
                    t_one, e_one = exact.exact_feasibility(n, d, beta, 1.0, cal.r, cal.m)
                    exact.exact_feasibility(n, d, beta, 1.0, cal.r, cal.m, size=k)
                except exact.ExactInfeasibleError as err:
                    need = exact.exact_plan(
                        n, d, beta, 1.0, cal.r, cal.m, max_proposals=10**300
                    ).proposals
                    prob = exact.Problem(xtr, np.where(ytr > 0.5, 1.0, -1.0), cal.r, n * beta)
                    vt = np.random.default_rng(0).normal(size=(d, exact.BATCH)) * 1e-3
                    z0 = np.zeros(n)
                    t0 = time.perf_counter()
                    prob.loglik_diff(z0, np.full(n, np.log(2.0)), vt)
                    per = (time.perf_counter() - t0) / exact.BATCH
                    print(
                        f"  {head} INFEASIBLE: {need:.3g} proposals per release (about "
                        f"{err.expected_proposals_per_draw:.3g} per exact draw, x "
                        f"log(1/delta_f)); at {per * 1e3:.3f} ms per proposal that is "
                        f"{need * per:.3g} s per release"
                    )
                    continue
                t0 = time.perf_counter()
                first = pb.sample(model, (xtr, ytr), 2.0, eps, rng=1)
                t_first = time.perf_counter() - t0
                t0 = time.perf_counter()
                many = pb.sample(model, (xtr, ytr), 2.0, eps * k, size=k, rng=2)
                t_many = time.perf_counter() - t0
                dg = many.diagnostics
                observed = dg["public"]["proposals"] / max(dg["accepted"], 1)
                acc = _accuracy(many.value, xte, yte)
                imh = pb.BayesianLogisticRegression(beta=beta, c=1.0, backend="imh")
                t0 = time.perf_counter()
                ref = pb.sample(imh, (xtr, ytr), 2.0, eps * k, size=k, rng=3)
                t_imh = time.perf_counter() - t0
                print(
                    f"  {head} first release {t_first:.2f} s (N={t_one}, "
                    f"fit {first.diagnostics['seconds_fit']:.2f} s); {k} releases in "
                    f"{t_many:.2f} s = {k / t_many:.1f}/s (N={dg['public']['proposals']}); "
                    f"proposals per draw: public <= {e_one:.2f}, observed {observed:.2f}; "
                    f"accuracy {acc:.4f} (imh {_accuracy(ref.value, xte, yte):.4f}, "
                    f"{k / t_imh:.1f}/s); peak RSS so far {peak_mb():.0f} MB"
                )


def _peak_numpy_mb(fn) -> float:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _step_profile(x, y, chains: int, reps: int = 9) -> dict:
    """Seconds per Langevin step by part (X W, sigmoid, X^T S, noise and update): the
    fastest of ``reps`` repetitions of each, so that other load on the machine drops out.
    One thread for the sigmoid here (the sampler splits it over the cores)."""
    from privbayes.glm.family import sigmoid_neg

    z = np.asfortranarray(x * np.where(y > 0, 1.0, -1.0)[:, None])  # as the sampler stores it
    w = np.zeros((z.shape[1], chains))
    rng = np.random.default_rng(0)
    parts = dict.fromkeys(("X W", "sigmoid", "X^T S", "noise+update"), np.inf)
    for _ in range(reps):
        t0 = time.perf_counter()
        mar = z @ w
        t1 = time.perf_counter()
        sigmoid_neg(mar)
        t2 = time.perf_counter()
        g = z.T @ mar
        t3 = time.perf_counter()
        w = 0.99 * w + 1e-4 * g + 0.01 * rng.standard_normal(w.shape)
        t4 = time.perf_counter()
        for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            parts[key] = min(parts[key], dt)
    return parts


def _compare(name, x, y, xte, yte, eps: float, k: int, beta: float, h: float) -> dict:
    data = (x, y)
    lmodel = pb.BayesianLogisticRegression(beta=beta, c=1.0, backend="langevin", step_scale=h)
    imodel = pb.BayesianLogisticRegression(beta=beta, c=1.0, backend="imh")
    out = {}
    for label, model in (("langevin", lmodel), ("imh", imodel)):
        t0 = time.perf_counter()
        pb.sample(model, data, 2.0, eps, rng=1)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        many = pb.sample(model, data, 2.0, eps * k, size=k, rng=2)
        rate = k / (time.perf_counter() - t0)
        out[label] = {"first": first, "rate": rate, "acc": _accuracy(many.value, xte, yte)}
        out[label]["cal"] = many.calibration
    cal = out["langevin"]["cal"]
    posterior = float(imodel.rdp(x.shape[0], 2.0, cal.r, cal.m, cal.method))
    capped = pb.BayesianLogisticRegression(
        beta=beta, c=1.0, backend="langevin", step_scale=h, max_steps=3
    )
    mem = _peak_numpy_mb(lambda: pb.sample(capped, data, 2.0, eps * k, size=k, rng=3))
    s = cal.sampler
    print(
        f"  eps={eps:<4g} langevin: first {out['langevin']['first']:6.2f} s, "
        f"{out['langevin']['rate']:6.2f} rel/s, acc {out['langevin']['acc']:.4f} | "
        f"imh: first {out['imh']['first']:6.2f} s, {out['imh']['rate']:6.2f} rel/s, "
        f"acc {out['imh']['acc']:.4f} (r {out['imh']['cal'].r:.3f}) | langevin r {cal.r:.3f}, "
        f"K {s['steps']}, eta {s['step']:.3g}, cert/posterior {cal.eps / posterior:.4f}, "
        f"numpy peak {mem:.0f} MB"
    )
    return out


def langevin_section(args) -> None:
    """Langevin vs IMH on the real data sets and synthetic sizes (see the module docstring)."""
    import os

    k, beta, h = args.k, 1e-3, args.langevin_step_scale
    print(
        f"== Langevin (certified K-step law, step_scale {h:g}) vs IMH: lam=2, beta={beta:g}, "
        f"size={k} =="
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name in ("abalone", "adult", "mnist"):
        x, y, xte, yte = _real_data(name, args.data_dir)
        print(f"{name}: n={x.shape[0]:,} d={x.shape[1]} (test {xte.shape[0]:,})")
        for eps in (0.1, 1.0):
            _compare(name, x, y, xte, yte, eps, k, beta, h)
        prof = _step_profile(x, y, k)
        total = sum(prof.values())
        print(
            f"  one step with {k} chains: {total * 1e3:.1f} ms = "
            + ", ".join(f"{key} {v / total:.0%}" for key, v in prof.items())
            + f"; peak RSS so far {peak_mb():.0f} MB"
        )
    rng = np.random.default_rng(0)
    for n, d in ((45_000, 100), (100_000, 20), (1_000_000, 20)):
        X, y = adult_like(n, d, rng)
        row = []
        for label, backend in (("langevin", "langevin"), ("imh", "imh")):
            extra = {"step_scale": h} if backend == "langevin" else {}
            model = pb.BayesianLogisticRegression(beta=beta, c=1.0, backend=backend, **extra)
            t0 = time.perf_counter()
            rel = pb.sample(model, (X, y), 2.0, 1.0, rng=1)
            row.append(f"{label} {time.perf_counter() - t0:6.2f} s")
            if backend == "langevin":
                steps = rel.calibration.sampler["steps"]
        rate = ""
        if n == 45_000:
            model = pb.BayesianLogisticRegression(
                beta=beta, c=1.0, backend="langevin", step_scale=h
            )
            t0 = time.perf_counter()
            pb.sample(model, (X, y), 2.0, float(k), size=k, rng=2)
            rate = f"; langevin {k / (time.perf_counter() - t0):.2f} releases/s with size={k}"
        print(
            f"synthetic n={n:,} d={d}: first release (eps=1): {', '.join(row)} "
            f"(langevin K={steps}){rate}; peak RSS so far {peak_mb():.0f} MB"
        )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


def schedule_section(args) -> None:
    """Langevin's two step rules in the same process (docs/langevin.md §6): releases per
    second with the default ``schedule="utility"`` against ``"stationary"`` and their
    ratio, with K, r and the mean test accuracy of the releases. beta = "auto" (the public
    rule beta = c^2 d / (n M^2), M = 10: the peers study's prior), lam = 2, eps per release
    in {0.1, 1}, ``--schedule-k`` releases per call (one chain each)."""
    import os

    k = args.schedule_k
    print(
        f"== Langevin schedules: utility (default) vs stationary, beta='auto', lam=2, size={k} =="
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name in ("abalone", "adult", "mnist"):
        x, y, xte, yte = _real_data(name, args.data_dir)
        print(f"{name}: n={x.shape[0]:,} d={x.shape[1]} (test {xte.shape[0]:,})")
        for eps in (0.1, 1.0):
            res = {}
            for kind in ("utility", "stationary"):
                model = pb.BayesianLogisticRegression(
                    "auto", 1.0, backend="langevin", schedule=kind
                )
                t0 = time.perf_counter()
                rel = pb.sample(model, (x, y), 2.0, eps * k, size=k, rng=2)
                rate = k / (time.perf_counter() - t0)
                s = rel.calibration.sampler
                res[kind] = (rate, s["steps"], rel.calibration.r, _accuracy(rel.value, xte, yte))
            _schedule_row(eps, res)
    # softmax regression: scikit-learn's digits (10 classes; ships with scikit-learn)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    xd, yd = load_digits(return_X_y=True)
    xd = pb.preprocessing.clip_rows(xd / 16.0 / 8.0, 1.0)  # pixels in [0, 16]: a public scale
    x, xte, y, yte = train_test_split(xd, yd, test_size=0.3, random_state=0, stratify=yd)
    print(f"digits (softmax, 10 classes): n={x.shape[0]:,} d={x.shape[1]} (test {xte.shape[0]:,})")
    for eps in (0.1, 1.0):
        res = {}
        for kind in ("utility", "stationary"):
            model = pb.MultinomialLogisticRegression(
                "auto", 1.0, 10, backend="langevin", schedule=kind
            )
            t0 = time.perf_counter()
            rel = pb.sample(model, (x, y.astype(float)), 2.0, eps * k, size=k, rng=2)
            rate = k / (time.perf_counter() - t0)
            s = rel.calibration.sampler
            acc = _multi_accuracy(rel.value, xte, yte)
            res[kind] = (rate, s["steps"], rel.calibration.r, acc)
        _schedule_row(eps, res)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


def _schedule_row(eps: float, res: dict) -> None:
    (ru, ku, r_u, au), (rs, ks, r_s, as_) = res["utility"], res["stationary"]
    print(
        f"  eps={eps:<4g} utility: K {ku}, r {r_u:.4g}, {ru:7.2f} rel/s, acc {au:.4f} | "
        f"stationary: K {ks}, r {r_s:.4g}, {rs:7.2f} rel/s, acc {as_:.4f} | "
        f"speed-up {ru / rs:.1f}x"
    )


# -- multinomial (softmax) regression ---------------------------------------------------------
MULTI_SIZE = 8
MULTI_SHAPES = [  # (n, d, K, beta) for the exact back-end's public envelope table
    (12, 1, 3, 0.2),
    (4_177, 9, 3, 1e-2),
    (4_177, 9, 3, 1e-3),
    (10**5, 10, 4, 1e-3),
    (10**6, 20, 5, 1e-3),
    (10**6, 20, 10, 1e-3),
    (30_162, 105, 2, 1e-2),
    (10_000, 20, 5, 1e-2),
    (5_000, 50, 10, 3e-2),
]


def softmax_like(n: int, d: int, k: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Rows on ||x|| <= 1 and labels drawn from a softmax model with K classes."""
    X = pb.preprocessing.clip_rows(rng.normal(size=(n, d)) / np.sqrt(d), 1.0)
    scores = X @ (rng.normal(size=(d, k)) * 3.0)
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.random((n, 1)) > p.cumsum(axis=1)).sum(axis=1)
    return X, np.minimum(y, k - 1).astype(float)


def _multi_accuracy(values, x, y) -> float:
    """Mean test accuracy of argmax_k x.W[:, k] over the releases (size, d, K)."""
    w = np.asarray(values).reshape(-1, x.shape[1], np.asarray(values).shape[-1])
    return float(np.mean([np.mean(np.argmax(x @ wi, axis=1) == y) for wi in w]))


def _map_accuracy(x, y, xte, yte, beta: float) -> float:
    import warnings

    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs' iteration warnings
        fit = LogisticRegression(C=1.0 / (len(y) * beta), fit_intercept=False, max_iter=500)
        fit.fit(x, y.astype(int))
    return _multi_accuracy(fit.coef_.T, xte, yte)


def multinomial_row(name, x, y, xte, yte, k: int, beta: float) -> None:
    n, d = x.shape
    print(
        f"{name}: n={n:,} d={d} K={k} (test {xte.shape[0]:,}), beta={beta:g}, lam=2, eps=1 per "
        f"release; non-private MAP accuracy {_map_accuracy(x, y, xte, yte, beta):.4f}"
    )
    for backend in ("exact", "langevin", "imh"):
        model = pb.MultinomialLogisticRegression(beta, 1.0, k, backend=backend)
        extra = {"on_bad_diagnostics": "warn"} if backend == "imh" else {}
        t0 = time.perf_counter()
        try:
            first = pb.sample(model, (x, y), 2.0, 1.0, rng=1, **extra)
        except pb.ExactInfeasibleError as err:
            print(f"  exact: refused from public inputs ({err.expected_proposals_per_draw:.3g} "
                  "proposals per draw expected)")  # fmt: skip
            continue
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        many = pb.sample(model, (x, y), 2.0, float(MULTI_SIZE), size=MULTI_SIZE, rng=2, **extra)
        t_many = time.perf_counter() - t0
        assert abs(many.calibration.target_eps - 1.0) < 1e-12  # each draw at eps = 1
        cal = many.calibration
        if backend == "langevin":
            s = cal.sampler
            how = f"K={s['steps']} steps, eta {s['step']:.3g}"
        elif backend == "exact":
            pub = many.diagnostics["public"]
            how = (
                f"{pub['proposals']:,} proposals for {MULTI_SIZE} (public <= "
                f"{pub['expected_proposals_per_draw']:.2f} per draw; observed "
                f"{many.diagnostics['accepted'] / pub['proposals']:.3f} accepted)"
            )
        else:
            dg = many.diagnostics
            how = f"R-hat {dg['rhat_max']:.4f}, acceptance {dg['acceptance']:.2f}"
        print(
            f"  {backend:8s} ({many.guarantee}): first release {t_first:7.2f} s; "
            f"{MULTI_SIZE} releases in {t_many:7.2f} s = {MULTI_SIZE / t_many:6.3f} /s; "
            f"accuracy {_multi_accuracy(many.value, xte, yte):.4f} "
            f"(first {_multi_accuracy(first.value, xte, yte):.4f}); r {cal.r:.3f}, "
            f"certified eps {cal.eps:.4f}; {how}; peak RSS so far {peak_mb():.0f} MB"
        )


def multinomial_section(args) -> None:
    """Softmax regression: Langevin vs IMH (see the module docstring)."""
    print(f"== multinomial: exact, langevin (certified) vs imh (approximate), size={MULTI_SIZE} ==")
    print("public log envelope (exact back-end, r = m = 1, c = 1):")
    for n, d, k, beta in MULTI_SHAPES:
        try:
            plan = exact.exact_plan(n, d, beta, 1.0, classes=k, max_proposals=10**12)
            print(f"  n={n:,} d={d} K={k} beta={beta:g}: {plan.log_envelope:.2f}, "
                  f"N = {plan.proposals:,} per release")  # fmt: skip
        except exact.ExactInfeasibleError as err:
            print(f"  n={n:,} d={d} K={k} beta={beta:g}: infeasible "
                  f"({err.expected_proposals_per_draw:.3g} proposals per draw)")  # fmt: skip
    rng = np.random.default_rng(0)
    x, y = softmax_like(220_000, 10, 4, rng)
    multinomial_row("synthetic", x[:200_000], y[:200_000], x[200_000:], y[200_000:], 4, 1e-3)
    x, y = softmax_like(12_000, 20, 5, rng)
    multinomial_row("synthetic", x[:10_000], y[:10_000], x[10_000:], y[10_000:], 5, 1e-3)
    try:
        ab = datasets.load_abalone(args.data_dir)
    except (FileNotFoundError, OSError) as exc:
        print(f"Abalone skipped: {exc}")
    else:
        # sex (M / F / infant) from the 7 measurements, rows clipped to the ball of 0.9 plus
        # a constant 0.43 (c = 1); 3,177 training rows, 1,000 test rows (a fixed split)
        feats = pb.preprocessing.clip_rows(ab.measurements / 3.0, 0.9)
        xa = np.hstack([feats, np.full((len(ab), 1), math.sqrt(1 - 0.81))])
        ya = np.searchsorted(["F", "I", "M"], ab.sex).astype(float)
        order = np.random.default_rng(2).permutation(len(ab))
        tr, te = order[1000:], order[:1000]
        for beta in (1e-2, 1e-3):
            multinomial_row("Abalone sex", xa[tr], ya[tr], xa[te], ya[te], 3, beta)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
    import mnist_multiclass as mm

    try:
        tr_im, tr_y = datasets.load_mnist(args.data_dir, "train")
        te_im, te_y = datasets.load_mnist(args.data_dir, "test")
    except (FileNotFoundError, OSError) as exc:
        print(f"MNIST skipped: {exc}")
        return
    keep = np.random.default_rng(1).permutation(len(tr_y))[: args.mnist_train]
    x = mm.features(tr_im[keep], args.mnist_pool)
    xte = mm.features(te_im, args.mnist_pool)
    name = f"MNIST 10-class (pool {args.mnist_pool}, subsample)"
    multinomial_row(name, x, tr_y[keep].astype(float), xte, te_y, 10, 3e-3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--k", type=int, default=64, help="releases per IMH call")
    p.add_argument("--skip-pymc", action="store_true")
    p.add_argument("--skip-mnist", action="store_true")
    p.add_argument("--nuts-tune", type=int, default=500)
    p.add_argument("--nuts-draws", type=int, default=500)
    p.add_argument("--nuts-chains", type=int, default=2)
    p.add_argument("--exact", action="store_true", help="measure the exact back-end instead")
    p.add_argument("--data-dir", default=None, help="data sets (default $PRIVBAYES_DATA)")
    p.add_argument("--skip-real", action="store_true", help="--exact: synthetic only")
    p.add_argument("--betas", default="1e-3", help="--exact: prior precisions, comma-separated")
    p.add_argument("--blas-threads", type=int, default=0, help="limit BLAS threads (0: as is)")
    p.add_argument("--langevin", action="store_true", help="also run the Langevin section")
    p.add_argument("--langevin-only", action="store_true", help="only the Langevin section")
    p.add_argument("--langevin-step-scale", type=float, default=0.5, help="Langevin h")
    p.add_argument("--multinomial", action="store_true", help="measure softmax regression")
    p.add_argument(
        "--schedules", action="store_true", help="only Langevin's utility vs stationary rule"
    )
    p.add_argument("--schedule-k", type=int, default=16, help="--schedules: releases per call")
    p.add_argument("--mnist-train", type=int, default=5000, help="--multinomial: MNIST rows")
    p.add_argument("--mnist-pool", type=int, default=4, help="--multinomial: MNIST pooling")
    args = p.parse_args()
    if args.blas_threads:
        from threadpoolctl import threadpool_limits

        import privbayes.sampling.exact  # noqa: F401  (loads scipy's BLAS: limit it too)

        threadpool_limits(args.blas_threads, user_api="blas")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.multinomial:
        multinomial_section(args)
        return
    if args.schedules:
        schedule_section(args)
        return
    if args.exact:
        envelope_table()
        exact_large(10**6, 20, np.random.default_rng(0))
        if not args.skip_real:
            exact_real(args.data_dir, args.k, [float(b) for b in args.betas.split(",")])
        return
    if args.langevin or args.langevin_only:
        langevin_section(args)
        if args.langevin_only:
            return
    rng = np.random.default_rng(0)
    problems = [("Adult-sized", *adult_like(45_000, 100, rng))]
    if not args.skip_mnist:
        problems.append(("MNIST-sized", *mnist_like(12_000, 784, rng)))
    for name, X, y in problems:
        print(f"{name}: n={X.shape[0]:,} d={X.shape[1]}, lam=2, eps=1 per release, beta=1e-3")
        imh = run_imh(X, y, args.k)
        if args.skip_pymc:
            continue
        nuts = run_pymc(X, y, args.nuts_tune, args.nuts_draws, args.nuts_chains)
        note = "" if nuts["ok"] else " (NUTS missed R-hat 1.01: a lower bound)"
        print(
            f"  ratio imh/nuts: releases per second {imh['rate'] / nuts['rate']:.0f}x, "
            f"time to first release {nuts['first'] / imh['first']:.0f}x{note}"
        )


if __name__ == "__main__":
    main()
