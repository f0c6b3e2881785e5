"""Certified logistic-regression releases per second: IMH (default) against PyMC's NUTS.

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
    .venv/bin/python benchmarks/glm.py --langevin-only [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import privbayes as pb


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
    model = pb.BayesianLogisticRegression(beta=1e-3, c=1.0)
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
    pymc_backend._compiled(X.shape[1], model.target_accept)
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


# -- Langevin (certified noisy gradient descent) against IMH ---------------------------------
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


def _accuracy(values: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((x @ np.atleast_2d(values).T > 0) == (y[:, None] > 0.5)))


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
    from privbayes.sampling import langevin

    z = np.asfortranarray(x * np.where(y > 0, 1.0, -1.0)[:, None])  # as the sampler stores it
    w = np.zeros((z.shape[1], chains))
    rng = np.random.default_rng(0)
    parts = dict.fromkeys(("X W", "sigmoid", "X^T S", "noise+update"), np.inf)
    for _ in range(reps):
        t0 = time.perf_counter()
        mar = z @ w
        t1 = time.perf_counter()
        langevin._sigmoid_neg(mar)
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
    imodel = pb.BayesianLogisticRegression(beta=beta, c=1.0)
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--k", type=int, default=64, help="releases per IMH call")
    p.add_argument("--skip-pymc", action="store_true")
    p.add_argument("--skip-mnist", action="store_true")
    p.add_argument("--nuts-tune", type=int, default=500)
    p.add_argument("--nuts-draws", type=int, default=500)
    p.add_argument("--nuts-chains", type=int, default=2)
    p.add_argument("--langevin", action="store_true", help="also run the Langevin section")
    p.add_argument("--langevin-only", action="store_true", help="only the Langevin section")
    p.add_argument("--data-dir", default=None, help="data sets (default $PRIVBAYES_DATA)")
    p.add_argument("--langevin-step-scale", type=float, default=0.5, help="Langevin h")
    args = p.parse_args()
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
