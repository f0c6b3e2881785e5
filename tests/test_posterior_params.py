"""The conjugate models' public release parameters (``posterior_params``, ``count_step``,
``centre``) and the Dirichlet family's search functions (``float_sup``, ``knob_resolution``).

Truths: the library's own release drawn with the same generator (draw for draw), exact
rationals for the parameters' arithmetic, and mpmath's Renyi divergence between Beta laws
over every data set for the float sup.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import privbayes as pb
from privbayes.data import statistics
from privbayes.models import MeanQuery
from privbayes.sampling.conjugate import log_gamma_variates, sample_dirichlet_log

SETTINGS = [("diffused", 3.0, 0.2), ("concentrated", 3.0, 0.2), ("diffused", 2.0, 1e-3)]


# -- Dirichlet family ------------------------------------------------------------------------


@pytest.mark.parametrize("method, lam, eps", SETTINGS)
def test_dirichlet_params_give_the_release_draw_for_draw(method, lam, eps):
    cases = [
        (pb.BetaBernoulli(1.0, 2.0), np.r_[np.ones(7), np.zeros(43)]),
        (pb.DirichletCategorical([0.5, 1.0, 3.0]), np.repeat([0, 1, 2], [4, 0, 9])),
    ]
    for model, data in cases:
        counts, n = statistics(model, data)
        cal = pb.calibrate(model, n, lam, eps, method)
        params = model.posterior_params(n, counts, cal.r, cal.m)
        assert params.shape == (model.K,)
        for seed in range(4):
            lib = pb.sample(model, data, lam, eps, method, rng=np.random.default_rng(seed))
            ours = sample_dirichlet_log(params, np.random.default_rng(seed))
            np.testing.assert_array_equal(np.asarray(lib.log_value), ours)


def test_mean_query_params_give_the_release():
    values = np.linspace(0, 1, 50) ** 2  # a fractional sum
    model = MeanQuery()
    (s, rest), n = statistics(model, values)
    assert model.count_step == 2.0**-8 and s % model.count_step == 0 and s + rest == n
    assert s <= math.fsum(values) < s + model.count_step  # the floored sum
    cal = pb.calibrate(model, n, 3.0, 0.2, "diffused")
    params = model.posterior_params(n, [s, rest], cal.r, cal.m)
    for seed in range(3):
        lib = pb.release_query(values, 3.0, 0.2, rng=np.random.default_rng(seed))
        ours = sample_dirichlet_log(params, np.random.default_rng(seed))
        np.testing.assert_array_equal(np.asarray(lib.log_value), ours)


def test_count_step():
    assert pb.BetaBernoulli().count_step == 1.0
    assert pb.DirichletCategorical([1.0, 2.0, 3.0]).count_step == 1.0
    assert MeanQuery().count_step == 2.0**-8


@pytest.mark.parametrize(
    "model, r, m",
    [
        (pb.BetaBernoulli(0.3, 7.0), 0.123456789, 1.0),
        (pb.BetaBernoulli(1e-4, 1.0), 1.0, 0.0031381351836690),  # the issue-12 example prior
        (pb.DirichletCategorical([0.7, 1.1, 5.0]), 0.31, 0.77),
        (MeanQuery(2.0, 0.5), 0.4, 1.0),
    ],
)
def test_dirichlet_params_are_exact_and_neighbours_differ_by_r(model, r, m):
    """Every count vector of n records: the float parameters equal a + r' c in exact
    rationals, with one a and one r' (so neighbours differ by exactly +-r'), and a, r' are
    alpha/m and r up to the grid's tiny relative step."""
    n, k, step = 6, model.K, model.count_step
    units = int(round(n / step)) if step < 1 else n
    if k == 2:
        grid = [(j * (n / units),) for j in range(units + 1)]
        vectors = [(s, n - s) for (s,) in grid]
    else:
        vectors = [c for c in itertools.product(range(n + 1), repeat=k) if sum(c) == n]
    params = model.posterior_params(n, np.array(vectors, float), r, m)
    assert params.shape == (len(vectors), k)
    zero = model.posterior_params(n, np.zeros(k), r, m)
    one = model.posterior_params(n, np.eye(k)[0], r, m)
    a = [Fraction(float(v)) for v in zero]
    r_t = Fraction(float(one[0])) - a[0]
    assert 0 < r_t <= Fraction(r) and float(r_t) == pytest.approx(r, rel=1e-12)
    alpha = np.array([model.alpha, model.beta]) if k == 2 else np.asarray(model.alpha)
    np.testing.assert_allclose(zero, alpha / m, rtol=1e-9)
    for c, row in zip(vectors, params, strict=True):
        for j in range(k):
            assert Fraction(float(row[j])) == a[j] + r_t * Fraction(c[j])
    # leading axes are kept, and agree with row-by-row calls
    block = np.array(vectors[:6], float).reshape(2, 3, k)
    got = model.posterior_params(n, block, r, m)
    assert got.shape == (2, 3, k)
    np.testing.assert_array_equal(got.reshape(6, k), params[:6])


def test_dirichlet_params_refuse_bad_input():
    model = pb.BetaBernoulli()
    with pytest.raises(ValueError, match="shape"):
        model.posterior_params(5, [1.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        model.posterior_params(5, 3.0)
    for bad in ([-1.0, 6.0], [np.nan, 5.0], [np.inf, 0.0]):
        with pytest.raises(ValueError, match="finite and >= 0"):
            model.posterior_params(5, bad)
    with pytest.raises(TypeError):
        model.posterior_params(5, ["a", "b"])
    for r, m in [(0.0, 1.0), (1.5, 1.0), (1.0, 0.0), (1.0, np.nan)]:
        with pytest.raises(ValueError):
            model.posterior_params(5, [2.0, 3.0], r, m)
    with pytest.raises(ValueError):
        model.posterior_params(-1, [0.0, 0.0])
    with pytest.raises(ValueError, match="overflows"):
        pb.BetaBernoulli(1e300, 1.0).posterior_params(5, [2.0, 3.0], 1.0, 1e-10)


def _beta_renyi(p, q, lam) -> float:
    """D_lam(Beta(p) || Beta(q)) by its closed form, in mpmath at 50 digits."""
    mpmath.mp.dps = 50
    p = [mpmath.mpf(float(v)) for v in p]
    q = [mpmath.mpf(float(v)) for v in q]
    lam = mpmath.mpf(lam)
    mix = [lam * a + (1 - lam) * b for a, b in zip(p, q, strict=True)]
    if min(mix) <= 0:
        return math.inf
    lb = lambda v: mpmath.loggamma(v[0]) + mpmath.loggamma(v[1]) - mpmath.loggamma(v[0] + v[1])  # noqa: E731
    return float((lb(mix) - lam * lb(p) - (1 - lam) * lb(q)) / (lam - 1))


@pytest.mark.parametrize(
    "alpha, beta, n, lam, r, m",
    [(1.0, 1.0, 8, 2.0, 0.3, 1.0), (0.5, 3.0, 11, 5.0, 0.05, 1.0), (2.0, 0.7, 6, 3.0, 1.0, 0.2)],
)
def test_float_sup_equals_the_exact_sup_over_every_data_set(alpha, beta, n, lam, r, m):
    """Truth: the Renyi divergence between the released laws (parameters from the public
    posterior_params) over every data set of size n and every one-record change."""
    model = pb.BetaBernoulli(alpha, beta)
    best = 0.0
    for k in range(n + 1):
        for k2 in (k - 1, k + 1):
            if 0 <= k2 <= n:
                p = model.posterior_params(n, [k, n - k], r, m)
                q = model.posterior_params(n, [k2, n - k2], r, m)
                best = max(best, _beta_renyi(p, q, lam))
    got = model.float_sup(n, lam, r, m)
    assert got == pytest.approx(best, rel=1e-10)
    assert float(model.rdp(n, lam, r, m)) >= best  # the certificate is an upper bound


def test_float_sup_edges_and_errors():
    model = pb.BetaBernoulli(1.0, 1.0)
    assert model.float_sup(0, 2.0, 0.5) == 0.0
    # unbounded once r' (lam - 1) >= min(a): a = 1, r = 1, lam = 2
    assert model.float_sup(10, 2.0, 1.0, 1.0) == math.inf
    assert math.isinf(float(model.rdp(10, 2.0, 1.0, 1.0)))
    k3 = pb.DirichletCategorical(np.ones(8))  # the vectorised path (K > 4)
    assert k3.float_sup(20, 2.0, 0.3) == pytest.approx(float(k3.rdp(20, 2.0, 0.3)), rel=1e-10)
    for lam in (1.0, 0.5, math.inf, math.nan):
        with pytest.raises(ValueError, match="lam"):
            model.float_sup(10, lam, 0.5)
    for r in (0.0, 1.1):
        with pytest.raises(ValueError):
            model.float_sup(10, 2.0, r)


def test_knob_resolution_is_the_grid_step_of_r():
    """Diffused: r' is r rounded down to a multiple of the power of two knob * resolution."""
    model = pb.BetaBernoulli(1.0, 3.0)
    for n, r in [(10, 0.3), (10**6, 0.123456789), (10**9, 1e-3)]:
        res = model.knob_resolution(n, "diffused", r)
        assert 0 < res < 1e-6
        unit = 2.0 ** round(math.log2(r * res))
        assert r * res == pytest.approx(unit, rel=1e-12)
        zero = model.posterior_params(n, [0.0, 0.0], r)
        one = model.posterior_params(n, [1.0, 0.0], r)
        r_t = Fraction(float(one[0])) - Fraction(float(zero[0]))
        assert r_t == math.floor(Fraction(r) / Fraction(unit)) * Fraction(unit)
    # concentrated: the prior a_k ~ alpha_k/m moves on steps of about (a_k + n) 2^-53
    for n, m in [(10, 0.5), (10**6, 1e-3)]:
        res = model.knob_resolution(n, "concentrated", m)
        a = model.posterior_params(n, [0.0, 0.0], 1.0, m)
        rough = max((v + n) * 2.0**-53 / v for v in a.tolist())
        assert rough <= res <= 4 * rough
    with pytest.raises(ValueError, match="method"):
        model.knob_resolution(10, "direct", 1.0)
    with pytest.raises(ValueError):
        model.knob_resolution(10, "diffused", 0.0)


def test_calibration_is_consistent_with_the_search_functions():
    """The knob pb.calibrate returns sits where the float sup crosses the target."""
    model = pb.BetaBernoulli(1.0, 1.0)
    n, lam, eps = 1000, 2.0, 0.1
    cal = pb.calibrate(model, n, lam, eps, "diffused")
    assert model.float_sup(n, lam, cal.r) <= eps
    assert cal.eps == pytest.approx(model.float_sup(n, lam, cal.r), rel=1e-9)
    assert model.float_sup(n, lam, cal.r * (1 + 1e-6)) > eps * (1 - 1e-9)


# -- Gamma-Poisson ---------------------------------------------------------------------------


@pytest.mark.parametrize("method, lam, eps", SETTINGS)
def test_gamma_params_give_the_release_draw_for_draw(method, lam, eps):
    model = pb.GammaPoisson(0.5, 2.0, 5)
    counts = np.array([0, 3, 5, 1, 2, 0, 4])
    s, n = statistics(model, counts)
    assert s == counts.sum()
    cal = pb.calibrate(model, n, lam, eps, method)
    shape, log_rate = model.posterior_params(n, s, cal.r, cal.m)
    assert isinstance(shape, float) and isinstance(log_rate, float)
    for seed in range(4):
        lib = pb.sample(model, counts, lam, eps, method, rng=np.random.default_rng(seed))
        ours = log_gamma_variates(np.full(1, shape), np.random.default_rng(seed)) - log_rate
        assert lib.log_value == ours[0] and lib.value == np.exp(ours)[0]


def test_gamma_params_arithmetic_and_errors():
    model = pb.GammaPoisson(1.5, 0.25, 9)
    n, r, m = 40, 0.37, 0.61
    sums = np.arange(0, n * 9 + 1, 7)
    shape, log_rate = model.posterior_params(n, sums.reshape(-1, 1), r, m)
    assert shape.shape == (sums.size, 1)
    for s, got in zip(sums.tolist(), shape.ravel().tolist(), strict=True):
        exact = Fraction(1.5) / Fraction(m) + Fraction(r) * s
        assert abs(Fraction(got) - exact) <= 2 * 2.0**-53 * exact  # two roundings
    exact_rate = Fraction(0.25) / Fraction(m) + Fraction(r) * n
    mpmath.mp.dps = 30
    truth = float(mpmath.log(mpmath.mpf(exact_rate.numerator) / exact_rate.denominator))
    assert log_rate == pytest.approx(truth, rel=1e-15)
    # beta/m overflows: the rate is still faithful in log space
    big = pb.GammaPoisson(1.0, 1e300, 1)
    _, lr = big.posterior_params(10, 3, 1.0, 1e-10)
    assert lr == pytest.approx(float(mpmath.log(mpmath.mpf(1e300) / mpmath.mpf(1e-10))), rel=1e-14)
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="finite and >= 0"):
            model.posterior_params(n, bad, r, m)
    with pytest.raises(TypeError):
        model.posterior_params(n, "3")
    with pytest.raises(ValueError):
        model.posterior_params(n, 3, 0.0)
    with pytest.raises(ValueError, match="overflows"):
        pb.GammaPoisson(1e300, 1.0, 1).posterior_params(10, 3, 1.0, 1e-10)


# -- Normal ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method, lam, eps", SETTINGS)
def test_normal_params_give_the_release_draw_for_draw(method, lam, eps):
    model = pb.NormalKnownVariance(0.5, 2.0, 1.0, -3.0, 3.5)
    x = np.linspace(-3, 3.5, 7) ** 3 / 13
    s_c, n = statistics(model, x)
    assert model.centre == 0.25
    assert s_c == math.fsum((x - model.centre).tolist())  # correctly rounded centred sum
    cal = pb.calibrate(model, n, lam, eps, method)
    loc, offset, sd = model.posterior_params(n, s_c, cal.r, cal.m)
    assert all(isinstance(v, float) for v in (loc, offset, sd))
    for seed in range(4):
        lib = pb.sample(model, x, lam, eps, method, rng=np.random.default_rng(seed))
        ours = offset + (loc + sd * np.random.default_rng(seed).standard_normal(1))
        assert lib.value == ours[0]


def test_normal_params_are_the_tempered_posterior():
    """offset + loc and sd against the posterior of prior^(1/m) likelihood^r, in rationals."""
    mu, sigma, s, lo, hi = 1.25, 3.0, 0.7, -2.0, 5.0
    model = pb.NormalKnownVariance(mu, sigma, s, lo, hi)
    n, r, m = 25, 0.3, 0.8
    x = np.linspace(lo, hi, n)
    s_c, _ = statistics(model, x)
    loc, offset, sd = model.posterior_params(n, np.array([s_c, s_c]), r, m)
    assert loc.shape == (2,)
    p0 = 1 / (Fraction(m) * Fraction(sigma) ** 2)
    tau = p0 + Fraction(r) * n / Fraction(s) ** 2
    total = sum(Fraction(v) for v in x.tolist())
    mean = (Fraction(mu) * p0 + Fraction(r) * total / Fraction(s) ** 2) / tau
    assert offset + loc[0] == pytest.approx(float(mean), rel=1e-13)
    assert sd == pytest.approx(float(tau) ** -0.5, rel=1e-14)
    with pytest.raises(ValueError, match="finite"):
        model.posterior_params(n, np.nan, r, m)
    with pytest.raises(TypeError):
        model.posterior_params(n, "1")
    with pytest.raises(ValueError):
        model.posterior_params(n, 1.0, 2.0)
    tiny = pb.NormalKnownVariance(0.0, 1e-100, 1.0, -1.0, 1.0)  # m sigma^2 underflows
    with pytest.raises(ValueError, match="overflow"):
        tiny.posterior_params(3, 0.0, 1.0, 1e-300)
