"""Bayesian linear regression on a public ball, released by posterior sampling
(docs/linear_regression.md).

y = w.x + N(0, sigma^2) with a public noise_sd sigma; prior N(0, (n beta)^-1 I) truncated to
the ball ||w|| <= R; records ||x|| <= c, |y| <= y_bound (refused otherwise). On the ball the
replace-one gradient difference of the per-record loss (y - w.x)^2 / (2 sigma^2) is at most
G = c (c R + 2 y_bound) / sigma^2 and the tempered posterior is (n beta / m)-strongly
log-concave, so (docs/linear_regression.md §3; the argument of docs/glm.md)

    direct        eps(lam) = lam G^2 / (2 n beta)
    diffused      eps(lam) = lam G^2 r^2 / (2 n beta)      (likelihood ** r)
    concentrated  eps(lam) = lam G^2 m / (2 n beta)        (prior precision n beta / m)
    ops           pure eps0 = 2 t (y_bound + c R)^2 / (2 sigma^2)   (likelihood ** t)

and, for the exact back-end, the minimum of the first three with the pure-DP curve of
eps0 = 2 r Delta (the same truncated posterior is also pure DP: §3c).

:class:`BallGLM` holds what every GLM on a public ball shares (the radius, the response
check, the family's constants in the certificates, the projected Langevin back-end); a
family needs only its GLMFamily (privbayes.glm) and a small subclass: linear regression
here, Poisson regression in privbayes.models.poisson.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .. import mechanisms
from ..calibration import Calibration
from ..certified import pure_dp_rdp_upper, round_up
from ..errors import InfeasiblePrivacyError
from ..glm.linear import LinearGaussian
from .logistic import (
    BayesianLogisticRegression,
    _leave_room_for_allowance,
    _with_rounding_allowance,
)

__all__ = [
    "DEFAULT_MARGIN",
    "BallGLM",
    "BayesianLinearRegression",
    "default_noise_prior",
    "default_radius",
]

DEFAULT_MARGIN = 10.0  # default radius: the mean bound plus (sqrt(d) + 10) prior sds
LINEAR_METHODS = ("direct", "diffused", "concentrated", "ops")


def default_radius(n: int, d: int, beta: float, c: float, y_bound: float, noise_sd: float) -> float:
    """The public default ball radius for linear regression (docs/linear_regression.md §5):

        R = (M + (sqrt(d) + 10) / sqrt(n beta)) (1 + 1e-6),
        M = min(c y_bound / (sigma^2 beta), y_bound / (2 sigma sqrt(beta))),

    M bounds the norm of the untruncated tempered posterior's mean for every data set and
    every r, m <= 1, and 1 / sqrt(n beta) its spread, so the ball holds all but e^-50 of
    its mass: truncation changes the posterior by a negligible, public amount and the exact
    back-end keeps nearly every proposal. Public inputs only (n, d, beta, c, y_bound,
    sigma), never the data. ``c``: the certified row bound."""
    sigma = noise_sd
    mean = min(c * y_bound / (sigma * sigma * beta), y_bound / (2.0 * sigma * math.sqrt(beta)))
    return (mean + (math.sqrt(d) + DEFAULT_MARGIN) / math.sqrt(n * beta)) * (1.0 + 1e-6)


def default_noise_prior(y_bound: float) -> tuple[float, float]:
    """The public default inverse-gamma prior of sigma^2 for noise_sd=None
    (docs/linear_regression.md §N6): (a0, b0) = (2, y_bound^2 / 16), prior mean of sigma^2
    y_bound^2 / 16 (sigma around y_bound / 4, inside the response bound), infinite variance."""
    return 2.0, float(y_bound) ** 2 / 16.0


class BallGLM(BayesianLogisticRegression):
    """A Gaussian-prior GLM whose parameter lives on a public ball (a base class).

    Subclasses set ``family`` (a GLMFamily with ``radius``, ``bad_labels`` and its
    constants), ``methods``, ``backends`` and the constructor. The certificates read
    G^2 = family.gradient_sensitivity_sq(c) and the curvature bound from the family; the
    Langevin back-end projects onto the ball after every step (docs/linear_regression.md §6).
    """

    backends: tuple[str, ...] = ("auto", "langevin")
    family = None

    def _init_ball(self, family, backend: str) -> None:
        if not isinstance(backend, str) or backend not in self.backends:
            raise ValueError(f"backend must be one of {self.backends}; got {backend!r}")
        self.family = family

    # -- the radius -------------------------------------------------------------------------
    def _default_radius(self):
        return None  # resolved per release from the public n and d (resolve_beta)

    def _check_radius(self, method: str) -> None:
        """The ball applies to every method: nothing to refuse."""

    def _require_radius(self) -> None:
        if self.radius is None:
            raise ValueError(
                "the ball's default radius is resolved from the public n and d "
                "(docs/linear_regression.md §5): use model.resolve_beta(n, d), pass d to "
                "privbayes.calibrate (privbayes.sample resolves it from X), or pass radius"
            )

    needs_d_message = (
        "the ball's default radius is resolved from the public n and d "
        "(docs/linear_regression.md §5): pass d, the number of weights with the intercept's "
        "column counted (sample() takes it from X's shape), or pass radius to the model"
    )

    @property
    def beta_is_auto(self) -> bool:
        """True while the default radius is unresolved: calibrate() then needs d."""
        return self.radius is None

    def _require_beta(self) -> None:
        self._require_radius()

    def _labels(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=float)

    # -- certificates -----------------------------------------------------------------------
    def rdp(self, n, orders, r=1.0, m=1.0, method="diffused", sampler=None):
        """Certified RDP curve (docs/linear_regression.md §3), shaped like ``orders``."""
        mechanisms.check_method(method, self.methods)
        return super().rdp(n, orders, r, m, method, sampler)

    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration:
        mechanisms.check_method(method, self.methods)
        return super()._calibrate(n, lam, eps, method)

    def _worst_pair(self, n: int, cal: Calibration, *, d: int = 1):
        """((X, y), (X, y')): n - 1 records x = 0, y = 0 and one x = c e_1 with y = -y_b
        against y = +y_b (a change of the gradient by 2 y_b c along e_1)."""
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be an integer >= 1; got {d!r}")
        x = np.zeros((n, int(d)))
        x[0, 0] = self.feature_bound
        y = np.zeros(n)
        y1 = y.copy()
        y[0], y1[0] = self._low_response(), self._high_response()
        return (x, y), (x.copy(), y1)

    def _low_response(self) -> float:
        return 0.0

    def _high_response(self) -> float:
        return 0.0

    # -- back-ends --------------------------------------------------------------------------
    def _resolve(self, n: int, d: int, lam: float, eps: float, method: str, size=None):
        """``auto``: the subclass's exact back-end when its public plan fits, else Langevin.
        Public inputs only."""
        self._require_radius()
        if self.backend != "auto":
            return self
        return self.with_backend("langevin")

    def _check_release(self, n: int, d: int, cal: Calibration, size=None) -> float:
        self._require_radius()
        if self.backend == "auto":
            raise ValueError("resolve backend='auto' first (model._resolve)")
        return 0.0

    def _calibrate_release(self, n, d, lam, eps, method, size=None) -> Calibration:
        self._require_radius()
        return self._calibrate(n, lam, eps, method)

    def _draw(self, xy, cal, rng, size=None, *, progressbar=False, on_bad_diagnostics="raise"):
        self._require_radius()
        if self.backend != "langevin":
            raise ValueError(f"backend {self.backend!r} cannot draw here (resolve 'auto' first)")
        from ..sampling.langevin import release_draw

        value, diagnostics = release_draw(self, xy, cal, rng, size=size)
        return value, None, diagnostics


class BayesianLinearRegression(BallGLM):
    """Bayesian linear regression with known noise, released by posterior sampling.

    Parameters
    ----------
    beta : float > 0, prior precision per record: w ~ N(0, (n beta)^-1 I) truncated to the
        ball ||w|| <= R. Public.
    c : float > 0, the public bound on feature rows, ||x||_2 <= c (with an intercept, on
        the row [x, s]).
    y_bound : float > 0, the public bound on responses, |y| <= y_bound.
    noise_sd : float > 0, the public noise standard deviation sigma of y = w.x + N(0, sigma^2);
        or None: sigma unknown, with the Normal-Inverse-Gamma prior sigma^2 ~ IG(a0, b0),
        w | sigma^2 ~ N(0, sigma^2 (n beta)^-1 I) (docs/linear_regression.md §N6). Then only
        the noise-aware route runs (``privbayes.posterior`` or ``sample(...,
        method="noise-aware")``); every posterior-sampling method raises ValueError before
        the data are read or anything is charged (their certificates need a known sigma).
    noise_prior : (a0, b0), with noise_sd=None only: the public inverse-gamma prior of
        sigma^2 (density proportional to (sigma^2)^-(a0+1) exp(-b0 / sigma^2), sigma in y's
        units). Default (None): :func:`default_noise_prior`, (2, y_bound^2 / 16): prior mean
        of sigma^2 y_bound^2 / 16, infinite prior variance.
    radius : float > 0 or None, the ball's radius R (public). None: the default of
        :func:`default_radius`, resolved per release from the public n and d; it holds all
        but a negligible, public share of the tempered posterior for every data set. A
        smaller R gives a smaller certificate (G = c (c R + 2 y_bound) / sigma^2) but
        truncates the posterior; the exact back-end then refuses (from public inputs) and
        Langevin, which projects onto the ball, runs.
    backend : "auto" (default: "exact" when its public plan fits, else "langevin"),
        "exact" (exact Gaussian draws truncated to the ball by rejection with a public
        budget: guarantee "exact"; docs/linear_regression.md §4) or "langevin" (projected
        noisy gradient descent: guarantee "algorithm"; §6; no method="ops").
    fit_intercept, intercept_scaling : as in :class:`privbayes.BayesianLogisticRegression`
        (the released vector ends with the intercept b = s w_{d+1}).
    delta_f, max_proposals : exact only: failure probability (default 1e-12; with the ball
        test's shell it is added to delta) and the cap on proposals.
    step_scale, max_steps : langevin only (docs/langevin.md §5).
    schedule : langevin only: "utility" (default; projected noisy gradient descent from 0
        without the prior's pull, stopped at K = ceil(1 / (2 eta n beta / m)): not a
        posterior draw) or "stationary" (the truncated posterior's chain run until it
        forgets its start), docs/langevin.md §6.

    Data for :func:`privbayes.sample`: ``(X, y)``, X (n, d) with rows of norm <=
    ``feature_bound``, y (n,) with |y| <= y_bound. NaN/inf, rows over the bound and
    responses outside [-y_bound, y_bound] raise :class:`privbayes.DataError` before any
    charge (clip with :mod:`privbayes.preprocessing` first if you must). The release is a
    weight vector (d,), or (d + 1,) ending with the intercept.

    Raises ValueError for a non-positive or non-finite beta, c, y_bound, noise_sd or radius,
    beta="auto" (not defined for this model), an unknown back-end, or an option that does not
    apply to the back-end; TypeError for an unknown keyword.
    """

    methods = LINEAR_METHODS
    backends = ("auto", "exact", "langevin")

    def __init__(
        self,
        beta: float = 0.01,
        c: float = 1.0,
        y_bound: float = 1.0,
        noise_sd: float | None = 1.0,
        radius: float | None = None,
        *,
        noise_prior: tuple[float, float] | None = None,
        fit_intercept: bool = False,
        intercept_scaling: float | None = None,
        backend: str = "auto",
        delta_f: float | None = None,
        max_proposals: int | None = None,
        step_scale: float | None = None,
        max_steps: int | None = None,
        schedule: str | None = None,
    ) -> None:
        if isinstance(beta, str):
            raise ValueError(
                "beta must be a number > 0 (beta='auto' is defined for logistic regression only)"
            )
        if noise_sd is None:  # unknown variance: the noise-aware route only (§N6)
            from ..glm.linear import check_bounded_family
            from ..posterior.linear import check_noise_prior

            y_bound = check_bounded_family(y_bound, "y_bound")
            if radius is not None:
                check_bounded_family(radius, "radius")
            prior = default_noise_prior(y_bound) if noise_prior is None else noise_prior
            self.noise_prior = check_noise_prior(prior)
            self._init_ball(None, backend)
            self.y_bound, self.noise_sd = y_bound, None
        else:
            if noise_prior is not None:
                raise ValueError(
                    "noise_prior applies with noise_sd=None only (an unknown noise variance); "
                    f"got noise_sd={noise_sd!r}"
                )
            family = LinearGaussian(y_bound, noise_sd, radius)
            self._init_ball(family, backend)
            self.y_bound, self.noise_sd = family.y_bound, family.noise_sd
            self.noise_prior = None
        super().__init__(
            beta, c, radius, backend=backend, fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling, delta_f=delta_f, max_proposals=max_proposals,
            step_scale=step_scale, max_steps=max_steps,
            schedule=schedule,
        )  # fmt: skip

    def __repr__(self) -> str:
        extra = self._intercept_repr()
        if self.noise_sd is None:
            extra = f", noise_prior={self.noise_prior!r}" + extra
        return (
            f"BayesianLinearRegression(beta={self.beta!r}, c={self.c!r}, "
            f"y_bound={self.y_bound!r}, noise_sd={self.noise_sd!r}, radius={self.radius!r}, "
            f"backend={self.backend!r}{extra}{self._options_repr()})"
        )

    def _rebuild(self, backend: str, beta, radius=None):
        from .logistic import OPTION_BACKENDS

        keep = {k: v for k, v in self._options.items() if backend in OPTION_BACKENDS[k]}
        return type(self)(
            beta=beta, c=self.c, y_bound=self.y_bound, noise_sd=self.noise_sd,
            noise_prior=self.noise_prior,
            radius=self.radius if radius is None else radius, backend=backend,
            fit_intercept=self.fit_intercept, intercept_scaling=self.intercept_scaling, **keep,
        )  # fmt: skip

    def noise_aware_spec(self):
        """The public inputs of the noise-aware route (``privbayes.posterior(model, (X, y),
        ...)``; privbayes.posterior.linear, docs/linear_regression.md §9): beta, the feature
        bound ``feature_bound`` (c, or sqrt(c^2 - s^2) with an intercept, so the same rows
        are accepted by both routes), y_bound, noise_sd and fit_intercept. That route puts
        the prior N(0, (n beta)^-1) on the intercept itself (the posterior-sampling route: on
        w_{d+1} = b / s); the radius does not enter it (no ball: its certificate is the
        statistic's sensitivity)."""
        from ..posterior.linear import LinearNoiseAwareSpec

        return LinearNoiseAwareSpec(
            self.beta, self.feature_bound, self.y_bound, self.noise_sd, self.fit_intercept,
            noise_prior=self.noise_prior,
        )  # fmt: skip

    # -- noise_sd=None: the posterior-sampling route is refused, from public inputs --------
    def _require_noise_sd(self) -> None:
        if self.noise_sd is None:
            raise ValueError(
                "BayesianLinearRegression(noise_sd=None) (an unknown noise variance) has the "
                "noise-aware route only: use privbayes.posterior(model, (X, y), ...) or "
                "sample(..., method='noise-aware'); the posterior-sampling certificates "
                "(docs/linear_regression.md §3) need a public noise_sd"
            )

    def _statistics(self, data):
        self._require_noise_sd()  # before the data are read
        return super()._statistics(data)

    def resolve_beta(self, n: int, d: int):
        """The model with the default radius resolved for n public records of d weights
        (the intercept's column counted); itself when the radius is set."""
        self._require_noise_sd()
        if self.radius is not None:
            return self
        from ..validation import check_n

        if check_n(n) < 1:
            raise ValueError("n must be >= 1 to resolve the default radius")
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be an integer >= 1 (the number of weights); got {d!r}")
        radius = default_radius(n, int(d), self.beta, self.c_bound, self.y_bound, self.noise_sd)
        return self._rebuild(self.backend, self.beta, radius)

    def _low_response(self) -> float:
        return -self.y_bound

    def _high_response(self) -> float:
        return self.y_bound

    # -- certificates -----------------------------------------------------------------------
    def _ops_eps0(self, t: float) -> float:
        """eps0 = 2 t Delta, Delta = (y_bound + c R_cert)^2 / (2 sigma^2): the range of one
        record's loss over the ball (docs/linear_regression.md §3c); exact, rounded up."""
        self._require_radius()
        return round_up(2 * Fraction(t) * self.family.loss_range(self._c_cert()))

    def rdp(self, n, orders, r=1.0, m=1.0, method="diffused", sampler=None):
        """Certified RDP curve; backend="exact": the minimum of the zCDP-type curve and the
        pure-DP curve of eps0 = 2 r Delta (both proven for the truncated posterior, §3c),
        plus the rounding allowance of ``sampler``."""
        self._require_noise_sd()
        curve = super().rdp(n, orders, r, m, method, sampler)
        if self.backend == "exact" and method != "ops" and check_n_positive(n):
            lam = np.asarray(orders, dtype=float)
            pure = np.asarray(pure_dp_rdp_upper(lam, self._ops_eps0(r)), dtype=float)
            pure = _with_rounding_allowance(pure, lam, sampler)
            curve = np.minimum(curve, pure)
        return curve

    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration:
        self._require_noise_sd()
        mechanisms.check_method(method, self.methods)
        if self.backend == "exact" and n > 0 and eps > 0 and method in ("direct", "diffused"):
            # the pure-DP side of the minimum may allow a larger r (or make direct feasible)
            try:
                cal = super()._calibrate(n, lam, eps, method)
            except InfeasiblePrivacyError:
                cal = None
            t = self._calibrate_ops(n, lam, eps).r
            if method == "direct":
                if cal is not None:
                    return cal
                if t >= 1.0:
                    got = float(self.rdp(n, lam, 1.0, 1.0, "direct"))
                    return Calibration("direct", 1.0, 1.0, lam, got, eps, n, None, 1, self)
                got = float(self.rdp(n, lam, 1.0, 1.0, "direct"))
                raise InfeasiblePrivacyError(
                    f"direct sampling certifies eps={got:.6g} at lam={float(lam)!r} for n={n}; "
                    f"ask for eps >= {got:.6g} or use method='diffused' or 'concentrated'",
                    reachable={"min_eps": got, "method": "diffused"},
                )
            if cal is None or t > cal.r:
                got = float(self.rdp(n, lam, t, 1.0, "diffused"))
                if got <= eps:
                    return Calibration("diffused", t, 1.0, lam, got, eps, n, None, 1, self)
            if cal is None:
                raise InfeasiblePrivacyError(f"no knob certifies eps={eps!r}")
            return cal
        return super()._calibrate(n, lam, eps, method)

    # -- the exact back-end -----------------------------------------------------------------
    def _plan(self, n: int, d: int, cal: Calibration, size=None):
        from ..sampling.exact_gaussian import gaussian_plan

        return gaussian_plan(
            n, d, self.beta, self.c_bound, cal.r, cal.m, self.family, size=size or 1,
            delta_f=self.delta_f, max_proposals=self.max_proposals,
        )  # fmt: skip

    def _calibrate_release(self, n, d, lam, eps, method, size=None) -> Calibration:
        """As sample() calibrates: for the exact back-end the knob leaves room for the
        plan's rounding allowance (docs/linear_regression.md §5), as docs/exact.md §7 does."""
        self._require_radius()
        if self.backend != "exact" or n == 0:
            return self._calibrate(n, lam, eps, method)
        return _leave_room_for_allowance(
            self, n, lam, eps, method, lambda cal: self._plan(n, d, cal, size),
            f"the exact back-end's rounding allowance leaves no room at eps={eps!r}; ask for "
            "a larger eps or use backend='langevin'",
        )  # fmt: skip

    def _check_release(self, n: int, d: int, cal: Calibration, size=None) -> float:
        """Public checks before any charge; returns the total variation added to delta
        (exact: delta_f plus the ball test's shell, docs/linear_regression.md §4)."""
        self._require_noise_sd()
        self._require_radius()
        if self.backend == "auto":
            raise ValueError("resolve backend='auto' first (model._resolve)")
        if self.backend != "exact" or n == 0:
            return 0.0
        return float(self._plan(n, d, cal, size).total_variation)

    def _resolve(self, n: int, d: int, lam: float, eps: float, method: str, size=None):
        """``auto``: exact when its public plan fits these public inputs (one pass over the
        data and a d x d factorisation: always cheaper than Langevin's K passes), else
        Langevin; OPS needs exact. Public inputs only."""
        self._require_noise_sd()
        self._require_radius()
        if self.backend != "auto":
            return self
        from ..sampling.exact import ExactInfeasibleError

        exact_model = self.with_backend("exact")
        try:
            cal = exact_model._calibrate_release(n, d, lam, eps, method, size)
            if n > 0:
                exact_model._check_release(n, d, cal, size)
            return exact_model
        except (ExactInfeasibleError, InfeasiblePrivacyError) as err:
            if method == "ops":
                raise InfeasiblePrivacyError(
                    f"backend='auto': OPS needs the exact back-end, which cannot run here ({err}; "
                    "Langevin has no OPS: for this radius use method='diffused' or "
                    "'concentrated')",
                    reachable={"method": "diffused"},
                ) from None
        return self.with_backend("langevin")

    def _draw(self, xy, cal, rng, size=None, *, progressbar=False, on_bad_diagnostics="raise"):
        self._require_noise_sd()
        self._require_radius()
        if self.backend == "exact":
            from ..sampling.exact_gaussian import release_draw

            value, diagnostics = release_draw(self, xy, cal, rng, size=size)
            return value, None, diagnostics
        return super()._draw(xy, cal, rng, size)


def check_n_positive(n) -> bool:
    try:
        return int(n) > 0
    except (TypeError, ValueError):
        return False
