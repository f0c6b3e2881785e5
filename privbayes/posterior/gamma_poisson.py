"""Gamma-Poisson given a noisy sum: a finite mixture of Gamma posteriors (docs/noise_aware.md §3).

With S the sum of n counts and S~ = S + Z, Z ~ N_Z(0, sigma^2),

    p(theta | S~) proportional to sum_{S=0}^{n M} NB(S; a, b/(b + n)) exp(-(S - S~)^2 / (2 sigma^2))
                                  Gamma(theta; a + S, b + n),

NB the negative binomial prior predictive of S under the Poisson likelihood (the one the
conjugate posterior uses: the per-record bound M is not part of the likelihood, as in
``sample``), restricted to the values 0..nM the statistic can take (conditioning on a
fact about the data). Truncated to a window around S~ with a proven total-variation bound.
"""

from __future__ import annotations

import math

import numpy as np

from ._mixture import GammaMixture, ScalarMixturePosterior, log_negbinom, window


class GammaPoissonPosterior(ScalarMixturePosterior):
    """p(theta | S~) for :class:`privbayes.GammaPoisson` (public inputs and S~ only).

    Parameters
    ----------
    model : GammaPoisson (prior Gamma(alpha, rate beta), bound max_count). n : int >= 0.
    statistic : int, the released noisy sum S~. sigma2 : float > 0, the noise's sigma^2.
    """

    var_name = "theta"
    diagnostics = None

    def __init__(self, model, n: int, statistic: int, sigma2: float) -> None:
        self.model, self.n, self.statistic, self.sigma2 = model, int(n), int(statistic), sigma2
        a, b = model.alpha, model.beta
        s, w, tv = window(
            lambda k: log_negbinom(k, self.n, a, b),
            0,
            self.n * model.max_count,
            float(statistic),
            sigma2,
        )
        self.support, self.weights, self.truncation = s, w, tv
        self.mixture = GammaMixture(a + s, b + self.n, w)

    def draw(self, size: int | None, rng: np.random.Generator):
        """(theta, log theta): floats, or with ``size`` arrays of shape (size,)."""
        lt = self.mixture.log_draws(1 if size is None else size, rng)
        theta = np.exp(lt)
        if size is None:
            return float(theta[0]), float(lt[0])
        return theta, lt

    def approx_sd(self) -> float:
        m = self.mixture
        second = float(np.dot(m.w, m.A * (m.A + 1))) / m.rate**2
        return math.sqrt(max(second - m.mean() ** 2, 0.0))
