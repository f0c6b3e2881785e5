"""scikit-learn style estimators whose fitted parameters are private releases."""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import re

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .capping import public_entry
from .charges import open_ledger
from .errors import DataError, PrivBayesError
from .models.logistic import GLM_METHODS, BayesianLogisticRegression
from .models.multinomial import MULTINOMIAL_METHODS, MultinomialLogisticRegression
from .preprocessing import clip_rows
from .release import sample
from .validation import check_bool


class PrivateLogisticRegression(ClassifierMixin, BaseEstimator):
    """Logistic regression (binary or K-class softmax) fitted by private posterior sampling.

    Two classes: :class:`privbayes.BayesianLogisticRegression` (one weight vector). K > 2
    classes: :class:`privbayes.MultinomialLogisticRegression` (one weight column per class,
    labels mapped to 0..K-1 in the order of ``classes_``; docs/multinomial.md). The class
    set is a public input, never read from y (that would make K, the model and its cost
    depend on the data): ``classes``, by default the binary labels {0, 1}.

    Parameters
    ----------
    lam : float > 1 (or inf for method="ops"), the Rényi order of the guarantee; None
        (default) means 2.0 for an RDP target, and must stay None with ``delta``.
    eps : float > 0, the *total* eps at ``lam`` for the whole fit (nats), or of (eps,
        delta)-DP with ``delta``. With ``n_samples`` = k, each release is calibrated to
        eps / k at the order and RDP composition adds them up; ``privacy_`` reports the sum.
    delta : None (an RDP target at ``lam``) or delta in [0, 1): an (eps, delta)-DP target
        for the whole fit, the order chosen from public inputs (docs/dp_target.md);
        ``privacy_["delta"]`` and ``privacy_["dp_eps"]`` report it.
    method : "diffused", "concentrated", "direct" or "ops" (One Posterior Sample: pure DP
        as RDP, for two classes and for K; docs/multinomial.md §3b).
    beta : prior precision per record, w ~ N(0, (n beta)^-1 I) (default 0.01), or "auto":
        the public rule beta = c^2 d / (n M^2) (:func:`privbayes.auto_beta`), resolved in
        ``fit`` from the public n and d (X's columns, plus one with ``fit_intercept``) and
        reported as ``beta_`` (docs/glm.md, "Choosing beta"). ``beta`` itself is kept.
    margin_scale : None (default: 10) or M > 0, the rule's public scale of the margins
        |w.x| (softmax: of each class's score); with beta="auto" only (ValueError
        otherwise). Choose it before seeing the data.
    c : public bound on the norm of a row *including* the intercept column (the
        :class:`privbayes.BayesianLogisticRegression` that each fit builds appends it).
    n_samples : posterior draws to average (each one a private release).
    fit_intercept : False (default, as :class:`privbayes.BayesianLogisticRegression`: c
        bounds the rows x themselves) or True: append a constant column
        ``intercept_scaling`` = s to X. The bound then applies to [x, s]: feature rows must
        have norm <= sqrt(c^2 - s^2). The intercept is the last weight times s, and its
        prior is N(0, (n beta)^-1 s^2). Without it every decision boundary passes through
        the origin: features that are not centred (e.g. all positive) need it (README:
        breast cancer / 4000 at eps = 1 reaches a train accuracy of 0.87 with it, 0.41
        without, against 0.63 for the majority class).
    intercept_scaling : s in (0, c), with ``fit_intercept=True`` only (ValueError
        otherwise, as the model and the command line); None (default) for c / 2.
    clip : False (default) refuses rows over the bound; True clips each row onto the ball
        (row-wise, so the guarantee holds for the clipped data). ``fit_intercept`` and
        ``clip`` must be True or False (TypeError for, e.g., "yes" or None).
    random_state : None (default: fresh OS entropy for every fit), an int, or a
        RandomState/Generator. An int makes a fit reproducible (the same data and settings
        give the same release), and so replays one noise stream in every fit that gets
        it: ``clone`` copies it into each cross-validation or grid-search fit. A fit whose
        noise repeats an earlier release of the process warns
        :class:`privbayes.SharedRandomnessWarning` (their composition is not covered), and
        so does every seeded fit in a child process (a joblib worker with ``n_jobs > 1``),
        whose record of seeds cannot see the other workers' fits; use None for repeated
        fits.
    backend : "auto" (default: the cheaper certified back-end, "exact" or "langevin", chosen
        from public inputs), "exact" (exact posterior draws; X in memory or on Dask, two
        classes or K), "langevin", or the approximate MCMC back-ends "imh" and "pymc"
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
    classes : None (default: the public binary set [0, 1]) or the public list of K >= 2
        distinct classes (numbers, or strings), e.g. ``[-1, 1]``, ``["ham", "spam"]`` or
        ``[0, 1, 2]``. ``classes_`` is this set, sorted, whatever y holds: K never depends
        on the data (reading the classes off y would: one changed label can turn two
        classes into three). Classes absent from y are fine; a label outside the set is
        refused with :class:`privbayes.DataError` naming its position (not its value),
        before anything is charged. Numbers match numbers (0 == 0.0 == False), strings
        match strings.
    radius : None (the model's default: c / beta for two classes, sqrt(2) c / beta for K)
        or OPS's truncation radius R on the weights (``method="ops"`` only; ValueError
        otherwise). A smaller R gives a smaller pure eps0 per unit of tempering.
    max_steps : None (the default cap, 10,000) or an integer in [1, 10**7]: the cap on
        Langevin's number of steps (``backend="langevin"`` or ``"auto"`` only; ValueError
        for the other back-ends). Raise it when a fit warns
        :class:`privbayes.StepCapWarning`.
    schedule : None (the default, "utility") or "stationary": Langevin's rule for its
        number of steps (``backend="langevin"`` or ``"auto"`` only; ValueError for the
        other back-ends). "utility" stops early where a stated excess-risk bound is
        smallest (a larger r at the same eps, and faster; not a posterior draw), "stationary"
        runs until the chain forgets its start (docs/langevin.md §6). ``privacy_``
        reports which ran.

    Every ``fit`` is a new release on the data it is given. ``cross_val_score(est, X, y,
    cv=k)`` fits k times on overlapping data, and a grid search over g settings fits
    g * k + 1 times: their costs compose (add eps at equal orders). With ``ledger`` each of
    those fits is charged and the ledger refuses the one that would overspend; without
    it only the process's ``default_accountant()`` records them, and it misses the fits
    made in joblib's worker processes (``n_jobs > 1``; README, "Repeated fits";
    docs/privacy.md §7).

    Attributes
    ----------
    coef_ : (1, n_features) for two classes, (K, n_features) for K > 2; intercept_ : (1,)
        or (K,); classes_ : (K,); n_features_in_ : int,
    privacy_ : dict with method, lam (the order used), eps (total certified at lam),
        delta and dp_eps (an (eps, delta) target's delta and the certified eps at it; None
        for an RDP target), per-release eps, n_samples, the back-end used, its guarantee
        ("exact", "algorithm", "approximate"), Langevin's schedule (None otherwise) and tv.
    samples_ : the released draws: (n_samples, n_features + fit_intercept) for two classes
        (weights, then the intercept itself when ``fit_intercept``), (n_samples,
        n_features + fit_intercept, K) for K > 2 (the last row the intercepts).
    calibration_ : the Calibration of each release (public: r, m, eps at lam).
    beta_ : float, the prior precision the fit used (``beta``, or the rule's value).

    Raises ValueError for bad arguments (fewer than two classes, an option that does not
    apply, ...) and TypeError for arguments of the wrong type, all before the data are
    read; ValueError / TypeError for inputs of the wrong shape or type (their messages
    name shapes, dtypes and types, never values); DataError (a ValueError, before
    anything is charged, the same in memory and on Dask) for NaN/inf, a row over the
    bound, a missing label (NaN, None, NA, null, masked: rule "finite") or one outside
    ``classes`` (rule 0), naming the position, never the value; with a ledger,
    BudgetExceededError, and LedgerError when ``dataset`` has no budget.
    """

    def __init__(
        self,
        lam: float | None = None,
        eps: float = 1.0,
        method: str = "diffused",
        delta: float | None = None,
        beta: float = 0.01,
        c: float = 1.0,
        n_samples: int = 1,
        fit_intercept: bool = False,
        intercept_scaling: float | None = None,
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
        max_steps: int | None = None,
        schedule: str | None = None,
        margin_scale: float | None = None,
    ) -> None:
        self.lam = lam
        self.eps = eps
        self.method = method
        self.delta = delta
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
        self.max_steps = max_steps
        self.schedule = schedule
        self.margin_scale = margin_scale

    def __sklearn_clone__(self):
        """clone(), with a :class:`privbayes.Ledger` instance shared rather than copied: it
        holds a database connection, and every clone must charge the same budget."""
        return _clone_sharing_ledger(self, super().__sklearn_clone__)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # K is the declared class set's size (public), never y's: two declared classes
        # (the default [0, 1]) refuse multiclass targets
        classes = BINARY_CLASSES if self.classes is None else self.classes
        tags.classifier_tags.multi_class = np.ndim(classes) != 1 or len(classes) > 2
        tags.classifier_tags.poor_score = True  # a private model may be a weak one
        tags.non_deterministic = self.random_state is None
        return tags

    def _dask_inputs(self, X, y, classes: np.ndarray):
        """(X, y) as Dask arrays (X float (n, d), y (n,)), with classes_ and
        n_features_in_ set from public inputs only."""
        xa, ya = _dask_xy(self, X, y)
        self.classes_ = classes
        return xa, ya

    @public_entry  # KnobCappedWarning once per fit, at the caller's line (privbayes.capping)
    def fit(self, X, y):
        """Release ``n_samples`` private posterior draws and average them. Returns self.

        X : (n, d) array-like of floats; y : (n,) labels, each one of ``classes`` (default
        0/1). X, y may also be Dask collections (docs/data.md §7): the passes over X then
        run on the workers, and the labels are mapped and checked inside the engine.
        Every argument is checked before the data are read; a label outside ``classes``
        (rule 0) or missing (rule "finite") is refused with a DataError naming its position,
        the same in memory and on Dask, before anything is charged.
        """
        from .data import is_dask

        # public inputs first: the class set (K), the method, the model
        classes = _public_classes(self.classes)
        n_classes = classes.size
        if (
            isinstance(self.n_samples, bool | np.bool_)
            or not isinstance(self.n_samples, numbers.Real)
            or not math.isfinite(self.n_samples)
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
        clip = check_bool(self.clip, "clip")  # a real bool, as sample() wants (not "yes")
        # The model appends the intercept column and checks the bound: one code path for
        # sample(), the command line and this estimator. It refuses a non-bool
        # fit_intercept and an intercept_scaling without fit_intercept=True.
        options = {
            "backend": self.backend,
            "tune": self.tune,
            "draws": self.draws,
            "chains": self.chains,
            "fit_intercept": self.fit_intercept,
            "intercept_scaling": self.intercept_scaling,
            "max_steps": self.max_steps,
            "schedule": self.schedule,
            "margin_scale": self.margin_scale,  # beta="auto" only (the model refuses it else)
        }
        if self.radius is not None:
            if self.method != "ops":
                raise ValueError(f"radius applies to method='ops' only; got method={self.method!r}")
            options["radius"] = self.radius
        if n_classes == 2:
            model = BayesianLogisticRegression(self.beta, self.c, **options)
        else:
            model = MultinomialLogisticRegression(self.beta, self.c, int(n_classes), **options)
        rng = self._rng()

        # Labels reach the engine as codes (_codes: the index in classes_, NaN for a missing
        # label, K for any other), in memory and on Dask alike: its rules refuse the last
        # two (with their row, before any charge) and the refusal is reworded in the
        # estimator's terms (_label_error), so both paths raise the same DataError.
        if is_dask(X) or is_dask(y):
            X, y = self._dask_inputs(X, y, classes)
            labels = y.map_blocks(_codes, self.classes_, dtype=float)
            if clip:
                X = X.map_blocks(clip_rows, model.feature_bound, dtype=float)
        else:
            # masked entries become NaN and NaN/inf reach privbayes' own check, so they are
            # refused as every entry point refuses them (DataError), never dropped
            from sklearn.utils import check_consistent_length, column_or_1d

            from .data import _refuse_lazy, _unmasked

            _refuse_lazy(X, "X")
            _refuse_lazy(y, "y")
            with _values_withheld(X=X):
                X = validate_data(self, _unmasked(X), dtype=np.float64, ensure_all_finite=False)
            with _values_withheld(y=y):
                y = column_or_1d(np.asarray(_unmasked(y)), warn=True)
                check_consistent_length(X, y)
            self.classes_ = classes
            labels = _codes(y, classes)  # 0/1 for two classes
            if clip:
                X = clip_rows(X, model.feature_bound)
        ledger, close = open_ledger(self.ledger)
        try:
            lam = 2.0 if self.lam is None and self.delta is None else self.lam
            release = sample(
                model,
                (X, labels),
                lam,
                self.eps,
                self.method,
                delta=self.delta,
                size=k,
                rng=rng,
                on_bad_diagnostics=self.on_bad_diagnostics,
                ledger=ledger,
                dataset=self.dataset,
                note=self.note if self.note is not None else f"{type(self).__name__}.fit",
            )
        except DataError as exc:
            if exc.column != "y":
                raise
            raise _label_error(exc, classes, y.dtype) from None
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
        self._release = release  # for the knob-cap warning's (eps, delta) judgement only
        self.beta_ = float(release.calibration.model.beta)  # beta="auto": resolved from n, d
        self.privacy_ = {
            "method": self.method,
            "lam": float(release.lam),
            "eps": float(release.eps),
            "delta": release.delta,
            "dp_eps": release.dp_eps,
            "per_release_eps": [release.calibration.eps] * k,
            "n_samples": k,
            "backend": release.calibration.model.backend,
            "guarantee": release.guarantee,
            # Langevin's step rule ("utility" or "stationary"; None for other back-ends)
            "schedule": (release.calibration.sampler or {}).get("schedule"),
            "tv": release.tv,
            "neighbours": "replace-one, n public",
        }
        return self

    def _rng(self):
        """None (fresh OS entropy: sample() draws it), or the Generator of this fit: the
        Generator given, or one seeded from the int / RandomState. sample() records its
        state and warns when an earlier release drew from the same one."""
        if self.random_state is None:
            return None
        if isinstance(self.random_state, np.random.Generator):
            return self.random_state  # its state advances with every fit
        try:
            seeded = check_random_state(self.random_state)
        except (TypeError, ValueError) as err:
            raise ValueError(
                "random_state must be None, an int in [0, 2**32 - 1], a RandomState or a "
                f"Generator; got {self.random_state!r} ({err})"
            ) from None
        return np.random.default_rng(seeded.randint(2**31 - 1))

    def decision_function(self, X) -> np.ndarray:
        """Scores: w.x + b, shape (n,), for two classes; x.W_k + b_k, shape (n, K), for
        K > 2 (scikit-learn's convention)."""
        check_is_fitted(self)
        with _values_withheld(X=X):
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

    def score(self, X, y, sample_weight=None) -> float:
        """Mean accuracy of ``predict(X)`` against y, X (n, d), y (n,) (scikit-learn's
        ``ClassifierMixin.score``). Its errors name shapes, dtypes and types, never values
        (scikit-learn's metrics would quote y's labels)."""
        with _values_withheld(X=X, y=y):
            return super().score(X, y, sample_weight=sample_weight)


def _clone_sharing_ledger(estimator, base_clone):
    """scikit-learn's clone of ``estimator`` (``base_clone``: its parent's
    ``__sklearn_clone__``), except that a :class:`privbayes.Ledger` instance is shared, not
    copied; a ledger path (or None) is an ordinary parameter."""
    ledger = estimator.ledger
    if ledger is None or isinstance(ledger, str | os.PathLike):
        return base_clone()
    twin = type(estimator)(**{**estimator.get_params(deep=False), "ledger": None})
    twin = twin.__sklearn_clone__()
    twin.ledger = ledger
    return twin


def _dask_xy(estimator, X, y):
    """(X, y) of a fit on Dask collections as Dask arrays (X float (n, d), y (n,) as given),
    setting the estimator's n_features_in_ (and feature_names_in_) from public shapes; both
    must be Dask (TypeError), X 2-D and y 1-D (ValueError). Nothing is computed."""
    from .data import is_dask
    from .glm.passes import dask_array

    if not (is_dask(X) and is_dask(y)):
        raise TypeError(
            "X and y must both be Dask collections (or both in memory); got "
            f"{type(X).__name__} and {type(y).__name__}"
        )
    if getattr(y, "ndim", 1) == 2 and hasattr(y, "columns") and len(y.columns) == 1:
        y = y[y.columns[0]]
    xa = dask_array(X, "X")
    ya = y.to_dask_array(lengths=True) if hasattr(y, "divisions") else y
    if xa.ndim != 2 or ya.ndim != 1:
        raise ValueError(f"X must be 2-D and y 1-D; got {xa.ndim}-D and {ya.ndim}-D")
    estimator.n_features_in_ = int(xa.shape[1])
    if hasattr(X, "columns"):
        estimator.feature_names_in_ = np.asarray(list(X.columns), dtype=object)
    return xa, ya


def _codes(labels, classes: np.ndarray) -> np.ndarray:
    """Labels (an array or a Dask block, any shape) -> float codes for the engine: each
    label's index in ``classes``; NaN for a missing label (NaN, None, pandas' NA or NaT, a
    masked entry), which the engine's "finite" rule refuses; K = len(classes) for any other
    label, which its label rule refuses ({0, 1} or {-1, +1} for two classes, 0..K-1 for K)."""
    from .data import _unmasked

    arr = np.asarray(_unmasked(labels))
    codes = _label_codes(arr, classes).astype(float)
    codes[codes < 0] = classes.size
    codes[_missing(arr)] = np.nan
    return codes


def _missing(arr: np.ndarray) -> np.ndarray:
    """Which labels are missing (bool, shape of ``arr``): NaN, None, pandas' NA / NaT."""
    if arr.dtype.kind in "fc":
        return np.isnan(arr)
    if arr.dtype.kind in "mM":
        return np.isnat(arr)
    if arr.dtype.kind != "O":
        return np.zeros(arr.shape, dtype=bool)
    return np.array([_is_missing(v) for v in arr.ravel().tolist()], dtype=bool).reshape(arr.shape)


def _is_missing(v) -> bool:
    if v is None or type(v).__name__ in ("NAType", "NaTType"):  # pandas' NA, NaT
        return True
    try:
        return bool(v != v)  # NaN (float, numpy, Decimal)
    except (TypeError, ValueError):  # comparisons that are not a bool
        return False


def _label_error(exc: DataError, classes: np.ndarray, dtype) -> DataError:
    """The engine's DataError about the coded labels (column y) in the estimator's terms:
    rule "finite" for a missing label (code NaN), rule 0 for one outside ``classes`` (code
    K), with the engine's count and first row; never a label (a record value). ``dtype``:
    y's (public), for scikit-learn's "Unknown label type" wording with float labels."""
    i, count, listed = exc.index, exc.count, classes.tolist()
    if exc.rule == "finite":
        return DataError(
            f"y[{i}] is missing (NaN, None, NA, a null or a masked entry); every label must "
            f"be one of classes={listed!r} ({count} row(s) of (X, y) with a missing or "
            "non-finite value)",
            column="y",
            rule="finite",
            count=count,
            index=i,
            value=float("nan"),
        )
    if exc.rule != 0 or i is None:  # not a coded label: the engine's own words
        return exc
    if classes.size == 2:  # scikit-learn's wording for a binary-only classifier
        declared = f"Only binary classification is supported with classes={listed!r}"
        if listed == list(BINARY_CLASSES):
            declared += " (the default)"
    else:
        declared = f"Labels must be one of classes={listed!r}"
    if np.dtype(dtype).kind in "fc":  # scikit-learn's wording for, e.g., continuous y
        declared = f"Unknown label type: {dtype} labels outside the classes. {declared}"
    return DataError(
        f"{declared}: y[{i}] is not one of them ({count} row(s) with other labels). "
        "Declare every class in advance with classes=[...] (public: never read off the "
        "data)",
        column="y",
        rule=0,
        count=count,
        index=i,
        value=None,
    )


# scikit-learn's and numpy's input checks quote record values in some messages ("Expected
# 2D array, got 1D array instead: array=[...]", "Complex data not supported\n[...]",
# "could not convert string to float: '...'", metrics' "Got y_true=[...]"). Their message
# passes only when it is one of these, built from shapes, dtypes, counts, types and
# column names alone; the value-quoting ones are reworded, any other is withheld.
_VALUE_FREE = re.compile(
    "|".join(
        [
            r"Input (X |y |y_true |y_pred )?contains (NaN|infinity)",
            r"Found array with \d+ (sample|feature)\(s\)",
            r"Found array with dim \d+",
            r"Found input variables with inconsistent numbers of samples",
            r"Expected 2D input, got input with shape",
            r"Expected a 2-dimensional container",
            r"X has \d+ features, but",
            r"X has feature names, but",
            r"X does not have valid feature names",
            r"The feature names should match those that were passed during fit",
            r"Feature names are only supported if all input features have string names",
            r"Sparse data was passed",
            r"Unable to convert array of bytes/strings",
            r"dtype='numeric' is not compatible",
            r"setting an array element with a sequence",
            r"(float|int|complex)\(\) argument must be a string or a (real )?number, not '\w+'$",
            r"y should be a 1d array, got an array of shape",
            r"Classification metrics can't handle a mix of \S+ and \S+ targets$",
        ]
    )
)
_QUOTES_A_VALUE = re.compile(  # a value-free head, then the value(s): the head is kept
    r"could not convert string to (float|complex)|invalid literal for int\(\) with base \d+"
    r"|Mix of label input types \(\w+ and \w+\)"
    r"|Labels in y_true and y_pred should be of the same type"
)


def _described(data) -> str:
    """``data``'s type, shape and dtype (public): never its values."""
    parts = [type(data).__name__]
    shape = getattr(data, "shape", None)
    if isinstance(shape, tuple):
        parts.append(f"shape {shape}")
    elif isinstance(data, list | tuple):
        parts.append(f"length {len(data)}")
    dtype = getattr(data, "dtype", None)
    if dtype is not None:
        parts.append(f"dtype {dtype}")
    return ", ".join(parts)


@contextlib.contextmanager
def _values_withheld(**inputs):
    """Re-raise a ValueError / TypeError of scikit-learn's or numpy's checks of ``inputs``
    (argument name -> value) with a message naming shapes, dtypes and types only, never
    record values; the same exception type (scikit-learn's checks expect it), the original
    not chained (a traceback would print it). privbayes' own errors pass unchanged."""
    try:
        yield
    except (ValueError, TypeError) as err:
        if isinstance(err, PrivBayesError) or getattr(err, "_values_withheld", False):
            raise
        text = str(err)
        described = "; ".join(f"{k}: {_described(v)}" for k, v in inputs.items())
        what = f"{described}; values are not shown"
        if text.startswith("Expected 2D array, got"):
            got = "scalar" if "got scalar" in text else "1D"
            text = (
                f"Expected 2D array, got {got} array instead ({what}). Reshape your data "
                "either using array.reshape(-1, 1) if your data has a single feature or "
                "array.reshape(1, -1) if it contains a single sample."
            )
        elif text.startswith("Complex data not supported"):
            text = f"Complex data not supported ({what})"
        elif _QUOTES_A_VALUE.match(text):
            text = f"{_QUOTES_A_VALUE.match(text).group(0)} ({what})"
        elif not _VALUE_FREE.match(text):
            text = (
                f"scikit-learn's input check refused {' and '.join(inputs)} "
                f"({type(err).__name__}); its message may quote record values, so it is "
                f"withheld ({described}). X must be a 2-D array (n, d) of numbers, y a 1-D "
                "array of labels."
            )
        kind = (
            type(err)
            if type(err) in (ValueError, TypeError)
            else (TypeError if isinstance(err, TypeError) else ValueError)
        )
        new = kind(text)
        new._values_withheld = True
        raise new from None


BINARY_CLASSES = (0, 1)  # the public class set when ``classes`` is not given
MAX_CLASSES = 10_000  # privbayes.models.multinomial.MAX_CLASSES


def _public_classes(classes) -> np.ndarray:
    """The public class set, sorted: ``classes`` (default [0, 1]) after checking it holds
    K >= 2 distinct numbers or strings. Public input only: raises ValueError / TypeError."""
    given = BINARY_CLASSES if classes is None else classes
    if isinstance(given, str | bytes) or np.ndim(given) != 1:
        raise TypeError(f"classes must be a flat list of labels, e.g. [0, 1]; got {classes!r}")
    items = list(given)
    strings = all(isinstance(c, str) for c in items)  # np.str_ is a str
    if not strings:
        if not all(isinstance(c, numbers.Real | np.bool_) for c in items):
            raise TypeError(f"classes must be all numbers or all strings; got {classes!r}")
        if not all(math.isfinite(float(c)) for c in items):
            raise ValueError(f"classes must be finite numbers; got {classes!r}")
    out = np.unique(np.asarray(items))
    if out.size != len(items):  # 0, 0.0 and False are one class
        raise ValueError(f"classes must be distinct; got {classes!r}")
    if not 2 <= out.size <= MAX_CLASSES:
        raise ValueError(
            f"classes must hold between 2 and {MAX_CLASSES} labels (logistic regression "
            f"needs two classes at least); got {classes!r}"
        )
    return out


def _label_codes(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Each label's index in ``classes`` (int64, shape of y); -1 for a label outside them.
    Numbers match numbers, strings strings (numpy would compare 0 and "0" as equal after
    converting both to text)."""
    index = {c: i for i, c in enumerate(classes.tolist())}

    def code(v) -> int:  # 0 == 0.0 == False hash alike; "0" != 0; NaN matches nothing
        try:
            return index.get(v, -1)
        except TypeError:  # an unhashable label
            return -1

    arr = np.asarray(y)
    try:
        values, inverse = np.unique(arr, return_inverse=True)
        codes = np.array([code(v) for v in values.tolist()], dtype=np.int64)[inverse.ravel()]
    except TypeError:  # object labels of mixed types: one by one
        codes = np.array([code(v) for v in arr.ravel().tolist()], dtype=np.int64)
    return codes.reshape(arr.shape)
