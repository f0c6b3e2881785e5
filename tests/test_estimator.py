"""PrivateLogisticRegression: scikit-learn conventions, privacy reporting, accuracy."""

import copy
import inspect
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import KFold, train_test_split
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

import privbayes as pb
from privbayes import PrivateLogisticRegression

# Every applicable check runs. The instances clip rows (the checks feed unbounded features),
# have a fixed seed (idempotence checks) and a loose eps (the checks test API conventions,
# not privacy). The class set is a public input (classes=, default [0, 1]), never read off
# y: K, the model and the cost must not depend on the data (docs/privacy.md §6). So each
# check runs on an instance that declares the labels it feeds: BINARY (the default) for
# the binary checks (its multi_class tag is False: scikit-learn then feeds two classes and
# checks that three are refused), FOUR for the checks that feed up to four classes, and
# the three checks that feed the labels {1, 2} on an instance declaring them
# (test_checks_that_feed_labels_1_and_2). The expected failures are the checks that feed an
# instance labels it does not declare, and check_classifiers_classes, which feeds one
# instance "one"/"two" and then -1/+1 and expects classes_ to follow y: by design no
# instance can (test_declared_string_and_signed_classes checks those conventions instead).
BINARY = PrivateLogisticRegression(lam=2.0, eps=5.0, clip=True, random_state=0)
FOUR = clone(BINARY).set_params(classes=[0, 1, 2, 3])
CLASSES_FROM_Y = (
    "feeds labels 'one'/'two', then -1/+1, to one instance and expects classes_ to be read "
    "off y; here the class set is a declared, public input (privacy: K must not depend on "
    "the data); see test_declared_string_and_signed_classes"
)
LABELS_1_2 = "feeds labels {1, 2}, not declared here; runs in test_checks_that_feed_labels_1_and_2"
BINARY_ON_FOUR = (
    "feeds two classes to an instance declared with four, and expects a binary decision "
    "function; passes on the binary instance"
)


def _expected_failures(estimator) -> dict[str, str]:
    if estimator.classes is None:
        return {
            "check_classifiers_classes": CLASSES_FROM_Y,
            "check_estimators_dtypes": LABELS_1_2,
            "check_classifier_data_not_an_array": LABELS_1_2,
            "check_fit2d_1feature": LABELS_1_2,
        }
    return {
        "check_classifiers_classes": CLASSES_FROM_Y,
        "check_classifiers_train": BINARY_ON_FOUR,
        "check_decision_proba_consistency": BINARY_ON_FOUR,
    }


@parametrize_with_checks([BINARY, FOUR], expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "check",
    [
        estimator_checks.check_estimators_dtypes,
        estimator_checks.check_classifier_data_not_an_array,
        estimator_checks.check_fit2d_1feature,
    ],
)
def test_checks_that_feed_labels_1_and_2(check):
    check("PrivateLogisticRegression", clone(BINARY).set_params(classes=[1, 2]))


def test_the_expected_failures_are_the_undeclared_labels():
    """The binary instance refuses exactly what its expected failures say: labels {1, 2}
    (scikit-learn's check data) with the default classes, accepted once declared."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.array([1, 2] * 10)
    with pytest.raises(pb.DataError, match="Only binary classification is supported"):
        clone(BINARY).fit(X, y)
    assert list(clone(BINARY).set_params(classes=[1, 2]).fit(X, y).classes_) == [1, 2]


def _cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = pb.preprocessing.normalize_rows(np.log1p(X), c=0.8)  # row-wise only: private-safe
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def test_fit_on_real_data_and_privacy_report():
    Xtr, Xte, ytr, yte = _cancer()
    est = PrivateLogisticRegression(
        lam=2.0, eps=1.0, n_samples=3, fit_intercept=True, random_state=1
    )
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
        eps=5.0, random_state=0, backend="imh", tune=300, draws=300, classes=["ham", "spam"]
    ).fit(X, y)
    assert set(est.predict(X)) <= {"spam", "ham"}
    # one label in y is fine: K comes from the declared classes, not from y
    ones = PrivateLogisticRegression(eps=5.0).fit(X, np.ones(40))
    assert list(ones.classes_) == [0, 1] and ones.coef_.shape == (1, 2)
    with pytest.raises(ValueError, match="between 2 and"):
        PrivateLogisticRegression(classes=[1]).fit(X, np.ones(40))
    # three classes: the softmax model (tests/test_glm_multinomial.py), OPS included
    three = PrivateLogisticRegression(method="ops", random_state=0, classes=[0, 1, 2])
    three.fit(X, np.arange(40) % 3)
    assert three.coef_.shape == (3, X.shape[1]) and three.privacy_["method"] == "ops"
    with pytest.raises(ValueError, match="norm >"):
        PrivateLogisticRegression().fit(X * 10, y == "spam")  # no silent clipping by default
    with pytest.raises(ValueError, match="n_samples"):
        PrivateLogisticRegression(n_samples=0).fit(X, y == "spam")
    with pytest.raises(ValueError, match="n_samples must be at most"):
        PrivateLogisticRegression(n_samples=10**6).fit(X, y == "spam")


# -- the class set is public (issue 14 item 2a) ---------------------------------------------
def _toy(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = pb.preprocessing.clip_rows(rng.normal(size=(n, 3)) * 0.5, 0.8)
    return X, (X[:, 0] > 0).astype(int)


def test_one_changed_label_changes_neither_the_model_nor_the_cost():
    """The issue's case: y with one label turned from 1 into 2. Reading the classes off y
    turned coef_ (1, d) into (3, d) and changed privacy_["eps"]; now the default class set
    refuses the label (naming its position, never its value), and with classes declared
    both data sets get the same model and the same certified eps."""
    X, y = _toy()
    y2 = y.copy()
    i = int(np.flatnonzero(y == 1)[3])
    y2[i] = 2
    base = PrivateLogisticRegression(eps=1.0).fit(X, y)
    assert base.coef_.shape == (1, 3) and list(base.classes_) == [0, 1]
    with pytest.raises(pb.DataError) as err:
        PrivateLogisticRegression(eps=1.0).fit(X, y2)
    assert f"y[{i}]" in str(err.value) and "1 row(s)" in str(err.value)
    assert err.value.index == i and err.value.count == 1 and err.value.column == "y"
    assert err.value.value is None
    declared = {"eps": 1.0, "classes": [0, 1, 2]}
    a = PrivateLogisticRegression(**declared).fit(X, y)
    b = PrivateLogisticRegression(**declared).fit(X, y2)
    assert a.coef_.shape == b.coef_.shape == (3, 3)
    assert list(a.classes_) == list(b.classes_) == [0, 1, 2]
    assert a.privacy_["eps"] == b.privacy_["eps"]
    # the certificate is the declared K-class model's, computed from public inputs only
    model = pb.MultinomialLogisticRegression(0.01, 1.0, 3)
    cal = pb.calibrate(model, len(y), 2.0, 1.0, d=3)
    assert a.privacy_["eps"] == cal.eps and a.privacy_["backend"] == cal.model.backend


@pytest.mark.parametrize(
    "labels,classes,first,count,secret",
    [
        (["no", "yes", "secret-label-7f3"], ["no", "yes"], 2, 10, "secret-label-7f3"),
        ([0, 1, 987654321], None, 2, 10, "987654321"),
        ([0.0, 1.0, 0.5], None, 2, 10, "0.5"),
        ([-1, 1, 1], None, 0, 10, None),  # -1/+1 must be declared: classes=[-1, 1]
        (["0", "1", "1"], None, 0, 30, None),  # text is not a number: "0" is not the class 0
        ([0, 1, 1], ["0", "1"], 0, 30, None),  # nor the other way round
    ],
)
def test_labels_outside_the_declared_set_are_refused_by_position(
    labels, classes, first, count, secret
):
    X, _ = _toy(n=30)
    y = np.array(labels * 10)
    with pytest.raises(pb.DataError, match=r"is not one of them") as err:
        PrivateLogisticRegression(eps=1.0, classes=classes).fit(X, y)
    assert err.value.index == first and err.value.count == count
    assert f"y[{first}] is not one of them ({count} row(s)" in str(err.value)
    if secret is not None:  # the record's value is never shown
        assert secret not in str(err.value) and err.value.value is None


def test_a_refused_label_is_refused_before_any_charge(tmp_path):
    X, y = _toy()
    path = tmp_path / "l.db"
    pb.Ledger(path).init_budget("d", eps=100.0, delta=1e-6)
    y = y.copy()
    y[5] = 7
    with pytest.raises(pb.DataError):
        PrivateLogisticRegression(eps=1.0, ledger=str(path), dataset="d").fit(X, y)
    assert pb.Ledger(path).status("d")[0]["charges"] == []


def test_declared_string_and_signed_classes():
    """The conventions check_classifiers_classes tests, with the classes declared:
    classes_ is the declared set, predictions are among them and follow the scores."""
    X, y01 = _toy(n=80, seed=2)
    for labels in (["one", "two"], [-1, 1], [False, True]):
        y = np.asarray(labels)[y01]
        est = PrivateLogisticRegression(eps=8.0, classes=labels, random_state=None).fit(X, y)
        assert list(est.classes_) == sorted(labels)
        pred = est.predict(X)
        assert set(pred.tolist()) <= set(labels)
        np.testing.assert_array_equal(pred, est.classes_[(est.decision_function(X) > 0) * 1])
        assert est.score(X, y) > 0.6
    # a declared class absent from y is fine, and classes_ still reports it
    est = PrivateLogisticRegression(eps=4.0, classes=["a", "b", "c"]).fit(
        X, np.where(y01, "a", "b")
    )
    assert list(est.classes_) == ["a", "b", "c"] and est.predict_proba(X).shape == (80, 3)


@pytest.mark.parametrize(
    "classes,error,match",
    [
        ([0], ValueError, "between 2 and"),
        ([0, 0.0], ValueError, "distinct"),
        ([1, True], ValueError, "distinct"),
        ([0, "a"], TypeError, "all numbers or all strings"),
        ("ab", TypeError, "list of labels"),
        ([[0, 1]], TypeError, "list of labels"),
        ([0, float("nan")], ValueError, "finite"),
    ],
)
def test_bad_class_lists_are_refused_before_the_data(classes, error, match):
    X, y = _toy()
    with pytest.raises(error, match=match):
        PrivateLogisticRegression(classes=classes).fit(X, np.full(len(y), np.nan))


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
    est = PrivateLogisticRegression(eps=2.0, n_samples=3, fit_intercept=True, random_state=7)
    est.fit(X, y)
    model = pb.BayesianLogisticRegression(beta=0.01, fit_intercept=True, intercept_scaling=0.5)
    seed = np.random.RandomState(7).randint(2**31 - 1)
    with pytest.warns(pb.SharedRandomnessWarning):  # the same noise, on purpose
        rel = pb.sample(model, (X, y.astype(float)), 2.0, 2.0, size=3, rng=seed)
    np.testing.assert_array_equal(est.samples_, rel.value)
    mean = np.asarray(rel.value).mean(axis=0)
    np.testing.assert_array_equal(est.coef_[0], mean[:2])
    assert est.intercept_[0] == mean[2]  # the intercept itself (b = s * w_{d+1})


# -- one default for the intercept; max_steps (issue 14 item 5) ------------------------------
def test_estimator_and_models_share_one_intercept_default():
    """The estimator defaulted to fit_intercept=True, the models to False."""
    params = inspect.signature(PrivateLogisticRegression).parameters
    assert params["fit_intercept"].default is False
    assert pb.BayesianLogisticRegression().fit_intercept is False
    assert pb.MultinomialLogisticRegression(n_classes=3).fit_intercept is False
    X, y = _toy()
    est = PrivateLogisticRegression(eps=1.0).fit(X, y)
    assert est.calibration_.model.fit_intercept is False and est.samples_.shape == (1, 3)
    assert est.intercept_.tolist() == [0.0]
    # with an intercept, its column s defaults to c / 2 in both (not 0.5 whatever c)
    for c in (1.0, 2.0):
        fit = PrivateLogisticRegression(eps=1.0, c=c, fit_intercept=True).fit(X, y)
        model = pb.BayesianLogisticRegression(c=c, fit_intercept=True)
        assert fit.calibration_.model.intercept_scaling == model.intercept_scaling == c / 2


def test_the_intercept_is_what_positive_features_need():
    """Issue 14 item 5: all-positive features (breast cancer / 4000, as in the README):
    without an intercept even the non-private MAP is worse than the majority class; with
    it the private fit is far better than the majority class, near the MAP."""
    from sklearn.linear_model import LogisticRegression

    X, y = load_breast_cancer(return_X_y=True)
    X = pb.preprocessing.clip_rows(X / 4000.0, c=0.8)
    n, majority = len(y), max(y.mean(), 1 - y.mean())

    def map_accuracy(s):
        Z = np.hstack([X, np.full((n, 1), s)]) if s else X
        fit = LogisticRegression(C=1 / (n * 1e-3), fit_intercept=False, max_iter=10**4)
        return fit.fit(Z, y).score(Z, y)

    assert map_accuracy(None) < majority < map_accuracy(0.5) - 0.2
    accuracy = [
        PrivateLogisticRegression(lam=2.0, eps=1.0, beta=1e-3, fit_intercept=True)
        .fit(X, y)
        .score(X, y)
        for _ in range(5)
    ]
    assert min(accuracy) > majority + 0.15 and np.mean(accuracy) > map_accuracy(0.5) - 0.06


def test_max_steps_is_exposed_and_the_step_cap_warning_names_it():
    X, y = _toy(n=200)
    est = PrivateLogisticRegression(eps=1.0, backend="langevin", max_steps=3)
    assert est.get_params()["max_steps"] == 3  # stored as given, checked in fit
    with pytest.warns(pb.StepCapWarning, match=r"max_steps=.*PrivateLogisticRegression"):
        est.fit(X, y)
    assert est.calibration_.sampler["steps"] == 3 and est.calibration_.sampler["capped"]
    roomy = PrivateLogisticRegression(eps=1.0, backend="langevin", max_steps=10**6).fit(X, y)
    assert not roomy.calibration_.sampler["capped"]
    with pytest.raises(ValueError, match="max_steps does not apply to backend='imh'"):
        PrivateLogisticRegression(backend="imh", max_steps=50).fit(X, y)
    with pytest.raises(ValueError, match="max_steps must be an integer"):
        PrivateLogisticRegression(max_steps=0).fit(X, y)


# -- two releases never silently share their noise (issue 14 item 2b) -------------------------
def _folds(n=80):
    X, y = _toy(n=n, seed=4)
    (a, b), (c, d) = list(KFold(2).split(X))
    return (X[a], y[a]), (X[c], y[c])


def _shared(records) -> list:
    return [w for w in records if issubclass(w.category, pb.SharedRandomnessWarning)]


def test_cloned_estimators_with_an_int_seed_warn_on_their_second_fit():
    """clone() copies an int random_state: fits on two folds replay one noise stream."""
    one, two = _folds()
    est = PrivateLogisticRegression(eps=1.0, random_state=2**31 - 9)
    clone(est).fit(*one)
    with pytest.warns(pb.SharedRandomnessWarning, match="NOT covered") as got:
        clone(est).fit(*two)
    text = str(_shared(got)[0].message)
    assert "share their noise" in text and "random_state=None" in text


@pytest.mark.parametrize("kind", ["Generator", "RandomState"])
def test_a_generator_deep_copied_by_clone_warns(kind):
    one, two = _folds()
    state = (
        np.random.default_rng()  # fresh entropy: a state no earlier test used
        if kind == "Generator"
        else np.random.RandomState(np.random.default_rng().integers(2**32))
    )
    est = PrivateLogisticRegression(eps=1.0, random_state=state)
    first, second = clone(est), clone(est)  # as cross_val_score does, before any fit
    assert first.random_state is not state and second.random_state is not state
    first.fit(*one)
    with pytest.warns(pb.SharedRandomnessWarning):
        second.fit(*two)


def test_fresh_entropy_and_an_advancing_generator_do_not_warn():
    one, two = _folds()
    gen = np.random.default_rng()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for est in (PrivateLogisticRegression(eps=1.0), PrivateLogisticRegression(eps=1.0)):
            clone(est).fit(*one)
            clone(est).fit(*two)
        same = PrivateLogisticRegression(eps=1.0, random_state=gen)
        same.fit(*one)  # the same object twice: its state has advanced in between
        same.fit(*two)
        pb.sample(pb.BetaBernoulli(), [0, 1, 1], 2.0, 1.0, rng=gen)
    assert _shared(got) == []


def test_every_release_path_shares_one_record_of_seeds():
    """sample(), release_query() and the estimator: an int seed and a Generator seeded
    alike are one stream; a copy of a Generator is the same stream; a call refused before
    its draw used no noise and is not recorded."""
    seed = int(np.random.default_rng().integers(2**62))  # not used before in this process
    pb.sample(pb.BetaBernoulli(), [0, 1, 1], 2.0, 1.0, rng=seed)
    with pytest.warns(pb.SharedRandomnessWarning):
        pb.release_query([0.2, 0.9], 2.0, 1.0, rng=seed)
    with pytest.warns(pb.SharedRandomnessWarning):
        pb.sample(pb.BetaBernoulli(), [1, 1, 1], 2.0, 1.0, rng=np.random.default_rng(seed))
    gen = np.random.default_rng()
    twin = copy.deepcopy(gen)
    pb.release_query([0.5], 2.0, 1.0, rng=gen)
    with pytest.warns(pb.SharedRandomnessWarning):
        pb.release_query([0.7], 2.0, 1.0, rng=twin)
    fresh = int(np.random.default_rng().integers(2**62))
    with pytest.raises(pb.InfeasiblePrivacyError):
        pb.sample(pb.BetaBernoulli(), [0, 1], 40.0, 1e-9, method="direct", rng=fresh)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pb.sample(pb.BetaBernoulli(), [0, 1], 2.0, 1.0, rng=fresh)  # its first draw
    assert _shared(got) == []


def test_idempotence_checks_still_pass_with_the_warning_shown():
    """check_estimator's idempotence checks refit one seed on the same data: they warn
    (the noise is the same, and so is the release) and pass."""
    with pytest.warns(pb.SharedRandomnessWarning):
        estimator_checks.check_fit_idempotent("PrivateLogisticRegression", clone(BINARY))


def test_masked_and_non_finite_inputs_are_refused_as_data_errors():
    """scikit-learn's input check drops a NumPy mask (n would count the masked rows) and
    refuses NaN with its own ValueError: the estimator refuses both as sample() does."""
    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(40, 2)), 0.9)
    y = (X[:, 0] > 0).astype(float)
    est = pb.PrivateLogisticRegression(eps=1.0, beta=0.1, backend="langevin", random_state=1)
    Xm = np.ma.masked_array(X, mask=np.zeros_like(X, dtype=bool))
    Xm.mask[3, 1] = True
    with pytest.raises(pb.DataError, match=r"X\[3, 1\] = nan"):
        est.fit(Xm, y)
    ym = np.ma.masked_array(y, mask=np.arange(40) == 5)
    with pytest.raises(pb.DataError):
        est.fit(X, ym)
    Xn = X.copy()
    Xn[7, 0] = np.inf
    with pytest.raises(pb.DataError, match=r"X\[7, 0\] = inf"):
        est.fit(Xn, y)


_PARALLEL_SCRIPT = r"""
import os, sys, tempfile, warnings
import numpy as np
import privbayes as pb
from privbayes.accounting import default_accountant
from sklearn.model_selection import KFold, cross_validate

rng = np.random.default_rng(0)
X = pb.preprocessing.clip_rows(rng.normal(size=(120, 3)), 0.8)
y = (X[:, 0] > 0).astype(int)
path = os.path.join(tempfile.mkdtemp(), "cv.sqlite")
pb.Ledger(path).init_budget("d", eps=100.0, delta=1e-6)

def cv(seed):
    est = pb.PrivateLogisticRegression(eps=1.0, beta=1e-2, fit_intercept=True,
                                       random_state=seed, ledger=path, dataset="d")
    cross_validate(est, X, y, cv=KFold(2), n_jobs=2, error_score="raise")

for phase, seed in (("seeded", 3), ("fresh", None)):
    print(f"=== {phase}", file=sys.stderr, flush=True)
    cv(seed)
print("=== end", file=sys.stderr, flush=True)
print("CHARGES:", len(pb.Ledger(path).status("d")[0]["charges"]))
print("PARENT EPS:", default_accountant().get_epsilon(1e-6))
warnings.simplefilter("error", pb.SharedRandomnessWarning)  # scikit-learn passes it on
try:
    cv(3)
except pb.SharedRandomnessWarning as exc:
    print("RAISED:", str(exc)[:60])
"""


def test_parallel_fits_with_a_fixed_seed_warn_on_the_console(tmp_path):
    """cross_validate(n_jobs=2) with an int random_state: each loky worker fits one fold,
    so no worker's record of seeds sees a repeat, yet both folds replay one noise stream.
    Every seeded release in a child process warns; what reaches the user is measured in a
    fresh interpreter: the warning on the console (the workers' stderr), an exception in
    the parent under an "error" filter; the ledger sees every fit, the parent's
    default_accountant none (README, "Repeated fits")."""
    import subprocess
    import sys

    script = tmp_path / "cv.py"
    script.write_text(_PARALLEL_SCRIPT)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    seeded = run.stderr.split("=== seeded")[1].split("=== fresh")[0]
    fresh = run.stderr.split("=== fresh")[1].split("=== end")[0]
    assert seeded.count("SharedRandomnessWarning") == 2, run.stderr  # one per fit
    assert "child process" in seeded and "share their noise" in seeded
    assert "SharedRandomnessWarning" not in fresh  # random_state=None: independent noise
    assert "CHARGES: 4" in run.stdout and "PARENT EPS: 0.0" in run.stdout
    assert "RAISED: this release draws its noise from" in run.stdout  # (workers reused)


def test_a_seeded_release_in_a_child_process_warns_and_one_in_the_parent_does_not():
    """The rule itself, for every release path: a child process's first seeded release
    warns (its record is its own), the parent's first one does not."""
    import multiprocessing

    seed = int(np.random.default_rng().integers(2**32))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pb.release_query([0.5], 2.0, 1.0, rng=seed)
    assert _shared(got) == []
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        messages = pool.apply(_child_release, (seed,))
    assert len(messages) == 2 and all("child process" in m for m in messages)


def _child_release(seed: int) -> list[str]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pb.release_query([0.5], 2.0, 1.0, rng=seed)
        X, y = _toy()
        PrivateLogisticRegression(eps=1.0, random_state=np.random.RandomState(seed)).fit(X, y)
    return [str(w.message) for w in _shared(got)]
