"""Bayesian linear regression (docs/linear_regression.md): a MINIMAL stand-in.

It holds and validates the public parameters and exposes :meth:`noise_aware_spec`, the
hook through which ``privbayes.posterior`` runs the noise-aware route
(privbayes/posterior/linear.py holds all of that logic). The posterior-sampling
mechanisms (direct, diffused, concentrated, OPS; exact and Langevin back-ends) belong to
the full class, to be merged with this one: keep ``noise_aware_spec`` when merging.
"""

from __future__ import annotations

from ..validation import check_positive
from ..frozen import Frozen

BACKENDS = ("auto", "exact", "langevin")


class BayesianLinearRegression(Frozen):
    """y = w.x + N(0, noise_sd^2), prior w ~ N(0, (n beta)^-1 I), ||x|| <= c, |y| <= y_bound.

    Parameters
    ----------
    beta : float > 0, prior precision per record. c : float > 0, public bound on ||x||.
    y_bound : float > 0, public bound on |y|. noise_sd : float > 0, the known sd of y
    around w.x. radius : None or float > 0, the public ball ||w|| <= R of the
    posterior-sampling certificates (unused by the noise-aware route). fit_intercept : bool,
    the row [x, 1] (intercept last, same prior). backend : "auto", "exact" or "langevin".
    """

    name = "linear"

    def __init__(
        self,
        beta: float,
        c: float,
        y_bound: float,
        noise_sd: float,
        radius: float | None = None,
        fit_intercept: bool = False,
        backend: str = "auto",
    ) -> None:
        self.beta = check_positive(beta, "beta")
        self.c = check_positive(c, "c")
        self.y_bound = check_positive(y_bound, "y_bound")
        self.noise_sd = check_positive(noise_sd, "noise_sd")
        self.radius = None if radius is None else check_positive(radius, "radius")
        if not isinstance(fit_intercept, bool):
            raise TypeError(f"fit_intercept must be a bool; got {fit_intercept!r}")
        self.fit_intercept = fit_intercept
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
        self.backend = backend
        self._freeze()

    def __repr__(self) -> str:
        extra = "" if self.radius is None else f", radius={self.radius!r}"
        return (
            f"BayesianLinearRegression(beta={self.beta!r}, c={self.c!r}, "
            f"y_bound={self.y_bound!r}, noise_sd={self.noise_sd!r}{extra}, "
            f"fit_intercept={self.fit_intercept!r})"
        )

    def noise_aware_spec(self):
        """The public inputs of the noise-aware route (privbayes.posterior.linear)."""
        from ..posterior.linear import LinearNoiseAwareSpec

        return LinearNoiseAwareSpec(
            self.beta, self.c, self.y_bound, self.noise_sd, self.fit_intercept
        )
