"""Which route should PrivateLinearRegression take by default? (docs/linear_regression.md §10)

Test R^2 at equal (eps, delta = 1e-5) of the estimator's routes, against OLS:

* noise-aware: one release of the sufficient statistics, coef_ = the posterior mean;
* sample: one posterior draw on the model's default (public) ball;
* sample, R*: one draw on an *oracle* ball, R* = 2 x the norm of the OLS weights in the
  model's coordinates (not a private choice: it favours the sample route);
* mean of 4, R*: the mean of 4 draws at eps / 4 each on the oracle ball.

Data: synthetic (n = 20,000 train, d = 5, intercept, SNR = Var(w.x) / sigma^2 = 2), sklearn's
diabetes (n = 442) and UCI Abalone (n = 4177; privbayes.datasets, if the file is present),
each with public bounds stated below. Run: ``python benchmarks/linear_route.py [reps]``.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split

import privbayes as pb

EPS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-5


def synthetic(seed: int, n: int = 20_000, d: int = 5):
    """x ~ N(0, 0.2^2 I) clipped into ||x|| <= sqrt(3)/2 (the bound with the intercept
    column s = 1/2 of c = 1; 0.2% of rows clipped), y = w.x + 0.5 + N(0, 0.3^2) clipped to
    |y| <= 3 (never binding here), w = (1, -0.5, 0.25, 0.75, -1): Var(w.x) = 0.18, SNR 2."""
    rng = np.random.default_rng(seed)
    w = np.array([1.0, -0.5, 0.25, 0.75, -1.0])[:d]
    fb = np.sqrt(0.75)
    x = pb.preprocessing.clip_rows(rng.normal(0.0, 0.2, (2 * n, d)), fb)
    y = np.clip(x @ w + 0.5 + 0.3 * rng.normal(size=2 * n), -3.0, 3.0)
    params = {"c": 1.0, "y_bound": 3.0, "noise_sd": 0.3, "beta": 1e-4, "fit_intercept": True}
    return x[:n], x[n:], y[:n], y[n:], params


def diabetes(seed: int):
    """sklearn's diabetes (X as sklearn ships it, rows of norm <= 0.34): rows scaled by the
    public bound 0.4 onto sqrt(3)/2; y - 175 (the public centre of 0..350), y_bound 175,
    noise_sd 55 (a public guess of the residual sd)."""
    X, y = load_diabetes(return_X_y=True)
    X = pb.preprocessing.scale_rows(X, 0.4, np.sqrt(0.75))
    xtr, xte, ytr, yte = train_test_split(X, y - 175.0, test_size=0.25, random_state=seed)
    params = {"c": 1.0, "y_bound": 175.0, "noise_sd": 55.0, "beta": 1e-6, "fit_intercept": True}
    return xtr, xte, ytr, yte, params


def abalone(seed: int):
    """UCI Abalone: the 7 measurements (UCI's units / 200) scaled by the public row bound 4
    onto sqrt(3)/2; rings - 10, y_bound 20 (rings 1..29), noise_sd 2.5 (a public guess)."""
    data = pb.datasets.load_abalone()
    X = pb.preprocessing.scale_rows(np.asarray(data.measurements), 4.0, np.sqrt(0.75))
    y = np.asarray(data.rings, dtype=float) - 10.0
    xtr, xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed)
    params = {"c": 1.0, "y_bound": 20.0, "noise_sd": 2.5, "beta": 1e-6, "fit_intercept": True}
    return xtr, xte, ytr, yte, params


def oracle_radius(xtr, ytr, s: float = 0.5) -> float:
    """2 x ||(w_ols, b_ols / s)||: the sample route's weights (the intercept column is s)."""
    ols = LinearRegression().fit(xtr, ytr)
    return 2.0 * float(np.linalg.norm(np.append(ols.coef_, ols.intercept_ / s)))


def run(name: str, make, reps: int) -> None:
    routes = {
        "noise-aware": {"route": "noise-aware"},
        "sample": {"route": "sample"},
        "sample, R*": {"route": "sample", "radius": "oracle"},
        "mean of 4, R*": {"route": "sample", "radius": "oracle", "n_samples": 4},
    }
    got = {(k, e): [] for k in routes for e in EPS}
    ols_r2 = []
    for rep in range(reps):
        xtr, xte, ytr, yte, params = make(rep)
        ols_r2.append(LinearRegression().fit(xtr, ytr).score(xte, yte))
        radius = oracle_radius(xtr, ytr)
        for key, opts in routes.items():
            opts = {k: (radius if v == "oracle" else v) for k, v in opts.items()}
            for eps in EPS:
                est = pb.PrivateLinearRegression(
                    eps=eps, delta=DELTA, random_state=1000 * rep + int(10 * eps), **params,
                    **opts,
                )  # fmt: skip
                try:
                    got[key, eps].append(est.fit(xtr, ytr).score(xte, yte))
                except pb.PrivBayesError as err:  # e.g. an infeasible target
                    print(f"  {key} eps={eps}: {type(err).__name__}: {err}", file=sys.stderr)
    print(f"\n{name}: n_train = {len(ytr)}, d = {xtr.shape[1]}, {reps} reps; OLS test R^2 = "
          f"{np.mean(ols_r2):.4f}")  # fmt: skip
    print("| route | " + " | ".join(f"eps={e:g}" for e in EPS) + " |")
    print("|---|" + "---|" * len(EPS))
    for key in routes:
        cells = [f"{np.mean(got[key, e]):.4f}" if got[key, e] else "-" for e in EPS]
        print(f"| {key} | " + " | ".join(cells) + " |")


def main(reps: int = 5) -> None:
    warnings.simplefilter("ignore", pb.SharedRandomnessWarning)
    run("synthetic", synthetic, reps)
    run("diabetes", diabetes, reps)
    try:
        pb.datasets.load_abalone()
    except (OSError, pb.PrivBayesError, ValueError) as err:
        print(f"abalone skipped: {err}")
        return
    run("abalone", abalone, reps)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
