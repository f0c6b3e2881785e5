"""Logistic-regression settings refused before any charge, NaN diagnostics as failures,
ConvergenceError advice, the intercept, and OPS's t (issue 12 items 7, 8, 13, 14)."""

import math
import warnings
from functools import partial

import numpy as np
import pytest

import privbayes as pb
from privbayes.sampling import imh, pymc_backend

# these tests are about the MCMC back-ends: IMH unless a test says otherwise
BayesianLogisticRegression = partial(pb.BayesianLogisticRegression, backend="imh")


def _toy(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = pb.preprocessing.clip_rows(rng.normal(size=(n, d)) * 0.5, 0.8)
    return X, np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)


# -- item 7: settings that can never pass are refused when the model is built -----------------
@pytest.mark.parametrize("backend", ["imh", "pymc"])
def test_one_chain_or_three_draws_are_refused_before_any_charge(backend, tmp_path):
    with pytest.raises(ValueError, match=r"chains must be an integer >= 2 \(split R-hat"):
        BayesianLogisticRegression(backend=backend, chains=1)
    with pytest.raises(ValueError, match=r"draws must be an integer >= 4 \(split R-hat"):
        BayesianLogisticRegression(backend=backend, draws=3)


def test_imh_burn_in_cap_is_checked_at_build():
    from privbayes.models.logistic import IMH_MAX_TUNE

    assert IMH_MAX_TUNE == imh.MAX_TUNE
    with pytest.raises(ValueError, match="tune must be at most"):
        BayesianLogisticRegression(tune=imh.MAX_TUNE + 1)
    BayesianLogisticRegression(tune=imh.MAX_TUNE, backend="pymc")  # NUTS has no such cap


def test_nan_diagnostics_fail_everywhere():
    rng = np.random.default_rng(0)
    traces = rng.normal(size=(4, 100, 3))
    traces[:, :, 1] = 0.25  # one coordinate never moves: its R-hat is 0/0
    diag = imh._diagnostics(traces, rng.normal(size=(4, 100)), 0.5, rng.normal(size=500), 20)
    diag["attempts"] = 1
    assert math.isnan(diag["rhat_max"]) and any("R-hat" in p for p in imh._problems(diag))
    ok = dict(diag, rhat_max=1.001)
    for key in ("rhat_max", "pareto_k", "tv_bound_est"):  # OPS batches: NaN wins either way
        assert math.isnan(
            imh._worst(ok, diag if key == "rhat_max" else dict(ok, **{key: math.nan}))[key]
        )
        assert math.isnan(imh._worst(dict(ok, **{key: math.nan}), ok)[key])
    assert math.isnan(imh._tv_bound(math.nan, 20))


def test_pymc_nan_rhat_is_never_released(monkeypatch):
    """An undefined R-hat used to read as converged (xarray's max skips NaN); with "warn"
    such chains (that did not move) are not released either."""
    model = BayesianLogisticRegression(backend="pymc", tune=10, draws=10)
    cal = pb.calibrate(model, 60, 2.0, 1.0)
    draws = np.zeros((4, 10, 2))
    diag = {"rhat_max": math.nan, "ess_bulk_min": 40.0, "ess_tail_min": 40.0, "divergences": 0}
    monkeypatch.setattr(pymc_backend, "posterior_draws", lambda *a, **k: (draws, dict(diag)))
    for on_bad in ("raise", "warn"):
        with pytest.raises(pb.ConvergenceError, match="would not release it either"):
            pymc_backend.release_draw(model, _toy(), cal, np.random.default_rng(0),
                                      progressbar=False, on_bad=on_bad)  # fmt: skip


# -- item 8: the advice does not go in a circle --------------------------------------------------
def test_hopeless_runs_say_warn_would_not_help_and_the_charge_stays(tmp_path):
    X, y = _toy()
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=1e6, delta=1e-6)
    frozen = BayesianLogisticRegression(beta=0.05, proposal_scale=1e-6, reruns=0)
    for on_bad in ("raise", "warn"):
        with pytest.raises(pb.ConvergenceError) as err:
            pb.sample(frozen, (X, y), 2.0, 1.0, rng=0, on_bad_diagnostics=on_bad,
                      ledger=ledger, dataset="d")  # fmt: skip
        text = str(err.value)
        assert "stays spent" in text and "another back-end" in text and "beta" in text
        assert ("would not release it either" in text) or ("burn-in" in text)
        assert "to release anyway" not in text
    assert len(ledger.status("d")[0]["charges"]) == 2  # both attempts read the data


def test_narrow_failures_offer_warn():
    X, y = _toy()
    model = BayesianLogisticRegression(beta=0.05, draws=4, chains=2, reruns=0)
    with pytest.raises(pb.ConvergenceError, match="'warn' would release a run like this"):
        pb.sample(model, (X, y), 2.0, 1.0, rng=0)


def test_warn_says_the_run_was_released_and_weakened():
    X, y = _toy()
    for backend in ("imh", "pymc"):
        if backend == "pymc":
            pytest.importorskip("pymc")
        model = BayesianLogisticRegression(beta=0.05, backend=backend, draws=4, tune=0,
                                           chains=2, reruns=0)  # fmt: skip
        with pytest.warns(RuntimeWarning) as record:
            rel = pb.sample(model, (X, y), 2.0, 1.0, rng=0, on_bad_diagnostics="warn")
        assert rel.value.shape == (2,)
        text = " ".join(str(w.message) for w in record)
        assert "released anyway under on_bad_diagnostics='warn'" in text
        assert "weakened" in text and "approximate" in text
        assert "nothing was released" not in text and "would release" not in text


# -- item 14: the intercept inside the release flow ---------------------------------------------
def test_intercept_is_appended_inside_the_release():
    X, y = _toy(n=80)
    X = X * 0.9  # rows <= 0.72 < sqrt(1 - 0.5^2)
    model = BayesianLogisticRegression(beta=0.05, fit_intercept=True, intercept_scaling=0.5)
    rel = pb.sample(model, (X, y), 2.0, 1.0, rng=3)
    raw = pb.sample(
        BayesianLogisticRegression(beta=0.05), (np.hstack([X, np.full((80, 1), 0.5)]), y),
        2.0, 1.0, rng=3,
    )  # fmt: skip
    assert rel.value.shape == (3,)
    np.testing.assert_array_equal(rel.value[:2], raw.value[:2])
    assert rel.value[2] == raw.value[2] * 0.5  # released as the bias b = s * w_{d+1}
    assert rel.calibration.eps == raw.calibration.eps  # same certificate: c covers [x, s]
    with pytest.raises(ValueError, match=r"sqrt\(c\^2 - intercept_scaling\^2\) = 0.866025"):
        pb.sample(model, (pb.preprocessing.normalize_rows(X, 0.9), y), 2.0, 1.0)
    assert model.feature_bound == pytest.approx(math.sqrt(0.75))
    assert "intercept_scaling=0.5" in repr(model)


def test_intercept_options_are_checked():
    with pytest.raises(ValueError, match="only with fit_intercept=True"):
        BayesianLogisticRegression(intercept_scaling=0.5)
    for s in (0.0, -1.0, 1.0, 2.0, math.nan):
        with pytest.raises(ValueError, match="intercept_scaling"):
            BayesianLogisticRegression(fit_intercept=True, intercept_scaling=s)
    with pytest.raises(TypeError, match="fit_intercept"):
        BayesianLogisticRegression(fit_intercept="yes")
    assert BayesianLogisticRegression(c=4.0, fit_intercept=True).intercept_scaling == 2.0


# -- item 13: OPS's knob is t ---------------------------------------------------------------------
def test_t_property():
    model = BayesianLogisticRegression(beta=0.1)
    ops = pb.calibrate(model, 100, 2.0, 1.0, "ops")
    assert ops.t == ops.r and 0 < ops.t <= 1
    assert pb.calibrate(model, 100, 2.0, 1.0).t is None
    assert pb.calibrate(pb.BetaBernoulli(), 100, 2.0, 1.0).t is None
    rel = pb.sample(pb.BetaBernoulli(), [0, 1, 1], 2.0, 1.0, rng=0)
    assert rel.t is None
    X, y = _toy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", pb.SharedRandomnessWarning)  # rng=0 again, above
        rel = pb.sample(BayesianLogisticRegression(beta=0.5), (X, y), 2.0, 1.0, "ops", rng=0)
    assert rel.t == rel.r == rel.calibration.t
    with pytest.raises((AttributeError, TypeError)):  # read-only (frozen, slots)
        rel.t = 0.5
