"""The discrete Gaussian mechanism against independent truth: its sampler against its pmf
(chi^2), its pmf and moments against mpmath, its certificate against the exact Rényi
divergence of two discrete Gaussians summed over the lattice (docs/noise_aware.md §1-§2)."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import partial

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

import privbayes as pb
from privbayes.accounting import RdpAccountant, discrete_gaussian_rdp
from privbayes.noise import (
    calibrate_sigma2,
    discrete_gaussian_pmf,
    discrete_gaussian_tail,
    discrete_gaussian_variance,
    log_normalizer,
    sample_discrete_gaussian,
)
from privbayes.noise.discrete_gaussian import discrete_gaussian_quantile


def _mp_pmf(sigma2, lo: int, hi: int):
    """P[Z = z] for z in lo..hi, by direct summation in mpmath (60 digits)."""
    with mp.workdps(60):
        s2 = mp.mpf(sigma2)
        reach = int(40 * math.sqrt(float(sigma2))) + 40
        norm = mp.fsum(mp.exp(-(mp.mpf(k) ** 2) / (2 * s2)) for k in range(-reach, reach + 1))
        return [mp.exp(-(mp.mpf(z) ** 2) / (2 * s2)) / norm for z in range(lo, hi + 1)]


class _IntegersOnly:
    """A generator that offers uniform integers and nothing else: no float may be drawn."""

    def __init__(self, seed):
        self._g = np.random.default_rng(seed)

    def integers(self, *args, **kwargs):
        return self._g.integers(*args, **kwargs)


@pytest.mark.parametrize("sigma2", [0.1, 0.3, 2.0, 47.5, 1e6, 1e12])
def test_sampler_matches_its_pmf_chi2(sigma2):
    """chi^2 over 2*10^4 draws, bins of about equal mass from the exact pmf (mpmath
    for small sigma, the normaliser and tail of privbayes checked separately below)."""
    draws = sample_discrete_gaussian(sigma2, _IntegersOnly(int(sigma2 * 1000) % 2**32), 20_000)
    sigma = math.sqrt(sigma2)
    if sigma < 30:
        reach = int(8 * sigma) + 3
        pmf = np.array([float(p) for p in _mp_pmf(sigma2, -reach, reach)])
        values = np.arange(-reach, reach + 1)
        # bins: single values with expected count >= 20, the tails pooled
        expected = pmf * draws.size
        keep = expected >= 20
        obs = [np.sum(draws == v) for v in values[keep]]
        exp_ = list(expected[keep])
        rest_obs = draws.size - sum(obs)
        rest_exp = draws.size - sum(exp_)
        if rest_exp >= 5:
            obs.append(rest_obs)
            exp_.append(rest_exp)
        elif rest_obs:
            pytest.fail(f"{rest_obs} draws where the pmf puts {rest_exp:.3g}")
    else:  # 20 bins of |Z| of about equal mass, cut at the discrete quantiles, and the sign
        edges = sorted({discrete_gaussian_quantile(q, sigma2) for q in np.arange(1, 20) / 20})
        obs, exp_ = [], []
        absd = np.abs(draws)
        prev_tail, lo = 1.0, -1  # P[|Z| > -1] = 1
        for z in [*edges, None]:
            tail = 0.0 if z is None else discrete_gaussian_tail(z, sigma2)
            hi = math.inf if z is None else z
            obs.append(int(np.sum((absd > lo) & (absd <= hi))))
            exp_.append((prev_tail - tail) * draws.size)
            prev_tail, lo = tail, hi
        positive = int(np.sum(draws > 0))
        assert stats.binomtest(positive, int(np.sum(draws != 0))).pvalue > 1e-3
    chi2 = sum((o - e) ** 2 / e for o, e in zip(obs, exp_, strict=True))
    p = stats.chi2.sf(chi2, len(obs) - 1)
    assert p > 1e-3, (sigma2, chi2, len(obs))


def test_tiny_sigma2_is_almost_surely_zero():
    """sigma^2 = 1e-3: P[Z != 0] = 2 e^-500 / (...): every draw is 0; sigma^2 = 1e-300
    (acceptance exponents ~1e300 handled by peeling exp(-1) factors) too."""
    for s2 in (1e-3, 1e-300):
        assert not sample_discrete_gaussian(s2, np.random.default_rng(3), 2000).any()


def test_sampler_uses_integers_only_and_is_reproducible():
    a = sample_discrete_gaussian(2.5, _IntegersOnly(7), 50)
    b = sample_discrete_gaussian(2.5, np.random.default_rng(7), 50)
    assert a.dtype == np.int64 and np.array_equal(a, b)
    one = sample_discrete_gaussian(Fraction(5, 3), np.random.default_rng(1))
    assert isinstance(one, int)
    with pytest.raises(ValueError):
        sample_discrete_gaussian(0.0, np.random.default_rng(1))
    with pytest.raises(ValueError):
        sample_discrete_gaussian(math.inf, np.random.default_rng(1))
    with pytest.raises(TypeError):
        sample_discrete_gaussian("1", np.random.default_rng(1))


def test_normaliser_and_variance_of_huge_sigma2_by_poisson_summation():
    """sigma^2 = 1e10 (10^6 terms each way): mpmath's Jacobi theta function in its dual
    form at 60 digits, and E Z^2 = 2 s^4 d log Z / d s (mpmath's numerical derivative)."""
    for s2 in (1e7, 1e10, 1e12):
        with mp.workdps(60):

            def log_z(s):
                return mp.log(mp.sqrt(2 * mp.pi * s) * mp.jtheta(3, 0, mp.exp(-2 * mp.pi**2 * s)))

            assert log_normalizer(s2) == pytest.approx(float(log_z(mp.mpf(s2))), rel=1e-14)
            var = 2 * mp.mpf(s2) ** 2 * mp.diff(log_z, mp.mpf(s2))
            assert discrete_gaussian_variance(s2) == pytest.approx(float(var), rel=1e-12)
        # the tail lies between the integrals of the density from z + 1 and from z (up to
        # the normaliser's relative 1/sigma); above 1e5 it is the upper integral bound
        z = int(1.6 * math.sqrt(s2))
        upper = float(mp.erfc(z / mp.sqrt(2 * s2)))
        lower = float(mp.erfc((z + 1) / mp.sqrt(2 * s2)))
        got = discrete_gaussian_tail(z, s2)
        assert lower * (1 - 1e-3) <= got <= upper * (1 + 1e-3)
        if s2 > 1e10:  # sigma > 1e5: the integral bound, above the continuous tail
            assert got >= upper * (1 - 1e-12)


@pytest.mark.parametrize("sigma2", [1e-4, 0.05, 1 / (2 * math.pi), 0.7, 3.0, 1e4])
def test_normaliser_variance_and_tail_against_mpmath(sigma2):
    with mp.workdps(60):
        s2 = mp.mpf(sigma2)
        reach = int(40 * math.sqrt(sigma2)) + 40
        terms = [(k, mp.exp(-(mp.mpf(k) ** 2) / (2 * s2))) for k in range(-reach, reach + 1)]
        norm = mp.fsum(t for _, t in terms)
        var = mp.fsum(k * k * t for k, t in terms) / norm
        assert log_normalizer(sigma2) == pytest.approx(float(mp.log(norm)), rel=1e-13, abs=1e-15)
        assert discrete_gaussian_variance(sigma2) == pytest.approx(float(var), rel=1e-12)
        z = int(1.6 * math.sqrt(sigma2))
        tail = 2 * mp.fsum(t for k, t in terms if k > z) / norm
        got = discrete_gaussian_tail(z, sigma2)
        assert got >= float(tail) * (1 - 1e-12)  # exact or an upper bound
        assert got == pytest.approx(float(tail), rel=1e-9)
    x = np.array([-3, 0, 2])
    truth = [float(_mp_pmf(sigma2, v, v)[0]) for v in x]
    assert np.allclose(discrete_gaussian_pmf(x, sigma2), truth, rtol=1e-11, atol=0)


def test_quantile_is_the_smallest_covering_integer():
    for s2 in (0.2, 4.0, 1e3):
        for prob in (0.5, 0.9, 0.99):
            z = discrete_gaussian_quantile(prob, s2)
            assert 1 - discrete_gaussian_tail(z, s2) >= prob
            if z > 0:
                assert 1 - discrete_gaussian_tail(z - 1, s2) < prob


def _mp_renyi(sigma2, delta: int, lam):
    """D_lam(N_Z(0, s2) || N_Z(delta, s2)) by summing over the lattice (mpmath, 60 digits)."""
    with mp.workdps(60):
        s2, lam = mp.mpf(sigma2), mp.mpf(lam)
        reach = int(40 * math.sqrt(float(sigma2)) + abs(delta) * (float(lam) + 1)) + 40
        ks = range(-reach, reach + 1)
        norm = mp.fsum(mp.exp(-(mp.mpf(k) ** 2) / (2 * s2)) for k in ks)
        total = mp.fsum(
            mp.exp(-(lam * mp.mpf(z) ** 2 + (1 - lam) * mp.mpf(z - delta) ** 2) / (2 * s2))
            for z in ks
        )
        return (mp.log(total / norm)) / (lam - 1)


@pytest.mark.parametrize("sigma2", [0.15, 1.0, 4.5, 100.0])
@pytest.mark.parametrize("delta", [1, 3])
@pytest.mark.parametrize("lam", [1.5, 2.0, 3.7, 8.0])
def test_certificate_bounds_the_exact_lattice_divergence(sigma2, delta, lam):
    exact = _mp_renyi(sigma2, delta, lam)
    cert = float(discrete_gaussian_rdp(lam, sigma2, delta**2))
    assert mp.mpf(cert) >= exact
    if ((lam - 1) * delta).is_integer():  # Theorem 1: equality there
        assert cert == pytest.approx(float(exact), rel=1e-12)
    # and the certificate is the closed form, rounded up
    assert Fraction(cert) >= Fraction(lam) * delta**2 / (2 * Fraction(sigma2))


@pytest.mark.parametrize("sigma2", [0.01, 0.05, 0.4])
@pytest.mark.parametrize("lam", [1.01, 1.5, 64.0, 1000.0])
def test_certificate_holds_for_tiny_sigma2_and_extreme_orders(sigma2, lam):
    """Audit: where the discrete Gaussian is furthest from the continuous one (sigma^2 < 1;
    the certificate is loosest there, e.g. exact/certified = 0.76 at sigma^2 = 0.05,
    lam = 1.5) and at orders near 1 and far out, the curve never falls below the lattice
    sum, and meets it where (lam - 1) delta is an integer (Theorem 1)."""
    for delta in (1, 2):
        exact = _mp_renyi(sigma2, delta, lam)
        cert = float(discrete_gaussian_rdp(lam, sigma2, delta**2))
        assert mp.mpf(cert) >= exact
        if ((lam - 1) * delta).is_integer():
            assert cert == pytest.approx(float(exact), rel=1e-12)


def test_certificate_of_vectors_adds_coordinates():
    """Dirichlet: a replaced record moves two counts by +-1 (Delta^2 = 2); Gamma-Poisson
    with M = 3: every shift up to 3 is below the Delta^2 = 9 curve."""
    for s2, lam in [(0.4, 2.0), (2.0, 5.5)]:
        pair = 2 * _mp_renyi(s2, 1, lam)  # independent coordinates: divergences add
        assert mp.mpf(float(discrete_gaussian_rdp(lam, s2, 2))) >= pair
        for shift in (1, 2, 3):
            assert mp.mpf(float(discrete_gaussian_rdp(lam, s2, 9))) >= _mp_renyi(s2, shift, lam)


def test_curve_edges_and_kl():
    out = discrete_gaussian_rdp([1.0, 2.0, np.inf], 2.0, 1)
    assert out[0] == 0.25 and out[1] == 0.5 and out[2] == np.inf
    assert np.all(discrete_gaussian_rdp([1.5, 7.0], 3.0, 0) == 0)
    assert np.all(np.isinf(discrete_gaussian_rdp([1.5, 7.0], 0.0, 1)))
    # KL = Delta^2 / (2 sigma^2): the lattice sum at an order near 1
    assert float(_mp_renyi(0.8, 1, 1.0 + 1e-9)) == pytest.approx(1 / 1.6, rel=1e-6)
    # never below the exact rational, even where the float product rounds down
    for s2 in (3.0, 1e-300, 7e300):
        v = discrete_gaussian_rdp(1.1, s2, 3)
        assert Fraction(float(v)) >= Fraction(1.1) * 3 / (2 * Fraction(s2))
    with pytest.raises(ValueError):
        discrete_gaussian_rdp([0.5], 1.0, 1)


@pytest.mark.parametrize(
    "lam,eps,d2", [(2.0, 1.0, 1), (3.0, 0.1, 2), (8.0, 1e-3, 65536), (1.5, 7.3, 400)]
)
def test_calibrate_sigma2_is_the_smallest_safe_float(lam, eps, d2):
    s2 = calibrate_sigma2(lam, eps, d2)
    assert Fraction(lam) * d2 / (2 * Fraction(s2)) <= Fraction(eps)
    smaller = math.nextafter(s2, 0.0)
    assert Fraction(lam) * d2 / (2 * Fraction(smaller)) > Fraction(eps)
    assert float(discrete_gaussian_rdp(lam, s2, d2)) <= eps


def test_calibrate_refuses_lam_inf():
    with pytest.raises(pb.InfeasiblePrivacyError):
        calibrate_sigma2(math.inf, 1.0, 1)


def test_accountant_composes_the_curve_exactly():
    acc = RdpAccountant()
    acc.compose(partial(discrete_gaussian_rdp, sigma2=2.0, sensitivity_sq=1), count=3)
    expected = np.array([float(v) for v in discrete_gaussian_rdp(acc.orders, 2.0, 1)])
    assert np.all(acc.rdp >= 3 * expected * (1 - 1e-15))
    assert acc._parts is not None and len(acc._parts) == 1  # kept exact (refinable)


def test_curve_takes_a_large_integer_delta_sq_exactly():
    """Audit: Gamma-Poisson's Delta^2 = max_count^2 is an int that may exceed 2^53. With
    M = 2^27 + 1, float(M^2) = M^2 - 1; the curve took Delta^2 through float and certified
    lam (M^2 - 1) / 2 at sigma^2 = 1, lam = 2 -- below the exact divergence M^2 there
    ((lam - 1) M is an integer: Theorem 1's equality case)."""
    m2 = (2**27 + 1) ** 2
    assert Fraction(float(m2)) < m2  # the float rounds it down
    for lam in (2.0, 3.0, 5.0, 1.1):
        v = float(discrete_gaussian_rdp(lam, 1.0, m2))
        assert Fraction(v) >= Fraction(lam) * m2 / 2
    # and through a release's calibration, at every order of the ledger's grid
    from privbayes.posterior import calibrate_noise

    cal = calibrate_noise(pb.GammaPoisson(1.0, 1.0, max_count=2**27 + 1), 10, 2.0, 1e17)
    s2 = Fraction(cal.model.sigma2)
    orders = np.array([1.0, 1.5, 2.0, 3.0, 5.0, 64.0])
    for lam, v in zip(orders, cal.rdp(orders), strict=True):
        assert Fraction(float(v)) >= Fraction(float(lam)) * m2 / (2 * s2)


def test_rationals_are_never_rounded_to_less_noise():
    """Audit: a Fraction or long-double sigma^2 was rounded to the nearest float, which may
    lie above it (Fraction(1, 10) -> 0.1000000000000000055): the curve then certified less
    noise than there is, and the sampler drew with a smaller sigma^2 than asked. Now the
    sampler and the curve take them exactly, and the mechanism publishes a float sigma^2
    <= the one it is given (its certificate never below the exact one)."""
    from privbayes.noise import DiscreteGaussianMechanism

    tenth = Fraction(1, 10)
    assert Fraction(0.1) > tenth
    v = float(discrete_gaussian_rdp(2.0, tenth, 1))
    assert Fraction(v) >= 2 / (2 * tenth)  # = 10 exactly: Theorem 1's equality case
    mech = DiscreteGaussianMechanism(tenth, 1, 1, "count", pb.BetaBernoulli())
    assert Fraction(mech.sigma2) <= tenth
    assert Fraction(float(mech.rdp(5, 2.0))) >= 2 / (2 * tenth)
    big = np.longdouble(1) + np.longdouble(2) ** -60  # exact in 80-bit long double
    if Fraction(*big.as_integer_ratio()) != Fraction(float(big)):  # long double is wider
        exact = Fraction(*big.as_integer_ratio())
        assert Fraction(float(discrete_gaussian_rdp(2.0, big, 1))) >= 1 / exact
        # the sampler draws with sigma^2 = big exactly: its acceptance constants say so
        from privbayes.noise.discrete_gaussian import _check_sigma2

        assert _check_sigma2(big) == exact
