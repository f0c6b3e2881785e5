"""Run IBM diffprivlib's mechanisms on arrays handed over as .npy files (a subprocess).

Usage: ``python dpl_runner.py DIR``. DIR holds ``spec.json`` and the arrays it names; the
answer is written to ``DIR/result.json``. Imports only numpy and diffprivlib, so that it
runs in the interpreter of a separate environment (diffprivlib 0.6.6 does not import with
scikit-learn >= 1.8): see experiments/README.md, ``make peers-env``.

spec.json: {"jobs": [job, ...]}; each job has "id", "kind" and its parameters:

* ``logreg``: diffprivlib.models.LogisticRegression(epsilon, data_norm, C,
  fit_intercept=False, random_state=seed) fitted on arrays "x", "y"; returns the weights.
* ``linreg``: diffprivlib.models.LinearRegression(epsilon, bounds_X=(-bx, bx) per column,
  bounds_y=(-y_bound, y_bound), fit_intercept=False, random_state=seed) fitted on arrays
  "x", "y" (experiments/linear_regression.py); returns the coefficients.
* ``mean``: diffprivlib.tools.mean(a 0/1 array with k ones of n, epsilon, bounds=(0, 1))
  for each k in "ks"; returns the noisy means.
* ``histogram``: diffprivlib.tools.histogram(sample, epsilon, bins=K, range=(-0.5, K-0.5))
  for each count vector in "counts"; returns the noisy histograms.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np


def versions() -> dict:
    import diffprivlib
    import sklearn

    return {
        "diffprivlib": diffprivlib.__version__,
        "scikit-learn": sklearn.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
    }


def run_job(job: dict, arrays: dict) -> dict:
    import diffprivlib
    from diffprivlib.models import LogisticRegression

    kind = job["kind"]
    if kind == "logreg":
        clf = LogisticRegression(
            epsilon=job["eps"],
            data_norm=job["data_norm"],
            C=job["C"],
            fit_intercept=False,
            random_state=job["seed"],
            max_iter=job.get("max_iter", 100),
            tol=job.get("tol", 1e-4),
            accountant=diffprivlib.BudgetAccountant(),  # a fresh one: no global spending
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.fit(arrays["x"], arrays["y"])
        return {
            "w": clf.coef_.ravel().tolist(),
            "n_iter": int(clf.n_iter_[0]),
            "warnings": sorted({type(w.message).__name__ for w in caught}),
        }
    if kind == "linreg":
        from diffprivlib.models import LinearRegression

        bx = np.asarray(job["bounds_x"], dtype=float)
        reg = LinearRegression(
            epsilon=job["eps"],
            bounds_X=(-bx, bx),
            bounds_y=(-job["y_bound"], job["y_bound"]),
            fit_intercept=False,
            random_state=job["seed"],
            accountant=diffprivlib.BudgetAccountant(),
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reg.fit(arrays["x"], arrays["y"])
        return {
            "w": np.ravel(reg.coef_).tolist(),
            "warnings": sorted({type(w.message).__name__ for w in caught}),
        }
    rng = np.random.RandomState(job["seed"])
    if kind == "mean":
        n = int(job["n"])
        out = []
        for k in job["ks"]:
            data = np.zeros(n)
            data[: int(k)] = 1.0
            out.append(
                float(
                    diffprivlib.tools.mean(
                        data,
                        epsilon=job["eps"],
                        bounds=(0.0, 1.0),
                        random_state=rng,
                        accountant=diffprivlib.BudgetAccountant(),
                    )
                )
            )
        return {"values": out}
    if kind == "histogram":
        out = []
        for counts in job["counts"]:
            k = len(counts)
            sample = np.repeat(np.arange(k), np.asarray(counts, dtype=int))
            hist, _ = diffprivlib.tools.histogram(
                sample,
                epsilon=job["eps"],
                bins=k,
                range=(-0.5, k - 0.5),
                random_state=rng,
                accountant=diffprivlib.BudgetAccountant(),
            )
            out.append([int(v) for v in hist])
        return {"values": out}
    raise ValueError(f"unknown job kind {kind!r}")


def main(folder: str) -> None:
    root = Path(folder)
    spec = json.loads((root / "spec.json").read_text())
    arrays = {name: np.load(root / f"{name}.npy") for name in spec.get("arrays", [])}
    results = {job["id"]: run_job(job, arrays) for job in spec["jobs"]}
    (root / "result.json").write_text(json.dumps({"versions": versions(), "results": results}))


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--versions":
        print(json.dumps(versions()))
    else:
        main(sys.argv[1])
