"""renyi_gamma / renyi_normal against mpmath (60 digits), quadrature and optimisation."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate, optimize, stats

from privbayes import renyi_gamma, renyi_normal
from privbayes.divergence import _second_difference

DPS = 60


def mp_gamma(a1, b1, a2, b2, lam):
    with mp.workdps(DPS):
        a1, b1, a2, b2 = (mp.mpf(float(v)) for v in (a1, b1, a2, b2))
        lam = mp.mpf(float(lam))

        def c(a, b):
            return mp.loggamma(a) - a * mp.log(b)

        al, bl = lam * a1 + (1 - lam) * a2, lam * b1 + (1 - lam) * b2
        if al <= 0 or bl <= 0:
            return math.inf
        if lam == 1:
            kl = (a1 - a2) * mp.digamma(a1) - mp.loggamma(a1) + mp.loggamma(a2)
            return float(kl + a2 * (mp.log(b1) - mp.log(b2)) + a1 * (b2 - b1) / b1)
        return float((c(al, bl) - lam * c(a1, b1) - (1 - lam) * c(a2, b2)) / (lam - 1))


def mp_normal(m1, s1, m2, s2, lam):
    with mp.workdps(DPS):
        m1, s1, m2, s2 = (mp.mpf(float(v)) for v in (m1, s1, m2, s2))
        lam = mp.mpf(float(lam))
        vl = lam * s2**2 + (1 - lam) * s1**2
        if vl <= 0:
            return math.inf
        if lam == 1:
            return float(mp.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - mp.mpf(1) / 2)
        mean = lam * (m1 - m2) ** 2 / (2 * vl)
        return float(mp.log(s2 / s1) + mp.log(s2**2 / vl) / (2 * (lam - 1)) + mean)


def _order(rng):
    kind = rng.integers(3)
    if kind == 0:
        return 1 + float(10 ** rng.uniform(-10, -1))
    return float(10 ** rng.uniform(0.01, 3)) if kind == 1 else 1.0


def _rel(got, want):
    if math.isinf(want):
        assert math.isinf(got)
        return 0.0
    assert math.isfinite(got)
    return abs(got - want) / want if want > 0 else abs(got)


def test_gamma_same_rate_against_mpmath_at_extreme_parameters():
    """Shapes 1e-4 .. 1e12, relative shifts 1e-10 .. 2, orders 1 .. 1e3 (the mechanisms'
    case: equal rates)."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(2000):
        a2 = float(10 ** rng.uniform(-4, 12))
        a1 = a2 * (1 + float(rng.choice([-1, 1]) * 10 ** rng.uniform(-10, 0.3)))
        if a1 <= 0:
            a1 = a2 * float(10 ** rng.uniform(-4, 0))
        b = float(10 ** rng.uniform(-5, 5))
        lam = _order(rng)
        worst = max(worst, _rel(renyi_gamma(a1, b, a2, b, lam), mp_gamma(a1, b, a2, b, lam)))
    assert worst < 1e-9  # measured ~2e-11 (the log-gamma second difference)


def test_gamma_unequal_rates_against_mpmath():
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(2000):
        a2 = float(10 ** rng.uniform(-4, 12))
        a1 = a2 * (1 + float(rng.choice([-1, 1]) * 10 ** rng.uniform(-10, 0.3)))
        if a1 <= 0:
            a1 = a2 * 0.5
        b2 = float(10 ** rng.uniform(-5, 5))
        b1 = b2 * (1 + float(rng.choice([-1, 1]) * 10 ** rng.uniform(-10, 0.5)))
        if b1 <= 0:
            b1 = b2 * 0.5
        lam = _order(rng)
        got, want = renyi_gamma(a1, b1, a2, b2, lam), mp_gamma(a1, b1, a2, b2, lam)
        if math.isinf(want) or want == 0:
            assert got == want
            continue
        # documented: the shape term T and the rate terms R cancel when the means agree;
        # the error is then ~1e-16 (T + |R|) / D
        t = float(_second_difference(a2, a1 - a2, lam))
        cond = (t + abs(got - t)) / want
        err = _rel(got, want)
        assert err < 1e-10 + 5e-15 * cond, (a1, b1, a2, b2, lam, err, cond)
        worst = max(worst, err / max(cond, 1.0))
    assert worst < 1e-10  # measured 3e-12 per unit of condition number


def test_gamma_cancellation_when_the_means_agree_is_bounded_by_its_condition():
    """Shape and rate scaled together (equal means): the three terms cancel; the error is
    ~1e-16 times the terms over the result (documented), here with shapes up to 1e6."""
    for a, f in [(10.0, 1.001), (1e3, 1 + 1e-6), (1e6, 1.01)]:
        got, want = renyi_gamma(a * f, f, a, 1.0, 2.0), mp_gamma(a * f, f, a, 1.0, 2.0)
        assert _rel(got, want) < 1e-15 * (2 * a) + 1e-12


def _quad_renyi(lp, lq, lam):
    val, _ = integrate.quad(
        lambda t: math.exp(lam * lp(t) + (1 - lam) * lq(t)), 0, np.inf, limit=400, epsrel=1e-12
    )
    return math.log(val) / (lam - 1)


def _quad_kl(lp, lq):
    kl, _ = integrate.quad(lambda t: math.exp(lp(t)) * (lp(t) - lq(t)), 0, np.inf, epsrel=1e-12)
    return kl


def test_gamma_against_quadrature_and_at_order_one():
    for p, q in [((3.0, 2.0), (3.5, 2.0)), ((2.5, 1.6), (2.0, 1.5)), ((0.7, 3.0), (0.6, 2.0))]:
        lp, lq = stats.gamma(p[0], scale=1 / p[1]).logpdf, stats.gamma(q[0], scale=1 / q[1]).logpdf
        for lam in (1.5, 2.0, 4.0):
            assert renyi_gamma(*p, *q, lam) == pytest.approx(_quad_renyi(lp, lq, lam), rel=1e-8)
        kl = _quad_kl(lp, lq)
        assert renyi_gamma(*p, *q, 1.0) == pytest.approx(kl, rel=1e-9)
        assert renyi_gamma(*p, *q, 1 + 1e-9) == pytest.approx(kl, rel=1e-7)


def test_gamma_max_divergence():
    p, q = (5.0, 3.0), (4.0, 2.0)  # a1 >= a2 and b1 > b2: bounded ratio
    lp, lq = stats.gamma(p[0], scale=1 / p[1]).logpdf, stats.gamma(q[0], scale=1 / q[1]).logpdf
    res = optimize.minimize_scalar(lambda t: -(lp(t) - lq(t)), bounds=(1e-9, 50), method="bounded")
    assert renyi_gamma(*p, *q, math.inf) == pytest.approx(-res.fun, rel=1e-8)
    assert renyi_gamma(4.0, 2.0, 5.0, 2.0, math.inf) == math.inf  # shapes differ, one rate
    assert renyi_gamma(5.0, 2.0, 4.0, 2.0, math.inf) == math.inf
    assert renyi_gamma(4.0, 3.0, 4.0, 2.0, math.inf) == pytest.approx(4 * math.log(1.5))
    assert renyi_gamma(4.0, 2.0, 4.0, 2.0, math.inf) == 0.0


def test_gamma_domain_and_broadcasting():
    # lam a1 + (1 - lam) a2 > 0 iff lam < a2 / (a2 - a1) = 3
    got = renyi_gamma(2.0, 1.0, 3.0, 1.0, np.array([1.0, 2.0, 2.999, 3.0, 5.0]))
    assert np.isfinite(got[:3]).all() and np.isinf(got[3:]).all() and (np.diff(got[:3]) > 0).all()
    assert renyi_gamma([1.0, 2.0], 1.0, 1.5, 1.0, 2.0).shape == (2,)
    # the mixed rate 4 * 1.0 - 3 * 1.5 < 0 at lam = 4: the integral diverges at infinity
    assert renyi_gamma(2.5, 1.0, 2.0, 1.5, 4.0) == math.inf
    assert np.isfinite(renyi_gamma(2.5, 1.0, 2.0, 1.5, 2.9))
    with pytest.raises(ValueError, match="a1"):
        renyi_gamma(0.0, 1.0, 1.0, 1.0, 2.0)
    with pytest.raises(ValueError, match="b2"):
        renyi_gamma(1.0, 1.0, 1.0, np.nan, 2.0)
    with pytest.raises(ValueError, match="lam"):
        renyi_gamma(1.0, 1.0, 1.0, 1.0, 0.0)


def test_normal_against_mpmath_at_extreme_parameters():
    rng = np.random.default_rng(2)
    worst = 0.0
    for _ in range(3000):
        s2 = float(10 ** rng.uniform(-8, 8))
        s1 = s2 * (1 + float(rng.choice([-1, 1]) * 10 ** rng.uniform(-12, 0.5)))
        if rng.random() < 0.3 or s1 <= 0:
            s1 = s2
        m2 = float(rng.normal() * 10 ** rng.uniform(-3, 6))
        m1 = m2 + float(rng.normal() * s2 * 10 ** rng.uniform(-8, 2))
        lam = _order(rng)
        worst = max(worst, _rel(renyi_normal(m1, s1, m2, s2, lam), mp_normal(m1, s1, m2, s2, lam)))
    assert worst < 1e-12  # measured ~1e-14


def test_normal_equal_variances_and_limits():
    assert renyi_normal(1.0, 2.0, 0.0, 2.0, 3.0) == pytest.approx(3.0 / 8.0, rel=1e-15)
    assert renyi_normal(1.0, 2.0, 0.0, 2.0, math.inf) == math.inf  # no pure-DP bound
    assert renyi_normal(1.0, 2.0, 1.0, 2.0, math.inf) == 0.0
    # sigma1 < sigma2: bounded ratio, against numerical optimisation
    lp, lq = stats.norm(1.0, 1.0).logpdf, stats.norm(0.0, 2.0).logpdf
    res = optimize.minimize_scalar(lambda t: -(lp(t) - lq(t)))
    assert renyi_normal(1.0, 1.0, 0.0, 2.0, math.inf) == pytest.approx(-res.fun, rel=1e-9)
    # lam sigma2^2 + (1 - lam) sigma1^2 > 0 iff lam < 4 / 3 here
    assert np.isinf(renyi_normal(0.0, 2.0, 0.0, 1.0, 1.34)) and np.isfinite(
        renyi_normal(0.0, 2.0, 0.0, 1.0, 1.33)
    )
    with pytest.raises(ValueError, match="sigma1"):
        renyi_normal(0.0, -1.0, 0.0, 1.0, 2.0)
    with pytest.raises(ValueError, match="mu2"):
        renyi_normal(0.0, 1.0, np.inf, 1.0, 2.0)
