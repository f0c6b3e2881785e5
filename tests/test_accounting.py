"""RDP curves and the accountant against ../shared/reference/accounting.md and quadrature."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from privbayes.accounting import (
    OrdersWarning,
    RdpAccountant,
    gaussian_rdp,
    laplace_rdp,
    pure_dp_rdp,
    randomized_response_rdp,
    subsampled_gaussian_rdp,
    zcdp_rdp,
)


def test_subsampled_gaussian_reference_values():
    got = 50 * subsampled_gaussian_rdp([1.5, 2.5, 5, 50, 100, np.inf], 0.01, 2.5)
    want = [6.5007e-4, 1.0854e-3, 2.1808e-3, 2.3846e-2, 1.6742e2, np.inf]
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert 10 * subsampled_gaussian_rdp(5, 0.1, 2) == pytest.approx(0.0773697, rel=1e-4)
    np.testing.assert_allclose(
        subsampled_gaussian_rdp([2, 10, 64], 0.01, 1),
        [1.7181342e-4, 3.8270419e-2, 27.321732],
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        subsampled_gaussian_rdp([4, 25], 0.1, 2), [6.0032830e-3, 0.75148022], rtol=1e-6
    )
    assert subsampled_gaussian_rdp([1.5, 7, np.inf], 0.0, 1.0).tolist() == [0, 0, 0]
    np.testing.assert_allclose(subsampled_gaussian_rdp([1.5, 7], 1.0, 1.0), [0.75, 3.5])
    assert np.isinf(subsampled_gaussian_rdp(2.0, 0.3, 0.0))


@pytest.mark.parametrize("alpha", [1.5, 2.5, 3.7])
def test_fractional_orders_are_exact_by_quadrature(alpha):
    q, sigma = 0.05, 1.2
    mu0, mu1 = stats.norm(0, sigma), stats.norm(1, sigma)

    def integrand(z):
        return mu0.pdf(z) * ((1 - q) + q * mu1.pdf(z) / mu0.pdf(z)) ** alpha

    val = integrate.quad(integrand, -40, 40, epsabs=0, epsrel=1e-13, limit=500)[0]
    exact = math.log(val) / (alpha - 1)
    assert float(subsampled_gaussian_rdp(alpha, q, sigma)) == pytest.approx(exact, rel=1e-9)


def test_mironov_table_two():
    p = 0.8
    np.testing.assert_allclose(
        randomized_response_rdp([1, np.inf], p),
        [(2 * p - 1) * math.log(p / (1 - p)), abs(math.log(p / (1 - p)))],
    )
    lam = 3.0
    rr = math.log(p**lam * (1 - p) ** (1 - lam) + (1 - p) ** lam * p ** (1 - lam)) / (lam - 1)
    assert float(randomized_response_rdp(lam, p)) == pytest.approx(rr)
    b = 0.7
    lap = math.log(
        lam / (2 * lam - 1) * math.exp((lam - 1) / b)
        + (lam - 1) / (2 * lam - 1) * math.exp(-lam / b)
    ) / (lam - 1)
    np.testing.assert_allclose(
        laplace_rdp([1, lam, np.inf], b), [1 / b + math.exp(-1 / b) - 1, lap, 1 / b], rtol=1e-12
    )
    assert np.isfinite(laplace_rdp(1e6, 1e-3))  # log space: no overflow
    np.testing.assert_allclose(gaussian_rdp([1, 4, np.inf], 2.0), [1 / 8, 4 / 8, np.inf])


def test_pure_dp_tight_form():
    e = 0.7
    for lam in [1.5, 2.0, 10.0]:
        tight = math.log((math.sinh(lam * e) - math.sinh((lam - 1) * e)) / math.sinh(e)) / (lam - 1)
        assert float(pure_dp_rdp(lam, e)) == pytest.approx(tight, rel=1e-12)
        assert float(pure_dp_rdp(lam, e)) <= min(e, lam * e * e / 2) + 1e-15
    assert float(pure_dp_rdp(np.inf, e)) == e and np.isfinite(pure_dp_rdp(1e8, 800.0))


def test_conversion_reference_values():
    acc = RdpAccountant(orders=np.arange(2, 33)).compose(np.full(31, 1.1))
    with pytest.warns(OrdersWarning, match="orders"):
        eps, order = acc.get_epsilon_and_order(1e-5)
    assert eps == pytest.approx(1.32783806176, rel=1e-9) and order == 32
    orders = np.concatenate([np.arange(1.1, 11, 0.1), np.arange(12, 64)])
    acc = RdpAccountant(orders).compose(lambda o: subsampled_gaussian_rdp(o, 0.04, 1.5), 2250)
    eps, order = acc.get_epsilon_and_order(1e-5, refine=False)
    assert eps == pytest.approx(7.32911117143, rel=1e-9) and order == pytest.approx(3.9)
    assert acc.get_epsilon(1e-5) <= eps  # continuous refinement never does worse
    # Mironov's conversion: the reference's 8.0797 is the value at order 4, but on this grid
    # the minimum is at order 4.1 (8.0738; dp-accounting finds the same): the reference
    # value is not the grid minimum. We reproduce it at order 4 and are below it.
    assert acc.get_epsilon(1e-5, "mironov", refine=False) <= 8.0797
    four = float(2250 * subsampled_gaussian_rdp(4.0, 0.04, 1.5)) + math.log(1e5) / 3
    assert four == pytest.approx(8.0797, rel=1e-4)


def test_zcdp_delta_reference_values():
    assert RdpAccountant().compose(lambda o: zcdp_rdp(o, 0.05)).get_delta(0.25) == pytest.approx(
        0.0817727531036956, rel=1e-9
    )
    assert RdpAccountant().compose(lambda o: zcdp_rdp(o, 0.5)).get_delta(0.0) == pytest.approx(
        0.5588356393474351, rel=1e-9
    )


def test_edge_behaviour():
    gauss = RdpAccountant().compose(lambda o: gaussian_rdp(o, 1.0))
    assert gauss.get_epsilon(0.0) == math.inf  # delta = 0, unbounded curve: at once
    tiny = RdpAccountant().compose(lambda o: zcdp_rdp(o, 1e-6))
    assert tiny.get_epsilon(1 - 1e-12) == 0.0  # clamped, never negative
    pure = RdpAccountant().compose(lambda o: pure_dp_rdp(o, 0.3))
    assert pure.get_epsilon(0.0) == pytest.approx(0.3) and pure.get_delta(0.3) == 0.0
    with pytest.raises(ValueError, match="delta"):
        gauss.get_epsilon(1.5)
    with pytest.raises(ValueError, match="orders"):
        RdpAccountant(orders=[0.5, 2.0])
    assert float(subsampled_gaussian_rdp(1.0, 0.1, 1.0)) >= 0  # order 1: no ZeroDivisionError
    inf = RdpAccountant().compose(lambda o: gaussian_rdp(o, 0.0))
    assert inf.get_epsilon(1e-5) == math.inf and inf.get_delta(1.0) == 1.0


@settings(max_examples=40, deadline=None)
@given(rho=st.floats(1e-4, 5.0), d1=st.floats(1e-12, 0.5), d2=st.floats(1e-12, 0.5))
def test_epsilon_non_increasing_in_delta(rho, d1, d2):
    acc = RdpAccountant().compose(lambda o: zcdp_rdp(o, rho))
    lo, hi = sorted((d1, d2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        assert acc.get_epsilon(hi) <= acc.get_epsilon(lo) + 1e-12


def test_composes_privbayes_releases():
    import privbayes as pb

    rel = pb.sample(pb.BetaBernoulli(), np.r_[np.ones(30), np.zeros(70)], 2.0, 0.5, rng=0)
    acc = RdpAccountant().compose(rel, count=3)
    i = int(np.flatnonzero(acc.orders == 2.0)[0])
    assert acc.rdp[i] == pytest.approx(3 * rel.eps)
    assert np.isfinite(acc.get_epsilon(1e-6))


def test_review_regressions():
    """Unsorted orders, count=0, grids without finite orders, orders next to 1."""
    acc = RdpAccountant([64.0, 2.0]).compose(lambda o: gaussian_rdp(o, 3.0))
    assert acc.orders.tolist() == [2.0, 64.0]
    lam = np.array([2.0, 64.0])
    grid = gaussian_rdp(lam, 3.0) + np.log1p(-1 / lam) - (math.log(1e-6) + np.log(lam)) / (lam - 1)
    assert acc.get_epsilon(1e-6, refine=False) == pytest.approx(float(grid.min()))
    acc = RdpAccountant().compose(lambda o: gaussian_rdp(o, 1.0), count=0)
    acc.compose(lambda o: gaussian_rdp(o, 0.5), count=100)
    assert np.isfinite(acc.get_epsilon(1e-5)) and acc.get_epsilon(0.0) == math.inf
    only_inf = RdpAccountant([np.inf]).compose(lambda o: pure_dp_rdp(o, 0.2))
    assert only_inf.get_epsilon(1e-5) == pytest.approx(0.2) and only_inf.get_delta(0.1) == 1.0
    with pytest.raises(ValueError, match="method"):
        acc.get_epsilon(0.0, method="bogus")
    with pytest.raises(ValueError, match="orders"):
        RdpAccountant().compose(lambda o: np.zeros((2, 2)))
    with pytest.raises(TypeError):
        subsampled_gaussian_rdp(2.0, "0.1", 1.0)
    assert (laplace_rdp([1.01, 1.5, 3.0], 1e7) >= 0).all()


@pytest.mark.parametrize(
    "q,sigma,alpha",
    [(0.1, 2.0, 1 + 1e-12), (0.001, 5.0, 1.0), (0.3, 0.8, 1.05), (0.5, 0.5, 1.000001)],
)
def test_subsampled_gaussian_near_order_one_against_quadrature(q, sigma, alpha):
    mu0 = stats.norm(0, sigma)

    def f(z):
        return (1 - q) + q * math.exp((2 * z - 1) / (2 * sigma**2))

    if alpha == 1.0:  # KL(mu || mu0)
        want = integrate.quad(
            lambda z: mu0.pdf(z) * f(z) * math.log(f(z)), -40, 40, epsabs=0, epsrel=1e-12, limit=500
        )[0]
    else:  # (1+u)^a - 1 - a u, written without cancellation, integrates to A - 1

        def g(z):
            u = f(z) - 1
            return mu0.pdf(z) * (
                (1 + u) * math.expm1((alpha - 1) * math.log1p(u)) - (alpha - 1) * u
            )

        total = integrate.quad(g, -40, 40, epsabs=0, epsrel=1e-12, limit=500)[0]
        want = math.log1p(total) / (alpha - 1)
    assert float(subsampled_gaussian_rdp(alpha, q, sigma)) == pytest.approx(want, rel=1e-7)


def test_randomized_response_and_laplace_next_to_order_one():
    p, lam = 0.51, 1 + 1e-12
    kl = (2 * p - 1) * math.log(p / (1 - p))
    assert float(randomized_response_rdp(lam, p)) == pytest.approx(kl, rel=1e-6)
    b = 1.0
    assert float(laplace_rdp(lam, b)) == pytest.approx(1 / b + math.expm1(-1 / b), rel=1e-6)
