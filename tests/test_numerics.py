"""Certified numerics (docs/numerics.md): every certificate is >= the EXACT sup.

"Exact" is an independent 80-digit mpmath evaluation of the Rényi divergence at the float
parameters the sampler really draws from (captured from the sampler itself), over every
neighbouring pair of count vectors (small n) or the boundary pairs (large n, proven to be
the sup in docs/boundary.md). Nothing here reuses the certificate code.
"""

import itertools
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privbayes as pb
from privbayes import BetaBernoulli, DirichletCategorical, InfeasiblePrivacyError, calibrate
from privbayes.certified import (
    _trigamma_bounds,
    pure_dp_rdp_upper,
    round_down,
    round_up,
    second_difference_bounds,
    second_difference_upper,
)
from privbayes.models import MeanQuery
from privbayes.models import _dirichlet as dirichlet_module
from privbayes.models.beta_bernoulli import floor_sum

DPS = 80


# -- independent references -------------------------------------------------------------
def _log_partition(p):
    return mp.fsum(mp.loggamma(v) for v in p) - mp.loggamma(mp.fsum(p))


def _renyi(p, q, lam):
    """D_lam(Dir(p) || Dir(q)) at 80 digits from the closed form (docs/background.md §3)."""
    lam = mp.mpf(lam)
    p, q = [mp.mpf(float(v)) for v in p], [mp.mpf(float(v)) for v in q]
    if lam == 1:
        return (
            mp.fsum(
                (a - b) * (mp.digamma(a) - mp.digamma(mp.fsum(p)))
                for a, b in zip(p, q, strict=True)
            )
            - _log_partition(p)
            + _log_partition(q)
        )
    mix = [lam * a + (1 - lam) * b for a, b in zip(p, q, strict=True)]
    if min(mix) <= 0:
        return mp.inf
    return (_log_partition(mix) - lam * _log_partition(p) - (1 - lam) * _log_partition(q)) / (
        lam - 1
    )


def _sampler_params(model, cal, counts):
    """The parameters the release flow hands to the Dirichlet sampler, captured there."""
    seen = []
    real = dirichlet_module.sample_dirichlet_log

    def spy(params, rng, size=None):
        seen.append(np.array(params, dtype=float))
        return real(params, rng, size)

    dirichlet_module.sample_dirichlet_log = spy
    try:
        model._draw(np.asarray(counts, dtype=float), cal, np.random.default_rng(0))
    finally:
        dirichlet_module.sample_dirichlet_log = real
    return seen[0]


def _neighbour_pairs(k, n):
    """Every (c, c') differing by one moved record (small n), else the boundary pairs."""
    if math.comb(n + k - 1, k - 1) <= 400:
        vecs = [c for c in itertools.product(range(n + 1), repeat=k) if sum(c) == n]
        for c in vecs:
            for i, j in itertools.permutations(range(k), 2):
                if c[i] >= 1:
                    c2 = list(c)
                    c2[i] -= 1
                    c2[j] += 1
                    yield list(c), c2
        return
    verts = [(1, n - 1), (n, 0)] if k == 2 else [(1, 0), (n, 0), (1, n - 1)]
    for i, j in itertools.permutations(range(k), 2):
        for ci, cj in verts:
            c = [0] * k
            c[i], c[j] = ci, cj
            if n - ci - cj:
                c[next(t for t in range(k) if t not in (i, j))] = n - ci - cj
            c2 = list(c)
            c2[i] -= 1
            c2[j] += 1
            yield c, c2


def exact_sup(model, cal, lam):
    """80-digit sup of D_lam over neighbouring data sets, at the sampler's parameters."""
    best = mp.mpf(0)
    with mp.workdps(DPS):
        for c, c2 in _neighbour_pairs(model.K, cal.n):
            d = _renyi(_sampler_params(model, cal, c), _sampler_params(model, cal, c2), lam)
            best = max(best, d)
    return best


# -- the issue's example -------------------------------------------------------------------
def test_issue_example_old_knob_exceeds_and_new_certificate_holds():
    model = BetaBernoulli(1, 1)
    # the reference reproduces the issue: the old sampler's fl(1/m + k) at the old knob
    m_old = 0.003138135183669043
    a = 1.0 / m_old
    with mp.workdps(DPS):
        old = max(
            _renyi([a + k, a + 5 - k], [a + k + s, a + 5 - k - s], 32.0)
            for k in range(6)
            for s in (-1, 1)
            if 0 <= k + s <= 5
        )
    assert float(old) == pytest.approx(0.10000000000018622, rel=1e-15)  # above 0.1
    cal = calibrate(model, 5, 32.0, 0.1, "concentrated")
    exact = exact_sup(model, cal, 32.0)
    assert exact <= cal.eps <= 0.1
    assert float(exact) == pytest.approx(cal.eps, rel=1e-12)  # and tight


# -- the sweep: exact <= certified <= target -----------------------------------------------
priors = st.floats(1e-4, 1e6).filter(lambda v: v > 0)


@st.composite
def settings_(draw):
    kind = draw(st.sampled_from(["beta", "query", "dirichlet"]))
    if kind == "dirichlet":
        model = DirichletCategorical([draw(priors) for _ in range(3)])
    else:
        cls = BetaBernoulli if kind == "beta" else MeanQuery
        model = cls(draw(priors), draw(priors))
    small = draw(st.booleans())
    n = draw(st.integers(1, 12)) if small else int(10 ** draw(st.floats(0, 7)))
    lam = 1 + 10 ** draw(st.floats(-6, 3))
    eps = 10 ** draw(st.floats(-8, 1))
    method = draw(st.sampled_from(["diffused", "concentrated", "direct"]))
    return model, n, lam, eps, method


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(settings_())
def test_sweep_exact_below_certified_below_target(case):
    model, n, lam, eps, method = case
    try:
        cal = calibrate(model, n, lam, eps, method)
    except InfeasiblePrivacyError as err:
        assert err.reachable  # says what is reachable
        return
    exact = exact_sup(model, cal, lam)
    assert exact <= cal.eps <= eps, (model, n, lam, eps, method, cal)
    # the whole curve: other orders too (order 1 is KL)
    for order in (1.0, 1 + (lam - 1) / 3, 2 * lam):
        cert = float(cal.rdp(order))
        with mp.workdps(DPS):
            assert exact_sup(model, cal, order) <= cert, (order, cal)


# Settings where the float evaluation of the old code (no margin) falls below the exact
# sup: found by the sweep's mutant run; kept as fixed regression cases.
MUTANT_CASES = [
    (BetaBernoulli(1, 1), 5, 32.0, 0.1, "concentrated"),
    (BetaBernoulli(1.832242845406998, 0.5160943359109794), 38, 10.951696321294762,
     3.3939583976494024e-07, "concentrated"),
    (DirichletCategorical([2.9226186661887175, 1.0966057390248158, 0.8428215243028461]), 40,
     2.810168298524239, 0.018255854902330906, "concentrated"),
    (BetaBernoulli(58.759275344211204, 18.97583000722443), 28969, 2.2075551585576147,
     0.0010580605739808006, "diffused"),
]  # fmt: skip


@pytest.mark.parametrize("case", MUTANT_CASES)
def test_certificate_holds_where_the_float_value_does_not(case):
    cal = calibrate(*case)
    assert exact_sup(case[0], cal, case[2]) <= cal.eps <= case[3]


def test_mutant_without_margin_fails(monkeypatch):
    """The old certificate (the plain float sup, no margin) breaks the sweep's assertion."""
    family = dirichlet_module.DirichletFamily
    monkeypatch.setattr(family, "_certified_sup", family._boundary_sup)
    broken = 0
    for case in MUTANT_CASES:
        cal = calibrate(*case)
        broken += exact_sup(case[0], cal, case[2]) > cal.eps
    assert broken >= 2


# -- exact parameters ------------------------------------------------------------------
@pytest.mark.parametrize("cls, bits", [(BetaBernoulli, 0), (MeanQuery, 8)])
def test_sampler_parameters_are_exact(rng, cls, bits):
    """a + r' c computed in float64 equals the exact rational, for every count tried."""
    for _ in range(200):
        model = cls(*(10 ** rng.uniform(-4, 6, 2)))
        n = int(10 ** rng.uniform(0, 12 if bits == 0 else 10))
        r, m = 10 ** rng.uniform(-6, 0), 10 ** rng.uniform(-8, 0)
        (a0, a1), rt = model._grid(n, r, m)
        if rt == 0:
            continue
        assert rt <= r and a0 > 0 and a1 > 0
        counts = {0, 1, n - 1, n, int(rng.integers(0, n + 1))}
        fracs = {c - f for c in counts for f in (0.0, 2.0**-bits) if 0 <= c - f} if bits else set()
        for c in counts | fracs:
            for a in (a0, a1):
                assert Fraction(a + rt * c) == Fraction(a) + Fraction(rt) * Fraction(c)


def test_vectorised_grid_matches_the_scalar_grid(rng, monkeypatch):
    """K > 4 computes the grid with numpy: the very same floats as the scalar loop."""
    for _ in range(300):
        model = DirichletCategorical(10 ** rng.uniform(-4, 6, 6))
        n, r, m = (
            int(10 ** rng.uniform(0, 14)),
            10 ** rng.uniform(-18, 0),
            10 ** rng.uniform(-18, 0),
        )
        vec = model._grid(n, r, m)
        with monkeypatch.context() as patch:
            patch.setattr(dirichlet_module, "_SCALAR_MAX_K", 100)
            loop = model._grid(n, r, m)
        assert (vec[0] is None and loop[0] is None) or (
            np.array_equal(vec[0], loop[0]) and vec[1] == loop[1]
        )


# -- the bounds themselves ---------------------------------------------------------------
def test_trigamma_bounds_bracket_mpmath(rng):
    y = np.concatenate([10 ** rng.uniform(-6, 12, 400), [1e-300, 0.5, 1.0, 19.9, 20.0, 1e300]])
    lo, up = _trigamma_bounds(y)
    with mp.workdps(40):
        for v, a, b in zip(y, lo, up, strict=True):
            exact = mp.psi(1, mp.mpf(v))
            assert a <= exact <= b
            if 1e-6 < v < 1e12:
                assert (b - a) <= 3e-12 * b  # the envelope gap at z = 20: 1/(30 z^8)


def _t_exact(x, h, lam):
    with mp.workdps(DPS):
        x, h, lam = mp.mpf(x), mp.mpf(h), mp.mpf(lam)
        if x + lam * h <= 0:
            return mp.inf
        return (
            mp.loggamma(x + lam * h) - lam * mp.loggamma(x + h) + (lam - 1) * mp.loggamma(x)
        ) / (lam - 1)


def test_second_difference_bounds_bracket_the_exact_value(rng):
    for _ in range(300):
        x = float(10 ** rng.uniform(-3, 12))
        h = float(x * 10 ** rng.uniform(-9, 0.5) * rng.choice([-1, 1]))
        lam = float(1 + 10 ** rng.uniform(-6, 2))
        lo, up = second_difference_bounds(x, h, lam)
        exact = _t_exact(x, h, lam)
        assert float(lo) <= exact <= up
        hp = second_difference_upper(x, h, lam, estimate=float(lo))
        assert exact <= hp
        if math.isfinite(exact):
            assert hp <= float(exact) * (1 + 2e-13) + 1e-300


def test_pure_dp_bound_brackets_the_exact_curve():
    for e in [1e-12, 1e-5, 0.01, 0.3, 1.0, 5.0, 50.0, 800.0, 2000.0]:
        for lam in [1.0, 1 + 1e-9, 1.001, 1.5, 2.0, 10.0, 1e3, 1e6, math.inf]:
            up = float(pure_dp_rdp_upper(lam, e))
            with mp.workdps(DPS):
                E, L = mp.mpf(e), mp.mpf(lam)
                if math.isinf(lam):
                    exact = E
                elif lam == 1:
                    exact = E * mp.tanh(E / 2)
                else:
                    exact = mp.log((mp.exp(L * E) + mp.exp((1 - L) * E)) / (1 + mp.exp(E))) / (
                        L - 1
                    )
                exact = min(exact, E)
            assert exact <= up <= float(exact) * (1 + 1e-14) + 1e-300, (e, lam)


def test_rounding_helpers():
    third = Fraction(1, 3)
    assert Fraction(round_down(third)) < third < Fraction(round_up(third))
    assert round_up(Fraction(10) ** 400) == math.inf and round_up(Fraction(1, 10**400)) > 0
    assert round_up(0.5) == 0.5 == round_down(0.5)


# -- GLM -------------------------------------------------------------------------------
def test_glm_certificate_is_the_exact_closed_form_rounded_up(monkeypatch):
    from privbayes.sampling import imh

    model = pb.BayesianLogisticRegression(beta=0.37, c=1.3, backend="imh")
    for n, lam, eps, method in [(7, 2.0, 0.3, "diffused"), (1000, 13.0, 1e-3, "concentrated")]:
        cal = calibrate(model, n, lam, eps, method)
        # the prior precision the IMH sampler really uses, captured from it
        seen = []
        real = imh.Target

        def spy(x, y, r, prec, _seen=seen, _real=real):
            _seen.append((r, prec))
            raise RuntimeError("captured")

        monkeypatch.setattr(imh, "Target", spy)
        with pytest.raises(RuntimeError, match="captured"):
            model._draw((np.zeros((n, 1)), np.ones(n)), cal, np.random.default_rng(0))
        monkeypatch.setattr(imh, "Target", real)
        r, prec = seen[0]
        c_cert = Fraction(1.3) * (1 + 2 * Fraction(1e-12))
        exact = Fraction(lam) * 2 * c_cert**2 * Fraction(r) ** 2 / Fraction(prec)
        assert exact <= Fraction(cal.eps) and cal.eps <= eps
        assert cal.eps == round_up(exact)


def test_glm_tiny_eps_is_certified_or_typed():
    """Issue 12 item 6: eps = 5e-324 no longer trips an internal r check."""
    cal = calibrate(pb.BayesianLogisticRegression(), 10, 2, 5e-324)
    assert 0 < cal.r <= 1 and 0 < cal.eps <= 5e-324
    with pytest.raises(InfeasiblePrivacyError) as err:
        calibrate(pb.BayesianLogisticRegression(), 10, 2, 5e-324, "concentrated")
    assert err.value.reachable["min_eps"] > 0


def test_glm_norm_check_covers_float_rounding(rng):
    """Accepted rows have exact norm <= c (1 + 2e-12) (the certificate's c), any d."""
    model = pb.BayesianLogisticRegression(c=1.0)
    for d in (1, 3, 784, 5000):
        X = rng.normal(size=(50, d))
        X /= np.linalg.norm(X, axis=1)[:, None]  # onto the sphere, rounding either way
        (x, _), _ = model._statistics((X, np.ones(50)))
        bound = model._c_cert() ** 2
        for row in x[:10]:
            assert sum(Fraction(v) ** 2 for v in row.tolist()) <= bound
        thr = model._norm_threshold(d)
        bad = X[:1] * (np.nextafter(thr, 2.0) / np.linalg.norm(X[0]))
        if np.linalg.norm(bad[0]) > thr:
            with pytest.raises(ValueError, match="norm > c"):
                model._statistics((bad, np.ones(1)))


def test_ops_certificate_covers_the_float_ball():
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0, radius=3.0)
    cal = calibrate(model, 100, 4.0, 0.5, "ops")
    eps0 = 2 * Fraction(cal.r) * Fraction(1.0) * (1 + 2 * Fraction(1e-12)) * Fraction(3.0)
    assert Fraction(model._ops_eps0(cal.r)) > eps0  # R enlarged for the float norm test
    with mp.workdps(DPS):
        e, lam = mp.mpf(model._ops_eps0(cal.r)), mp.mpf(4)
        exact = mp.log((mp.exp(lam * e) + mp.exp((1 - lam) * e)) / (1 + mp.exp(e))) / (lam - 1)
    assert exact <= cal.eps <= 0.5


# -- statistical queries: the sum ---------------------------------------------------------
def test_floor_sum_is_exact(rng):
    cases = [
        np.array([0.5, 2.0**-60, 0.5 - 2.0**-60]),  # exact sum 1 - 2^-60 + 2^-60 = 1
        np.array([2.0**-9, 1.0 - 2.0**-53, 2.0**-55]),
        np.array([1.0] * 5 + [2.0**-1074]),
        rng.random(1000),
        np.r_[rng.random(500) * 2.0**-40, np.ones(500)],
    ]
    for v in cases:
        exact = sum(Fraction(x) for x in v.tolist())
        want = Fraction(math.floor(exact * 256), 256)
        assert Fraction(floor_sum(v, 8)) == want


def test_query_neighbours_move_the_sum_by_at_most_one(rng):
    """A replaced record moves the floored exact sum by <= 1, even where float sums move
    by 1 + ulps."""
    for _ in range(300):
        v = rng.random(int(rng.integers(1, 200))) ** rng.uniform(1, 30)
        w = v.copy()
        i = int(rng.integers(v.size))
        w[i] = rng.choice([0.0, 1.0, rng.random()])
        assert abs(floor_sum(v, 8) - floor_sum(w, 8)) <= 1.0


def test_query_release_uses_the_floored_exact_sum():
    values = np.full(10, 0.1)  # float sum 0.9999999999999999, exact sum just above 1
    s = floor_sum(values, 8)
    assert s == 1.0 and sum(values.tolist()) < 1.0  # a left-to-right float sum would floor lower
    rel = pb.release_query(values, 2.0, 1.0, rng=0)
    assert isinstance(rel.calibration.model, MeanQuery)
    assert rel.log_value.shape == (2,)


# -- item 16: both logs ---------------------------------------------------------------------
def test_beta_release_keeps_log_one_minus_theta():
    """Beta(1, 0.1): ~2.4% of draws round to theta = 1.0; log(1 - theta) survives."""
    rel = pb.sample(BetaBernoulli(1.0, 0.1), np.array([]), 2.0, 1.0, size=20_000, rng=3)
    theta, logs = rel.value, rel.log_value
    assert logs.shape == (20_000, 2)
    at_one = theta == 1.0
    assert 0.015 < at_one.mean() < 0.035  # P(theta > 1 - 2^-54) = 2^-5.4 ~ 2.4%
    assert np.isfinite(logs[at_one, 1]).all() and (logs[at_one, 1] < math.log(2.0**-53)).all()
    inner = (theta > 1e-3) & (theta < 1 - 1e-3)
    np.testing.assert_allclose(np.log1p(-theta[inner]), logs[inner, 1], rtol=1e-9)
    # the two logs are of complementary probabilities
    np.testing.assert_allclose(np.logaddexp(logs[:, 0], logs[:, 1]), 0.0, atol=1e-12)


# -- item 6: every model, method and extreme input ---------------------------------------------
@pytest.mark.parametrize(
    "model",
    [
        BetaBernoulli(),
        BetaBernoulli(1e-300, 1.0),
        DirichletCategorical([1e-4, 1.0, 1e6]),
        MeanQuery(),
        pb.BayesianLogisticRegression(),
        pb.BayesianLogisticRegression(beta=1e-100, c=1e100),
        pb.BayesianLogisticRegression(beta=1e100, c=1e-100),
    ],
    ids=repr,
)
def test_extremes_certify_or_raise_typed_errors(model):
    for method in model.methods:
        for n, lam, eps in itertools.product(
            [1, 2**44, 2**53], [1 + 1e-15, 2.0, 1e300, math.inf], [5e-324, 1e-30, 0.5, 1e300]
        ):
            try:
                cal = calibrate(model, n, lam, eps, method)
            except InfeasiblePrivacyError as err:
                assert err.reachable, (method, n, lam, eps)
                continue
            assert 0 <= cal.eps <= eps and 0 < cal.r <= 1 and 0 < cal.m <= 1
