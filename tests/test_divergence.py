"""Closed forms against independent truth: docs/background.md §6, quadrature, mpmath."""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from privbayes import renyi_beta, renyi_dirichlet, renyi_expfam
from privbayes.divergence import _second_difference, _second_difference_1

REFERENCE = [  # docs/background.md §6
    (2.0, (3, 5), (4, 4), 0.628608659422),
    (1.5, (3, 5), (4, 4), 0.454909581916),
    (5.0, (11, 91), (12, 90), 0.293930851949),
    (2.0, (1, 1), (3, 1), math.inf),
]


@pytest.mark.parametrize("lam,p,q,want", REFERENCE)
def test_background_reference_values_beta(lam, p, q, want):
    got = renyi_beta(p[0], p[1], q[0], q[1], lam)
    if math.isinf(want):
        assert got == math.inf
    else:
        assert got == pytest.approx(want, rel=1e-11)


def test_background_reference_value_dirichlet():
    assert renyi_dirichlet([2, 3, 4], [3, 3, 3], 2.0) == pytest.approx(0.980829253012, rel=1e-11)


def _quad_renyi_beta(p, q, lam):
    lp, lq = stats.beta(*p).logpdf, stats.beta(*q).logpdf

    def integrand(t):
        return math.exp(lam * lp(t) + (1 - lam) * lq(t))

    val, _ = integrate.quad(integrand, 0, 1, limit=500, epsabs=0, epsrel=1e-12)
    return math.log(val) / (lam - 1)


@pytest.mark.parametrize("lam", [1.05, 1.5, 2.0, 3.7, 10.0, 25.0])
@pytest.mark.parametrize("p,q", [((3, 5), (4, 4)), ((11.5, 40), (10.5, 41)), ((2, 2), (2.3, 1.7))])
def test_beta_against_quadrature(p, q, lam):
    got = renyi_beta(*p, *q, lam)
    if min(lam * p[0] + (1 - lam) * q[0], lam * p[1] + (1 - lam) * q[1]) <= 0:
        assert got == math.inf
        return
    assert got == pytest.approx(_quad_renyi_beta(p, q, lam), rel=1e-8)


def test_beta_kl_at_order_one_against_quadrature():
    p, q = (3.0, 5.0), (4.0, 4.5)
    lp, lq = stats.beta(*p).logpdf, stats.beta(*q).logpdf
    kl, _ = integrate.quad(lambda t: math.exp(lp(t)) * (lp(t) - lq(t)), 0, 1, epsrel=1e-12)
    assert renyi_beta(*p, *q, 1.0) == pytest.approx(kl, rel=1e-9)
    # and the order-1 value is the limit of the curve
    assert renyi_beta(*p, *q, 1 + 1e-9) == pytest.approx(kl, rel=1e-7)


def test_beta_max_divergence_against_optimisation():
    p, q = (5.0, 7.0), (4.0, 6.5)  # p - q >= 0 coordinatewise: finite
    lp, lq = stats.beta(*p).logpdf, stats.beta(*q).logpdf
    res = optimize.minimize_scalar(
        lambda t: -(lp(t) - lq(t)),
        bounds=(1e-9, 1 - 1e-9),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert renyi_beta(*p, *q, math.inf) == pytest.approx(-res.fun, rel=1e-8)
    assert renyi_beta(4, 6, 5, 6, math.inf) == math.inf  # a1 < a2: unbounded ratio


def test_dirichlet_against_simplex_quadrature():
    a1, a2, lam = np.array([2.5, 3.0, 1.5]), np.array([2.0, 3.5, 1.5]), 1.5
    d1, d2 = stats.dirichlet(a1), stats.dirichlet(a2)

    def integrand(y, x):
        z = 1 - x - y
        if z <= 0:
            return 0.0
        v = np.array([x, y, z])
        return math.exp(lam * d1.logpdf(v) + (1 - lam) * d2.logpdf(v))

    val, _ = integrate.dblquad(integrand, 0, 1, 0, lambda x: 1 - x, epsabs=1e-13, epsrel=1e-10)
    assert renyi_dirichlet(a1, a2, lam) == pytest.approx(math.log(val) / (lam - 1), rel=1e-7)


def test_vectorised_over_orders_and_inf_outside_parameter_space():
    lam = np.array([1.0, 1.5, 2.0, 3.0, 4.0, np.inf])
    got = renyi_beta(2.0, 3.0, 3.0, 2.0, lam)
    assert got.shape == (6,)
    each = [renyi_beta(2.0, 3.0, 3.0, 2.0, v) for v in lam]
    np.testing.assert_allclose(got, each, rtol=1e-14)
    # lam*2 + (1-lam)*3 > 0 iff lam < 3
    assert np.isfinite(got[: 4 - 1]).all() and np.isinf(got[3:]).all()
    assert (np.diff(got[:3]) > 0).all()  # non-decreasing in the order


def test_outer_product_of_orders_and_pairs():
    a1 = np.array([[2.0, 3.0], [4.0, 4.0]])
    a2 = np.array([[3.0, 2.0], [4.5, 3.5]])
    lam = np.array([1.5, 2.0, 2.5])
    got = renyi_dirichlet(a1, a2, lam[:, None])
    assert got.shape == (3, 2)
    assert got[1, 0] == pytest.approx(renyi_beta(2, 3, 3, 2, 2.0), rel=1e-14)


def _mp_renyi(a1, a2, lam):
    with mp.workdps(90):
        a1 = [mp.mpf(v) for v in a1]
        a2 = [mp.mpf(v) for v in a2]
        lam = mp.mpf(lam)

        def c(a):
            return mp.fsum(mp.loggamma(v) for v in a) - mp.loggamma(mp.fsum(a))

        mix = [lam * x + (1 - lam) * y for x, y in zip(a1, a2, strict=True)]
        if min(mix) <= 0:
            return math.inf
        return float((c(mix) - lam * c(a1) - (1 - lam) * c(a2)) / (lam - 1))


def test_random_pairs_against_mpmath(rng):
    worst = 0.0
    for _ in range(400):
        k = int(rng.integers(2, 5))
        x = 10 ** rng.uniform(-4, 10) * rng.uniform(0.1, 1, k)
        h = rng.normal(size=k) * 10 ** rng.uniform(-6, 0)
        a1 = x + h
        if (a1 <= 0).any():
            continue
        lam = float(rng.choice([1.0001, 1.5, 2.0, 5.0, 20.0, 60.0, 300.0]))
        want = _mp_renyi(a1, x, lam)
        got = renyi_dirichlet(a1, x, lam)
        if math.isinf(want):
            assert got == math.inf
        elif want > 1e-60:  # below that mpmath's own rounding dominates
            worst = max(worst, abs(got - want) / want)
    assert worst < 1e-9


@pytest.mark.parametrize("m", [1e-8, 1e-6, 1e-3])
@pytest.mark.parametrize("n", [10, 10**5, 10**7])
@pytest.mark.parametrize("lam", [1.5, 2.0, 10.0, 60.0])
def test_large_parameters_against_mpmath(m, n, lam):
    """The concentrated method at small m and huge n: every parameter is large."""
    alpha, beta = 0.7, 2.0
    pairs = [  # the four boundary pairs (P ones, Q ones), as float parameters
        ((alpha / m + 1, beta / m + n - 1), (alpha / m, beta / m + n)),
        ((alpha / m + n, beta / m), (alpha / m + n - 1, beta / m + 1)),
    ]
    for p, q in pairs + [(q, p) for p, q in pairs]:
        want = _mp_renyi(p, q, lam)
        got = renyi_beta(p[0], p[1], q[0], q[1], lam)
        assert got == pytest.approx(want, rel=1e-9), (p, q, lam)


def test_plain_log_beta_formula_fails_where_we_do_not():
    """Why the stable evaluation exists: the textbook formula loses every digit here."""
    m, n, lam = 1e-8, 10**7, 2.0
    p, q = (1.0 / m + 1, 1.0 / m + n - 1), (1.0 / m, 1.0 / m + n)
    mix = [lam * x + (1 - lam) * y for x, y in zip(p, q, strict=True)]
    plain = (special.betaln(*mix) - lam * special.betaln(*p) - (1 - lam) * special.betaln(*q)) / (
        lam - 1
    )
    want = _mp_renyi(p, q, lam)
    assert abs(plain - want) / want > 1e-3
    assert renyi_beta(*p, *q, lam) == pytest.approx(want, rel=1e-12)


def test_scalar_twin_matches_array_version(rng):
    for _ in range(3000):
        x = 10 ** rng.uniform(-5, 10)
        h = rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-9, 1) * (x if rng.random() < 0.3 else 1)
        lam = 1 + 10 ** rng.uniform(-9, 3)
        a, b = _second_difference(x, h, lam), _second_difference_1(x, h, lam)
        if math.isinf(a) or math.isinf(b):
            assert a == b
        else:
            assert b == pytest.approx(float(a), rel=1e-9, abs=1e-300)


def test_never_negative_and_zero_for_equal_arguments():
    a = np.array([1e8, 3e7, 2.5])
    assert renyi_dirichlet(a, a, np.array([1.0, 2.0, 50.0, np.inf])).tolist() == [0, 0, 0, 0]


def test_generic_exponential_family_form_matches_beta():
    def log_beta(eta):  # natural parameters (a, b) up to the base measure
        return special.betaln(eta[..., 0], eta[..., 1])

    def positive(eta):
        return (eta > 0).all(axis=-1)

    lam = np.array([1.5, 2.0, 3.0])
    got = renyi_expfam(log_beta, [3.0, 5.0], [4.0, 4.0], lam, in_domain=positive)
    np.testing.assert_allclose(got, renyi_beta(3, 5, 4, 4, lam), rtol=1e-12)
    assert renyi_expfam(log_beta, [1.0, 1.0], [3.0, 1.0], 2.0, in_domain=positive) == math.inf


def test_generic_form_gaussian_mean_family():
    """N(mu, 1) in natural form: C(eta) = eta^2 / 2; D_lam = lam (mu1 - mu2)^2 / 2."""
    got = renyi_expfam(lambda e: e[..., 0] ** 2 / 2, [0.3], [-0.5], np.array([2.0, 7.5]))
    np.testing.assert_allclose(got, [2.0 * 0.64 / 2, 7.5 * 0.64 / 2], rtol=1e-13)


@pytest.mark.parametrize(
    "args,match",
    [
        (([0, 1], [1, 1], 2.0), "a1"),
        (([1, np.nan], [1, 1], 2.0), "a1"),
        (([1, 1], [1, np.inf], 2.0), "a2"),
        (([1, 1], [1, 1, 1], 2.0), "K"),
        (([1, 1], [1, 1], 0.0), "lam"),
        (([1, 1], [1, 1], np.nan), "lam"),
        (([1], [1], 2.0), "a1"),
    ],
)
def test_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        renyi_dirichlet(*args)
