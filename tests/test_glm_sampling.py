"""GLM releases through both back-ends (PyMC NUTS is the reference): right posterior,
compiled once, diagnostics, bad input. The IMH back-end's own checks: test_glm_imh.py."""

import math
from functools import partial

import numpy as np
import pytest
from scipy import integrate

import privbayes as pb
from privbayes.sampling import pymc_backend

# these tests are about the MCMC back-ends: IMH unless a test says otherwise
BayesianLogisticRegression = partial(pb.BayesianLogisticRegression, backend="imh")


def _toy(n=40, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.full(d, 2.0)))).astype(float)
    return X, y


def _exact_moments_1d(X, y, model, r, m):
    n = len(y)
    s = np.where(y > 0, 1.0, -1.0)

    def logp(w):
        return -r * np.logaddexp(0, -s * X[:, 0] * w).sum() - 0.5 * n * model.beta / m * w * w

    ref = logp(0.0)
    lim = 30.0
    z = integrate.quad(lambda w: math.exp(logp(w) - ref), -lim, lim, limit=300)[0]
    mean = integrate.quad(lambda w: w * math.exp(logp(w) - ref), -lim, lim, limit=300)[0] / z
    var = (
        integrate.quad(lambda w: (w - mean) ** 2 * math.exp(logp(w) - ref), -lim, lim, limit=300)[0]
        / z
    )
    m4 = (
        integrate.quad(lambda w: (w - mean) ** 4 * math.exp(logp(w) - ref), -lim, lim, limit=300)[0]
        / z
    )
    return mean, var, m4


@pytest.mark.parametrize("r,m", [(1.0, 1.0), (0.3, 1.0), (1.0, 0.2)])
def test_pymc_draws_match_quadrature_1d(r, m):
    X, y = _toy()
    model = BayesianLogisticRegression(beta=0.05, c=1.0, backend="pymc")
    s = np.where(y > 0, 1.0, -1.0)
    draws, diag = pymc_backend.posterior_draws(model, (X, s), r, m, np.random.default_rng(3))
    w = draws.reshape(-1)
    mean, var, m4 = _exact_moments_1d(X, y, model, r, m)
    ess = diag["ess_bulk_min"]
    assert diag["rhat_max"] <= 1.01 and diag["divergences"] == 0
    # Monte Carlo standard errors from the ESS, not hand-set tolerances
    assert abs(w.mean() - mean) < 4.5 * math.sqrt(var / ess)
    assert abs(w.var() - var) < 4.5 * math.sqrt((m4 - var**2) / ess)


def test_release_fields_and_diagnostics():
    X, y = _toy(n=60, d=2)
    model = BayesianLogisticRegression(beta=0.05)
    rel = pb.sample(model, (X, y), 2.0, 0.5, rng=1)
    assert rel.value.shape == (2,) and np.isfinite(rel.value).all()
    assert rel.method == "diffused" and rel.eps <= 0.5 and rel.n == 60
    # the certificate's c carries 2e-12 slack for the float norm check (docs/numerics.md §8)
    assert rel.r == pytest.approx(math.sqrt(0.5 / (2 * 2.0 / (60 * 0.05))), rel=3e-12)
    assert rel.r < math.sqrt(0.5 / (2 * 2.0 / (60 * 0.05)))
    assert set(rel.diagnostics) >= {"rhat_max", "ess_bulk_min", "ess_tail_min", "attempts"}
    assert rel.diagnostics["rhat_max"] <= 1.01
    np.testing.assert_allclose(rel.rdp([2.0, 4.0]), [rel.eps, 2 * rel.eps], rtol=1e-12)
    assert "diagnostics" not in repr(rel)
    again = pb.sample(model, (X, y), 2.0, 0.5, rng=1)
    np.testing.assert_array_equal(rel.value, again.value)  # seeded: reproducible


def test_model_compiled_once_per_dimension(monkeypatch):
    import pymc as pm

    X, y = _toy(n=30, d=3, seed=4)
    model = BayesianLogisticRegression(beta=0.05, tune=300, draws=300, backend="pymc")
    pb.sample(model, (X, y), 2.0, 1.0, rng=0)
    key = (3, model.target_accept)
    step = pymc_backend._CACHE[key].step
    built = []
    monkeypatch.setattr(
        pm.Model,
        "logp_dlogp_function",
        lambda *a, **k: built.append(1) or pytest.fail("recompiled"),
    )
    monkeypatch.setattr(pm, "NUTS", lambda *a, **k: pytest.fail("rebuilt the step"))
    X2, y2 = _toy(n=55, d=3, seed=5)  # other data, other n: shared inputs only
    pb.sample(model, (X2, y2), 3.0, 0.5, "concentrated", rng=1)
    assert pymc_backend._CACHE[key].step is step and not built


@pytest.mark.parametrize("backend", ["imh", "pymc"])
def test_ops_release_inside_the_ball(backend):
    X, y = _toy(n=50, d=2)
    model = BayesianLogisticRegression(beta=0.5, c=1.0, radius=0.8, backend=backend)
    rel = pb.sample(model, (X, y), 2.0, 1.0, "ops", rng=2)
    assert np.linalg.norm(rel.value) <= 0.8
    if backend == "pymc":
        assert 0 < rel.diagnostics["ops_acceptance"] <= 1
    cal = pb.calibrate(model, 50, math.inf, 1.0, "ops")  # pure DP reaches lam = inf
    assert cal.eps == pytest.approx(1.0) and cal.eps <= 1.0


@pytest.mark.parametrize("backend", ["imh", "pymc"])
def test_ops_hopeless_acceptance_is_a_clear_error(backend):
    X, y = _toy(n=50, d=2)
    y[:] = 1.0
    X[:] = np.array([1.0, 0.0])  # the posterior sits far from the origin...
    model = BayesianLogisticRegression(
        beta=0.001, c=1.0, radius=1e-3, tune=200, draws=200, backend=backend
    )
    with pytest.raises(pb.SamplingError, match="OPS rejection"):
        pb.sample(model, (X, y), 2.0, 50.0, "ops", rng=0)  # ...outside a tiny ball


def test_bad_mcmc_settings_are_caught_by_diagnostics():
    X, y = _toy(n=40, d=2)
    model = BayesianLogisticRegression(beta=0.05, tune=0, draws=4, chains=2, backend="pymc")
    with pytest.raises(pb.ConvergenceError, match="R-hat") as err:
        pb.sample(model, (X, y), 2.0, 1.0, rng=0)
    assert err.value.diagnostics["rhat_max"] > 1.01
    with pytest.warns(RuntimeWarning, match="did not converge"):
        rel = pb.sample(model, (X, y), 2.0, 1.0, rng=0, on_bad_diagnostics="warn")
    assert rel.value.shape == (2,)


def test_closed_form_calibration_and_infeasible_orders():
    model = BayesianLogisticRegression(beta=0.1, c=2.0)
    n, lam = 100, 4.0
    direct = 2 * lam * 4.0 / (n * 0.1)
    cal = pb.calibrate(model, n, lam, 0.2, "concentrated")
    assert cal.m == pytest.approx(0.2 / direct) and cal.eps <= 0.2
    cal = pb.calibrate(model, n, lam, 100.0, "diffused")
    assert cal.r == 1.0 and cal.eps == pytest.approx(direct)
    with pytest.raises(pb.InfeasiblePrivacyError, match="ops"):
        pb.calibrate(model, n, math.inf, 1.0, "diffused")
    with pytest.raises(pb.InfeasiblePrivacyError, match="ask for eps >="):
        pb.calibrate(model, n, lam, 0.1, "direct")


@pytest.mark.parametrize(
    "data,exc,match",
    [
        ((np.array([[0.1, np.nan]]), np.array([1.0])), pb.DataError, r"X must be finite"),
        ((np.ones((3, 1)) * 0.5, np.array([0.0, 1.0, 2.0])), pb.DataError, r"y\[2\] = 2"),
        (
            (np.ones((3, 1)) * 0.5, np.array([-1.0, 0.0, 1.0])),
            pb.DataError,
            r"holds both 0 \(the first at y\[1\]\) and -1 \(the first at y\[0\]\)",
        ),
        ((np.ones((3, 0)), np.array([0.0, 1.0, 1.0])), ValueError, "d = 0"),
        ((np.ones((0, 2)), np.array([])), ValueError, "n = 0"),
        (
            (np.array([[0.6, 0.8], [0.1, 0.1], [3.0, 0.0]]), np.ones(3)),
            pb.DataError,
            r"1 row\(s\) of X have norm > c = 1 \(first: X\[2\]\)",
        ),
        ((np.ones((3, 1)) * 0.5, np.ones(2)), ValueError, "y must have shape"),
        ((np.ones((3, 1)) * 0.5,), TypeError, "tuple"),
        ((np.ones(3), np.ones(3)), ValueError, "2-D"),
    ],
)
def test_bad_input(data, exc, match):
    with pytest.raises(exc, match=match):
        pb.sample(BayesianLogisticRegression(), data, 2.0, 1.0)


def test_one_class_is_accepted_by_sample():
    """Refusing would reveal that every label is equal: the posterior is well defined."""
    X, _ = _toy(n=30, d=1)
    rel = pb.sample(
        BayesianLogisticRegression(beta=0.1, tune=300, draws=300), (X, np.ones(30)), 2.0, 1.0, rng=0
    )
    assert np.isfinite(rel.value).all()


def test_preprocessing_helpers():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    np.testing.assert_allclose(
        pb.preprocessing.clip_rows(X, 1.0), [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]]
    )
    np.testing.assert_allclose(pb.preprocessing.scale_rows(X, 10.0), X / 10)
    np.testing.assert_allclose(np.linalg.norm(pb.preprocessing.normalize_rows(X)[:2], axis=1), 1)
    with pytest.raises(ValueError, match="finite"):
        pb.preprocessing.clip_rows([[np.inf, 0]], 1.0)


@pytest.mark.parametrize("backend", ["imh", "pymc"])
def test_concurrent_releases_never_mix_data_sets(backend):
    import threading

    model = BayesianLogisticRegression(beta=0.01, tune=300, draws=300, chains=2, backend=backend)
    xa = np.tile([[1.0, 0.0]], (400, 1))
    y = np.ones(400)
    out = {}

    def run(key, x):
        out[key] = pb.sample(model, (x, y), 2.0, 5.0, rng=0).value

    threads = [threading.Thread(target=run, args=(k, x)) for k, x in (("A", xa), ("B", -xa))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out["A"][0] > 1 and out["B"][0] < -1  # each release saw its own data


def test_reruns_really_double_the_draws():
    X, y = _toy(n=30, d=1)
    model = BayesianLogisticRegression(beta=0.1, tune=100, draws=50, chains=2, backend="pymc")
    s = np.where(y > 0, 1.0, -1.0)
    draws, diag = pymc_backend.posterior_draws(
        model, (X, s), 1.0, 1.0, np.random.default_rng(0), scale=4
    )
    assert draws.shape == (2, 200, 1) and diag["draws"] == 200 and diag["tune"] == 400
    assert pymc_backend._CACHE[(1, model.target_accept)].model["X"].get_value().shape == (1, 1)


def test_glm_certificates_never_exceed_the_target():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        model = BayesianLogisticRegression(
            beta=10 ** rng.uniform(-3, 1), c=10 ** rng.uniform(-1, 1.5)
        )
        n, lam = int(rng.integers(1, 1000)), 1 + 10 ** rng.uniform(-2, 2)
        eps = 10 ** rng.uniform(-3, 1)
        method = str(rng.choice(["diffused", "concentrated", "ops"]))
        cal = pb.calibrate(model, n, lam, eps, method)
        assert cal.eps <= eps and float(cal.rdp(lam)) == cal.eps
    tiny = pb.calibrate(BayesianLogisticRegression(beta=0.1), 50, 2.0, 1e-20, "ops")
    assert 0 < tiny.r and tiny.eps <= 1e-20


def test_estimator_accepts_a_generator_and_names_the_intercept_bound():
    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(40, 2)), 0.8)
    y = (X[:, 0] > 0).astype(int)
    est = pb.PrivateLogisticRegression(
        eps=5.0,
        backend="imh",
        tune=300,
        draws=300,
        chains=2,
        random_state=np.random.default_rng(1),
    )
    assert est.fit(X, y).coef_.shape == (1, 2)
    with pytest.raises(ValueError, match="sqrt"):
        pb.PrivateLogisticRegression(fit_intercept=True).fit(
            pb.preprocessing.normalize_rows(X, 0.95), y
        )


def test_pymc_softmax_regression_matches_imh():
    """backend="pymc" for MultinomialLogisticRegression (its own compiled model, key
    (d, target_accept, K)): posterior means of the class contrasts against IMH's."""
    rng = np.random.default_rng(0)
    x = pb.preprocessing.clip_rows(rng.normal(size=(120, 2)) * 0.4, 1.0)
    y = np.argmax(x @ rng.normal(size=(2, 3)) * 4 + rng.gumbel(size=(120, 3)), axis=1)
    nuts = pb.MultinomialLogisticRegression(0.05, 1.0, 3, backend="pymc", tune=300, draws=300)
    draws, diag = pymc_backend.posterior_draws(nuts, (x, y), 1.0, 1.0, np.random.default_rng(1))
    assert draws.shape == (4, 300, 6) and diag["rhat_max"] < 1.02
    assert (2, nuts.target_accept, 3) in pymc_backend._CACHE
    imh = pb.MultinomialLogisticRegression(0.05, 1.0, 3, backend="imh")
    ref = pb.sample(imh, (x, y), 2.0, 1e4, size=400, rng=2).value  # r = 1: the posterior
    a = draws.reshape(-1, 2, 3)
    da, db = a - a[..., :1], ref - ref[..., :1]
    se = np.sqrt(da.var(axis=0) / 300 + db.var(axis=0) / 400)  # NUTS draws: ESS ~ 1/4
    assert (np.abs(da.mean(axis=0) - db.mean(axis=0)) <= 5 * se + 1e-9).all()
