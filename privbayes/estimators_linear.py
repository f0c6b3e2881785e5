"""PrivateLinearRegression: a scikit-learn regressor whose coefficients are a private release.

Two routes (docs/linear_regression.md §10):

* ``"noise-aware"``: the sufficient statistics (X^T X, X^T y, y^T y) are released once with
  exact discrete Gaussian noise (§9, Theorem N2 for the sensitivity) and ``coef_`` is the
  mean of the posterior given the noisy statistics with the noise modelled — a
  post-processing of that one release (:func:`privbayes.posterior`).
* ``"sample"``: one certified posterior draw of the ball-truncated posterior
  (:func:`privbayes.sample` with :class:`privbayes.BayesianLinearRegression`, §1-§6), or
  the mean of ``n_samples`` draws at eps / k each.

``route="auto"`` is the noise-aware route unless an option only the sample route has is
set (``method``, ``n_samples`` > 1, ``backend``, ``radius``, ``max_steps``, lam = inf or
delta = 0): a rule on public inputs only, measured in §10 (the noise-aware mean had the
smaller test error in every setting measured, at equal eps).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .capping import public_entry
from .charges import open_ledger
from .estimators import _clone_sharing_ledger, _dask_xy, _values_withheld
from .models.linear import LINEAR_METHODS, BayesianLinearRegression
from .preprocessing import clip_rows
from .validation import check_bool, check_eps, check_lam

__all__ = ["ROUTES", "PrivateLinearRegression", "choose_route"]

ROUTES = ("auto", "noise-aware", "sample")
# the estimator's parameters that only the sample route uses, with their "unset" value
_SAMPLE_ONLY = {
    "method": None,
    "n_samples": 1,
    "backend": "auto",
    "radius": None,
    "max_steps": None,
}


def choose_route(route: str, lam, delta, **options) -> str:
    """The route a fit takes, from public inputs only (never the data).

    ``route`` : "auto", "noise-aware" or "sample". ``lam``, ``delta`` : the privacy target
    (lam = inf or delta = 0 ask for pure DP, which the discrete Gaussian cannot give).
    ``options`` : the estimator's sample-only parameters (``method``, ``n_samples``,
    ``backend``, ``radius``, ``max_steps``). "auto" is "noise-aware" (the better point
    estimate at equal eps: docs/linear_regression.md §10) unless a sample-only option is
    set or the target is pure DP; then "sample". Raises ValueError for an unknown route, or
    for route="noise-aware" with a sample-only option or a pure-DP target.
    """
    if not isinstance(route, str) or route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}; got {route!r}")
    given = [k for k, unset in _SAMPLE_ONLY.items() if k in options and options[k] != unset]
    pure = (lam is not None and lam == math.inf) or (delta is not None and delta == 0)
    if route == "noise-aware":
        if given:
            raise ValueError(
                f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to "
                "route='sample' only (the noise-aware route releases the sufficient "
                "statistics once, with discrete Gaussian noise)"
            )
        if pure:
            raise ValueError(
                "route='noise-aware' needs a finite order (the discrete Gaussian is not pure "
                "DP): use route='sample' with method='ops' for lam=inf or delta=0"
            )
        return route
    if route == "sample":
        return route
    return "sample" if (given or pure) else "noise-aware"


def _check_n_samples(k) -> int:
    if (
        isinstance(k, bool | np.bool_)
        or not isinstance(k, numbers.Real)
        or not math.isfinite(k)
        or int(k) != k
        or k < 1
    ):
        raise ValueError(f"n_samples must be an integer >= 1; got {k!r}")
    if k > BayesianLinearRegression.max_size:
        raise ValueError(
            f"n_samples must be at most {BayesianLinearRegression.max_size}; got {k!r}"
        )
    return int(k)


def _check_target(lam, eps, delta):
    """(lam, eps, delta) checked as the release will (public; before any data are read):
    lam None means 2.0 for an RDP target and must stay None with ``delta``."""
    from .dp_target import check_delta_target

    check_eps(eps)
    if delta is None:
        return 2.0 if lam is None else check_lam(lam), delta
    if lam is not None:
        raise ValueError("give lam (an RDP target) or delta (an (eps, delta) target), not both")
    return None, check_delta_target(delta)


class PrivateLinearRegression(RegressorMixin, BaseEstimator):
    """Linear regression whose fitted coefficients are a private release (scikit-learn's
    regressor conventions: ``fit``, ``predict``, ``score`` = R^2).

    Model (public): y = w.x + b + N(0, noise_sd^2), prior N(0, (n beta)^-1) on each
    coefficient, rows ||x|| <= ``c`` (with ``fit_intercept``: ||[x, s]|| <= c, so feature
    rows need ||x|| <= sqrt(c^2 - s^2), s = ``intercept_scaling``) and |y| <= ``y_bound``.
    The model: :class:`privbayes.BayesianLinearRegression` (docs/linear_regression.md).

    Parameters
    ----------
    lam : float > 1 (or inf, route "sample" with method="ops"), the Rényi order; None
        (default) means 2.0 for an RDP target, and must stay None with ``delta``.
    eps : float > 0, the total eps of the fit at ``lam`` (nats), or of (eps, delta)-DP.
    delta : None (an RDP target at ``lam``) or delta in [0, 1): an (eps, delta)-DP target
        for the whole fit (docs/dp_target.md).
    beta, c, y_bound, noise_sd : the model's public prior precision per record, row bound,
        response bound and noise sd (defaults 0.01, 1, 1, 1). Choose them before seeing the
        data. noise_sd=None: the noise sd is unknown, with the Normal-Inverse-Gamma prior
        (sigma^2 ~ IG(noise_prior), w | sigma^2 ~ N(0, sigma^2 (n beta)^-1);
        docs/linear_regression.md §N6): the noise-aware route only (ValueError, before the
        data are read, for route="sample", a pure-DP target or a sample-only option).
    noise_prior : (a0, b0) with noise_sd=None only; None (default): the model's public
        default (2, y_bound^2 / 16) (:func:`privbayes.models.linear.default_noise_prior`).
    fit_intercept : False (default) or True: append the constant column s; ``intercept_``
        is then fitted (else 0). intercept_scaling : s in (0, c) (default c / 2), with
        ``fit_intercept`` only. The two routes put the prior N(0, (n beta)^-1) on the
        intercept b itself (noise-aware) or on b / s (sample): the same rows are accepted
        by both.
    route : "auto" (default), "noise-aware" or "sample" (module docstring; the rule is
        :func:`choose_route`, public inputs only).
    method : None (default: "diffused") or "direct", "diffused", "concentrated", "ops":
        the sample route's mechanism.
    n_samples : the sample route: draws averaged, each at eps / k (default 1).
    backend : the sample route's back-end: "auto" (default), "exact" or "langevin".
    radius : None (the model's public default ball, from n and d) or R > 0: the sample
        route's ball ||w|| <= R.
    max_steps : None or the cap on Langevin's steps (backend "langevin").
    clip : False (default) refuses rows over the bound and responses outside
        [-y_bound, y_bound] (DataError, before any charge); True clips each row onto the
        ball and each response onto the interval (record-wise: the guarantee holds for the
        clipped data).
    random_state : None (fresh OS entropy), an int, a RandomState or a Generator, as in
        :class:`privbayes.PrivateLogisticRegression` (an int replays one noise stream in
        every fit: SharedRandomnessWarning).
    ledger, dataset, note : as in :class:`privbayes.PrivateLogisticRegression`: each fit is
        charged before anything is released; BudgetExceededError means nothing was.

    Attributes
    ----------
    coef_ : (n_features,); intercept_ : float; n_features_in_ : int.
    noise_sd_ : float, the noise sd used: ``noise_sd``, or with noise_sd=None the posterior
        mean of sigma (intervals by ``posterior_.noise_sd_interval(prob)``).
    route_ : the route taken. posterior_ : the :class:`privbayes.PrivatePosterior`
        (noise-aware route; intervals by ``posterior_.interval(prob)``: coefficients, then
        the intercept) or None. samples_ : the released draws (sample route: (n_samples,
        n_features + fit_intercept), the intercept last) or None.
    privacy_ : dict: route, method ("noise-aware" or the sample route's), backend (the
        release's mechanism: "discrete_gaussian", or the sampler's back-end), guarantee,
        lam, eps (total certified at lam), delta and dp_eps (an (eps, delta) target's; None
        for an RDP target), per_release_eps, n_samples, tv, neighbours.

    Raises ValueError / TypeError for bad parameters before any data are read; ValueError
    for inputs of the wrong shape (messages name shapes, never values); DataError (before
    any charge) for NaN/inf/missing values, a row over the bound or |y| > y_bound; with a
    ledger, BudgetExceededError and LedgerError; InfeasiblePrivacyError for a target no
    knob certifies.
    """

    def __init__(
        self,
        lam: float | None = None,
        eps: float = 1.0,
        delta: float | None = None,
        beta: float = 0.01,
        c: float = 1.0,
        y_bound: float = 1.0,
        noise_sd: float | None = 1.0,
        fit_intercept: bool = False,
        intercept_scaling: float | None = None,
        route: str = "auto",
        method: str | None = None,
        n_samples: int = 1,
        backend: str = "auto",
        radius: float | None = None,
        max_steps: int | None = None,
        clip: bool = False,
        random_state=None,
        ledger=None,
        dataset: str | None = None,
        note: str | None = None,
        noise_prior: tuple[float, float] | None = None,
    ) -> None:
        self.lam = lam
        self.eps = eps
        self.delta = delta
        self.beta = beta
        self.c = c
        self.y_bound = y_bound
        self.noise_sd = noise_sd
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.route = route
        self.method = method
        self.n_samples = n_samples
        self.backend = backend
        self.radius = radius
        self.max_steps = max_steps
        self.clip = clip
        self.random_state = random_state
        self.ledger = ledger
        self.dataset = dataset
        self.note = note
        self.noise_prior = noise_prior

    def __sklearn_clone__(self):
        """clone(), sharing a :class:`privbayes.Ledger` instance (as the logistic one)."""
        return _clone_sharing_ledger(self, super().__sklearn_clone__)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # a private model may be a weak one
        tags.non_deterministic = self.random_state is None
        return tags

    # -- public inputs --------------------------------------------------------------------
    def _public(self):
        """Every public check, before the data are read: (route, model, lam, delta, k,
        method)."""
        lam, delta = _check_target(self.lam, self.eps, self.delta)
        options = {k: getattr(self, k) for k in _SAMPLE_ONLY}
        route = choose_route(self.route, lam, delta, **options)
        k = _check_n_samples(self.n_samples)
        method = "diffused" if self.method is None else self.method
        if method not in LINEAR_METHODS:
            raise ValueError(f"method must be one of {LINEAR_METHODS} or None; got {method!r}")
        check_bool(self.clip, "clip")
        extra = {}
        if self.max_steps is not None:
            extra["max_steps"] = self.max_steps
        if self.noise_sd is None and route == "sample":
            raise ValueError(
                "noise_sd=None (an unknown noise variance, docs/linear_regression.md §N6) has "
                "the noise-aware route only; the sample route's certificates need a public "
                "noise_sd (route='sample', a pure-DP target and the sample-only options "
                "method, n_samples, backend, radius, max_steps do not apply)"
            )
        model = BayesianLinearRegression(
            self.beta, self.c, self.y_bound, self.noise_sd, self.radius,
            noise_prior=self.noise_prior, fit_intercept=self.fit_intercept,
            intercept_scaling=self.intercept_scaling, backend=self.backend, **extra,
        )  # fmt: skip
        return route, model, lam, delta, k, method

    def _inputs(self, X, y, model):
        """(X, y) checked as arrays (values withheld from messages), clipped with
        ``clip``; n_features_in_ (and feature_names_in_) set. Dask collections pass to the
        engine, which checks them there."""
        from .data import is_dask

        if is_dask(X) or is_dask(y):
            xa, ya = _dask_xy(self, X, y)
            ya = ya.astype(float)
            if self.clip:
                xa = xa.map_blocks(clip_rows, model.feature_bound, dtype=float)
                ya = ya.map_blocks(np.clip, -model.y_bound, model.y_bound, dtype=float)
            return xa, ya
        from sklearn.utils import check_consistent_length, column_or_1d

        from .data import _refuse_lazy, _unmasked

        _refuse_lazy(X, "X")
        _refuse_lazy(y, "y")
        with _values_withheld(X=X):
            X = validate_data(self, _unmasked(X), dtype=np.float64, ensure_all_finite=False)
        with _values_withheld(y=y):
            y = column_or_1d(np.asarray(_unmasked(y)), warn=True)
            check_consistent_length(X, y)
            y = np.asarray(y, dtype=np.float64)
        # NaN/inf are left to the engine, which refuses them (DataError naming the row)
        if self.clip and np.isfinite(X).all() and np.isfinite(y).all():
            X = clip_rows(X, model.feature_bound)
            y = np.clip(y, -model.y_bound, model.y_bound)
        return X, y

    @public_entry
    def fit(self, X, y):
        """One private release on (X, y); returns self.

        X : (n, d) array-like of floats (or a Dask array / DataFrame), y : (n,) floats.
        Every parameter is checked before the data are read; every record before anything
        is charged.
        """
        from .posterior import posterior
        from .release import sample

        route, model, lam, delta, k, method = self._public()
        rng = _fit_rng(self.random_state)
        X, y = self._inputs(X, y, model)
        note = self.note if self.note is not None else f"{type(self).__name__}.fit"
        ledger, close = open_ledger(self.ledger)
        try:
            charge = {"ledger": ledger, "dataset": self.dataset, "note": note}
            if route == "noise-aware":
                post = posterior(model, (X, y), lam, self.eps, delta=delta, rng=rng, **charge)
                w = np.asarray(post.mean(), dtype=float)
                if self.noise_sd is None:
                    self.noise_sd_ = float(post.law.noise_sd_mean())
                else:
                    self.noise_sd_ = float(model.noise_sd)
                self.posterior_, self.samples_ = post, None
                self.calibration_ = None
                info = {
                    "method": "noise-aware",
                    "backend": post.noise["mechanism"],
                    "guarantee": post.guarantee,
                    "lam": float(post.lam),
                    "eps": float(post.eps),
                    "delta": post.delta,
                    "dp_eps": post.dp_eps,
                    "per_release_eps": [float(post.eps)],
                    "n_samples": 1,
                    "tv": float(post.tv),
                }
            else:
                release = sample(
                    model, (X, y), lam, self.eps, method, delta=delta, size=k, rng=rng,
                    **charge,
                )  # fmt: skip
                self.samples_ = np.atleast_2d(np.array(release.value, dtype=float))
                w = self.samples_.mean(axis=0)
                self.noise_sd_ = float(model.noise_sd)
                self.posterior_ = None
                self.calibration_ = release.calibration
                info = {
                    "method": release.method,
                    "backend": release.calibration.model.backend,
                    "guarantee": release.guarantee,
                    "lam": float(release.lam),
                    "eps": float(release.eps),
                    "delta": release.delta,
                    "dp_eps": release.dp_eps,
                    "per_release_eps": [float(release.calibration.eps)] * k,
                    "n_samples": k,
                    "tv": float(release.tv),
                    "radius": float(release.calibration.model.radius),
                }
        finally:
            if close:
                ledger.close()
        d = self.n_features_in_
        self.coef_ = np.ascontiguousarray(w[:d])
        self.intercept_ = float(w[d]) if self.fit_intercept else 0.0
        self.route_ = route
        self.privacy_ = {"route": route, **info, "neighbours": "replace-one, n public"}
        return self

    def predict(self, X) -> np.ndarray:
        """X @ coef_ + intercept_, shape (n,)."""
        check_is_fitted(self)
        with _values_withheld(X=X):
            X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.coef_ + self.intercept_

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 of ``predict(X)`` against y (scikit-learn's ``RegressorMixin.score``); its
        errors name shapes, dtypes and types, never values."""
        with _values_withheld(X=X, y=y):
            return super().score(X, y, sample_weight=sample_weight)


def _fit_rng(random_state):
    """None (fresh OS entropy, drawn by the release), or the Generator of this fit (as
    :class:`privbayes.PrivateLogisticRegression`)."""
    if random_state is None:
        return None
    if isinstance(random_state, np.random.Generator):
        return random_state
    try:
        seeded = check_random_state(random_state)
    except (TypeError, ValueError) as err:
        raise ValueError(
            "random_state must be None, an int in [0, 2**32 - 1], a RandomState or a "
            f"Generator; got {random_state!r} ({err})"
        ) from None
    return np.random.default_rng(seeded.randint(2**31 - 1))
