"""Multinomial (softmax) logistic regression with a Gaussian prior (docs/multinomial.md).

W in R^(d x K), every entry a priori N(0, (n beta)^-1); loss
logsumexp(W^T x) - (W^T x)_y for labels y in {0, ..., K-1}; rows ||x||_2 <= c. A replaced
record moves the gradient of the log-density by at most G = 2 sqrt(2) c in Frobenius norm
(the supremum for d >= 2; docs/multinomial.md §2), which gives, by the argument of
docs/glm.md,

    direct        eps(lam) = 4 lam c^2 / (n beta)
    diffused      eps(lam) = 4 lam c^2 r^2 / (n beta)     (likelihood ** r)
    concentrated  eps(lam) = 4 lam c^2 m / (n beta)       (prior precision n beta / m)
    ops           pure eps0 = 2 t min(2a, a + log(K - 1)), a = sqrt(2) c R
                  (prior truncated to ||W||_F <= R, likelihood ** t; docs/multinomial.md §3b)

Back-ends: "exact" (rejection sampling under the envelope of docs/multinomial.md §6:
exact posterior draws), "langevin" (certified, guarantee "algorithm": docs/multinomial.md
§4), "imh" and "pymc" (approximate); "auto" picks the cheaper certified one from public
inputs, as for binary logistic regression; OPS needs "exact" (or the approximate ones).
"""

from __future__ import annotations

import inspect
import math
from fractions import Fraction

import numpy as np

from .. import mechanisms
from ..calibration import Calibration
from ..glm.family import MultinomialLogistic
from .logistic import BayesianLogisticRegression

MULTINOMIAL_METHODS = ("direct", "diffused", "concentrated", "ops")
MAX_CLASSES = 10_000


class MultinomialLogisticRegression(BayesianLogisticRegression):
    """Gaussian-prior softmax regression over K classes, released by posterior sampling.

    Parameters
    ----------
    beta : float > 0, prior precision per record: every entry of W ~ N(0, (n beta)^-1).
        Or "auto": beta = c^2 d / (n M^2) with d the rows of W (features, the intercept's
        column counted) and M = ``margin_scale`` (default 10) the public scale of each
        class's score x.W_k, resolved per release from the public n and d as for
        :class:`privbayes.BayesianLogisticRegression` (docs/glm.md, "Choosing beta").
    c : float > 0, the public bound on feature norms, ||x||_2 <= c (with an intercept, on
        the row [x, s]).
    n_classes : int K >= 2, public: labels are 0, ..., K-1.
    radius : float > 0 or None, OPS's truncation radius R on ||W||_F (default sqrt(2) c /
        beta: for every data set the mode of the tempered posterior lies inside,
        docs/multinomial.md §3b).
    backend : "auto" (default: "exact" or "langevin", the cheaper certified back-end for
        the public inputs n, d, beta, c, eps, lam, size), "exact" (exact posterior draws
        by rejection sampling, docs/multinomial.md §6; X in memory or on Dask),
        "langevin" (certified noisy gradient descent, docs/multinomial.md §4), "imh" or
        "pymc" (approximate MCMC releases).
    fit_intercept, intercept_scaling, tune, draws, chains, target_accept, reruns,
    proposal_scale, step_scale, max_steps, delta_f, max_proposals, margin_scale : as in
        :class:`privbayes.BayesianLogisticRegression`.

    Data for :func:`privbayes.sample`: a tuple ``(X, y)``, X of shape (n, d) with rows of
    norm <= ``feature_bound``, y of shape (n,) with integer labels in {0, ..., K-1} (K is
    public: a class absent from the data is fine, a label >= K is refused). The
    released value has shape (d, K) — (d + 1, K) with an intercept, whose last row is the
    intercepts b = s W_{d+1} — and (size, d, K) with ``size``. Class k's score is
    x.W[:, k] + b_k; softmax of the scores gives the class probabilities.

    Raises ValueError for K < 2 or not an integer, non-positive beta, c or radius, and
    an option that does not apply (as in :class:`privbayes.BayesianLogisticRegression`:
    ``radius`` with a method other than "ops" at sample/calibrate time); DataError (a
    ValueError) at sample time for labels outside {0, ..., K-1}, NaN/inf or a row over the
    norm bound (naming X or y, the count and the first row, in memory and in Dask alike).
    """

    methods = MULTINOMIAL_METHODS

    def __init__(
        self,
        beta: float = 0.01,
        c: float = 1.0,
        n_classes: int = 2,
        radius: float | None = None,
        *,
        backend: str = "auto",
        **options,
    ) -> None:
        if (
            isinstance(n_classes, bool)
            or not isinstance(n_classes, int | np.integer)
            or not 2 <= n_classes <= MAX_CLASSES
        ):
            raise ValueError(
                f"n_classes must be an integer in [2, {MAX_CLASSES}] (labels 0..K-1); "
                f"got {n_classes!r}"
            )
        allowed = set(inspect.signature(BayesianLogisticRegression.__init__).parameters)
        unknown = sorted(set(options) - allowed - {"self", "beta", "c"})
        if unknown:
            raise TypeError(
                f"MultinomialLogisticRegression() got an unexpected keyword argument {unknown[0]!r}"
            )
        self.n_classes = int(n_classes)
        self.family = MultinomialLogistic(self.n_classes)
        super().__init__(beta, c, radius, backend=backend, **options)

    def _default_radius(self) -> float:
        """OPS's default R = sqrt(2) c / beta: the mode's norm bound (docs/multinomial.md §3b)."""
        return math.sqrt(2.0) * self.c / self.beta

    def __repr__(self) -> str:
        return (
            f"MultinomialLogisticRegression(beta={self.beta!r}, c={self.c!r}, "
            f"n_classes={self.n_classes}, radius={self.radius!r}, backend={self.backend!r}"
            f"{self._intercept_repr()}{self._auto_repr()})"
        )

    def _init_extra(self) -> dict:
        return {"n_classes": self.n_classes}

    # -- data ---------------------------------------------------------------------------
    def _labels(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.int64)

    def _released(self, value: np.ndarray) -> np.ndarray:
        """The flat draw(s) (..., P) as (..., d, K); with an intercept the last row times s
        is the bias vector b."""
        v = np.asarray(value, dtype=float)
        out = np.array(v.reshape(*v.shape[:-1], -1, self.n_classes))
        if self.fit_intercept:
            out[..., -1, :] *= self.intercept_scaling
        out.setflags(write=False)
        return out

    # -- certificates -------------------------------------------------------------------
    def rdp(
        self,
        n,
        orders,
        r: float = 1.0,
        m: float = 1.0,
        method: str = "diffused",
        sampler: dict | None = None,
    ) -> np.ndarray:
        """Certified RDP curve (docs/multinomial.md §3, OPS §3b; backend="langevin": §4),
        shaped like ``orders``. For ``method="ops"`` r is the tempering t."""
        mechanisms.check_method(method, MULTINOMIAL_METHODS)
        return super().rdp(n, orders, r, m, method, sampler)

    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration:
        mechanisms.check_method(method, MULTINOMIAL_METHODS)
        return super()._calibrate(n, lam, eps, method)

    def _ops_eps0(self, t: float) -> float:
        """eps0 = 2 t Delta, Delta = min(2a, a + log(K - 1)) with a = sqrt(2) c R_eff: the
        range of one record's loss over the ball (docs/multinomial.md §3b), for the ball
        the samplers' float norm test keeps, R_eff = R (1 + (P + 2) u + 2^-160 + 64 K^1.5 u),
        P = d K <= 2^24 K. Exact rationals: sqrt(2) and log(K - 1) by upper bounds;
        rounded up."""
        from ..certified import round_up
        from ..glm.passes import MAX_FEATURES
        from .logistic import _U, _norm_error

        # the float norm test in up to 2^24 K dims, and (exact back-end) the rounding of
        # W = Theta Q^T + m 1^T / sqrt(K) (gamma_K || |Q| ||_2 ||Theta|| <= K^1.5 u ||Theta||,
        # and Q^T 1 = 0 only up to rounding): 64 K^1.5 u more
        k = self.n_classes
        extra = 64 * k * (math.isqrt(k) + 1) * _U
        r_eff = Fraction(self.radius) * (1 + _norm_error(MAX_FEATURES * k) + extra)
        sqrt2_up = Fraction(math.isqrt(2 * 10**40) + 1, 10**20)
        a = sqrt2_up * self._c_cert() * r_eff
        spread = 2 * a
        if self.n_classes > 2:
            log_up = Fraction(math.nextafter(math.log(self.n_classes - 1), math.inf))
            spread = min(spread, a + log_up * (1 + Fraction(1, 2**50)))
        else:
            spread = a
        return round_up(2 * Fraction(t) * spread)

    def _worst_pair(self, n: int, cal: Calibration, *, d: int = 1):
        """((X, y), (X, y')): n - 1 records x = 0 and one x = c e_1 with label 0 vs 1
        (the audit's pair: the replaced record moves the log-density the most among
        records on one line; X of shape (n, d))."""
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be an integer >= 1; got {d!r}")
        x = np.zeros((n, int(d)))
        x[0, 0] = self.c
        y = np.zeros(n)
        y1 = y.copy()
        y1[0] = 1.0
        return (x, y), (x.copy(), y1)
