"""Regression data with public bounds: every map is row-wise with public constants.

Each design returns (x, y) with ||x_i||_2 <= c = 1 and |y_i| <= y_bound by construction
(no clipping of a value inside its documented range), so the bounds are true statements
about every record and the same for neighbouring data sets:

* **Abalone** (UCI, 4,177 records): y = rings - 15, y_bound = 14 (rings lie in 1..29 per
  ``abalone.names``: 15 is the midpoint of that public range). x = [sex dummies F, I
  (reference M), the 7 measurements divided by the per-attribute maxima published in
  ``abalone.names`` rounded up to 0.1 and clipped to [0, 1], a constant 1] / 3 (9
  unit-bounded blocks: the dummies of one categorical have norm <= 1 together). d = 10.
* **Adult** (UCI, 30,162 / 15,060 records without missing values, the canonical split):
  y = hours-per-week - 50, y_bound = 50 (a week's hours are recorded in 1..99; 100 is the
  public cap also used by ``statistical_query.py``). x = [age/100, education-num/16,
  log1p(capital-gain)/log1p(1e5), log1p(capital-loss)/log1p(1e5) (clipped to [0, 1]),
  dummies of workclass, marital-status, occupation, relationship, race, sex (first level
  of each public codebook the reference), a constant 1] / sqrt(11). d = 41. education
  (the same information as education-num) and native-country (41 levels, most with a
  handful of records) are left out: a 96-dimensional design makes the noise-aware
  posterior cost ~90 s per release (its Newton steps are O(d^5)).
* **synthetic**: x = z / max(1, ||z||) with z ~ N(0, s_x^2 I_d), s_x = 0.5 / sqrt(d) (so
  E||z||^2 = 0.25; the rescaling touches the rows with ||z|| > 1, P(chi2_5 > 20) = 0.12%
  of them at d = 5); w ~ the
  model's prior N(0, (n beta)^-1 I); y = w.x + N(0, noise_sd^2). A data set with any
  |y_i| > y_bound is redrawn (a rule on the data set alone, so the posterior given an
  accepted data set is unchanged and posterior intervals stay exactly calibrated over
  accepted draws).

Dummy coding (one level dropped per categorical, with a constant) keeps X^T X of full rank
in the population; the one-hot coding of ``logistic_regression.py`` plus a constant is
exactly collinear, which no regression method here needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privbayes import datasets

# the per-attribute maxima of abalone.names (mm/200, g/200), rounded up to 0.1
ABALONE_BOUNDS = np.array([0.9, 0.7, 1.2, 2.9, 1.5, 0.8, 1.1])
ABALONE_CENTRE, ABALONE_Y_BOUND = 15.0, 14.0
ADULT_CENTRE, ADULT_Y_BOUND = 50.0, 50.0
ADULT_DUMMIES = ("workclass", "marital-status", "occupation", "relationship", "race", "sex")
C_BOUND = 1.0  # every design has ||x|| <= 1


@dataclass(frozen=True)
class Design:
    """A regression task: training and test arrays and the public bounds."""

    name: str
    xtr: np.ndarray
    ytr: np.ndarray
    xte: np.ndarray
    yte: np.ndarray
    c: float
    y_bound: float
    w: np.ndarray | None = None  # the true coefficients (synthetic only)


def dummies(values, levels) -> np.ndarray:
    """One-hot against the public codebook without its first level (the reference)."""
    return datasets.one_hot(values, levels)[:, 1:]


def abalone_xy(data: datasets.Abalone) -> tuple[np.ndarray, np.ndarray]:
    meas = np.clip(data.measurements / ABALONE_BOUNDS, 0.0, 1.0)
    sex = dummies(data.sex, ("M", "F", "I"))
    x = np.hstack([sex, meas, np.ones((len(data), 1))]) / 3.0
    return x, data.rings.astype(float) - ABALONE_CENTRE


def adult_xy(data: datasets.Adult) -> tuple[np.ndarray, np.ndarray]:
    log_money = np.log1p(1e5)
    num = np.column_stack(
        [
            data.column("age") / 100.0,
            data.column("education-num") / 16.0,
            np.log1p(data.column("capital-gain")) / log_money,
            np.log1p(data.column("capital-loss")) / log_money,
        ]
    )
    blocks = [dummies(data.categorical[k], datasets.ADULT_CATEGORICAL[k]) for k in ADULT_DUMMIES]
    x = np.hstack([np.clip(num, 0.0, 1.0)] + blocks + [np.ones((len(data), 1))])
    x /= np.sqrt(4 + len(ADULT_DUMMIES) + 1)
    return x, data.column("hours-per-week") - ADULT_CENTRE


_CACHE: dict = {}


def load(name: str, data_dir=None) -> dict:
    key = (name, data_dir)
    if key not in _CACHE:
        if name == "abalone":
            x, y = abalone_xy(datasets.load_abalone(data_dir))
            _CACHE[key] = {"x": x, "y": y, "y_bound": ABALONE_Y_BOUND}
        elif name == "adult":
            tr = adult_xy(datasets.load_adult(data_dir, "train"))
            te = adult_xy(datasets.load_adult(data_dir, "test"))
            _CACHE[key] = {"train": tr, "test": te, "y_bound": ADULT_Y_BOUND}
        else:
            raise ValueError(f"unknown data set {name!r}")
        d = _CACHE[key]
        for x, y in [(d["x"], d["y"])] if "x" in d else [d["train"], d["test"]]:
            # the bounds are facts about every record (refused otherwise, never clipped)
            assert np.linalg.norm(x, axis=1).max() <= C_BOUND
            assert np.abs(y).max() <= d["y_bound"]
    return _CACHE[key]


def real_split(
    name: str, rng, test_fraction: float = 0.3, max_train: int = 0, max_test: int = 0, data_dir=None
) -> Design:
    """A random split (Abalone) or the canonical one (Adult), subsampled if asked; the
    split depends on ``rng`` only, so every method sees the same one (paired)."""
    data = load(name, data_dir)
    if "x" in data:
        x, y = data["x"], data["y"]
        idx = rng.permutation(len(y))
        n_test = int(round(test_fraction * len(y)))
        xtr, ytr, xte, yte = x[idx[n_test:]], y[idx[n_test:]], x[idx[:n_test]], y[idx[:n_test]]
    else:
        (xtr, ytr), (xte, yte) = data["train"], data["test"]
    if max_train and len(ytr) > max_train:
        keep = rng.choice(len(ytr), max_train, replace=False)
        xtr, ytr = xtr[keep], ytr[keep]
    if max_test and len(yte) > max_test:
        keep = rng.choice(len(yte), max_test, replace=False)
        xte, yte = xte[keep], yte[keep]
    return Design(name, xtr, ytr, xte, yte, C_BOUND, data["y_bound"])


def synthetic(
    rng, n: int, d: int, prior_sd: float, noise_sd: float, y_bound: float, n_test: int = 0
) -> Design:
    """w ~ N(0, prior_sd^2 I), rows in the unit ball, y = w.x + N(0, noise_sd^2); redrawn
    until every |y| <= y_bound (train and test alike)."""
    sx = 0.5 / np.sqrt(d)
    for _ in range(1000):
        w = prior_sd * rng.standard_normal(d)
        z = sx * rng.standard_normal((n + n_test, d))
        # rows beyond the ball are pulled just inside it (norm <= 1 after rounding)
        x = z / np.maximum(1.0, np.linalg.norm(z, axis=1) * (1.0 + 1e-12))[:, None]
        y = x @ w + noise_sd * rng.standard_normal(n + n_test)
        if np.abs(y).max() <= y_bound:
            return Design("synthetic", x[:n], y[:n], x[n:], y[n:], C_BOUND, y_bound, w)
    raise RuntimeError("no synthetic data set within y_bound in 1000 draws: raise y_bound")


def synthetic_snr(d: int, prior_sd: float, noise_sd: float) -> float:
    """E[(w.x)^2] / noise_sd^2 of :func:`synthetic` (ignoring the rare rescaling)."""
    return prior_sd**2 * 0.25 / noise_sd**2
