"""PrivateLogisticRegression: scikit-learn conventions, privacy reporting, accuracy."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

import privbayes as pb
from privbayes import PrivateLogisticRegression

# Every applicable check runs; none is skipped by us. (check_array_api_input skips itself
# unless SCIPY_ARRAY_API is set.) The instance clips rows (the checks feed unbounded
# features), has a fixed seed (idempotence checks) and a loose eps (the checks test API
# conventions, not privacy).
CHECKED = PrivateLogisticRegression(lam=2.0, eps=5.0, clip=True, random_state=0)


@parametrize_with_checks([CHECKED])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = pb.preprocessing.normalize_rows(np.log1p(X), c=0.8)  # row-wise only: private-safe
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def test_fit_on_real_data_and_privacy_report():
    Xtr, Xte, ytr, yte = _cancer()
    est = PrivateLogisticRegression(lam=2.0, eps=1.0, n_samples=3, random_state=1)
    assert est.fit(Xtr, ytr) is est
    assert est.coef_.shape == (1, 30) and est.intercept_.shape == (1,)
    assert est.n_features_in_ == 30 and list(est.classes_) == [0, 1]
    p = est.predict_proba(Xte)
    assert p.shape == (len(yte), 2) and np.allclose(p.sum(1), 1)
    assert est.score(Xte, yte) > 0.6
    priv = est.privacy_
    assert priv["n_samples"] == 3 and len(priv["per_release_eps"]) == 3
    assert priv["eps"] == pytest.approx(sum(priv["per_release_eps"])) and priv["eps"] <= 1.0


def test_label_handling_and_errors():
    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(40, 2)), 0.8)
    y = np.where(X[:, 0] > 0, "spam", "ham")
    est = PrivateLogisticRegression(
        eps=5.0, random_state=0, backend="imh", tune=300, draws=300
    ).fit(X, y)
    assert set(est.predict(X)) <= {"spam", "ham"}
    with pytest.raises(ValueError, match="1 class.*at least two classes"):
        PrivateLogisticRegression().fit(X, np.ones(40))
    # three classes: the softmax model (tests/test_glm_multinomial.py), OPS included
    three = PrivateLogisticRegression(method="ops", random_state=0).fit(X, np.arange(40) % 3)
    assert three.coef_.shape == (3, X.shape[1]) and three.privacy_["method"] == "ops"
    with pytest.raises(ValueError, match="norm >"):
        PrivateLogisticRegression().fit(X * 10, y)  # no silent clipping by default
    with pytest.raises(ValueError, match="n_samples"):
        PrivateLogisticRegression(n_samples=0).fit(X, y)
    with pytest.raises(ValueError, match="n_samples must be at most"):
        PrivateLogisticRegression(n_samples=10**6).fit(X, y)


# -- repeated fits and the ledger (issue 12 item 9b) -------------------------------------------
def _small(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = pb.preprocessing.clip_rows(rng.normal(size=(n, 2)) * 0.5, 0.8)
    return X, (X[:, 0] > 0).astype(int)


def test_ledger_params_survive_clone_and_get_params(tmp_path):
    from sklearn.base import clone

    path = str(tmp_path / "l.db")
    est = PrivateLogisticRegression(ledger=path, dataset="d", note="cv")
    twin = clone(est)
    params = twin.get_params()
    assert params["ledger"] == path and params["dataset"] == "d" and params["note"] == "cv"
    ledger = pb.Ledger(path)  # an instance is shared by the clones, not copied
    twin = clone(PrivateLogisticRegression(eps=2.0, ledger=ledger, dataset="d"))
    assert twin.ledger is ledger and twin.get_params()["eps"] == 2.0


def test_cross_validation_charges_every_fit(tmp_path):
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y = _small()
    path = tmp_path / "l.db"
    pb.Ledger(path).init_budget("d", eps=1e6, delta=1e-6)
    est = PrivateLogisticRegression(eps=1.0, random_state=0, ledger=str(path), dataset="d")
    cross_val_score(est, X, y, cv=5)
    charges = pb.Ledger(path).status("d")[0]["charges"]
    assert len(charges) == 5  # k folds = k releases on overlapping data
    assert all(c["note"] == "PrivateLogisticRegression.fit" for c in charges)
    grid = GridSearchCV(est, {"beta": [0.01, 0.1]}, cv=3).fit(X, y)
    assert len(pb.Ledger(path).status("d")[0]["charges"]) == 5 + 2 * 3 + 1  # g k + 1 refit
    assert grid.best_estimator_.privacy_["n_samples"] == 1


def test_ledger_refuses_the_fit_that_would_overspend(tmp_path):
    X, y = _small()
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=8.0, delta=1e-6)
    est = PrivateLogisticRegression(eps=0.3, random_state=0, ledger=ledger, dataset="d")
    fitted = 0
    with pytest.raises(pb.BudgetExceededError):
        for _ in range(50):
            est.fit(X, y)
            fitted += 1
    assert 0 < fitted < 50 and len(ledger.status("d")[0]["charges"]) == fitted
    assert ledger.spent("d") <= 8.0
    with pytest.raises(ValueError, match="dataset"):
        PrivateLogisticRegression(ledger=ledger).fit(X, y)
    with pytest.raises(ValueError, match="ledger"):
        PrivateLogisticRegression(dataset="d").fit(X, y)
    with pytest.raises(pb.errors.LedgerError, match="no ledger"):
        PrivateLogisticRegression(ledger=str(tmp_path / "typo.db"), dataset="d").fit(X, y)


def test_cross_validation_needs_error_score_raise_to_surface_an_overspend(tmp_path):
    """scikit-learn's default error_score=nan turns BudgetExceededError into NaN scores; the
    README's repeated-fits example passes error_score="raise"."""
    import warnings
    from pathlib import Path

    from sklearn.model_selection import KFold, cross_val_score

    X, y = _small(n=100)
    path = tmp_path / "cv.sqlite"
    pb.Ledger(path).init_budget("d", eps=8.0, delta=1e-6)  # room for a fit or two, not 5
    est = PrivateLogisticRegression(eps=1.0, random_state=0, ledger=path, dataset="d")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        swallowed = cross_val_score(est, X, y, cv=KFold(5))
    assert np.isnan(swallowed).any()  # the default hides the refusal
    pb.Ledger(path).init_budget("e", eps=8.0, delta=1e-6)
    est.set_params(dataset="e")
    with pytest.raises(pb.BudgetExceededError):
        cross_val_score(est, X, y, cv=KFold(5), error_score="raise")
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    section = readme.split("### Repeated fits")[1].split("### ")[0]
    assert 'cv=KFold(5), error_score="raise")' in section and "GridSearchCV" in section


def test_estimator_is_sample_with_an_intercept():
    """One code path: the estimator's draws are those of sample() with fit_intercept."""
    X, y = _small(n=80, seed=3)
    X = X * 0.9  # inside sqrt(1 - 0.5^2)
    est = PrivateLogisticRegression(eps=2.0, n_samples=3, random_state=7).fit(X, y)
    model = pb.BayesianLogisticRegression(beta=0.01, fit_intercept=True, intercept_scaling=0.5)
    seed = np.random.RandomState(7).randint(2**31 - 1)
    rel = pb.sample(model, (X, y.astype(float)), 2.0, 2.0, size=3, rng=seed)
    np.testing.assert_array_equal(est.samples_, rel.value)
    mean = np.asarray(rel.value).mean(axis=0)
    np.testing.assert_array_equal(est.coef_[0], mean[:2])
    assert est.intercept_[0] == mean[2]  # the intercept itself (b = s * w_{d+1})
