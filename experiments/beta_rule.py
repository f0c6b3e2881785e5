"""beta="auto" against the fixed betas of the README, on the README's data (issue 21 §5).

Test accuracy of one private release (backend "auto": the certified back-end chosen from
public inputs) at eps(lam = 2) in {0.1, 1, 10}, a few seeds, for

* breast cancer (scikit-learn; the README's features: X / 4000 clipped to 0.8, the
  intercept column s = 0.5 inside the release, c = 1; a fresh 70/30 split per seed),
* Adult (``--data-dir`` or ``PRIVBAYES_DATA``, docs/data.md; the features of
  ``logistic_regression.py``: c = 1, a constant column included, d = 105; the canonical
  train/test split, a random ``--adult-train`` rows of the training set per seed),
* iris, 3 classes (the README's softmax example, train accuracy: n = 150).

Every beta is public: the rule's (``pb.auto_beta``: c^2 d / (n M^2), M = 10), the README's
(1e-3 binary, 1e-2 softmax) and the models' default (1e-2). Prints a Markdown table (mean
+- standard error over seeds) and the knob r each beta got. Run:
``python experiments/beta_rule.py [--seeds 5] [--data-dir DIR]`` (a few minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import privbayes as pb  # noqa: E402
from privbayes import datasets  # noqa: E402

EPS = (0.1, 1.0, 10.0)
LAM = 2.0


def breast_cancer(rng):
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = pb.preprocessing.clip_rows(X / 4000.0, c=0.8)
    idx = rng.permutation(len(y))
    cut = int(round(0.3 * len(y)))
    te, tr = idx[:cut], idx[cut:]
    return X[tr], y[tr], X[te], y[te]


def iris(rng):
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = pb.preprocessing.clip_rows((X - 4.0) / 8.0, c=0.85)
    return X, y, X, y  # the README reports train accuracy (n = 150)


def adult_loader(data_dir, n_train):
    from logistic_regression import adult_features

    train = adult_features(datasets.load_adult(data_dir, "train"))
    test = adult_features(datasets.load_adult(data_dir, "test"))

    def split(rng):
        x, y = train
        keep = rng.choice(len(y), min(n_train, len(y)), replace=False) if n_train else slice(None)
        return x[keep], y[keep], test[0], test[1]

    return split


def accuracy(w, x, y, intercept: bool, classes: int) -> float:
    w = np.asarray(w)
    if classes == 2:
        score = x @ w[:-1] + w[-1] if intercept else x @ w
        return float(np.mean((score > 0) == (y > 0.5)))
    scores = x @ w[:-1] + w[-1] if intercept else x @ w
    return float(np.mean(np.argmax(scores, axis=1) == y))


def run(name, split, betas, intercept, classes, seeds, out, backend="auto"):
    for beta in betas:
        for eps in EPS:
            accs, knobs, certs = [], [], []
            for seed in range(seeds):
                xtr, ytr, xte, yte = split(np.random.default_rng(seed))
                if classes == 2:
                    model = pb.BayesianLogisticRegression(
                        beta, 1.0, fit_intercept=intercept, backend=backend
                    )
                else:
                    model = pb.MultinomialLogisticRegression(
                        beta, 1.0, classes, fit_intercept=intercept, backend=backend
                    )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", pb.KnobCappedWarning)  # reported below
                    warnings.simplefilter("ignore", pb.SharedRandomnessWarning)
                    rel = pb.sample(model, (xtr, ytr), LAM, eps, rng=1000 + seed)
                accs.append(accuracy(rel.value, xte, yte, intercept, classes))
                knobs.append(rel.r)
                certs.append(rel.eps)
                used = rel.calibration.model
            a = np.array(accs)
            se = a.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else 0.0
            shown = f"auto ({used.beta:.3g})" if beta == "auto" else f"{beta:g}"
            capped = " (capped)" if np.mean(certs) < 0.5 * eps else ""
            out(
                f"| {name} | {shown} | {eps:g} | {a.mean():.3f} ± {se:.3f} | "
                f"{np.median(knobs):.3g} | {np.mean(certs):.3g}{capped} | {used.backend} |"
            )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--adult-train", type=int, default=0, help="0: all 30,162 rows")
    p.add_argument("--skip", default="", help="comma list of data sets to skip")
    p.add_argument(
        "--adult-backend",
        default="auto",
        help="Adult's back-end: auto (certified; Langevin there, minutes per release on a "
        "busy machine) or imh (approximate, ~10x faster; the same accuracy in the peers study)",
    )
    args = p.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    t0 = time.time()
    print(f"lam = {LAM:g}; {args.seeds} seeds; test accuracy of one release (iris: train)")
    print("| data | beta | eps | accuracy | r | certified eps | back-end |")
    print("|---|---|---|---|---|---|---|")
    if "cancer" not in skip:
        run("breast cancer", breast_cancer, ["auto", 1e-3, 1e-2], True, 2, args.seeds, print)
    if "iris" not in skip:
        run("iris (K = 3)", iris, ["auto", 1e-2], True, 3, args.seeds, print)
    if "adult" not in skip:
        try:
            split = adult_loader(args.data_dir, args.adult_train)
        except (OSError, FileNotFoundError) as exc:
            print(f"(Adult skipped: {exc})")
        else:
            betas = ["auto", 1e-3, 1e-2]
            run("adult", split, betas, False, 2, args.seeds, print, args.adult_backend)
    print(f"wall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
