"""The model catalogue: one entry per model class, for tests/test_contract.py.

In the style of scipy.stats' distribution catalogue: each entry says how to build a typical
model, a small public n, how to generate valid data, and gives *independent* truths written
here from the textbook formulas (mpmath at 50 digits, scipy.stats), sharing no code with
the library:

* ``exact_sup(model, n, lam, r, m)``: the sup over every pair of neighbouring data sets of
  size n of D_lam between the released laws, by brute force over every data set (count
  vectors / sums) or a dense grid (Normal), in exact arithmetic;
* ``pair_divergence(model, d0, d1, lam, r, m)``: D_lam between the laws released on two
  given data sets;
* ``posterior(model, data, r, m)``: the scipy law of a scalar projection
  ``project(value)`` of the release the mechanism prescribes on ``data``;
* ``bad_data`` / ``bad_params``: inputs that must be refused, with the expected error
  and a regex naming the argument.

Adding a model = adding its entry here (tests/test_contract.py fails for an exported model
class without one). Entries without exact hooks must be listed, with the reason, in
``test_contract.NOT_EXACT``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mpmath as mp
import numpy as np
from scipy import stats

import privbayes as pb

DPS = 50


# -- independent closed forms, in mpmath ----------------------------------------------------
def _mpf(*values):
    return [mp.mpf(float(v)) for v in values]


def mp_dirichlet(a1, a2, lam) -> float:
    """D_lam(Dir(a1) || Dir(a2)) from C(a) = sum lgamma(a_k) - lgamma(sum a_k)."""
    with mp.workdps(DPS):
        lam = mp.mpf(lam)
        mix = [lam * x + (1 - lam) * y for x, y in zip(a1, a2, strict=True)]
        if min(mix) <= 0:
            return math.inf

        def c(a):
            return mp.fsum(mp.loggamma(v) for v in a) - mp.loggamma(mp.fsum(a))

        if lam == 1:
            s1 = mp.fsum(a1)
            pairs = zip(a1, a2, strict=True)
            grad = mp.fsum((x - y) * (mp.digamma(x) - mp.digamma(s1)) for x, y in pairs)
            return float(c(a2) - c(a1) + grad)
        return float((c(mix) - lam * c(a1) - (1 - lam) * c(a2)) / (lam - 1))


def mp_gamma_same_rate(p, q, lam) -> float:
    """D_lam(Gamma(p, b) || Gamma(q, b)) for any rate b: (lgamma second difference)."""
    with mp.workdps(DPS):
        lam = mp.mpf(lam)
        mix = lam * p + (1 - lam) * q
        if mix <= 0:
            return math.inf
        if lam == 1:
            return float((p - q) * mp.digamma(p) - mp.loggamma(p) + mp.loggamma(q))
        val = mp.loggamma(mix) - lam * mp.loggamma(p) - (1 - lam) * mp.loggamma(q)
        return float(val / (lam - 1))


def mp_normal_posterior(model, s, n, r, m):
    """(mean, variance) of the released Normal law for a data sum s (mpmath)."""
    mu, sg, ns = _mpf(model.mu, model.sigma, model.noise_sigma)
    r, m = _mpf(r, m)
    tau = 1 / (m * sg**2) + r * n / ns**2
    return (mu / (m * sg**2) + r * s / ns**2) / tau, 1 / tau


# -- per-model hooks ------------------------------------------------------------------------
def _compositions(n: int, k: int):
    for cut in itertools.combinations(range(n + k - 1), k - 1):
        yield np.diff((-1,) + cut + (n + k - 1,)) - 1


def _dirichlet_params(alpha, counts, r, m):
    with mp.workdps(DPS):
        r, m = _mpf(r, m)
        return [mp.mpf(float(a)) / m + r * int(c) for a, c in zip(alpha, counts, strict=True)]


def _dirichlet_alpha(model):
    return [model.alpha, model.beta] if isinstance(model, pb.BetaBernoulli) else model.alpha


def _counts(model, data) -> list[int]:
    data = np.asarray(data, float)
    if isinstance(model, pb.BetaBernoulli):
        k = int(data.sum())
        return [k, data.size - k]
    return np.bincount(data.astype(int), minlength=len(model.alpha)).tolist()


def dirichlet_exact_sup(model, n, lam, r, m) -> float:
    """Every count vector (sum n) and every move of one record between categories."""
    alpha = _dirichlet_alpha(model)
    k = len(alpha)
    best = 0.0
    for c in _compositions(n, k):
        for i, j in itertools.permutations(range(k), 2):
            if c[i] == 0:
                continue
            c2 = c.copy()
            c2[i] -= 1
            c2[j] += 1
            d = mp_dirichlet(
                _dirichlet_params(alpha, c, r, m), _dirichlet_params(alpha, c2, r, m), lam
            )
            best = max(best, d)
    return best


def dirichlet_pair(model, d0, d1, lam, r, m) -> float:
    alpha = _dirichlet_alpha(model)
    return mp_dirichlet(
        _dirichlet_params(alpha, _counts(model, d0), r, m),
        _dirichlet_params(alpha, _counts(model, d1), r, m),
        lam,
    )


def dirichlet_posterior(model, data, r, m):
    a = np.array([float(v) for v in _dirichlet_alpha(model)]) / m + r * np.array(
        _counts(model, data), float
    )
    return stats.beta(a[0], a.sum() - a[0])  # the first coordinate's marginal


def _gamma_shape(model, s, r, m):
    with mp.workdps(DPS):
        alpha, r, m = _mpf(model.alpha, r, m)
        return alpha / m + r * int(s)


def gamma_exact_sup(model, n, lam, r, m) -> float:
    """Every pair of sums (S, S') in [0, n M] with 1 <= |S - S'| <= M: exactly the pairs of
    neighbouring count vectors (tests/test_gamma_poisson.py checks that by enumeration)."""
    big = model.max_count
    best = 0.0
    for s in range(n * big + 1):
        for s2 in range(max(0, s - big), min(n * big, s + big) + 1):
            if s2 != s:
                d = mp_gamma_same_rate(
                    _gamma_shape(model, s, r, m), _gamma_shape(model, s2, r, m), lam
                )
                best = max(best, d)
    return best


def gamma_pair(model, d0, d1, lam, r, m) -> float:
    s0, s1 = int(np.sum(d0)), int(np.sum(d1))
    return mp_gamma_same_rate(_gamma_shape(model, s0, r, m), _gamma_shape(model, s1, r, m), lam)


def gamma_posterior(model, data, r, m):
    data = np.asarray(data, float)
    if model.clip:
        data = np.minimum(data, model.max_count)
    shape = model.alpha / m + r * data.sum()
    rate = model.beta / m + r * data.size
    return stats.gamma(shape, scale=1.0 / rate)


def normal_exact_sup(model, n, lam, r, m, grid: int = 41) -> float:
    """Dense grid of sums S in [n low, n high] and shifts t in [-(high-low), high-low]."""
    lo, hi = model.low, model.high
    best = mp.mpf(0)
    with mp.workdps(30):
        lam_ = mp.mpf(lam)
        shifts = [mp.mpf(float(t)) for t in np.linspace(-(hi - lo), hi - lo, 11) if t != 0]
        for s in np.linspace(n * lo, n * hi, grid):
            s = mp.mpf(float(s))
            m1, v = mp_normal_posterior(model, s, n, r, m)
            for t in shifts:
                if n * lo <= s + t <= n * hi:
                    m2, _ = mp_normal_posterior(model, s + t, n, r, m)
                    best = max(best, lam_ * (m1 - m2) ** 2 / (2 * v))
    return float(best)


def normal_pair(model, d0, d1, lam, r, m) -> float:
    n = len(d0)
    with mp.workdps(DPS):
        s0 = mp.fsum(_mpf(*d0))
        s1 = mp.fsum(_mpf(*d1))
        m1, v = mp_normal_posterior(model, s0, n, r, m)
        m2, _ = mp_normal_posterior(model, s1, n, r, m)
        return float(mp.mpf(lam) * (m1 - m2) ** 2 / (2 * v))


def normal_posterior(model, data, r, m):
    data = np.clip(np.asarray(data, float), model.low, model.high)
    tau = 1.0 / (m * model.sigma**2) + r * data.size / model.noise_sigma**2
    mean = (model.mu / (m * model.sigma**2) + r * data.sum() / model.noise_sigma**2) / tau
    return stats.norm(mean, 1.0 / math.sqrt(tau))


def _query_sum(data) -> float:
    """The exact sum, floored to a multiple of 2^-8 (what the query's release uses)."""
    from fractions import Fraction

    exact = sum(Fraction(float(v)) for v in np.asarray(data, float))
    return math.floor(exact * 256) / 256


def query_exact_sup(model, n, lam, r, m) -> float:
    """Sums S on a 1/4 grid of [0, n] and every neighbour S' with |S - S'| <= 1 on it (the
    boundary pairs are grid points); a Beta in (S, n - S) as for Beta-Bernoulli."""
    alpha = _dirichlet_alpha(model)
    grid = [k / 4 for k in range(4 * n + 1)]
    best = 0.0
    for s in grid:
        for s2 in grid:
            if s2 != s and abs(s - s2) <= 1:
                d = mp_dirichlet(
                    _dirichlet_params_real(alpha, [s, n - s], r, m),
                    _dirichlet_params_real(alpha, [s2, n - s2], r, m),
                    lam,
                )
                best = max(best, d)
    return best


def _dirichlet_params_real(alpha, sums, r, m):
    with mp.workdps(DPS):
        r, m = _mpf(r, m)
        return [mp.mpf(float(a)) / m + r * mp.mpf(v) for a, v in zip(alpha, sums, strict=True)]


def query_pair(model, d0, d1, lam, r, m) -> float:
    alpha = _dirichlet_alpha(model)
    s0, s1 = _query_sum(d0), _query_sum(d1)
    return mp_dirichlet(
        _dirichlet_params_real(alpha, [s0, len(d0) - s0], r, m),
        _dirichlet_params_real(alpha, [s1, len(d1) - s1], r, m),
        lam,
    )


def query_posterior(model, data, r, m):
    s = _query_sum(data)
    a = model.alpha / m + r * s
    b = model.beta / m + r * (len(data) - s)
    return stats.beta(a, b)


# -- the catalogue --------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    name: str
    build: Callable[[], Any]
    n: int
    data: Callable[[np.random.Generator, int], Any]
    exact_sup: Callable | None = None
    pair_divergence: Callable | None = None
    posterior: Callable | None = None
    project: Callable[[Any], Any] = lambda v: v
    bad_data: list[tuple[Any, type, str]] = field(default_factory=list)
    bad_params: list[tuple[Callable[[], Any], type, str]] = field(default_factory=list)
    knob_attrs: tuple[str, ...] = ()  # public attributes that must be read-only


CATALOGUE = [
    Entry(
        "beta-bernoulli",
        lambda: pb.BetaBernoulli(2.0, 3.0),
        7,
        lambda rng, n: (rng.random(n) < 0.3).astype(float),
        dirichlet_exact_sup,
        dirichlet_pair,
        dirichlet_posterior,
        bad_data=[([0, 1, 2], ValueError, r"data\[2\] = 2"), ([0, 0.5], ValueError, r"data\[1\]")],
        bad_params=[
            (lambda: pb.BetaBernoulli(0, 1), ValueError, "alpha"),
            (lambda: pb.BetaBernoulli(1, -1), ValueError, "beta"),
            (lambda: pb.BetaBernoulli(np.nan, 1), ValueError, "alpha"),
            (lambda: pb.BetaBernoulli(1, np.inf), ValueError, "beta"),
        ],
        knob_attrs=("alpha", "beta"),
    ),
    Entry(
        "mean-query",
        lambda: pb.models.MeanQuery(2.0, 3.0),
        3,
        lambda rng, n: rng.random(n),
        query_exact_sup,
        query_pair,
        query_posterior,
        bad_data=[([0, 1.5], ValueError, "query values"), ([0, -0.1], ValueError, "query values")],
        bad_params=[
            (lambda: pb.models.MeanQuery(0, 1), ValueError, "alpha"),
            (lambda: pb.models.MeanQuery(1, np.nan), ValueError, "beta"),
        ],
        knob_attrs=("alpha", "beta"),
    ),
    Entry(
        "dirichlet-categorical",
        lambda: pb.DirichletCategorical([2.0, 1.5, 3.0]),
        5,
        lambda rng, n: rng.integers(0, 3, n).astype(float),
        dirichlet_exact_sup,
        dirichlet_pair,
        dirichlet_posterior,
        project=lambda v: np.asarray(v)[..., 0],
        bad_data=[([0, 3], ValueError, r"data\[1\] = 3"), ([0, -1], ValueError, r"data\[1\]")],
        bad_params=[
            (lambda: pb.DirichletCategorical([1.0, 0.0]), ValueError, "alpha"),
            (lambda: pb.DirichletCategorical([1.0, np.nan]), ValueError, "alpha"),
            (lambda: pb.DirichletCategorical([1.0]), ValueError, "alpha"),
        ],
        knob_attrs=("alpha",),
    ),
    Entry(
        "gamma-poisson",
        lambda: pb.GammaPoisson(4.0, 1.5, 2),
        6,
        lambda rng, n: np.minimum(rng.poisson(1.0, n), 2).astype(float),
        gamma_exact_sup,
        gamma_pair,
        gamma_posterior,
        bad_data=[
            ([0, 1, 3], ValueError, r"max_count = 2; data\[2\] = 3"),
            ([0, -1], ValueError, r"data\[1\] = -1"),
            ([0, 1.5], ValueError, r"integer counts; data\[1\] = 1.5"),
        ],
        bad_params=[
            (lambda: pb.GammaPoisson(0, 1, 5), ValueError, "alpha"),
            (lambda: pb.GammaPoisson(1, -2, 5), ValueError, "beta"),
            (lambda: pb.GammaPoisson(np.nan, 1, 5), ValueError, "alpha"),
            (lambda: pb.GammaPoisson(1, np.inf, 5), ValueError, "beta"),
            (lambda: pb.GammaPoisson(1, 1, 0), ValueError, "max_count"),
            (lambda: pb.GammaPoisson(1, 1, 2.5), TypeError, "max_count"),
            (lambda: pb.GammaPoisson(1, 1, True), TypeError, "max_count"),
            (lambda: pb.GammaPoisson(1, 1, 5, clip="yes"), TypeError, "clip"),
        ],
        knob_attrs=("alpha", "beta", "max_count", "clip"),
    ),
    Entry(
        "normal",
        lambda: pb.NormalKnownVariance(0.5, 2.0, 1.5, -2.0, 3.0),
        6,
        lambda rng, n: np.clip(rng.normal(0.8, 1.5, n), -2.0, 3.0),
        normal_exact_sup,
        normal_pair,
        normal_posterior,
        bad_data=[([0.0, 3.5], ValueError, r"\[low, high\].*data\[1\] = 3.5")],
        bad_params=[
            (lambda: pb.NormalKnownVariance(0, 0, 1, 0, 1), ValueError, "sigma"),
            (lambda: pb.NormalKnownVariance(0, 1, -1, 0, 1), ValueError, "noise_sigma"),
            (lambda: pb.NormalKnownVariance(np.nan, 1, 1, 0, 1), ValueError, "mu"),
            (lambda: pb.NormalKnownVariance(0, 1, 1, 1, 1), ValueError, "low must be < high"),
            (lambda: pb.NormalKnownVariance(0, 1, 1, 0, np.inf), ValueError, "high"),
            (lambda: pb.NormalKnownVariance(0, np.inf, 1, 0, 1), ValueError, "sigma"),
            (lambda: pb.NormalKnownVariance(0, 1, 1, 0, 1, clip=1), TypeError, "clip"),
        ],
        knob_attrs=("mu", "sigma", "noise_sigma", "low", "high", "clip"),
    ),
    Entry(
        "logistic",
        lambda: pb.BayesianLogisticRegression(beta=0.5, c=1.0),
        8,
        lambda rng, n: (
            np.clip(rng.normal(0, 0.4, (n, 2)), -0.7, 0.7),
            np.where(rng.random(n) < 0.5, 1.0, -1.0),
        ),
        bad_data=[
            ((np.full((2, 2), 2.0), np.ones(2)), ValueError, "norm > c"),
            ((np.zeros((2, 2)), np.array([1.0, 2.0])), ValueError, r"y\[1\] = 2"),
            ((np.zeros((2, 2)), np.ones(3)), ValueError, "y must have shape"),
        ],
        bad_params=[
            (lambda: pb.BayesianLogisticRegression(beta=0), ValueError, "beta"),
            (lambda: pb.BayesianLogisticRegression(c=np.nan), ValueError, "c"),
        ],
        knob_attrs=("beta", "c", "radius"),
    ),
    Entry(
        "multinomial",
        lambda: pb.MultinomialLogisticRegression(beta=0.5, c=1.0, n_classes=3),
        8,
        lambda rng, n: (
            np.clip(rng.normal(0, 0.4, (n, 2)), -0.7, 0.7),
            rng.integers(0, 3, n).astype(float),
        ),
        bad_data=[
            ((np.full((2, 2), 2.0), np.ones(2)), ValueError, "norm > c"),
            ((np.zeros((2, 2)), np.array([1.0, 3.0])), ValueError, r"n_classes=3.*y\[1\] = 3"),
            ((np.zeros((2, 2)), np.array([0.0, 1.5])), ValueError, r"y\[1\] = 1.5"),
            ((np.zeros((2, 2)), np.array([-1.0, 1.0])), ValueError, r"y\[0\] = -1"),
            ((np.zeros((2, 2)), np.ones(3)), ValueError, "y must have shape"),
        ],
        bad_params=[
            (lambda: pb.MultinomialLogisticRegression(0, 1.0, 3), ValueError, "beta"),
            (lambda: pb.MultinomialLogisticRegression(0.1, -1.0, 3), ValueError, "c"),
            (lambda: pb.MultinomialLogisticRegression(0.1, np.nan, 3), ValueError, "c"),
            (lambda: pb.MultinomialLogisticRegression(0.1, 1.0, 1), ValueError, "n_classes"),
            (lambda: pb.MultinomialLogisticRegression(0.1, 1.0, 2.5), ValueError, "n_classes"),
            (
                lambda: pb.MultinomialLogisticRegression(0.1, 1.0, 3, radius=-2.0),
                ValueError,
                "radius",
            ),
        ],
        knob_attrs=("beta", "c", "n_classes"),
    ),
    Entry(
        "linear",
        lambda: pb.BayesianLinearRegression(beta=0.5, c=1.0, y_bound=1.0, noise_sd=0.7, radius=3.0),
        8,
        lambda rng, n: (
            np.clip(rng.normal(0, 0.4, (n, 2)), -0.7, 0.7),
            np.clip(rng.normal(0, 0.5, n), -1.0, 1.0),
        ),
        bad_data=[
            ((np.full((2, 2), 2.0), np.zeros(2)), ValueError, "norm > c"),
            ((np.zeros((2, 2)), np.array([0.0, 2.0])), ValueError, r"y\[1\] = 2"),
            ((np.zeros((2, 2)), np.array([0.0, np.nan])), ValueError, "finite"),
            ((np.zeros((2, 2)), np.ones(3)), ValueError, "y must have shape"),
        ],
        bad_params=[
            (lambda: pb.BayesianLinearRegression(beta=0), ValueError, "beta"),
            (lambda: pb.BayesianLinearRegression(noise_sd=-1.0), ValueError, "noise_sd"),
            (lambda: pb.BayesianLinearRegression(y_bound=np.nan), ValueError, "y_bound"),
            (lambda: pb.BayesianLinearRegression(radius=0.0), ValueError, "radius"),
        ],
        knob_attrs=("beta", "c", "y_bound", "noise_sd", "radius"),
    ),
    Entry(
        "poisson",
        lambda: pb.BayesianPoissonRegression(beta=0.5, c=1.0, max_count=4, radius=1.0),
        8,
        lambda rng, n: (
            np.clip(rng.normal(0, 0.4, (n, 2)), -0.7, 0.7),
            rng.integers(0, 5, n).astype(float),
        ),
        bad_data=[
            ((np.full((2, 2), 2.0), np.zeros(2)), ValueError, "norm > c"),
            ((np.zeros((2, 2)), np.array([0.0, 5.0])), ValueError, r"y\[1\] = 5"),
            ((np.zeros((2, 2)), np.array([0.5, 1.0])), ValueError, r"y\[0\] = 0.5"),
            ((np.zeros((2, 2)), np.ones(3)), ValueError, "y must have shape"),
        ],
        bad_params=[
            (lambda: pb.BayesianPoissonRegression(beta=0), ValueError, "beta"),
            (lambda: pb.BayesianPoissonRegression(max_count=0), ValueError, "max_count"),
            (lambda: pb.BayesianPoissonRegression(radius=-1.0), ValueError, "radius"),
        ],
        knob_attrs=("beta", "c", "max_count", "radius"),
    ),
]

BY_NAME = {e.name: e for e in CATALOGUE}
