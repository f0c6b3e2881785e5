"""Bayesian Poisson regression (log link) on a public ball (docs/linear_regression.md §7).

y ~ Poisson(exp(w.x)), counts 0..max_count, prior N(0, (n beta)^-1 I) truncated to
||w|| <= R (R public and required: the log link's gradients grow like e^(cR)). The
constants live in the family (privbayes.glm.poisson: G = 2 c max(e^(cR), max_count),
curvature e^(cR) c^2); everything else is :class:`privbayes.models.linear.BallGLM`'s.
Back-end: "langevin" (projected noisy gradient descent, guarantee "algorithm"); "auto"
is Langevin. Methods: direct, diffused, concentrated.
"""

from __future__ import annotations

from ..glm.poisson import PoissonLog
from .linear import BallGLM

__all__ = ["BayesianPoissonRegression"]


class BayesianPoissonRegression(BallGLM):
    """Poisson regression with a Gaussian prior truncated to a ball, released by certified
    projected Langevin.

    Parameters: ``beta`` (prior precision per record), ``c`` (row bound), ``max_count``
    (counts y in 0..max_count, public), ``radius`` R (public, required), ``backend``
    ("auto" = "langevin"), ``fit_intercept``, ``intercept_scaling``, ``step_scale``,
    ``max_steps``, ``schedule`` as in :class:`privbayes.BayesianLinearRegression`. Data
    ``(X, y)``; a count outside 0..max_count, a non-integer count, NaN/inf or a row over the
    bound raises :class:`privbayes.DataError` before any charge. ValueError when c R > 700.
    """

    methods = ("direct", "diffused", "concentrated")
    backends = ("auto", "langevin")
    resolves_without_d = True  # auto is always Langevin

    def __init__(
        self,
        beta: float = 0.01,
        c: float = 1.0,
        max_count: int = 100,
        radius: float = 1.0,
        *,
        fit_intercept: bool = False,
        intercept_scaling: float | None = None,
        backend: str = "auto",
        step_scale: float | None = None,
        max_steps: int | None = None,
        schedule: str | None = None,
    ) -> None:
        if isinstance(beta, str):
            raise ValueError(
                "beta must be a number > 0 (beta='auto' is defined for logistic regression only)"
            )
        if radius is None:
            raise ValueError("radius is required for Poisson regression (the ball ||w|| <= R)")
        family = PoissonLog(max_count, radius)
        self._init_ball(family, backend)
        self.max_count = family.max_count
        super().__init__(
            beta, c, radius, backend=backend, fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling, step_scale=step_scale, max_steps=max_steps,
            schedule=schedule,
        )  # fmt: skip
        family.rate_bound(self._c_cert())  # c R > 700 refused here

    def __repr__(self) -> str:
        return (
            f"BayesianPoissonRegression(beta={self.beta!r}, c={self.c!r}, "
            f"max_count={self.max_count}, radius={self.radius!r}, backend={self.backend!r}"
            f"{self._intercept_repr()}{self._options_repr()})"
        )

    def _rebuild(self, backend: str, beta, radius=None):
        from .logistic import OPTION_BACKENDS

        keep = {k: v for k, v in self._options.items() if backend in OPTION_BACKENDS[k]}
        return type(self)(
            beta=beta, c=self.c, max_count=self.max_count, radius=self.radius,
            backend=backend, fit_intercept=self.fit_intercept,
            intercept_scaling=self.intercept_scaling, **keep,
        )  # fmt: skip

    def rdp(self, n, orders, r=1.0, m=1.0, method="diffused", sampler=None):
        """Certified RDP curve; backend="auto" is always Langevin, so its curve is
        Langevin's (docs/linear_regression.md §6)."""
        if self.backend == "auto":
            return self.with_backend("langevin").rdp(n, orders, r, m, method, sampler)
        return super().rdp(n, orders, r, m, method, sampler)

    def resolve_beta(self, n: int, d: int):
        return self

    def _high_response(self) -> float:
        return float(self.max_count)
