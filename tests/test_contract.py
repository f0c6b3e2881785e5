"""The model contract (docs/models.md), run on every entry of tests/catalogue.py.

Every model class exported by privbayes.models must have a catalogue entry; models whose
releases cannot be checked against an exact law (MCMC) must be listed in NOT_EXACT with
the reason and where they are tested instead.
"""

from __future__ import annotations

import inspect
import math
from fractions import Fraction

import numpy as np
import pytest
from catalogue import BY_NAME, CATALOGUE  # noqa: I001  (tests/ is on sys.path)
from scipy import stats

import privbayes as pb
import privbayes.models as models
from privbayes import InfeasiblePrivacyError
from privbayes.audit import audit_model, worst_case_pair
from privbayes.certified import round_up
from privbayes.models.base import Model

NOT_EXACT = {
    "logistic": "a GLM (docs/glm.md): its analytic bound is tested in test_glm_bound.py, its "
    "back-ends in test_glm_exact.py, test_glm_langevin.py, test_glm_imh.py, test_glm_sampling.py",
    "multinomial": "a GLM (docs/multinomial.md): its bound is tested by quadrature in "
    "test_glm_multinomial.py, its back-ends (Langevin, IMH, NUTS) there too",
    "linear": "a GLM on a ball (docs/linear_regression.md): its bound is tested by quadrature "
    "of the truncated posteriors, its exact and Langevin back-ends, in test_glm_linear.py",
    "poisson": "a GLM on a ball (docs/linear_regression.md §7): bound and projected Langevin "
    "tested in test_glm_linear.py",
}
# the truncated posterior on a public ball is pure DP too (docs/linear_regression.md §3c)
PURE_AT_INF = {"linear"}
# The certificates cover the rounding of the sampler's parameters; the evaluation error of
# the closed forms themselves (log-gamma second differences: up to ~1e-11 relative,
# measured, docs/divergence.md) is left to the final interval-arithmetic check of the
# returned knob (another branch), so the exact sup may exceed the float certificate by
# that much.
SUP_RTOL = 5e-11
ORDERS = [(2.0, 0.5), (1.5, 0.05), (8.0, 3.0)]
EXACT = [e for e in CATALOGUE if e.name not in NOT_EXACT]
ids = [e.name for e in CATALOGUE]
exact_ids = [e.name for e in EXACT]


def _methods(model):
    return [m for m in model.methods if m != "ops"]


def _calibrate_or_skip(model, n, lam, eps, method):
    try:
        return pb.calibrate(model, n, lam, eps, method)
    except InfeasiblePrivacyError as err:
        assert err.reachable, "an infeasible target must say what is reachable"
        return None


# -- every model is in the catalogue, implements the protocol --------------------------------
def test_every_exported_model_class_has_an_entry():
    exported = {
        getattr(models, name)
        for name in models.__all__
        if inspect.isclass(getattr(models, name)) and getattr(models, name) is not Model
    }
    catalogued = {type(e.build()) for e in CATALOGUE}
    assert exported == catalogued, exported ^ catalogued
    assert set(NOT_EXACT) <= set(BY_NAME)
    for e in EXACT:
        assert e.exact_sup and e.pair_divergence and e.posterior, e.name


@pytest.mark.parametrize("entry", CATALOGUE, ids=ids)
def test_implements_the_model_protocol(entry):
    model = entry.build()
    assert isinstance(model, Model)
    for hook in ("_statistics", "rdp", "_calibrate", "_draw", "_worst_pair"):
        assert callable(getattr(model, hook)), hook
    assert set(pb.mechanisms.CONJUGATE_METHODS) <= set(model.methods)
    stats_, n = model._statistics(entry.data(np.random.default_rng(0), entry.n))
    assert n == entry.n


# -- calibration ----------------------------------------------------------------------------
def check_safety(entry, model) -> float:
    """certified <= target; brute force / grid sup (exact arithmetic) <= certified.
    Returns the largest (exact - certified) / certified seen."""
    n = entry.n
    worst_gap, checked = -math.inf, 0
    for lam, eps in ORDERS:
        for method in _methods(model):
            cal = _calibrate_or_skip(model, n, lam, eps, method)
            if cal is None:
                continue
            assert cal.eps <= eps
            assert cal.eps == float(model.rdp(n, lam, cal.r, cal.m, method))
            exact = entry.exact_sup(model, n, lam, cal.r, cal.m)
            assert exact <= cal.eps * (1 + SUP_RTOL), (method, lam, exact, cal.eps)
            worst_gap = max(worst_gap, (exact - cal.eps) / cal.eps)
            checked += 1
    assert checked >= 5
    # the certificate is the sup itself (boundary pairs), not a loose bound
    assert worst_gap > -1e-9, worst_gap
    return worst_gap


@pytest.mark.parametrize("entry", EXACT, ids=exact_ids)
def test_calibration_is_safe_against_the_exact_sup(entry):
    check_safety(entry, entry.build())


@pytest.mark.parametrize("entry", CATALOGUE, ids=ids)
def test_curve_is_monotone_in_the_order_and_the_knob(entry):
    model, n = entry.build(), entry.n
    orders = np.array([1.0, 1.01, 1.5, 2.0, 3.0, 5.0, 9.0, 30.0])
    knobs = np.geomspace(1e-4, 1.0, 60)
    for r in (0.05, 1.0):
        curve = model.rdp(n, orders, r=r)
        fin = np.isfinite(curve)
        assert (np.diff(curve[fin]) >= 0).all()
        assert fin[:1].all() or entry.name in ("beta-bernoulli", "dirichlet-categorical")
        assert np.isinf(curve[~fin]).all() and (np.diff(fin.astype(int)) <= 0).all()
        assert np.isinf(model.rdp(n, np.inf, r=r)) or entry.name == "logistic"
    for lam in (1.5, 4.0):
        for name in ("r", "m"):
            curve = np.array([float(model.rdp(n, lam, **{name: k})) for k in knobs])
            fin = np.isfinite(curve)
            assert (np.diff(curve[fin]) > 0).all(), (name, lam)
            assert (np.diff(fin.astype(int)) <= 0).all()  # finite below a cap, inf above
    assert (model.rdp(0, orders) == 0).all()


@pytest.mark.parametrize("entry", CATALOGUE, ids=ids)
def test_infeasible_targets_are_typed_and_n_zero_is_free(entry):
    model = entry.build()
    for method in _methods(model):
        cal = pb.calibrate(model, 0, 2.0, 0.5, method)
        assert cal.eps == 0.0 and cal.pair is None
    if entry.name in PURE_AT_INF:  # its exact posterior is also pure DP: finite at inf
        assert pb.calibrate(model, entry.n, math.inf, 1.0, "diffused").eps <= 1.0
    else:
        with pytest.raises(InfeasiblePrivacyError, match="lam=inf|finite eps") as err:
            pb.calibrate(model, entry.n, math.inf, 1.0, "diffused")
        assert isinstance(err.value, ValueError) and err.value.reachable
    with pytest.raises(InfeasiblePrivacyError, match="eps=0"):
        pb.calibrate(model, entry.n, 2.0, 0.0, "concentrated")
    # a tiny eps for direct sampling says which eps is reachable
    with pytest.raises(InfeasiblePrivacyError) as err:
        pb.calibrate(model, entry.n, 1.2, 1e-9, "direct")
    assert "min_eps" in err.value.reachable or "max_lam" in err.value.reachable


# -- sampling -------------------------------------------------------------------------------
def check_draws(entry, model, methods=None) -> None:
    """KS test of 4000 released draws against the law the mechanism prescribes (scipy)."""
    n = entry.n
    data = entry.data(np.random.default_rng(1), n)
    lam = 2.0
    for k, method in enumerate(methods or _methods(model)):
        eps, size = 1.0, 4000
        if method == "direct":  # eps / size per draw must cover direct sampling's eps
            if not np.isfinite(model.rdp(n, lam)):
                continue
            eps = 2 * size * float(model.rdp(n, lam))
        rel = pb.sample(model, data, lam, eps, method, size=size, rng=10 + k)
        cal = rel.calibration
        draws = entry.project(rel.value)
        law = entry.posterior(model, data, cal.r, cal.m)
        assert stats.kstest(draws, law.cdf).pvalue > 1e-3, method
        one = pb.sample(model, data, lam, eps / size, method, rng=3)
        assert np.shape(one.value) == np.shape(rel.value)[1:]
        if one.log_value is not None:
            v, lv = np.asarray(one.value, float), np.asarray(one.log_value, float)
            if lv.shape == v.shape + (2,):  # Beta releases: (log theta, log(1 - theta))
                np.testing.assert_allclose(np.log(v), lv[..., 0], rtol=1e-12)
                np.testing.assert_allclose(np.log1p(-v), lv[..., 1], rtol=1e-9)
            else:
                np.testing.assert_allclose(np.log(v), lv, rtol=1e-12)


@pytest.mark.parametrize("entry", EXACT, ids=exact_ids)
def test_draws_follow_the_prescribed_law(entry):
    check_draws(entry, entry.build())


@pytest.mark.parametrize("entry", EXACT, ids=exact_ids)
@pytest.mark.parametrize("k", [1, 9])
def test_size_k_composes_to_the_requested_eps(entry, k):
    model, n = entry.build(), entry.n
    data = entry.data(np.random.default_rng(2), n)
    rel = pb.sample(model, data, 3.0, 0.7, "concentrated", size=k, rng=1)
    assert rel.size == k and np.shape(rel.value)[0] == k
    # the composed certificate is the exact product k * eps, rounded up (docs/numerics.md)
    assert rel.eps <= 0.7 and rel.eps == round_up(Fraction(rel.calibration.eps) * k)
    orders = np.array([1.5, 3.0, 10.0])
    expected = [
        round_up(Fraction(float(v)) * k) if np.isfinite(v) else np.inf
        for v in rel.calibration.rdp(orders)
    ]
    np.testing.assert_array_equal(rel.rdp(orders), expected)
    with pytest.raises(ValueError):
        rel.value[0] = 0.0  # read-only


def test_rng_seeds_reproduce_and_default_is_fresh():
    for e in EXACT:
        model = e.build()
        data = e.data(np.random.default_rng(0), e.n)
        a = pb.sample(model, data, 2.0, 1.0, rng=5).value
        b = pb.sample(model, data, 2.0, 1.0, rng=5).value
        np.testing.assert_array_equal(a, b)
        fresh = [np.asarray(pb.sample(model, data, 2.0, 1.0).value).tobytes() for _ in range(4)]
        assert len(set(fresh)) == 4


# -- immutability and bad inputs -------------------------------------------------------------
@pytest.mark.parametrize("entry", CATALOGUE, ids=ids)
def test_models_are_immutable(entry):
    model = entry.build()
    for attr in entry.knob_attrs:
        value = getattr(model, attr)
        with pytest.raises(AttributeError, match="immutable"):
            setattr(model, attr, value)
        if isinstance(value, np.ndarray):
            with pytest.raises(ValueError):
                value[0] = 1.0
    with pytest.raises(AttributeError, match="immutable"):
        model.anything_new = 1


@pytest.mark.parametrize("entry", CATALOGUE, ids=ids)
def test_bad_prior_parameters_name_the_argument(entry):
    for build, exc, match in entry.bad_params:
        with pytest.raises(exc, match=match):
            build()


def _generic_bad_data(entry, good):
    """NaN, inf, a wrong number of dimensions, strings: refused for every model."""
    if isinstance(good, tuple):  # (X, y)
        x, y = good
        xn = x.copy()
        xn[1, 0] = np.nan
        return [
            ((xn, y), pb.DataError, r"X must be finite; X\[1, 0\] = nan \(1 row"),
            ((x[:, 0], y), ValueError, "2-D"),
            ((x.astype(str), y), TypeError, "dtype"),
        ]
    nan, inf = good.copy(), good.copy()
    nan[1], inf[2] = np.nan, np.inf
    return [
        (nan, ValueError, r"data must be finite; data\[1\] = nan"),
        (inf, ValueError, r"data must be finite; data\[2\] = inf"),
        (np.stack([good, good], 1) if good.ndim == 1 else good[None], ValueError, "shape"),
        (good.astype(str), TypeError, "dtype"),
    ]


def check_bad_data(entry, model, path) -> None:
    good = entry.data(np.random.default_rng(0), entry.n)
    cases = entry.bad_data + _generic_bad_data(entry, good)
    if entry.name == "dirichlet-categorical":  # (n, 2) is not one-hot for K = 3: also refused
        cases[-2] = (cases[-2][0], ValueError, "K=3")
    ledger = pb.Ledger(path)
    ledger.init_budget("d", eps=10.0, delta=1e-6)
    for data, exc, match in cases:
        with pytest.raises(exc, match=match):
            pb.sample(model, data, 2.0, 1.0, ledger=ledger, dataset="d")
    assert ledger.spent("d") == 0.0 and ledger.status("d")[0]["charges"] == []


@pytest.mark.parametrize("entry", CATALOGUE, ids=ids)
def test_bad_data_is_refused_and_nothing_is_charged(entry, tmp_path):
    check_bad_data(entry, entry.build(), tmp_path / "l.db")


@pytest.mark.parametrize("entry", EXACT, ids=exact_ids)
def test_ledger_is_charged_the_certified_curve(entry, tmp_path):
    model = entry.build()
    data = entry.data(np.random.default_rng(0), entry.n)
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=10.0, delta=1e-6)
    rel = pb.sample(model, data, 2.0, 0.5, ledger=ledger, dataset="d", rng=0)
    check = pb.Ledger(tmp_path / "c.db")
    check.init_budget("d", eps=10.0, delta=1e-6)
    check.charge("d", rel.calibration.rdp(check.orders))
    assert ledger.spent("d") == check.spent("d") > 0


# -- worst pair and audit --------------------------------------------------------------------
@pytest.mark.parametrize("entry", CATALOGUE, ids=ids)
def test_worst_pair_is_a_neighbouring_pair_attaining_the_certificate(entry):
    model, n = entry.build(), entry.n
    for method in ("diffused", "concentrated"):
        cal = pb.calibrate(model, n, 2.0, 0.5, method)
        d0, d1 = worst_case_pair(model, n, 2.0, 0.5, method)
        assert model._statistics(d0)[1] == model._statistics(d1)[1] == n
        if isinstance(d0, tuple):
            assert np.array_equal(d0[0], d1[0]) and np.sum(d0[1] != d1[1]) == 1
            continue
        assert np.shape(d0) == np.shape(d1) == (n,) and np.sum(d0 != d1) == 1
        exact = entry.pair_divergence(model, d0, d1, 2.0, cal.r, cal.m)
        assert exact == pytest.approx(cal.eps, rel=1e-9), method


@pytest.mark.parametrize("entry", EXACT, ids=exact_ids)
def test_audit_at_the_worst_pair_stays_below_the_certificate(entry):
    res = audit_model(entry.build(), entry.n, 2.0, 1.0, trials=6000, delta=1e-3, rng=0)
    assert not res.violation
    assert res.eps_lower <= res.eps_certified


# -- mutants: the contract catches deliberately broken models --------------------------------
class _NoMirrorPairs(pb.GammaPoisson):
    """Forgets the mirrored pairs (P below Q): under-certifies near the pole."""

    def _pairs(self, n, r, m):
        pairs = super()._pairs(n, r, m)
        return None if pairs is None else pairs[:2] + pairs[:2]


class _HalfRange(pb.NormalKnownVariance):
    """Uses half the sensitivity high - low."""

    def _spread(self, n):
        return 0.5 * super()._spread(n)


class _PriorRateNotConcentrated(pb.GammaPoisson):
    """Samples with rate beta + r n instead of beta / m + r n."""

    def _log_rate(self, n, r, m):
        return super()._log_rate(n, r, 1.0)


class _NoDomainCheck(pb.GammaPoisson):
    """Accepts counts above max_count."""

    def _statistics(self, data):
        arr = np.asarray(data, float)
        if arr.ndim != 1 or not np.isfinite(arr).all():
            return super()._statistics(data)
        return int(arr.sum()), arr.size


def test_mutants_are_caught(tmp_path):
    gamma, normal = BY_NAME["gamma-poisson"], BY_NAME["normal"]
    with pytest.raises(AssertionError):
        check_safety(gamma, _NoMirrorPairs(0.3, 1.5, 2))
    with pytest.raises(AssertionError):
        check_safety(normal, _HalfRange(0.5, 2.0, 1.5, -2.0, 3.0))
    with pytest.raises(AssertionError):
        check_draws(gamma, _PriorRateNotConcentrated(4.0, 1.5, 2), ["concentrated"])
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        check_bad_data(gamma, _NoDomainCheck(4.0, 1.5, 2), tmp_path / "l.db")
    # and the unbroken models pass the same checks
    check_safety(gamma, pb.GammaPoisson(0.3, 1.5, 2))
