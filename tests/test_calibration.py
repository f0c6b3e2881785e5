"""Calibration: safe side always, tight to the root, bounded, typed errors when infeasible."""

import inspect
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privbayes as pb
from privbayes import BetaBernoulli, DirichletCategorical, InfeasiblePrivacyError, calibrate

models = st.one_of(
    st.builds(
        BetaBernoulli,
        st.floats(0.05, 20.0),
        st.floats(0.05, 20.0),
    ),
    st.lists(st.floats(0.05, 20.0), min_size=3, max_size=6).map(DirichletCategorical),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=models,
    n=st.integers(1, 10**7),
    lam=st.floats(1.01, 200.0),
    eps=st.floats(1e-6, 20.0),
    method=st.sampled_from(["diffused", "concentrated"]),
)
def test_certified_eps_never_exceeds_target_and_knob_is_tight(model, n, lam, eps, method):
    cal = calibrate(model, n, lam, eps, method)
    knob = cal.r if method == "diffused" else cal.m
    other = cal.m if method == "diffused" else cal.r
    assert other == 1.0 and 0 < knob <= 1
    # recompute independently of the calibrator: the array path over the same boundary
    recomputed = float(model.rdp(n, lam, r=cal.r, m=cal.m))
    assert cal.eps <= eps and recomputed == cal.eps  # rdp() reports the certificate itself
    assert cal.iterations <= 60
    cap = float(np.min(model.alpha)) if np.ndim(model.alpha) else min(model.alpha, model.beta)
    # the knob lives on the exact-parameter grid (docs/numerics.md): tight up to its step
    step = model._rel_step(n, method, knob)
    near_pole = knob >= cap / (lam - 1) * (1 - 2.0**-20) * (1 - 1e-12 - 2 * step)
    if near_pole:  # documented: knobs within 2^-20 of the pole are not used
        assert knob <= cap / (lam - 1)
    elif knob < 1.0:  # a knob 1e-9 (and two grid steps) larger must break the target
        bigger = min(1.0, knob * (1 + 1e-9 + 2 * step))
        r, m = (bigger, 1.0) if method == "diffused" else (1.0, bigger)
        assert float(model.rdp(n, lam, r=r, m=m)) > eps
    else:
        assert float(model.rdp(n, lam)) <= eps


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_eps_is_increasing_in_the_knob(method):
    """docs/background.md: monotone in r and m, checked numerically (not proven)."""
    knobs = np.geomspace(1e-6, 1.0, 200)
    for model in [BetaBernoulli(0.3, 4.0), DirichletCategorical([0.5, 1.0, 7.0])]:
        for n in [1, 7, 1000]:
            for lam in [1.2, 2.0, 8.0]:
                curve = [
                    float(model.rdp(n, lam, r=k, m=1.0))
                    if method == "diffused"
                    else float(model.rdp(n, lam, r=1.0, m=k))
                    for k in knobs
                ]
                finite = np.isfinite(curve)
                assert (np.diff(np.asarray(curve)[finite]) > 0).all()


def test_matches_a_long_bisection_baseline():
    model = BetaBernoulli(1.0, 1.0)
    n, lam, eps = 10**6, 2.0, 0.1
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if model.rdp(n, lam, r=mid) <= eps else (lo, mid)
    # the bisection's knob, on the exact-parameter grid, to within one grid step
    r = calibrate(model, n, lam, eps).r
    assert r <= model._grid(n, lo, 1.0)[1]
    assert r == pytest.approx(lo, rel=1e-12 + 1.01 * model._rel_step(n, "diffused", r))


def test_direct_method():
    model = BetaBernoulli(2.0, 3.0)
    cal = calibrate(model, 100, 2.5, 10.0, "direct")
    assert (cal.r, cal.m) == (1.0, 1.0) and 0 < cal.eps <= 10.0
    with pytest.raises(InfeasiblePrivacyError, match=r"lam < 1 \+ min\(alpha\) = 3") as err:
        calibrate(model, 100, 3.0, 10.0, "direct")
    assert isinstance(err.value, ValueError) and err.value.reachable["max_lam"] == 3.0
    with pytest.raises(InfeasiblePrivacyError, match="ask for eps >=") as err:
        calibrate(model, 100, 2.5, 1e-3, "direct")
    assert err.value.reachable["min_eps"] == pytest.approx(cal.eps)


def test_infinite_order_and_zero_eps_are_infeasible():
    with pytest.raises(InfeasiblePrivacyError, match="lam=inf"):
        calibrate(BetaBernoulli(), 10, math.inf, 1.0)
    with pytest.raises(InfeasiblePrivacyError, match="eps=0"):
        calibrate(BetaBernoulli(), 10, 2.0, 0.0)


def test_n_zero_releases_the_prior_with_eps_zero():
    cal = calibrate(DirichletCategorical([1, 2]), 0, 2.0, 0.5, "concentrated")
    assert cal.eps == 0.0 and cal.pair is None
    assert cal.rdp([1.5, np.inf]).tolist() == [0.0, 0.0]


def test_knob_capped_at_one_when_target_is_loose():
    cal = calibrate(BetaBernoulli(5, 5), 1000, 2.0, 5.0, "diffused")
    assert cal.r == 1.0 and cal.eps < 5.0


def test_near_the_singular_order_the_knob_sits_below_the_cap():
    # lam = 60, alpha = 1: finite only for r < 1/59; eps=5 is loose there
    cal = calibrate(BetaBernoulli(), 1000, 60.0, 5.0, "diffused")
    assert cal.r < 1 / 59 and cal.r == pytest.approx(1 / 59, rel=2e-6) and cal.eps <= 5.0


def test_certificate_near_the_pole_is_conservative():
    """Reviewer's case: near the cap, rounding of the parameters must not understate eps."""
    import mpmath as mp

    model = BetaBernoulli(1.8476061604434562, 0.001832517043840926)
    rel = pb.sample(model, [0, 1], 1.01, 1000.0, rng=0)
    a, b, r, lam = model.alpha, model.beta, rel.r, mp.mpf(1.01)
    worst = 0
    with mp.workdps(60):
        for p, q in [
            ((a + r, b + r), (a, b + 2 * r)),
            ((a, b + 2 * r), (a + r, b + r)),
            ((a + 2 * r, b), (a + r, b + r)),
            ((a + r, b + r), (a + 2 * r, b)),
        ]:
            p, q = [mp.mpf(v) for v in p], [mp.mpf(v) for v in q]
            mix = [lam * x + (1 - lam) * y for x, y in zip(p, q, strict=True)]
            if min(mix) <= 0:
                worst = mp.inf
                break

            def c(v):
                return mp.loggamma(v[0]) + mp.loggamma(v[1]) - mp.loggamma(v[0] + v[1])

            worst = max(worst, (c(mix) - lam * c(p) - (1 - lam) * c(q)) / (lam - 1))
    assert rel.eps <= 1000.0 and float(worst) <= rel.eps


def test_tiny_eps_and_near_one_order():
    for lam, eps in [(1 + 1e-9, 1e-3), (1.000001, 1e-12), (1e4, 1e-8)]:
        cal = calibrate(BetaBernoulli(), 10**6, lam, eps, "concentrated")
        assert 0 < cal.eps <= eps


def test_calibration_uses_only_public_inputs():
    params = list(inspect.signature(pb.calibrate).parameters)
    # delta: an (eps, delta) target; d: GLM features (all public)
    assert params == ["model", "n", "lam", "eps", "method", "delta", "d"]
    # two different data sets of the same size get the same mechanism
    a = pb.sample(BetaBernoulli(), np.zeros(50), 2.0, 0.5, rng=1)
    b = pb.sample(BetaBernoulli(), np.ones(50), 2.0, 0.5, rng=1)
    assert (a.r, a.m, a.eps) == (b.r, b.m, b.eps)
    assert a.calibration.pair == b.calibration.pair
    # an (eps, delta) target too: the order search reads no data
    a = pb.sample(BetaBernoulli(), np.zeros(50), eps=1.0, delta=1e-6, rng=1)
    b = pb.sample(BetaBernoulli(), np.ones(50), eps=1.0, delta=1e-6, rng=1)
    assert (a.r, a.lam, a.eps, a.dp_eps) == (b.r, b.lam, b.eps, b.dp_eps)


def test_worst_pair_reported():
    cal = calibrate(BetaBernoulli(0.5, 3.0), 20, 2.0, 0.5)
    assert sum(cal.pair["counts"]) == 20 and sum(cal.pair["neighbour_counts"]) == 20
    # the small prior pseudo-count (alpha=0.5, the ones) is the exposed side
    assert cal.pair["counts"][0] in (0, 1) and cal.pair["neighbour_counts"][0] in (0, 1)


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"n": -1}, ValueError, "n must be"),
        ({"n": 2.5}, TypeError, "n must be"),
        ({"lam": 1.0}, ValueError, "lam must be > 1"),
        ({"lam": 0.5}, ValueError, "lam must be > 1"),
        ({"lam": float("nan")}, ValueError, "lam"),
        ({"lam": "2"}, TypeError, "lam"),
        ({"eps": -0.1}, ValueError, "eps"),
        ({"eps": float("nan")}, ValueError, "eps"),
        ({"eps": float("inf")}, ValueError, "eps"),
        ({"method": "laplace"}, ValueError, "method"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    args = {"model": BetaBernoulli(), "n": 10, "lam": 2.0, "eps": 1.0, "method": "diffused"}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        calibrate(**args)


def test_bad_model():
    with pytest.raises(TypeError, match="model"):
        calibrate("beta", 10, 2.0, 1.0)


def test_extreme_inputs_fail_clearly_or_certify_finitely():
    with pytest.raises(ValueError, match="n must be"):
        calibrate(BetaBernoulli(), 2**63, 2.0, 0.1)
    with pytest.raises(ValueError, match="n must be"):
        calibrate(BetaBernoulli(), 1e300, 2.0, 0.1)
    model = BetaBernoulli(1e-300, 1.0)
    try:
        rel = pb.sample(model, [0, 1, 1, 0, 1], 2.0, 1e-10, "concentrated", rng=0)
    except InfeasiblePrivacyError as err:
        assert "eps" in str(err)
    else:
        assert np.isfinite(rel.value) and rel.eps <= 1e-10
    # alpha = 1e-300 beside beta = 1: finite only for r < 1e-300, but 1 + r*c is exact in
    # float64 only for r >= 2^-52 (docs/numerics.md): no exact mechanism exists, say so
    with pytest.raises(InfeasiblePrivacyError, match=r"min\(alpha\)"):
        pb.sample(model, [0, 1, 1], 2.0, 50.0, rng=0)
    rel = pb.sample(BetaBernoulli(1e-300, 1e-300), [0, 1, 1], 2.0, 50.0, rng=0)
    assert rel.eps <= 50.0 and float(rel.rdp(2.0)) == rel.eps and np.isfinite(rel.value)


def test_large_k_is_linear_not_quadratic():
    model = DirichletCategorical(np.linspace(0.5, 3.0, 3000))
    curve = model.rdp(100, np.linspace(1.1, 5.9, 50), r=0.1)  # was K^2 x orders in memory
    assert curve.shape == (50,) and np.isfinite(curve).all()


def test_messages_show_lam_to_full_precision():
    lam = 1 + 1e-13
    for model in (pb.BetaBernoulli(), pb.BayesianLogisticRegression(beta=0.1),
                  pb.GammaPoisson(1.0, 1.0, 5)):  # fmt: skip
        with pytest.raises(InfeasiblePrivacyError) as err:
            pb.calibrate(model, 100, lam, 1e-20, "direct")
        assert f"at lam={lam!r} " in str(err.value) and "lam=1 " not in str(err.value)
