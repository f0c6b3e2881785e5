"""Gaussian-DP: conversion, composition, rounding, allowances, the accountant and the
releases that carry a GDP bound (docs/gdp.md). Independent truth: mpmath quadrature of the
Gaussian privacy-loss distribution, mpmath roots, scipy's 2-D quadrature."""

from __future__ import annotations

import functools
import math
import pickle
import tempfile
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting import (
    WIDE_ORDERS,
    GdpAccountant,
    GdpBound,
    NotGdpError,
    OrdersWarning,
    RdpAccountant,
    compose_gdp,
    gaussian_event,
    gaussian_gdp,
    gaussian_rdp,
    gdp_delta,
    gdp_epsilon,
    gdp_event,
    gdp_rdp,
    laplace_rdp,
)


def _delta_quad(eps: float, mu: float, dps: int = 40) -> mpmath.mpf:
    """delta of N(mu, 1) vs N(0, 1) at eps by quadrature of (p - e^eps q)_+ (densities
    only: no erfc), from the threshold x* = eps/mu + mu/2 to infinity."""
    with mpmath.workdps(dps):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        xs = e / m + m / 2

        def f(x):
            return (mpmath.exp(-((x - m) ** 2) / 2) - mpmath.exp(e - x**2 / 2)) / mpmath.sqrt(
                2 * mpmath.pi
            )

        return mpmath.quad(f, [xs, xs + 1, xs + 10, mpmath.inf])


def _eps_root(delta: float, mu: float, dps: int = 50) -> mpmath.mpf:
    """The exact eps with delta_mu(eps) = delta, by mpmath's own root finder on ncdf."""
    with mpmath.workdps(dps):
        m = mpmath.mpf(mu)

        def f(e):
            return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)

        lo, hi = mpmath.mpf(0), m * (m / 2 + mpmath.sqrt(2 * mpmath.log(1 / mpmath.mpf(delta))))
        for _ in range(3 * dps + 40):  # plain bisection: delta_mu decreases in eps
            mid = (lo + hi) / 2
            if f(mid) > delta:
                lo = mid
            else:
                hi = mid
        return hi


def _rdp_eps(curve, delta: float) -> float:
    acc = RdpAccountant(WIDE_ORDERS)
    acc.compose(curve)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        return acc.get_epsilon(delta)


# -- the conversion ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "mu, eps",
    [(0.1, 0.05), (0.1, 0.34), (0.5, 1.0), (1.0, 0.0), (1.0, 2.0), (1.0, 4.377), (2.0, 6.0),
     (3.0, 20.0), (0.01, 0.002)],
)  # fmt: skip
def test_delta_against_quadrature_of_the_privacy_loss(mu, eps):
    truth = _delta_quad(eps, mu)
    got = gdp_delta(eps, mu)
    assert mpmath.mpf(got) >= truth * (1 - mpmath.mpf(10) ** -25)  # never below
    assert got <= float(truth) * (1 + 1e-12)


def test_measured_gap_of_the_issue():
    """mu = 1 at delta = 1e-5: 4.377 exactly vs 4.728 by the best RDP conversion; mu = 0.1:
    0.341 vs 0.375 (issue 21 §2)."""
    assert round(gdp_epsilon(1e-5, 1.0), 3) == 4.377
    assert round(_rdp_eps(gdp_event(1.0), 1e-5), 3) == 4.728
    assert round(gdp_epsilon(1e-5, 0.1), 3) == 0.341
    assert round(_rdp_eps(gdp_event(0.1), 1e-5), 3) == 0.375


@pytest.mark.parametrize(
    "mu, delta", [(1.0, 1e-5), (0.1, 1e-5), (0.5, 1e-9), (2.0, 1e-3), (5.0, 1e-100),
                  (0.01, 1e-6), (20.0, 0.5)],
)  # fmt: skip
def test_epsilon_is_rounded_up_and_tight(mu, delta):
    e = gdp_epsilon(delta, mu)
    root = _eps_root(delta, mu)
    assert mpmath.mpf(e) >= root
    assert e <= float(root) * (1 + 1e-12)
    assert gdp_delta(e, mu) <= delta  # the check the function runs itself


def test_tiny_delta_and_huge_mu():
    e = gdp_epsilon(1e-300, 3.0)
    assert gdp_delta(e, 3.0) <= 1e-300
    assert mpmath.mpf(e) >= _eps_root(1e-300, 3.0, dps=80)
    big = gdp_epsilon(1e-5, 1e6)
    assert 5e11 < big < 5.1e11 and gdp_delta(big, 1e6) <= 1e-5
    assert gdp_epsilon(1e-5, 1e200) == math.inf  # the root is beyond the float range
    assert gdp_delta(1.0, 1e200) == 1.0


def test_edge_cases():
    assert gdp_delta(0.5, 0.0) == 0.0 and gdp_epsilon(0.0, 0.0) == 0.0
    assert gdp_delta(3.0, math.inf) == 1.0 and gdp_delta(math.inf, math.inf) == 1.0
    assert gdp_delta(math.inf, 1.0) == 0.0
    assert gdp_epsilon(0.0, 1.0) == math.inf  # mu-GDP is never pure DP
    assert gdp_epsilon(1e-5, math.inf) == math.inf
    assert gdp_epsilon(1.0, math.inf) == 0.0 and gdp_epsilon(1.0, 2.0) == 0.0
    d0 = gdp_delta(0.0, 1.0)  # 2 Phi(1/2) - 1
    assert d0 == pytest.approx(float(2 * mpmath.ncdf(0.5) - 1), rel=1e-15)
    assert gdp_epsilon(d0, 1.0) == 0.0 and gdp_epsilon(0.99 * d0, 1.0) > 0
    assert gdp_delta(1e-300, 1e-8) > 0  # tiny but not underflowed to 0
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError):
            gdp_delta(bad, 1.0)
        with pytest.raises(ValueError):
            gdp_delta(1.0, bad)
    with pytest.raises(ValueError):
        gdp_epsilon(1.5, 1.0)
    for bad in ("1", True, None):
        with pytest.raises(TypeError):
            gdp_epsilon(bad, 1.0)
        with pytest.raises(TypeError):
            gdp_delta(1.0, bad)


def test_delta_decreases_and_epsilon_inverts_it():
    eps = np.linspace(0, 8, 33)
    vals = [gdp_delta(e, 1.3) for e in eps]
    assert all(a >= b for a, b in zip(vals, vals[1:], strict=False))
    for d in (1e-2, 1e-6, 1e-12):
        e = gdp_epsilon(d, 1.3)
        assert gdp_delta(e, 1.3) <= d < gdp_delta(e * (1 - 1e-9), 1.3)


# -- composition and the RDP consequence ----------------------------------------------------
def test_compose_is_exact_and_rounded_up():
    mus = [0.3, 0.4, 1e-3, 2.0 / 3.0]
    got = compose_gdp(mus, [1, 2, 5, 3])
    exact = sum(c * Fraction(m) ** 2 for m, c in zip(mus, [1, 2, 5, 3], strict=True))
    assert Fraction(got) ** 2 >= exact > Fraction(math.nextafter(got, 0)) ** 2
    assert compose_gdp([0.75, 1.0]) == 1.25
    assert compose_gdp([1.0, math.inf]) == math.inf and compose_gdp([]) == 0.0


def test_composed_gaussians_against_two_dimensional_quadrature():
    """Two Gaussian releases (sigma 1.5 and 2, sensitivity 1): the accountant's GDP value
    against the hockey-stick divergence of the product laws, integrated in 2-D."""
    from scipy import integrate, stats

    acc = GdpAccountant()
    acc.compose(gaussian_event(1.5)).compose(gaussian_event(2.0))
    mu = acc.gdp
    assert mu == pytest.approx(math.hypot(1 / 1.5, 1 / 2.0), rel=1e-15)
    eps = 1.0
    p = stats.multivariate_normal([1.0, 1.0], np.diag([1.5**2, 2.0**2]))
    q = stats.multivariate_normal([0.0, 0.0], np.diag([1.5**2, 2.0**2]))

    def f(y, x):
        return max(p.pdf([x, y]) - math.exp(eps) * q.pdf([x, y]), 0.0)

    truth, _ = integrate.dblquad(f, -8, 12, -10, 14, epsabs=1e-12, epsrel=1e-9)
    assert acc.get_delta(eps) == pytest.approx(truth, rel=1e-6)
    assert acc.get_delta(eps) >= gdp_delta(eps, math.hypot(1 / 1.5, 0.5)) * (1 - 1e-15)
    e, method = acc.get_epsilon_and_method(1e-5)
    assert method == "gdp" and e == gdp_epsilon(1e-5, mu)


def test_gdp_rdp_bounds_the_gaussian_curve():
    lam = np.array([1.0, 1.5, 2.0, 10.0, 1e6, np.inf])
    for mu in (1e-8, 0.3, 7.0):
        vals = gdp_rdp(lam, mu)
        for v, x in zip(vals[:-1], lam[:-1], strict=True):
            assert Fraction(v) >= Fraction(x) * Fraction(mu) ** 2 / 2
        assert vals[-1] == math.inf
        assert np.all(vals <= gaussian_rdp(lam, 1.0, mu) * (1 + 1e-15))
    assert np.all(gdp_rdp(lam, 0.0) == 0)


def test_gaussian_gdp_and_events():
    assert gaussian_gdp(2.0, 1.0) == 0.5 and gaussian_gdp(0.0, 1.0) == math.inf
    assert gaussian_gdp(1.0, 0.0) == 0.0
    assert Fraction(gaussian_gdp(3.0, 1.0)) >= Fraction(1, 3)
    ev = gaussian_event(2.0, 1.0)
    assert ev.gdp == 0.5 and ev.gdp_bound.exact
    assert np.array_equal(ev.rdp([2.0, 8.0]), gaussian_rdp([2.0, 8.0], 2.0, 1.0))
    copy = pickle.loads(pickle.dumps(ev))
    assert copy.gdp == 0.5 and isinstance(copy, type(ev))
    # the RDP accountant composes it exactly (as a partial of gaussian_rdp)
    a, b = RdpAccountant(), RdpAccountant()
    a.compose(ev, 3)
    b.compose(functools.partial(gaussian_rdp, sigma=2.0, sensitivity=1.0), 3)
    assert a.get_epsilon(1e-6) == b.get_epsilon(1e-6)
    with pytest.raises(ValueError):
        gaussian_event(-1.0)


# -- allowances -----------------------------------------------------------------------------
def test_density_allowance_against_a_perturbed_gaussian_pair():
    """Lemma 1: densities within e^(+-a) of a mu-GDP pair. A worst-ish perturbation (P
    tilted up on the right, Q down) computed by quadrature never exceeds the bound."""
    mu, a = 1.0, 0.05
    bound = GdpBound(mu, a)
    with mpmath.workdps(30):
        m = mpmath.mpf(mu)

        def pdf(x, c):
            return mpmath.exp(-((x - c) ** 2) / 2) / mpmath.sqrt(2 * mpmath.pi)

        def wp(x):  # in [e^-a, e^a] after normalisation
            return mpmath.exp(a * mpmath.tanh(x))

        def wq(x):
            return mpmath.exp(-a * mpmath.tanh(x))

        zp = mpmath.quad(lambda x: pdf(x, m) * wp(x), [-mpmath.inf, 0, mpmath.inf])
        zq = mpmath.quad(lambda x: pdf(x, 0) * wq(x), [-mpmath.inf, 0, mpmath.inf])
        for eps in (0.5, 2.0, 4.0):
            e = mpmath.mpf(eps)

            def f(x, e=e):
                return max(pdf(x, m) * wp(x) / zp - mpmath.exp(e) * pdf(x, 0) * wq(x) / zq, 0)

            truth = mpmath.quad(f, [-mpmath.inf, 0, e + 1, mpmath.inf])
            assert bound.delta(eps) >= truth
    assert bound.epsilon(1e-5) > gdp_epsilon(1e-5, mu)
    assert bound.epsilon(1e-5) <= gdp_epsilon(1e-5 * math.exp(-a), mu) + 2 * a + 1e-12


def test_failure_allowance_and_round_trip():
    b = GdpBound(0.8, 1e-7, 1e-9)
    for d in (1e-3, 1e-6):
        e = b.epsilon(d)
        assert b.delta(e) <= d * (1 + 1e-9)
    assert b.epsilon(1e-9) == math.inf  # delta <= tv
    assert b.epsilon(1.0) == 0.0
    assert GdpBound(0.0, 0.01).epsilon(0.0) == pytest.approx(0.02)
    c = GdpBound(0.5).compose(GdpBound(0.5, 1e-6, 1e-8), 3)
    assert c.mu == compose_gdp([0.5, 0.5], [1, 3])
    assert c.log_ratio >= 3e-6 and c.tv >= 3e-8
    with pytest.raises(ValueError):
        GdpBound(1.0, -1.0)


# -- the accountant ---------------------------------------------------------------------
def test_strict_accountant_refuses_non_gdp_before_recording():
    acc = GdpAccountant(strict=True)
    acc.compose(gaussian_event(1.0))
    with pytest.raises(NotGdpError):
        acc.compose(functools.partial(laplace_rdp, b=2.0))
    assert acc.releases == 1 and acc.gdp == 1.0
    assert isinstance(NotGdpError("x"), TypeError)


def test_mixed_composition_falls_back_to_rdp_and_says_so():
    lap = functools.partial(laplace_rdp, b=10.0)
    acc = GdpAccountant()
    acc.compose(gaussian_event(1.0)).compose(lap)
    e, method = acc.get_epsilon_and_method(1e-5)
    ref = RdpAccountant(WIDE_ORDERS)
    ref.compose(functools.partial(gaussian_rdp, sigma=1.0)).compose(lap)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        assert method == "rdp" and e == ref.get_epsilon(1e-5)
    assert acc.mixed and acc.gdp is None and acc.gdp_bound is None


def test_gdp_only_is_never_worse_than_rdp():
    acc = GdpAccountant()
    acc.compose(gaussian_event(3.0), 10)
    e, method = acc.get_epsilon_and_method(1e-6)
    assert method == "gdp"
    assert e < _rdp_eps(functools.partial(gaussian_rdp, sigma=3.0 / math.sqrt(10)), 1e-6)
    assert acc.get_delta(e) <= 1e-6 * (1 + 1e-9)


# -- releases ----------------------------------------------------------------------------
def _glm_data(n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x = 0.8 * x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0)
    y = (x[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return x, y


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_exact_glm_mu_matches_its_rdp_curve(method):
    """mu^2 = G^2 r^2 m / (n beta): lam mu^2 / 2 is the exact posterior's own curve, up to
    the last rounding (never below it)."""
    model = pb.BayesianLogisticRegression(beta=0.05, c=1.0, backend="exact")
    cal = pb.calibrate(model, 500, 2.0, 0.5, method=method)
    assert cal.sampler is None and cal.gdp is not None
    lam = np.array([1.0, 1.5, 2.0, 30.0, 1e5])
    curve = model.rdp(500, lam, cal.r, cal.m, method)
    implied = gdp_rdp(lam, cal.gdp)
    assert np.all(implied >= curve) and np.all(implied <= curve * (1 + 1e-14))


def test_exact_glm_release_bound_and_epsilon():
    x, y = _glm_data()
    model = pb.BayesianLogisticRegression(beta=0.05, c=1.0, backend="exact")
    rel = pb.sample(model, (x, y), eps=1.0, delta=1e-5, rng=3)
    b = rel.gdp_bound
    e_bar = rel.calibration.sampler["log_density_error"]
    assert rel.gdp is None and b is not None  # allowances: not mu-GDP outright
    assert b.log_ratio >= 2 * e_bar and b.tv == rel.tv > 0
    rdp = _rdp_eps(rel, 1e-5)
    got = rel.epsilon(1e-5)
    assert got == b.epsilon(1e-5) < rdp <= 1.0
    # independent check: e^a delta_mu(eps - 2a - log(1/(1 - tv))) + tv <= delta, in mpmath
    with mpmath.workdps(40):
        a, tv, mu = mpmath.mpf(2 * e_bar), mpmath.mpf(rel.tv), mpmath.mpf(b.mu)
        inner = mpmath.mpf(got) - 2 * a - mpmath.log(1 / (1 - tv))
        dmu = mpmath.ncdf(-inner / mu + mu / 2) - mpmath.exp(inner) * mpmath.ncdf(
            -inner / mu - mu / 2
        )
        assert mpmath.exp(a) * dmu + tv <= mpmath.mpf(1e-5)
    two = pb.sample(model, (x, y), lam=2.0, eps=1.0, size=2, rng=4)
    one = pb.calibrate(model, len(y), 2.0, 0.5, d=2)
    assert two.gdp_bound.mu == pytest.approx(math.sqrt(2) * one.gdp_bound.mu, rel=1e-6)


@pytest.mark.parametrize("schedule", ["utility", "stationary"])
@pytest.mark.parametrize("method", ["diffused", "concentrated", "direct"])
def test_langevin_mu_is_the_composition_of_its_gaussian_steps(schedule, method):
    """docs/gdp.md §6: a Langevin chain is K adaptively composed Gaussian mechanisms, the
    first from 0 with sensitivity s0 = s / 2 (binary): mu = compose_gdp of the per-step
    gaussian_gdp, computed here step by step; at the utility rule's no-pull runs mu^2 / 2
    is the RDP certificate itself (never below it), with a pull at least it."""
    from privbayes.accounting.gdp import compose_gdp, gaussian_gdp
    from privbayes.sampling import langevin

    model = pb.BayesianLogisticRegression(beta=0.05, c=1.0, backend="langevin", schedule=schedule)
    eps = 30.0 if method == "direct" else 0.5
    cal = pb.calibrate(model, 400, 2.0, eps, method=method)
    s = cal.sampler
    c = model._c_cert()
    step_s = s["step"] * cal.r * 2 * c  # s = eta r G, G = 2c
    mus = [gaussian_gdp(s["noise"], step_s / 2)] + [gaussian_gdp(s["noise"], step_s)] * (
        s["steps"] - 1
    )
    mu = cal.gdp_bound.mu
    assert mu == pytest.approx(compose_gdp(mus), rel=1e-12)
    rho = langevin.certificate(s, 400, cal.r, c)
    assert mu * mu / 2 >= rho * (1 - 1e-15)
    if s["prec"] == 0.0:  # no pull: the same number (both round up the same sum)
        assert mu * mu / 2 == pytest.approx(rho, rel=1e-14)
    else:  # the pull's contraction: Theorem 1 below the composition
        assert rho < mu * mu / 2


def test_langevin_dp_target_calibrates_through_gdp():
    """An (eps, delta) target without a ledger calibrates the utility release through its
    exact GDP conversion: a larger knob than the RDP search (whose eps at delta exceeds
    the target at the GDP knob), eps at delta <= target by an independent mpmath check, the
    same release for two unrelated data sets (public inputs only); with a ledger, whose
    budget is RDP, the RDP search as before."""
    x, y = _glm_data()
    model = pb.BayesianLogisticRegression(beta="auto", c=1.0, backend="langevin")
    rel = pb.sample(model, (x, y), eps=0.5, delta=1e-5, rng=3)
    b = rel.gdp_bound
    assert b is not None and b.log_ratio == 0 and b.tv == 0 and rel.gdp == b.mu
    assert rel.dp_eps == rel.epsilon(1e-5) == b.epsilon(1e-5) <= 0.5
    with mpmath.workdps(40):  # delta_mu(eps) <= delta, from the normal CDF directly
        mu, e = mpmath.mpf(b.mu), mpmath.mpf(rel.dp_eps)
        dmu = mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2)
        assert dmu <= mpmath.mpf(1e-5)
    rdp = _rdp_eps(rel, 1e-5)
    assert rdp > 0.5  # the RDP conversion alone would not certify this release
    x2 = -x[::-1] * 0.5
    other = pb.sample(model, (x2, 1 - y[::-1]), eps=0.5, delta=1e-5, rng=4)
    assert other.calibration.sampler == rel.calibration.sampler and other.r == rel.r
    cal = pb.calibrate(model, len(y), eps=0.5, delta=1e-5, d=x.shape[1])
    assert cal.r == rel.r and cal.dp_eps == rel.dp_eps and cal.lam == 2.0
    with tempfile.TemporaryDirectory() as tmp:
        led = pb.Ledger(f"{tmp}/l.db")
        led.init_budget("d", eps=5.0, delta=1e-5)
        charged = pb.sample(model, (x, y), eps=0.5, delta=1e-5, ledger=led, dataset="d", rng=5)
    assert charged.r < rel.r and _rdp_eps(charged, 1e-5) <= 0.5
    assert rel.r / charged.r == pytest.approx(1.1, abs=0.08)  # 12-22% more rho ~ 10% r


def test_releases_without_a_gdp_proof():
    x, y = _glm_data()
    ops = pb.BayesianLogisticRegression(beta=0.05, c=1.0, backend="exact")
    assert pb.calibrate(ops, 120, 2.0, 1.0, method="ops").gdp_bound is None
    bb = pb.sample(pb.BetaBernoulli(1, 1), np.array([0, 1, 1, 0, 1]), lam=2.0, eps=1.0, rng=1)
    assert bb.gdp is None and bb.gdp_bound is None
    post = pb.posterior(pb.BetaBernoulli(1, 1), np.array([0, 1, 1, 0, 1]), lam=2.0, eps=1.0,
                        rng=1)  # fmt: skip
    assert post.gdp is None and post.gdp_bound is None
    empty = pb.calibrate(pb.BetaBernoulli(1, 1), 0, 2.0, 1.0)
    assert empty.gdp == 0.0
