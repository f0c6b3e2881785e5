"""PrivateLinearRegression: scikit-learn's regressor contract, the route rule, refusals
before any charge, accuracy against OLS and the exact posterior, privacy reporting."""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

import privbayes as pb
from privbayes import PrivateLinearRegression
from privbayes.estimators_linear import choose_route

# Every applicable check runs, with no expected failure, on both routes. The instances clip
# (the checks feed unbounded features and responses), have a fixed seed (idempotence
# checks) and a loose eps (the checks test API conventions, not privacy).
NOISE_AWARE = PrivateLinearRegression(eps=5.0, y_bound=3.0, clip=True, random_state=0)
SAMPLE = clone(NOISE_AWARE).set_params(route="sample")
UNKNOWN_SD = clone(NOISE_AWARE).set_params(noise_sd=None)  # docs/linear_regression.md §N6


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pb.SharedRandomnessWarning)
        yield


@parametrize_with_checks([NOISE_AWARE, SAMPLE, UNKNOWN_SD])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _data(n=2000, d=3, seed=0, intercept=0.5, sd=0.3):
    rng = np.random.default_rng(seed)
    X = pb.preprocessing.clip_rows(rng.normal(0.0, 0.3, (n, d)), math.sqrt(0.75))
    w = np.array([1.0, -0.5, 0.25, 0.75, -1.0])[:d]
    y = np.clip(X @ w + intercept + sd * rng.normal(size=n), -3.0, 3.0)
    return X, y


# -- the route is chosen from public inputs only ----------------------------------------------
def test_route_rule():
    assert choose_route("auto", 2.0, None) == "noise-aware"
    assert choose_route("auto", None, 1e-5, method=None, n_samples=1) == "noise-aware"
    for given in ({"method": "ops"}, {"n_samples": 3}, {"backend": "exact"}, {"radius": 2.0},
                  {"max_steps": 100}):  # fmt: skip
        assert choose_route("auto", 2.0, None, **given) == "sample"
        with pytest.raises(ValueError, match="route='sample' only"):
            choose_route("noise-aware", 2.0, None, **given)
    assert choose_route("auto", math.inf, None) == "sample"  # pure DP: no discrete Gaussian
    assert choose_route("auto", None, 0.0) == "sample"
    with pytest.raises(ValueError, match="finite order"):
        choose_route("noise-aware", math.inf, None)
    assert choose_route("sample", 2.0, None) == "sample"
    with pytest.raises(ValueError, match="route must be one of"):
        choose_route("best", 2.0, None)


@pytest.mark.parametrize(
    "params",
    [{}, {"delta": 1e-5, "lam": None}, {"method": "concentrated"}, {"n_samples": 2},
     {"radius": 4.0, "backend": "langevin", "max_steps": 200}],
)  # fmt: skip
def test_route_and_mechanism_do_not_depend_on_the_data(params):
    """Two data sets of the same public shape (one of them at the bounds, one all zeros):
    the same route, method, back-end and certified eps."""
    X, y = _data(n=300, d=2, seed=1)
    Xb = np.zeros_like(X)
    Xb[:, 0] = math.sqrt(0.75)  # every row on the sphere
    yb = np.where(np.arange(300) % 2 == 0, 3.0, -3.0)  # every response at +-y_bound
    est = PrivateLinearRegression(eps=2.0, y_bound=3.0, noise_sd=0.3, fit_intercept=True,
                                  random_state=0, **params)  # fmt: skip
    a = clone(est).fit(X, y).privacy_
    b = clone(est).fit(Xb, yb).privacy_
    c = clone(est).fit(np.zeros_like(X), np.zeros(300)).privacy_
    for key in ("route", "method", "backend", "guarantee", "lam", "eps", "delta", "dp_eps"):
        assert a[key] == b[key] == c[key], key


def test_public_inputs_are_checked_before_the_data_are_read():
    """A bad parameter raises its own error even when X and y are not data at all."""
    unreadable = object()
    bad = [
        ({"route": "fast"}, "route must be one of"),
        ({"route": "noise-aware", "method": "ops"}, "route='sample' only"),
        ({"eps": -1.0}, "eps must be"),
        ({"lam": 1.0}, "lam must be > 1"),
        ({"lam": 2.0, "delta": 1e-5}, "not both"),
        ({"delta": 1.5}, "delta must lie"),
        ({"method": "gibbs"}, "method must be one of"),
        ({"n_samples": 0}, "n_samples"),
        ({"y_bound": 0.0}, "y_bound"),
        ({"noise_sd": float("nan")}, "noise_sd"),
        ({"intercept_scaling": 0.5}, "intercept_scaling applies only"),
        ({"backend": "pymc"}, "backend must be one of"),
        ({"clip": "yes"}, "clip"),
    ]
    for params, needle in bad:
        with pytest.raises((ValueError, TypeError), match=needle):
            PrivateLinearRegression(**params).fit(unreadable, unreadable)


# -- refusals before any charge ---------------------------------------------------------------
@pytest.mark.parametrize("route", ["noise-aware", "sample"])
def test_bad_records_are_refused_before_any_charge(tmp_path, route):
    path = tmp_path / "l.db"
    pb.Ledger(path).init_budget("d", eps=10.0, delta=1e-6)
    X, y = _data(n=200, d=2)
    est = PrivateLinearRegression(eps=1.0, y_bound=3.0, noise_sd=0.3, route=route,
                                  ledger=str(path), dataset="d", random_state=0)  # fmt: skip
    over_y = y.copy()
    over_y[7] = 3.5
    nan_y = y.copy()
    nan_y[3] = np.nan
    long_row = X.copy()
    long_row[11] = [1.0, 1.0]
    inf_x = X.copy()
    inf_x[5, 1] = np.inf
    cases = [(X, over_y, r"y\[7\]"), (X, nan_y, r"y\[3\]"), (long_row, y, r"X\[11\]"),
             (inf_x, y, r"X\[5, 1\]")]  # fmt: skip
    for Xc, yc, needle in cases:
        with pytest.raises(pb.DataError, match=needle):
            clone(est).fit(Xc, yc)
    assert pb.Ledger(path).status("d")[0]["charges"] == []
    clone(est).fit(X, y)  # the good data are charged once
    assert len(pb.Ledger(path).status("d")[0]["charges"]) == 1
    with pytest.raises(pb.BudgetExceededError):
        clone(est).set_params(eps=50.0).fit(X, y)
    assert len(pb.Ledger(path).status("d")[0]["charges"]) == 1


def test_clip_is_the_only_way_past_the_bounds():
    X, y = _data(n=200, d=2)
    X2, y2 = 3 * X, 3 * y
    est = PrivateLinearRegression(eps=1.0, y_bound=3.0, noise_sd=0.3, random_state=0)
    with pytest.raises(pb.DataError):
        clone(est).fit(X2, y2)
    fitted = clone(est).set_params(clip=True).fit(X2, y2)
    assert fitted.coef_.shape == (2,)


# -- accuracy against independent truth -------------------------------------------------------
def test_noise_aware_mean_is_the_exact_posterior_mean_at_large_eps():
    """At eps = 1e4 the noise is negligible: coef_ and intercept_ match the conjugate
    posterior mean (n beta I + Z^T Z / s^2)^-1 Z^T y / s^2, Z = [X, 1], computed here."""
    X, y = _data(n=1500, d=3)
    beta, sd = 1e-3, 0.3
    est = PrivateLinearRegression(eps=1e4, beta=beta, y_bound=3.0, noise_sd=sd,
                                  fit_intercept=True, random_state=0).fit(X, y)  # fmt: skip
    Z = np.column_stack([X, np.ones(len(X))])
    prec = len(X) * beta * np.eye(4) + Z.T @ Z / sd**2
    mean = np.linalg.solve(prec, Z.T @ y / sd**2)
    post_sd = np.sqrt(np.diag(np.linalg.inv(prec)))
    got = np.append(est.coef_, est.intercept_)
    assert np.all(np.abs(got - mean) < 0.05 * post_sd)
    lo, hi = est.posterior_.interval(0.9)
    assert np.all(lo < mean) and np.all(mean < hi)


@pytest.mark.parametrize("route", ["noise-aware", "sample"])
def test_r2_close_to_ols_at_large_eps(route):
    X, y = _data(n=3000, d=3, seed=2)
    Xte, yte = _data(n=3000, d=3, seed=3)
    ols = LinearRegression().fit(X, y).score(Xte, yte)
    est = PrivateLinearRegression(eps=1000.0, beta=1e-2, y_bound=3.0, noise_sd=0.3,
                                  fit_intercept=True, route=route, random_state=0)  # fmt: skip
    est.fit(X, y)
    assert abs(est.score(Xte, yte) - ols) < 0.01
    assert est.route_ == route


# -- what privacy_ reports --------------------------------------------------------------------
def test_privacy_report_noise_aware_and_sample():
    X, y = _data(n=500, d=2)
    na = PrivateLinearRegression(eps=1.0, delta=1e-5, y_bound=3.0, noise_sd=0.3,
                                 random_state=0).fit(X, y)  # fmt: skip
    p = na.privacy_
    assert p["route"] == "noise-aware" and p["method"] == "noise-aware"
    assert p["backend"] == "discrete_gaussian" and p["guarantee"] == "exact"
    assert p["delta"] == 1e-5 and p["dp_eps"] <= 1.0 and p["lam"] > 1
    assert p["eps"] == p["per_release_eps"][0] and p["n_samples"] == 1
    # the certificate is the posterior's: recomputed from the published noise
    noise = na.posterior_.noise
    assert p["eps"] >= p["lam"] * noise["sensitivity_sq"] / (2 * noise["sigma2"]) * (1 - 1e-12)
    assert na.samples_ is None and na.posterior_.n == 500

    k = 3
    sm = PrivateLinearRegression(eps=1.5, lam=3.0, y_bound=3.0, noise_sd=0.3, n_samples=k,
                                 radius=3.0, random_state=0).fit(X, y)  # fmt: skip
    q = sm.privacy_
    assert q["route"] == "sample" and q["method"] == "diffused" and q["n_samples"] == k
    assert q["backend"] in ("exact", "langevin") and q["guarantee"] in ("exact", "algorithm")
    assert q["lam"] == 3.0 and q["delta"] is None and q["dp_eps"] is None
    assert len(q["per_release_eps"]) == k and q["eps"] == pytest.approx(sum(q["per_release_eps"]))
    assert q["eps"] <= 1.5 and q["radius"] == 3.0
    assert sm.samples_.shape == (k, 2)
    np.testing.assert_allclose(sm.coef_, sm.samples_.mean(axis=0))
    # OPS through the estimator: pure DP as RDP at every order
    ops = PrivateLinearRegression(lam=math.inf, eps=2.0, method="ops", y_bound=3.0,
                                  noise_sd=0.3, random_state=0).fit(X, y)  # fmt: skip
    assert ops.privacy_["route"] == "sample" and ops.privacy_["method"] == "ops"
    assert ops.privacy_["eps"] <= 2.0


def test_intercept_and_predict():
    X, y = _data(n=2000, d=2, intercept=0.8)
    est = PrivateLinearRegression(eps=50.0, beta=1e-4, y_bound=3.0, noise_sd=0.3,
                                  fit_intercept=True, random_state=0).fit(X, y)  # fmt: skip
    assert abs(est.intercept_ - 0.8) < 0.05 and isinstance(est.intercept_, float)
    np.testing.assert_allclose(est.predict(X[:5]), X[:5] @ est.coef_ + est.intercept_)
    no = PrivateLinearRegression(eps=50.0, y_bound=3.0, noise_sd=0.3, random_state=0).fit(X, y)
    assert no.intercept_ == 0.0


def test_dask_input_gives_the_in_memory_release():
    da = pytest.importorskip("dask.array")
    X, y = _data(n=400, d=2)
    est = PrivateLinearRegression(eps=1.0, y_bound=3.0, noise_sd=0.3, random_state=3)
    mem = clone(est).fit(X, y)
    lazy = clone(est).fit(da.from_array(X, chunks=(150, 2)), da.from_array(y, chunks=150))
    np.testing.assert_array_equal(mem.posterior_.statistic, lazy.posterior_.statistic)
    np.testing.assert_allclose(mem.coef_, lazy.coef_)
