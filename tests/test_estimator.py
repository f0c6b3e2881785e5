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
    est = PrivateLogisticRegression(eps=5.0, random_state=0, tune=300, draws=300).fit(X, y)
    assert set(est.predict(X)) <= {"spam", "ham"}
    with pytest.raises(ValueError, match="Only binary"):
        PrivateLogisticRegression().fit(X, np.ones(40))
    with pytest.raises(ValueError, match="Only binary"):
        PrivateLogisticRegression().fit(X, np.arange(40) % 3)
    with pytest.raises(ValueError, match="norm >"):
        PrivateLogisticRegression().fit(X * 10, y)  # no silent clipping by default
    with pytest.raises(ValueError, match="n_samples"):
        PrivateLogisticRegression(n_samples=0).fit(X, y)
    with pytest.raises(ValueError, match="n_samples must be at most"):
        PrivateLogisticRegression(n_samples=10**6).fit(X, y)
