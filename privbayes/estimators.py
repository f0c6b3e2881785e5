"""scikit-learn style estimators whose fitted parameters are private releases."""

from __future__ import annotations

import os

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .models.logistic import GLM_METHODS, BayesianLogisticRegression
from .models.multinomial import MULTINOMIAL_METHODS, MultinomialLogisticRegression
from .preprocessing import clip_rows
from .release import _open_ledger, sample


class PrivateLogisticRegression(ClassifierMixin, BaseEstimator):
    """Logistic regression (binary or K-class softmax) fitted by private posterior sampling.

    Two classes: :class:`privbayes.BayesianLogisticRegression` (one weight vector). K > 2
    classes: :class:`privbayes.MultinomialLogisticRegression` (one weight column per class,
    labels mapped to 0..K-1 in the order of ``classes_``; docs/multinomial.md). The
    classes are read from y, as scikit-learn does: K is public only if the set of labels
    is (pass data whose label set is fixed in advance).

    Parameters
    ----------
    lam : float > 1 (or inf for method="ops"), the Rényi order of the guarantee.
    eps : float > 0, the *total* eps at ``lam`` for the whole fit (nats). With
        ``n_samples`` = k, each release is calibrated to eps / k and RDP composition adds
        them up; ``privacy_`` reports the sum.
    method : "diffused", "concentrated", "direct" or "ops" ("ops": two classes only).
    beta : prior precision per record, w ~ N(0, (n beta)^-1 I).
    c : public bound on the norm of a row *including* the intercept column (the
        :class:`privbayes.BayesianLogisticRegression` that each fit builds appends it).
    n_samples : posterior draws to average (each one a private release).
    fit_intercept : append a constant column ``intercept_scaling`` to X. The bound then
        applies to [x, s]: feature rows must have norm <= sqrt(c^2 - s^2). The intercept is
        the last weight times s, and its prior is N(0, (n beta)^-1 s^2).
    intercept_scaling : s, in (0, c).
    clip : False (default) refuses rows over the bound; True clips each row onto the ball
        (row-wise, so the guarantee holds for the clipped data).
    random_state : None (OS entropy), an int, or a RandomState/Generator.
    backend : "auto" (default: the cheaper certified back-end, "exact" or "langevin", chosen
        from public inputs), "exact" (exact posterior draws; X in memory for K > 2), "langevin",
        or the approximate MCMC back-ends "imh" and "pymc"
        (:class:`privbayes.BayesianLogisticRegression`; ``privacy_["guarantee"]`` says which
        guarantee the fit carries).
    tune, draws, chains : MCMC settings; None for the back-end's defaults
        (:class:`privbayes.BayesianLogisticRegression`).
    on_bad_diagnostics : "raise" (default) or "warn", as in :func:`privbayes.sample`.
    ledger : None, or the privacy ledger every fit is charged to *before* it samples: a
        path (str or os.PathLike) of a ledger made by ``Ledger(path)`` / ``privbayes budget
        init`` — a path survives ``clone``, pickling and joblib workers, and is opened per
        fit — or a :class:`privbayes.Ledger`, which clones share (it cannot be pickled, so
        with joblib's ``n_jobs > 1`` pass a path). BudgetExceededError means the fit
        released nothing.
    dataset : the budget's name in the ledger (required with ``ledger``).
    note : text stored with each charge (default "PrivateLogisticRegression.fit").
    classes : None (default: the labels found in y, scikit-learn's convention) or the public
        list of classes. Reading the classes from y makes the number of classes, and so the
        model, depend on the data: a class present in one data set and absent from its
        neighbour changes K. With ``classes`` given, K is public, classes absent from y are
        fine, and a label outside ``classes`` is refused (ValueError naming its index).
    radius : None (the model's default: c / beta for two classes, sqrt(2) c / beta for K)
        or OPS's truncation radius R on the weights (``method="ops"`` only; ValueError
        otherwise). A smaller R gives a smaller pure eps0 per unit of tempering.

    Every ``fit`` is a new release on the data it is given. ``cross_val_score(est, X, y,
    cv=k)`` fits k times on overlapping data, and a grid search over g settings fits
    g * k + 1 times: their costs compose (add eps at equal orders). With ``ledger`` each of
    those fits is charged and the ledger refuses the one that would overspend; without
    it nothing records them (README, "Repeated fits"; docs/privacy.md §7).

    Attributes
    ----------
    coef_ : (1, n_features) for two classes, (K, n_features) for K > 2; intercept_ : (1,)
        or (K,); classes_ : (K,); n_features_in_ : int,
    privacy_ : dict with method, lam, eps (total certified), per-release eps, n_samples,
        the back-end used, its guarantee ("exact", "algorithm", "approximate") and tv.
    samples_ : the released draws: (n_samples, n_features + fit_intercept) for two classes
        (weights, then the intercept itself when ``fit_intercept``), (n_samples,
        n_features + fit_intercept, K) for K > 2 (the last row the intercepts).
    calibration_ : the Calibration of each release (public: r, m, eps at lam).

    Raises ValueError for one class, NaN/inf, rows over the bound, method="ops"
    with K > 2;
    with a ledger, BudgetExceededError, and KeyError when ``dataset`` has no budget.
    """

    def __init__(
        self,
        lam: float = 2.0,
        eps: float = 1.0,
        method: str = "diffused",
        beta: float = 0.01,
        c: float = 1.0,
        n_samples: int = 1,
        fit_intercept: bool = True,
        intercept_scaling: float = 0.5,
        clip: bool = False,
        random_state=None,
        backend: str = "auto",
        tune: int | None = None,
        draws: int | None = None,
        chains: int | None = None,
        on_bad_diagnostics: str = "raise",
        ledger=None,
        dataset: str | None = None,
        note: str | None = None,
        classes=None,
        radius: float | None = None,
    ) -> None:
        self.lam = lam
        self.eps = eps
        self.method = method
        self.radius = radius
        self.beta = beta
        self.c = c
        self.n_samples = n_samples
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.clip = clip
        self.random_state = random_state
        self.backend = backend
        self.tune = tune
        self.draws = draws
        self.chains = chains
        self.on_bad_diagnostics = on_bad_diagnostics
        self.ledger = ledger
        self.dataset = dataset
        self.note = note
        self.classes = classes

    def __sklearn_clone__(self):
        """clone(), with a :class:`privbayes.Ledger` instance shared rather than copied: it
        holds a database connection, and every clone must charge the same budget."""
        if self.ledger is None or isinstance(self.ledger, str | os.PathLike):
            return super().__sklearn_clone__()
        twin = type(self)(**{**self.get_params(deep=False), "ledger": None})
        twin = twin.__sklearn_clone__()
        twin.ledger = self.ledger
        return twin

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.classifier_tags.poor_score = True  # a private model may be a weak one
        tags.non_deterministic = self.random_state is None
        return tags

    def _dask_inputs(self, X, y):
        """(X, y) as Dask arrays (X float (n, d), y (n,)), with classes_ and
        n_features_in_ set from public inputs only."""
        from .data import is_dask
        from .sampling.passes import _dask_array

        if not (is_dask(X) and is_dask(y)):
            raise TypeError(
                "X and y must both be Dask collections (or both in memory); got "
                f"{type(X).__name__} and {type(y).__name__}"
            )
        if self.classes is None:
            raise ValueError(
                "Dask inputs need the public class list: PrivateLogisticRegression(classes="
                "[...]) (reading the classes off the data would make K depend on them)"
            )
        classes = np.unique(np.asarray(self.classes))
        if classes.size != len(self.classes):
            raise ValueError(f"classes must be distinct; got {self.classes!r}")
        if getattr(y, "ndim", 1) == 2 and hasattr(y, "columns") and len(y.columns) == 1:
            y = y[y.columns[0]]
        xa = _dask_array(X, "X")
        ya = y.to_dask_array(lengths=True) if hasattr(y, "divisions") else y
        if xa.ndim != 2 or ya.ndim != 1:
            raise ValueError(f"X must be 2-D and y 1-D; got {xa.ndim}-D and {ya.ndim}-D")
        self.classes_ = classes
        self.n_features_in_ = int(xa.shape[1])
        if hasattr(X, "columns"):
            self.feature_names_in_ = np.asarray(list(X.columns), dtype=object)
        return xa, ya

    def fit(self, X, y):
        """Release ``n_samples`` private posterior draws and average them. Returns self.

        X, y may also be Dask collections (docs/data.md §7): the passes over X then run on
        the workers; ``classes`` must be given (the labels are mapped and checked inside
        the engine, and K must not be read off the data). Raises ValueError when a label
        is not one of ``classes`` (DataError for Dask inputs), before anything is charged.
        """
        from .data import is_dask

        dask_input = is_dask(X) or is_dask(y)
        if dask_input:
            X, y = self._dask_inputs(X, y)
        else:
            X, y = validate_data(self, X, y, dtype=np.float64)
            check_classification_targets(y)
            if self.classes is None:
                self.classes_ = np.unique(y)
            else:
                self.classes_ = _public_classes(self.classes, y)
        n_classes = self.classes_.size
        if n_classes < 2:
            raise ValueError(
                f"y has {n_classes} class; PrivateLogisticRegression needs at least two classes"
            )
        if (
            isinstance(self.n_samples, bool)
            or int(self.n_samples) != self.n_samples
            or (self.n_samples < 1)
        ):
            raise ValueError(f"n_samples must be an integer >= 1; got {self.n_samples!r}")
        if self.n_samples > BayesianLogisticRegression.max_size:
            raise ValueError(
                f"n_samples must be at most {BayesianLogisticRegression.max_size} (one MCMC "
                f"chain per draw); got {self.n_samples!r}"
            )
        methods = GLM_METHODS if n_classes == 2 else MULTINOMIAL_METHODS
        if self.method not in methods:
            more = "" if n_classes == 2 else f" with {n_classes} classes"
            raise ValueError(f"method must be one of {methods}{more}; got {self.method!r}")
        k = int(self.n_samples)
        # The model appends the intercept column and checks the bound: one code path for
        # sample(), the command line and this estimator.
        options = {
            "backend": self.backend,
            "tune": self.tune,
            "draws": self.draws,
            "chains": self.chains,
            "fit_intercept": bool(self.fit_intercept),
            "intercept_scaling": self.intercept_scaling if self.fit_intercept else None,
        }
        if self.radius is not None:
            if self.method != "ops":
                raise ValueError(f"radius applies to method='ops' only; got method={self.method!r}")
            options["radius"] = self.radius
        if n_classes == 2:
            model = BayesianLogisticRegression(self.beta, self.c, **options)
        else:
            model = MultinomialLogisticRegression(self.beta, self.c, int(n_classes), **options)
        if dask_input:
            # codes 0..K-1 in the engine; an undeclared label becomes NaN, which the
            # engine's validation refuses (with its row) before any charge
            labels = y.map_blocks(_codes, self.classes_, dtype=float)
            if self.clip:
                X = X.map_blocks(clip_rows, model.feature_bound, dtype=float)
        else:
            labels = np.searchsorted(self.classes_, y).astype(float)  # 0/1 for two classes
            if self.clip:
                X = clip_rows(X, model.feature_bound)
        if self.random_state is None or isinstance(self.random_state, np.random.Generator):
            rng = np.random.default_rng(self.random_state)  # OS entropy, or a child stream
        else:
            try:
                seeded = check_random_state(self.random_state)
            except (TypeError, ValueError) as err:
                raise ValueError(
                    "random_state must be None, an int in [0, 2**32 - 1], a RandomState or a "
                    f"Generator; got {self.random_state!r} ({err})"
                ) from None
            rng = np.random.default_rng(seeded.randint(2**31 - 1))
        ledger, close = _open_ledger(self.ledger)
        try:
            release = sample(
                model,
                (X, labels),
                self.lam,
                self.eps,
                self.method,
                size=k,
                rng=rng,
                on_bad_diagnostics=self.on_bad_diagnostics,
                ledger=ledger,
                dataset=self.dataset,
                note=self.note if self.note is not None else f"{type(self).__name__}.fit",
            )
        finally:
            if close:
                ledger.close()
        self.samples_ = np.array(release.value)
        w = self.samples_.mean(axis=0)
        d = X.shape[1]
        if n_classes == 2:
            self.coef_ = w[:d].reshape(1, d)
            self.intercept_ = np.array([w[d]]) if self.fit_intercept else np.zeros(1)
        else:  # w: (d + fit_intercept, K)
            self.coef_ = np.ascontiguousarray(w[:d].T)
            self.intercept_ = w[d].copy() if self.fit_intercept else np.zeros(n_classes)
        self.calibration_ = release.calibration
        self.privacy_ = {
            "method": self.method,
            "lam": float(self.lam),
            "eps": float(release.eps),
            "per_release_eps": [release.calibration.eps] * k,
            "n_samples": k,
            "backend": release.calibration.model.backend,
            "guarantee": release.guarantee,
            "tv": release.tv,
            "neighbours": "replace-one, n public",
        }
        return self

    def decision_function(self, X) -> np.ndarray:
        """Scores: w.x + b, shape (n,), for two classes; x.W_k + b_k, shape (n, K), for
        K > 2 (scikit-learn's convention)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        if self.coef_.shape[0] == 1:
            return X @ self.coef_[0] + self.intercept_[0]
        return X @ self.coef_.T + self.intercept_

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape (n, K), columns in the order of ``classes_``
        (softmax of the scores for K > 2)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = 1.0 / (1.0 + np.exp(-scores))
            return np.column_stack([1.0 - p, p])
        from scipy.special import softmax

        return softmax(scores, axis=1)

    def predict(self, X) -> np.ndarray:
        """Predicted labels, shape (n,)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]


def _codes(block: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Labels -> their index in ``classes`` (float); labels not among them -> NaN."""
    block = np.asarray(block)
    out = np.searchsorted(classes, block).astype(float)
    out[~np.isin(block, classes)] = np.nan
    return out


def _public_classes(classes, y: np.ndarray) -> np.ndarray:
    """The public ``classes`` (sorted, distinct), after checking every label of y is one."""
    out = np.unique(np.asarray(classes))
    if out.size != len(classes):
        raise ValueError(f"classes must be distinct; got {classes!r}")
    bad = ~np.isin(y, out)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        label = np.asarray(y)[i : i + 1].tolist()[0]  # a plain Python value for the message
        raise ValueError(f"y[{i}] = {label!r} is not one of classes={out.tolist()!r}")
    return out
