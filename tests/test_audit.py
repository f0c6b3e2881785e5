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


def test_coverage_on_a_known_mechanism():
    """Across seeds, the bound exceeds the true eps at most (1 - confidence) of the time."""
    exact = gaussian_eps(2.0, 1e-3)
    over = [
        A.audit(gaussian_mech, [0.0], [2.0], 400, delta=1e-3, confidence=0.8, rng=s).eps_lower
        > exact
        for s in range(100)
    ]
    assert np.mean(over) <= 0.2


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
@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_renyi_estimate_matches_exact_divergence(method):
    """Far from the pole (eps = 0.1) the estimate is within 10% of the exact D_lam at the
    worst pair (= the certificate at lam = 2); near it (eps = 1) it stays below, reaching
    ~80% (the tail beyond the last bin is invisible to a histogram)."""
    model, orders = pb.BetaBernoulli(), np.array([1.5, 2.0, 3.0])
    for eps, lo, hi in ((0.1, 0.9, 1.1), (1.0, 0.7, 1.05)):
        res = A.audit_model(model, 100, 2.0, eps, method, 10**5, rng=11)
        cal = pb.calibrate(model, 100, 2.0, eps, method)
        d0, d1 = A.worst_case_pair(model, 100, 2.0, eps, method)
        exact = pb.renyi_dirichlet(
            posterior_params(model, d0, cal), posterior_params(model, d1, cal), orders
        )
        est = A.renyi_estimate(*res.scores, orders[:2], rng=0, certified=cal.rdp(orders[:2]))
        assert est.certified[1] == pytest.approx(exact[1], rel=1e-9)
        assert np.all(est.estimate >= lo * exact[:2]) and np.all(est.estimate <= hi * exact[:2])
        assert np.all(est.lower <= est.estimate) and np.all(est.estimate <= est.upper)
        if eps == 0.1:
            assert np.all(est.lower <= exact[:2] * 1.02) and np.all(exact[:2] <= est.upper * 1.02)


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
    with pytest.raises(ValueError, match="orders"):
        A.renyi_estimate(x, x, 1.0)
    with pytest.raises(ValueError, match=">= 100"):
        A.renyi_estimate(x[:50], x, 2.0)
    with pytest.raises(ValueError, match="NaN"):
        A.renyi_estimate(np.r_[x, np.nan], x, 2.0)
    with pytest.raises(TypeError):
        A.renyi_estimate(x.astype(str), x, 2.0)
    assert A.renyi_estimate(x, x, 2.0, rng=0).estimate[0] == pytest.approx(0.0, abs=1e-12)


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


# -- logistic regression and OPS through the library's own sampler (IMH back-end) ---------------
@pytest.mark.parametrize(
    "method,d,n",
    [("diffused", 1, 20), ("concentrated", 2, 20), ("ops", 1, 20), ("diffused", 2, 50)],
)
def test_logistic_audit_below_certified(method, d, n):
    """Small d and n, 2000 trials: sound, and far below the (loose) GLM certificate."""
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0)
    res = A.audit_model(model, n, 2.0, 1.0, method, 2000, confidence=CONF, rng=0, d=d)
    assert res.eps_certified is not None and res.eps_lower <= res.eps_certified
    assert (res.projection is None) == (d == 1)


@pytest.mark.slow
def test_ops_with_a_binding_radius_below_certified():
    """A ball ||w|| <= 1 that cuts the posterior (about 35% inside): pure eps0 = 2."""
    model = pb.BayesianLogisticRegression(beta=0.01, c=1.0, radius=1.0)
    res = A.audit_model(model, 20, 2.0, 10.0, "ops", 200, confidence=CONF, rng=0)
    assert res.eps_certified == pytest.approx(2.0) and res.eps_lower <= res.eps_certified


def test_catches_the_glm_sampler_calibrated_for_the_wrong_n():
    """The same bug through the library's own sampler: r for 100 n fed to model._draw."""
    model, n, lam, eps, delta = pb.BayesianLogisticRegression(beta=0.1, c=1.0), 20, 2.0, 0.01, 1e-5
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
        ({"confidence": 1.0}, ValueError, r"\(0, 1\)"),
        ({"confidence": 0.0}, ValueError, r"\(0, 1\)"),
        ({"confidence": True}, TypeError, "confidence"),
    ],
)
def test_bad_arguments(kwargs, err, match):
    args = {"trials": 200, "delta": 1e-5, "confidence": 0.95}
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
    assert A._records_changed(xy0, xy1) == 1
    assert A._records_changed([0.0, 1.0], [0.0, 1.0, 2.0]) is None  # add/remove: unknown


def test_a_mechanism_that_raises_is_named():
    def flaky(data, rng=None):
        if rng.random() < 0.01:
            raise RuntimeError("boom")
        return 0.0

    with pytest.raises(A.AuditError, match=r"trial \d+ on data \(D\): RuntimeError: boom"):
        A.audit(flaky, [0.0], [1.0], 1000, rng=0)

    def batch_fails(data, size=None):
        raise ZeroDivisionError("bad batch")

    with pytest.raises(A.AuditError, match=r"trials 0..199 .*ZeroDivisionError"):
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
    with pytest.raises(TypeError, match="numbers"):
        A.audit(lambda d: "x", [0.0], [1.0], 200)
    with pytest.raises(TypeError, match="callable"):
        A.audit(42, [0.0], [1.0], 200)
    with pytest.raises(ValueError, match="n must be >= 1"):
        A.worst_case_pair(pb.BetaBernoulli(), 0, 2.0, 1.0)


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
    assert res["interval"][0] <= res["eps_lower"] and res["renyi"]["order"] == 2.0
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
    ],
)
def test_cli_audit_errors(capsys, extra, match):
    code, out, err = run(
        capsys, "audit", "--model", "beta-bernoulli", "--lam", "2", "--eps", "1", *extra
    )
    assert code == 2 and out == "" and match in err and err.count("\n") == 1
