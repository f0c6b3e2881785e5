"""Privacy auditing: sound (never above the truth), powerful (catches broken mechanisms),
and strict about its inputs. Fixed seeds throughout; every audit here is vectorised.

Independent truths used: mechanisms with a known (eps, delta) curve (Gaussian, randomized
response), the exact privacy profile of the Beta worst pair by quadrature, the closed-form
Rényi divergences of privbayes.divergence, scipy's binomtest for Clopper-Pearson.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import optimize, special, stats

import privbayes as pb
from privbayes import audit as A
from privbayes.audit.blackbox import _records_changed
from privbayes.cli import main

CONF = 0.99


# -- independent references -----------------------------------------------------------------
def gaussian_eps(mu: float, delta: float) -> float:
    """Exact eps(delta) of N(0,1) vs N(mu,1) (Balle & Wang 2018, Thm 8)."""

    def f(e):
        return stats.norm.cdf(-e / mu + mu / 2) - np.exp(e) * stats.norm.cdf(-e / mu - mu / 2)

    return optimize.brentq(lambda e: f(e) - delta, 0.0, 60.0)


def beta_pair_eps(p1, p2, delta: float) -> float:
    """Exact eps(delta) of Beta(p1) vs Beta(p2), both directions, by quadrature in logit."""
    u = np.linspace(-80.0, 30.0, 400_001)
    th = special.expit(u)
    jac = np.log(th) + np.log1p(-th)
    lp = stats.beta.logpdf(th, *p1) + jac
    lq = stats.beta.logpdf(th, *p2) + jac
    du = u[1] - u[0]
    best = 0.0
    for x, y in ((lp, lq), (lq, lp)):

        def excess(e, x=x, y=y):
            return np.sum(np.maximum(np.exp(x) - np.exp(e + y), 0.0)) * du - delta

        if excess(0.0) > 0:
            best = max(best, optimize.brentq(excess, 0.0, 60.0))
    return best


def posterior_params(model, data, cal):
    stats_, _ = model._statistics(data)
    return np.asarray(model._alpha) / cal.m + cal.r * stats_


def gaussian_mech(data, size=None, rng=None):
    return float(np.sum(data)) + rng.standard_normal(size)


# -- statistics -------------------------------------------------------------------------------
@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (17, 5000), (2500, 5000)])
@pytest.mark.parametrize("conf", [0.9, 0.99])
def test_clopper_pearson_matches_scipy(k, n, conf):
    ref = stats.binomtest(k, n).proportion_ci(conf, method="exact")
    lo, hi = A.clopper_pearson(k, n, conf)
    assert lo == pytest.approx(ref.low, abs=1e-12) and hi == pytest.approx(ref.high, abs=1e-12)
    one = stats.binomtest(k, n, alternative="less").proportion_ci(conf, method="exact")
    assert A.clopper_pearson(k, n, conf, "upper") == pytest.approx(one.high, abs=1e-12)


def test_eps_from_rates():
    assert A.eps_from_rates(0.5, 0.5, 0.0) == 0.0  # a coin flip proves nothing
    # max(log((1 - d - fnr) / fpr), log((1 - d - fpr) / fnr))
    assert A.eps_from_rates(0.1, 0.2, 0.0) == pytest.approx(np.log(0.8 / 0.1))
    assert A.eps_from_rates(0.1, 0.2, 0.05) == pytest.approx(np.log(0.75 / 0.1))
    assert A.eps_from_rates(0.2, 0.1, 0.05) == pytest.approx(np.log(0.75 / 0.1))
    assert A.eps_from_rates(0.0, 0.5, 0.0) == np.inf
    assert A.eps_from_rates(0.9, 0.9, 0.0) == 0.0  # worse than guessing: clamped


def test_gaussian_audit_is_sound_and_close():
    """Known truth: N(0,1) vs N(1,1). The bound stays below it and gets near it."""
    d0, d1 = np.zeros(5), np.r_[1.0, np.zeros(4)]
    for delta, frac in ((1e-2, 0.8), (1e-5, 0.45)):
        res = A.audit(gaussian_mech, d0, d1, 10**5, delta=delta, confidence=CONF, rng=0)
        exact = gaussian_eps(1.0, delta)
        assert res.eps_lower <= exact
        assert res.eps_lower >= frac * exact, (delta, res.eps_lower, exact)
        assert res.interval[0] <= res.eps_lower <= res.interval[1]


def test_randomized_response_pure_dp_is_tight():
    eps0 = 1.0
    p = np.exp(eps0) / (1 + np.exp(eps0))

    def rr(bit, size=None, rng=None):
        truth = rng.random(size) < p
        return np.where(truth, bit[0], 1 - bit[0]).astype(float)

    res = A.audit(rr, np.array([0.0]), np.array([1.0]), 10**5, delta=0.0, confidence=CONF, rng=1)
    assert 0.9 * eps0 <= res.eps_lower <= eps0


def test_no_false_positives_when_outputs_ignore_the_data():
    """Same law on D and D': the bound is > 0 with probability <= 1 - confidence.

    Choosing the threshold on the same samples it is evaluated on fails this (about 60% of
    runs at confidence 0.8 in our trials): the split is what makes the bound valid.
    """

    def null(data, size=None, rng=None):
        return rng.standard_normal(size)

    hits = [
        A.audit(null, [0.0], [1.0], 200, delta=0.0, confidence=0.8, rng=s).eps_lower > 0
        for s in range(200)
    ]
    assert np.mean(hits) <= 0.2


def _randomized_response(eps0: float):
    p = np.exp(eps0) / (1 + np.exp(eps0))

    def rr(bit, size=None, rng=None):
        truth = rng.random(size) < p
        return np.where(truth, bit[0], 1 - bit[0]).astype(float)

    return rr


def test_coverage_on_a_known_mechanism():
    """Across seeds, the bound exceeds the true eps at most (1 - confidence) of the time.

    Randomized response at eps0 = 3 (pure DP, delta = 0): the threshold test is the
    Neyman-Pearson test there and both error rates equal 1 / (1 + e^eps0), so the bound is
    tight and its coverage is really at stake (a Gaussian at 400 trials cannot come near its
    true eps, so no miscoverage could show). 1000 seeded audits of 400 trials: measured
    0.151 over (allowed 0.2 + 2.5 binomial sd). Bounding each rate at level `confidence`
    instead of sqrt(confidence) fails here (measured 0.303).
    """
    eps0, conf, runs = 3.0, 0.8, 1000
    rr = _randomized_response(eps0)
    d0, d1 = np.array([0.0]), np.array([1.0])
    lows = np.array(
        [A.audit(rr, d0, d1, 400, delta=0.0, confidence=conf, rng=s).eps_lower for s in range(runs)]
    )
    over = np.mean(lows > eps0)
    assert over <= (1 - conf) + 2.5 * np.sqrt(conf * (1 - conf) / runs), over
    assert np.median(lows) > 0.8 * eps0  # and the audit is not vacuous


# -- privbayes mechanisms: soundness and how close the audit gets ------------------------------
CONJUGATE = [
    ("beta", pb.BetaBernoulli(), False, "diffused"),
    ("beta", pb.BetaBernoulli(), False, "concentrated"),
    ("dirichlet", pb.DirichletCategorical([1.0, 1.0, 1.0]), False, "diffused"),
    ("dirichlet", pb.DirichletCategorical([1.0, 1.0, 1.0]), False, "concentrated"),
    ("query", pb.BetaBernoulli(), True, "diffused"),
    ("query", pb.BetaBernoulli(), True, "concentrated"),
]


CASES = [(*c, eps) for c in CONJUGATE for eps in (0.1, 1.0)]
# direct is not tunable: Beta(2, 2) at lam = 2 certifies 0.70 for n = 100, below eps = 10
CASES.append(("beta", pb.BetaBernoulli(2.0, 2.0), False, "direct", 10.0))


@pytest.mark.parametrize("name,model,query,method,eps", CASES)
def test_conjugate_audit_below_certified_and_reaches_a_fraction(name, model, query, method, eps):
    """1e5 trials, delta = 1e-3: never above the certificate; measured fractions 0.39-0.70
    over 5 seeds (docs/audit.md), asserted >= 0.3. Beta: also below the exact eps(delta)
    of the worst pair itself (quadrature), which sits below the certificate."""
    res = A.audit_model(
        model, 100, 2.0, eps, method, 10**5, delta=1e-3, confidence=CONF, rng=7, query=query
    )
    assert not res.violation
    assert res.eps_lower <= res.eps_certified
    assert res.fraction >= 0.3, res
    if name == "beta":
        cal = pb.calibrate(model, 100, 2.0, eps, method)
        d0, d1 = A.worst_case_pair(model, 100, 2.0, eps, method)
        exact = beta_pair_eps(
            posterior_params(model, d0, cal), posterior_params(model, d1, cal), 1e-3
        )
        assert res.eps_lower <= exact <= res.eps_certified


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_conjugate_audit_at_small_delta(method):
    """delta = 1e-5 (the default): measured fractions 0.23-0.47; asserted >= 0.2."""
    for model in (pb.BetaBernoulli(), pb.DirichletCategorical([1.0, 1.0, 1.0])):
        res = A.audit_model(model, 100, 2.0, 1.0, method, 10**5, confidence=CONF, rng=3)
        assert res.eps_lower <= res.eps_certified
        assert res.fraction >= 0.2


def test_worst_case_pair_is_the_calibrators_pair():
    """D, D' differ in one record and their exact divergence is the certified eps."""
    for model in (pb.BetaBernoulli(1.0, 3.0), pb.DirichletCategorical([1.0, 2.0, 0.5, 1.0])):
        for method in ("diffused", "concentrated"):
            cal = pb.calibrate(model, 30, 3.0, 0.5, method)
            d0, d1 = A.worst_case_pair(model, 30, 3.0, 0.5, method)
            assert d0.shape == d1.shape == (30,) and np.sum(d0 != d1) == 1
            div = pb.renyi_dirichlet(
                posterior_params(model, d0, cal), posterior_params(model, d1, cal), 3.0
            )
            assert div == pytest.approx(cal.eps, rel=1e-9)
    (x, y), (x1, y1) = A.worst_case_pair(pb.BayesianLogisticRegression(c=2.0), 10, 2.0, 1.0, d=3)
    assert x.shape == (10, 3) and np.array_equal(x, x1) and np.sum(y != y1) == 1
    assert np.linalg.norm(x, axis=1).max() == 2.0


def test_calibrated_mechanism_draws_the_release_distribution():
    """Its draws follow the calibrated posterior (KS test against the exact Beta)."""
    model = pb.BetaBernoulli(2.0, 1.0)
    mech = A.CalibratedMechanism(model, 50, 2.0, 0.5, "concentrated")
    data = np.r_[np.ones(20), np.zeros(30)]
    a, b = posterior_params(model, data, mech.calibration)
    log_theta = mech(data, size=20_000, rng=0)
    assert stats.kstest(np.exp(log_theta), stats.beta(a, b).cdf).pvalue > 1e-3
    assert np.shape(mech(data, rng=1)) == ()
    with pytest.raises(ValueError, match="n = 49"):
        mech(data[:-1])
    q = A.CalibratedMechanism(model, 50, 2.0, 0.5, query=True)
    assert np.shape(q(np.full(50, 0.3), size=7, rng=0)) == (7,)


# -- Rényi divergence estimates -------------------------------------------------------------
def _worst_pair_draws(model, eps, method, size, seed):
    mech = A.CalibratedMechanism(model, 100, 2.0, eps, method)
    d0, d1 = A.worst_case_pair(model, 100, 2.0, eps, method)
    g = np.random.default_rng(seed)
    a0 = posterior_params(model, d0, mech.calibration)
    a1 = posterior_params(model, d1, mech.calibration)
    return mech(d0, size=size, rng=g), mech(d1, size=size, rng=g), a0, a1


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_renyi_binned_estimate_is_a_lower_estimate_at_the_worst_pair(method):
    """Binning loses information (data-processing inequality), so the binned estimate sits
    below the exact D_lam of the worst pair (privbayes.renyi_beta; = the certificate at
    lam = 2), up to Monte Carlo error, at every eps; close to it far from the pole
    (eps = 0.1), far below near it (eps = 10: ~1.6 against 10). Its interval is for the
    binned divergence: at eps = 1 and 10 it excludes the true value, as documented."""
    model, orders = pb.BetaBernoulli(), np.array([1.5, 2.0, 3.0])
    for eps in (0.1, 1.0, 3.0, 10.0):
        x0, x1, a0, a1 = _worst_pair_draws(model, eps, method, 10**5, seed=11)
        exact = pb.renyi_beta(*a0, *a1, orders)
        assert exact[1] == pytest.approx(eps, rel=1e-9)
        cal = pb.calibrate(model, 100, 2.0, eps, method)
        est = A.renyi_estimate(x0, x1, orders, rng=0, certified=cal.rdp(orders))
        assert np.array_equal(est.certified[1:2], [cal.eps])
        assert np.all(est.lower <= est.estimate) and np.all(est.estimate <= est.upper)
        assert np.all(est.lower <= exact)  # the interval's lower end: below the truth
        if est.saturated:  # possible near the pole: then nothing above is claimed
            assert np.all(est.estimate == np.inf)
            continue
        assert np.all(est.estimate <= 1.05 * exact + 0.005), (eps, est.estimate, exact)
        if eps == 0.1:
            assert np.all(est.estimate >= 0.9 * exact)
        if eps == 10.0:
            assert est.estimate[1] < 0.3 * exact[1] and est.upper[1] < exact[1]


def test_renyi_estimate_grows_with_the_divergence_and_saturates_at_separation():
    """Gaussians N(0, s^2) vs N(0.01, s^2), true D_2 = (0.01 / s)^2: the estimate rises
    with it and saturates (inf) once some bin holds draws of P and none of Q; it never
    falls to 0. Disjoint supports are inf, never a tight finite interval."""
    g = np.random.default_rng(0)
    previous = 0.0
    for s in (1e-2, 3e-3, 2e-3, 1e-3):
        x0, x1 = g.normal(0.0, s, 10**5), g.normal(0.01, s, 10**5)
        est = A.renyi_estimate(x0, x1, 2.0, rng=0)
        assert est.estimate[0] >= previous and est.lower[0] > 0.5
        previous = est.estimate[0]
        if s == 1e-2:
            assert est.estimate[0] == pytest.approx(1.0, rel=0.1) and not est.saturated
        if s <= 2e-3:
            assert est.saturated and est.estimate[0] == est.upper[0] == np.inf
    u0, u1 = g.random(10**4), g.random(10**4) + 0.5
    est = A.renyi_estimate(u0, u1, [1.5, 2.0], rng=0)
    assert est.saturated and np.all(est.estimate == np.inf) and np.all(est.upper == np.inf)
    assert est.unmatched == pytest.approx(0.5, abs=0.03)
    assert np.all(est.lower > 3.0)  # a finite lower end: >= log(0.25 / q-bound) or so
    # the reverse direction is saturated too (the law U(0.5, 1.5) has mass where U(0, 1) has none)
    assert A.renyi_estimate(u1, u0, 2.0, rng=0).saturated


def test_renyi_estimate_of_a_sufficient_statistic_gives_the_dirichlet_divergence():
    """For the Dirichlet pair moving a record i -> j, log p_j - log p_i carries the whole
    likelihood ratio, so its divergence is the full D_lam of the two Dirichlets."""
    model = pb.DirichletCategorical([1.0, 1.0, 1.0])
    cal = pb.calibrate(model, 100, 2.0, 0.1, "concentrated")
    mech = A.CalibratedMechanism(model, 100, 2.0, 0.1, "concentrated")
    d0, d1 = A.worst_case_pair(model, 100, 2.0, 0.1, "concentrated")
    i, j = cal.pair["moved"]
    g = np.random.default_rng(5)
    s0, s1 = (mech(d, size=10**5, rng=g) for d in (d0, d1))
    est = A.renyi_estimate(s0[:, j] - s0[:, i], s1[:, j] - s1[:, i], 2.0, rng=0)
    assert est.estimate[0] == pytest.approx(cal.eps, rel=0.1)


def test_renyi_estimate_validation():
    x = np.random.default_rng(0).standard_normal(200)
    for orders in (1.0, [], [[2.0]], [2.0, np.inf]):
        with pytest.raises(ValueError, match="orders"):
            A.renyi_estimate(x, x, orders)
    with pytest.raises(ValueError, match=">= 100"):
        A.renyi_estimate(x[:50], x, 2.0)
    with pytest.raises(ValueError, match="NaN"):
        A.renyi_estimate(np.r_[x, np.nan], x, 2.0)
    with pytest.raises(ValueError, match=r"q_samples holds \+-inf \(at index 200"):
        A.renyi_estimate(x, np.r_[x, -np.inf], 2.0)
    with pytest.raises(TypeError):
        A.renyi_estimate(x.astype(str), x, 2.0)
    with pytest.raises(ValueError, match="one eps per order"):
        A.renyi_estimate(x, x, [2.0, 3.0], certified=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="NaN"):
        A.renyi_estimate(x, x, 2.0, certified=np.nan)
    with pytest.raises(TypeError, match="certified"):
        A.renyi_estimate(x, x, 2.0, certified="x")
    with pytest.raises(ValueError, match=r"\[0.5, 1\)"):
        A.renyi_estimate(x, x, 2.0, confidence=0.3)
    same = A.renyi_estimate(x, x, [2.0, 3.0], rng=0, certified=1.0)
    assert np.all(same.estimate == 0.0) and not same.saturated
    assert np.array_equal(same.certified, [1.0, 1.0])


# -- power: deliberately broken mechanisms (kept here, never in the library) -------------------
def _claimed(model, n, lam, eps, method, delta):
    return A.certified_dp(pb.calibrate(model, n, lam, eps, method), delta)


def test_catches_noise_dropped():
    """Releases the posterior mean (no sampling): certified as (2, 0.1)-RDP, infinitely leaky.

    A perfect distinguisher shows eps_ceiling ~ log(trials / 2) at most (6.8 here)."""
    model = pb.BetaBernoulli()
    cal = pb.calibrate(model, 100, 2.0, 0.1)

    def mean_only(data, size=None, rng=None):
        a, b = posterior_params(model, data, cal)
        return np.full(size, a / (a + b))

    d0, d1 = A.worst_case_pair(model, 100, 2.0, 0.1)
    claimed = _claimed(model, 100, 2.0, 0.1, "diffused", 1e-5)
    res = A.audit(mean_only, d0, d1, 10**4, confidence=CONF, rng=0, certified=claimed)
    assert res.violation and res.eps_lower > claimed
    assert res.eps_lower == res.eps_ceiling and res.fpr == res.fnr == 0


def test_catches_r_chosen_from_the_data():
    """Uses the calibrated r on data without a positive record, r = 1 otherwise."""
    model, n, lam, eps, delta = pb.BetaBernoulli(), 100, 2.0, 0.05, 1e-5
    cal = pb.calibrate(model, n, lam, eps)

    def data_dependent_r(data, size=None, rng=None):
        stats_, _ = model._statistics(data)
        r = cal.r if stats_[0] == 0 else 1.0
        return pb.BetaBernoulli()._draw(stats_ * r / cal.r, cal, rng, size=size)[1]

    d0, d1 = A.worst_case_pair(model, n, lam, eps)
    claimed = _claimed(model, n, lam, eps, "diffused", delta)
    res = A.audit(data_dependent_r, d0, d1, 10**5, delta=delta, confidence=CONF, rng=0)
    assert res.eps_lower > claimed, (res.eps_lower, claimed)
    # the same audit of the correct mechanism stays below its claim
    ok = A.audit(A.CalibratedMechanism(model, n, lam, eps), d0, d1, 10**5, delta=delta, rng=0)
    assert ok.eps_lower < claimed


def _tempered_glm_draws(xy, n, beta, r, m, rng, size):
    """Exact draws (inverse CDF on a grid) of the 1-D tempered logistic posterior."""
    x, y = xy
    prec = n * beta / m
    w = np.linspace(-15 / np.sqrt(prec) - 5, 15 / np.sqrt(prec) + 5, 40_001)
    margins = (y[:, None] * x[:, :1]) * w[None, :]
    logf = -0.5 * prec * w**2 - r * np.logaddexp(0.0, -margins).sum(axis=0)
    f = np.exp(logf - logf.max())
    cdf = np.r_[0.0, np.cumsum((f[1:] + f[:-1]) / 2)]
    return np.interp(rng.random(size), cdf / cdf[-1], w)


def test_catches_calibration_for_the_wrong_n():
    """Logistic regression (eps ~ 1/n): r calibrated for 100 n, certificate claimed for n.

    (For the conjugate models the certified eps barely depends on n — r(n=10) = 0.682,
    r(n=1e4) = 0.700 at (2, 1) — so the same bug is benign there; docs/audit.md.)
    """
    model, n, lam, eps, delta = pb.BayesianLogisticRegression(beta=0.1, c=1.0), 20, 2.0, 0.01, 1e-5
    claimed_cal = pb.calibrate(model, n, lam, eps)
    wrong = pb.calibrate(model, 100 * n, lam, eps)
    assert wrong.r > 5 * claimed_cal.r

    def mech(cal):
        return lambda data, size=None, rng=None: _tempered_glm_draws(
            data, n, model.beta, cal.r, cal.m, rng, size
        )

    d0, d1 = A.worst_case_pair(model, n, lam, eps)
    claimed = A.certified_dp(claimed_cal, delta)
    bad = A.audit(mech(wrong), d0, d1, 10**5, delta=delta, confidence=CONF, rng=0)
    good = A.audit(mech(claimed_cal), d0, d1, 10**5, delta=delta, confidence=CONF, rng=0)
    assert bad.eps_lower > claimed > good.eps_lower


# -- logistic regression and OPS through the library's own sampler -------------------------------
@pytest.mark.parametrize(
    "method,d,n",
    [("diffused", 1, 20), ("concentrated", 2, 20), ("ops", 1, 20), ("diffused", 2, 50)],
)
def test_logistic_audit_below_certified(method, d, n):
    """The default back-end ("auto": exact or Langevin from public inputs). Small d and n,
    2000 trials: sound, and far below the (loose) GLM certificate."""
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0)
    res = A.audit_model(model, n, 2.0, 1.0, method, 2000, confidence=CONF, rng=0, d=d)
    assert res.eps_certified is not None and res.eps_lower <= res.eps_certified
    assert (res.projection is None) == (d == 1)


@pytest.mark.parametrize(
    "backend,method,d,eps",
    [
        ("exact", "diffused", 1, 1.0),
        ("exact", "concentrated", 2, 1.0),
        ("exact", "ops", 1, 10.0),
        ("langevin", "diffused", 1, 1.0),
        ("langevin", "concentrated", 2, 1.0),
        ("langevin", "diffused", 2, 10.0),
    ],
)
def test_certified_glm_backends_audit_below_certified(backend, method, d, eps):
    """The two certified back-ends, each named explicitly, audited at the worst pair (n = 20,
    beta = 0.1, lam = 2, 10^4 trials, delta = 1e-3): the lower bound stays under the
    certificate (exact: the posterior's; langevin: its K-step output law's). The audit is
    not vacuous: measured eps_lower / eps_certified 0.16-0.21 over seeds 0-2 for diffused
    and concentrated, 0.04 for OPS (whose ball R = c / beta keeps t small); asserted
    >= 0.1 and > 0."""
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0, backend=backend)
    mech = A.CalibratedMechanism(model, 20, 2.0, eps, method)
    assert mech.model.backend == backend
    assert mech.calibration.guarantee == {"exact": "exact", "langevin": "algorithm"}[backend]
    res = A.audit_model(model, 20, 2.0, eps, method, 10**4, delta=1e-3, confidence=CONF, rng=0, d=d)
    assert not res.violation
    assert res.eps_certified is not None and 0 < res.eps_lower <= res.eps_certified
    if method != "ops":
        assert res.fraction >= 0.1, res


def test_audit_catches_langevin_with_a_tenth_of_the_noise():
    """The same chain with its Gaussian noise divided by 10 (step, steps, start and knob as
    calibrated): D_lam grows ~100-fold, and the audit at the worst pair exceeds the
    certificate (measured 6.2 against 3.54; the honest chain: 0.59; noise / 4: 3.55)."""
    from privbayes.sampling.langevin import run_chains

    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0, backend="langevin")
    n, lam, eps, delta = 20, 2.0, 1.0, 1e-3
    cal = pb.calibrate(model, n, lam, eps)
    mutant = {**cal.sampler, "noise": cal.sampler["noise"] / 10}

    def broken(data, size=None, rng=None):
        (x, y), _ = model._statistics(data)
        out = run_chains(x, y, cal.r, mutant, size or 1, rng)
        return out if size else out[0]

    d0, d1 = A.worst_case_pair(model, n, lam, eps)
    claimed = A.certified_dp(cal, delta)
    res = A.audit(broken, d0, d1, 10**4, delta=delta, confidence=CONF, rng=0)
    assert res.eps_lower > claimed, (res.eps_lower, claimed)


@pytest.mark.slow
def test_ops_with_a_binding_radius_below_certified():
    """A ball ||w|| <= 1 that cuts the posterior (about 35% inside): pure eps0 = 2."""
    # the exact back-end refuses this ball from public inputs (it may hold little of the
    # posterior for some data set): the audit runs the approximate IMH back-end
    model = pb.BayesianLogisticRegression(beta=0.01, c=1.0, radius=1.0, backend="imh")
    res = A.audit_model(model, 20, 2.0, 10.0, "ops", 200, confidence=CONF, rng=0)
    assert res.eps_certified == pytest.approx(2.0) and res.eps_lower <= res.eps_certified


def test_catches_the_glm_sampler_calibrated_for_the_wrong_n():
    """The same bug through the library's own sampler: r for 100 n fed to model._draw."""
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0, backend="exact")
    n, lam, eps, delta = 20, 2.0, 0.01, 1e-5
    wrong = pb.calibrate(model, 100 * n, lam, eps)

    def broken(data, size=None, rng=None):
        xy, _ = model._statistics(data)
        return model._draw(xy, wrong, rng, size=size)[0]

    d0, d1 = A.worst_case_pair(model, n, lam, eps)
    claimed = A.certified_dp(pb.calibrate(model, n, lam, eps), delta)
    res = A.audit(broken, d0, d1, 10**4, delta=delta, confidence=CONF, rng=0)
    assert res.eps_lower > claimed, (res.eps_lower, claimed)


# -- behaviour and bad input --------------------------------------------------------------------
def test_vector_outputs_are_projected_and_audits_are_deterministic():
    model = pb.DirichletCategorical([1.0, 1.0, 1.0])
    a = A.audit_model(model, 50, 2.0, 1.0, "diffused", 2000, rng=4)
    b = A.audit_model(model, 50, 2.0, 1.0, "diffused", 2000, rng=4)
    assert a.projection is not None and a.projection.shape == (3,)
    assert a.eps_lower == b.eps_lower and a.threshold == b.threshold


def test_per_call_mechanisms_without_size():
    calls = []

    def one(data, rng=None):
        calls.append(1)
        return float(data[0]) + rng.standard_normal()

    res = A.audit(one, [0.0], [3.0], 300, delta=0.0, rng=0)
    assert len(calls) == 600 and res.eps_lower > 0.5
    res_batch_off = A.audit(gaussian_mech, [0.0], [3.0], 300, rng=0, batch=False)
    assert res_batch_off.trials == 300


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        ({"trials": 99}, ValueError, ">= 100"),
        ({"trials": 100.0}, TypeError, "integer"),
        ({"delta": 1.0}, ValueError, r"\[0, 1\)"),
        ({"delta": -1e-9}, ValueError, r"\[0, 1\)"),
        ({"delta": float("nan")}, ValueError, r"\[0, 1\)"),
        ({"delta": "0.1"}, TypeError, "delta"),
        ({"confidence": 1.0}, ValueError, r"\[0.5, 1\)"),
        ({"confidence": 0.0}, ValueError, r"\[0.5, 1\)"),
        ({"confidence": 0.2}, ValueError, r"\[0.5, 1\)"),
        ({"confidence": True}, TypeError, "confidence"),
        ({"certified": "x"}, TypeError, "certified must be one real number"),
        ({"certified": np.array([1.0, 2.0])}, TypeError, r"shape \(2,\)"),
        ({"certified": float("nan")}, ValueError, "NaN"),
        ({"certified": -1.0}, ValueError, ">= 0"),
        ({"batch": 1}, TypeError, "batch must be None, True or False"),
        ({"batch": "yes"}, TypeError, "batch"),
    ],
)
def test_bad_arguments(kwargs, err, match):
    args = {"trials": 200, "delta": 1e-5, "confidence": 0.95}  # valid defaults
    args.update(kwargs)
    trials = args.pop("trials")
    with pytest.raises(err, match=match):
        A.audit(gaussian_mech, [0.0], [1.0], trials, rng=0, **args)


def test_identical_data_sets_refused():
    with pytest.raises(ValueError, match="identical"):
        A.audit(gaussian_mech, [0.0, 1.0], np.array([0.0, 1.0]), 200)
    xy = (np.zeros((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="identical"):
        A.audit(lambda d: 0.0, xy, (xy[0].copy(), xy[1].copy()), 200)


def test_pairs_that_are_not_neighbours_warn():
    with pytest.warns(UserWarning, match="differ in 2 records"):
        A.audit(gaussian_mech, [0.0, 0.0], [1.0, 1.0], 200, rng=0)
    xy0, xy1 = A.worst_case_pair(pb.BayesianLogisticRegression(), 5, 2.0, 1.0)
    assert _records_changed(xy0, xy1) == 1
    assert _records_changed([0.0, 1.0], [0.0, 1.0, 2.0]) is None  # add/remove: unknown


def test_a_mechanism_that_raises_is_named():
    def flaky(data, rng=None):
        if rng.random() < 0.01:
            raise RuntimeError("boom")
        return 0.0

    with pytest.raises(
        A.AuditError, match=r"trial \d+ on (data \(D\)|neighbour \(D'\)): RuntimeError: boom"
    ):
        A.audit(flaky, [0.0], [1.0], 1000, rng=0)

    def batch_fails(data, size=None):
        raise ZeroDivisionError("bad batch")

    with pytest.raises(
        A.AuditError, match=r"trials 0..99 \(one batched call\) on data \(D\): ZeroDivisionError"
    ):
        A.audit(batch_fails, [0.0], [1.0], 200)
    assert issubclass(A.AuditError, pb.PrivBayesError)


def test_nan_and_malformed_outputs_refused():
    def nan_at_7(data, size=None, rng=None):
        out = rng.standard_normal(size)
        if data[0] == 1.0:
            out[7] = np.nan
        return out

    with pytest.raises(ValueError, match=r"NaN on trial 7 on neighbour"):
        A.audit(nan_at_7, [0.0], [1.0], 200, rng=0)
    with pytest.raises(ValueError, match="NaN on trial 0"):
        A.audit(lambda d: float("nan"), [0.0], [1.0], 200)
    with pytest.raises(ValueError, match="shape"):
        A.audit(lambda d, size=None: np.zeros(3), [0.0], [1.0], 200)
    with pytest.raises(TypeError, match=r"got a string \('x'\) on trial 0 on data"):
        A.audit(lambda d: "x", [0.0], [1.0], 200)
    with pytest.raises(TypeError, match=r"got a complex number"):
        A.audit(lambda d: [1.0, 2j], [0.0], [1.0], 200)
    with pytest.raises(TypeError, match=r"returned None on trial 0 on data"):
        A.audit(lambda d: None, [0.0], [1.0], 200)
    with pytest.raises(TypeError, match=r"got None on trial 99 on data"):  # not NaN
        A.audit(lambda d, size=None: [0.0] * (size - 1) + [None], [0.0], [1.0], 200)
    with pytest.raises(ValueError, match=r"ragged sequence on trial 0 on data"):
        A.audit(lambda d: [[1.0, 2.0], [3.0]], [0.0], [1.0], 200)
    with pytest.raises(ValueError, match=r"ragged sequence on trials 0..99"):
        A.audit(lambda d, size=None: [[1.0]] * (size - 1) + [[1.0, 2.0]], [0.0], [1.0], 200)

    def drifting_shape(data, rng=None):
        return np.zeros(2 if rng.random() < 0.1 else 3)

    with pytest.raises(ValueError, match=r"shape \(\d,\) on trial \d+ .* but \(\d,\) on trial 0"):
        A.audit(drifting_shape, [0.0], [1.0], 200, rng=0)
    with pytest.raises(TypeError, match="callable"):
        A.audit(42, [0.0], [1.0], 200)
    with pytest.raises(ValueError, match="n must be >= 1"):
        A.worst_case_pair(pb.BetaBernoulli(), 0, 2.0, 1.0)


def test_nan_in_data_counts_as_equal():
    """NaN == NaN when comparing D and D' (a missing value left in place is no change)."""
    with pytest.raises(ValueError, match="identical"):
        A.audit(gaussian_mech, [np.nan, 1.0], [np.nan, 1.0], 200)
    with pytest.raises(ValueError, match="identical"):
        A.audit(lambda d: 0.0, ([np.nan], [1.0]), ([np.nan], [1.0]), 200)
    assert _records_changed([np.nan, 1.0, 2.0], [np.nan, 1.0, 3.0]) == 1
    x = np.array([[np.nan, 1.0], [2.0, 3.0]])
    assert _records_changed((x, [1, 1]), (x.copy(), [1, -1])) == 1


class _Drifting:
    """Ignores its data; its output law shifts at every call (a stateful mechanism)."""

    def __init__(self, batched: bool):
        self.calls, self.order, self.batched = 0, [], batched

    def __call__(self, data, size=None, rng=None):
        self.order.append(int(data[0]))
        self.calls += 1
        shift = self.calls if self.batched else self.calls / 100.0
        return shift + rng.standard_normal(size)


def test_trials_on_d_and_d_prime_are_interleaved():
    """Drift from call to call is not mistaken for leakage: batched audits call D, D', D', D
    (halves), per-call audits alternate. Running all of D before all of D' (the old order)
    showed eps_lower 1.1 (batched) and 3.5 (per call) for this mechanism that ignores its
    data."""
    batched = _Drifting(batched=True)
    res = A.audit(batched, [0.0], [1.0], 2000, delta=0.0, rng=0)
    assert batched.order == [0, 1, 1, 0] and res.eps_lower == 0.0

    def per_call(data, rng=None):  # same drift, no size keyword
        return one(data, rng=rng)

    one = _Drifting(batched=False)
    res = A.audit(per_call, [0.0], [1.0], 1000, delta=0.0, rng=0)
    assert one.order[:6] == [0, 1, 0, 1, 0, 1] and len(one.order) == 2000
    assert res.eps_lower < 0.3


def test_statistics_validate_their_inputs():
    for k, n in ((2.5, 10), (11, 10), (-1, 10), (np.nan, 10), (3, 0)):
        with pytest.raises(ValueError, match="whole numbers|0 <= k <= n"):
            A.clopper_pearson(k, n)
    with pytest.raises(TypeError, match="real numbers"):
        A.clopper_pearson(True, 10)
    assert A.clopper_pearson(3.0, 10.0, 0.9, "upper") == A.clopper_pearson(3, 10, 0.9, "upper")
    with pytest.raises(ValueError, match=r"\[0.5, 1\)"):
        A.clopper_pearson(3, 10, 0.2)  # a level below 1/2 puts the upper bound below 3/10
    for fpr, fnr in ((np.nan, 0.1), (1.5, 0.1), (0.1, -0.2), ([0.1, 2.0], 0.1)):
        with pytest.raises(ValueError, match=r"rates in \[0, 1\]"):
            A.eps_from_rates(fpr, fnr, 0.0)
    with pytest.raises(TypeError, match="real numbers"):
        A.eps_from_rates("0.1", 0.1, 0.0)


def test_plot_audits(tmp_path):
    res = A.audit_model(pb.BetaBernoulli(), 100, 2.0, 1.0, "diffused", 500, rng=0)
    png = tmp_path / "a.png"
    A.plot_audits([1.0], [res], png, lam=2.0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="same length"):
        A.plot_audits([1.0, 2.0], [res], png, lam=2.0)
    with pytest.raises(ValueError, match="finite eps > 0"):
        A.plot_audits([0.0], [res], png, lam=2.0)
    with pytest.raises(ValueError, match="no audit results"):
        A.plot_audits([], [], png, lam=2.0)
    with pytest.raises(TypeError, match="AuditResult"):
        A.plot_audits([1.0], [1.0], png, lam=2.0)


# -- command line ---------------------------------------------------------------------------------
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_audit(capsys, tmp_path):
    png = tmp_path / "audit.png"
    code, out, err = run(
        capsys,
        *("audit", "--model", "beta-bernoulli", "--lam", "2", "--eps", "1"),
        *("--trials", "2000", "--seed", "3", "--plot", str(png)),
    )
    assert code == 0, err
    res = json.loads(out)
    assert 0 <= res["eps_lower"] <= res["eps_certified"] and not res["violation"]
    assert res["interval"][0] <= res["eps_lower"] <= res["eps_ceiling"]
    ren = res["renyi_binned"]
    assert ren["order"] == 2.0 and ren["interval"][0] <= ren["estimate"] <= ren["certified"]
    assert "lower estimate" in ren["note"] and ren["saturated"] is False
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run(
        capsys,
        *("audit", "--model", "dirichlet", "--method", "concentrated", "--lam", "2"),
        *("--eps", "0.5", "--trials", "500", "--seed", "1", "--delta", "1e-3"),
    )
    assert code == 0 and json.loads(out)["model"] == "dirichlet-categorical"
    code, out, _ = run(
        capsys, "audit", "--model", "query", "--lam", "2", "--eps", "1", "--trials", "500"
    )
    assert code == 0 and json.loads(out)["worst_pair"]["counts"] == [0, 100]


@pytest.mark.parametrize(
    "extra,match",
    [
        (("--trials", "50"), "--trials must be >= 100"),
        (("--trials", "500", "--delta", "1"), "delta"),
        (("--trials", "500", "--confidence", "1.5"), "confidence"),
        (("--trials", "500", "--method", "ops"), "ops applies"),
        (("--trials", "500", "--n", "0"), "n must be >= 1"),
        (("--trials", "500", "--backend", "pymc"), "--backend applies"),
        (("--trials", "500", "--confidence", "0.3"), "[0.5, 1)"),
        (("--trials", "500", "--d", "2"), "--d applies to --model logistic and multinomial only"),
        (("--trials", "500", "--c", "2"), "--c applies to --model logistic and multinomial only"),
        (("--trials", "500", "--categories", "a,b"), "--categories does not apply to audit"),
        (("--trials", "500", "--plot", "/nonexistent-dir/a.png"), "--plot: no such directory"),
        (("--trials", "500", "--plot", "audit.pdf"), "must be a .png file"),
    ],
)
def test_cli_audit_errors(capsys, extra, match):
    code, out, err = run(
        capsys, "audit", "--model", "beta-bernoulli", "--lam", "2", "--eps", "1", *extra
    )
    assert code == 2 and out == "" and match in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "extra,match",
    [
        (("--alpha", "1", "1"), "--alpha does not apply to --model logistic"),
        (("--categories", "a,b"), "--categories does not apply to audit"),
    ],
)
def test_cli_audit_logistic_refuses_conjugate_flags(capsys, extra, match):
    code, out, err = run(
        capsys,
        "audit",
        "--model",
        "logistic",
        "--lam",
        "2",
        "--eps",
        "1",
        "--trials",
        "500",
        *extra,
    )
    assert code == 2 and out == "" and match in err and err.count("\n") == 1


def test_cli_audit_plot_checks_and_reuses(capsys, tmp_path, monkeypatch):
    """--plot: checked before any audit runs; the main audit is not run again in the grid;
    method direct (no knob) plots its one audit and says why."""
    import privbayes.audit as audit_pkg

    grids = []
    real_curve = audit_pkg.audit_curve

    def spy(model, n, lam, eps_values, *args, **kwargs):
        grids.append(list(eps_values))
        return real_curve(model, n, lam, eps_values, *args, **kwargs)

    monkeypatch.setattr(audit_pkg, "audit_curve", spy)
    png = tmp_path / "a.png"
    base = ("audit", "--model", "beta-bernoulli", "--lam", "2", "--trials", "300", "--seed", "1")
    code, out, err = run(capsys, *base, "--eps", "1", "--plot", str(png))
    assert code == 0, err
    assert len(grids) == 1 and len(grids[0]) == 6 and 1.0 not in grids[0]
    code, out, err = run(
        capsys, *base, "--eps", "10", "--method", "direct", "--alpha", "2", "2", "--plot", str(png)
    )
    assert code == 0, err
    assert len(grids) == 1 and "not tunable" in json.loads(out)["plot_note"]
    import privbayes.cli.audit

    audits = []
    monkeypatch.setattr(audit_pkg, "audit_model", lambda *a, **k: audits.append(a))
    monkeypatch.setattr(privbayes.cli.audit.os, "access", lambda *a, **k: False)
    code, out, err = run(capsys, *base, "--eps", "1", "--plot", str(tmp_path / "b.png"))
    assert code == 2 and "cannot write" in err and not audits  # refused before any audit
