"""Beta-Bernoulli given a noisy count: a finite mixture of Beta posteriors (docs/noise_aware.md §3).

With s the number of ones among n records and s~ = s + Z, Z ~ N_Z(0, sigma^2),

    p(theta | s~) = sum_{s=0}^{n} w_s Beta(theta; a + s, b + n - s),
    w_s proportional to BetaBin(s; n, a, b) exp(-(s - s~)^2 / (2 sigma^2)),

the Beta-Binomial being the prior predictive of s (the discrete Gaussian's normaliser is
common to every s). The mixture is truncated to a window around s~ with a proven bound on
the total-variation distance it moves (``truncation``, <= 2^-40).
"""

from __future__ import annotations

import math

import numpy as np

from ._mixture import BetaMixture, ScalarMixturePosterior, log_betabinom, window


class BetaBernoulliPosterior(ScalarMixturePosterior):
    """p(theta | s~) for :class:`privbayes.BetaBernoulli` (public inputs and s~ only).

    Parameters
    ----------
    model : BetaBernoulli (the prior Beta(alpha, beta)). n : int >= 0, the public size.
    statistic : int, the released noisy count of ones s~ (any integer: noise can take it
        outside [0, n]). sigma2 : float > 0, the noise's sigma^2.

    Attributes: ``support`` (the latent counts kept, shape (L,)), ``weights`` (shape (L,)),
    ``truncation`` (the proven total-variation bound), ``mixture``.
    """

    var_name = "theta"
    diagnostics = None

    def __init__(self, model, n: int, statistic: int, sigma2: float) -> None:
        self.model, self.n, self.statistic, self.sigma2 = model, int(n), int(statistic), sigma2
        a, b = model.alpha, model.beta
        s, w, tv = window(
            lambda k: log_betabinom(k, self.n, a, b), 0, self.n, float(statistic), sigma2
        )
        self.support, self.weights, self.truncation = s, w, tv
        self.mixture = BetaMixture(a + s, b + (self.n - s), w)

    def draw(self, size: int | None, rng: np.random.Generator):
        """(theta, (log theta, log(1 - theta))): a float and shape (2,), or with ``size``
        shapes (size,) and (size, 2)."""
        lp = self.mixture.log_draws(1 if size is None else size, rng)
        theta = np.exp(lp[:, 0])
        if size is None:
            return float(theta[0]), lp[0]
        return theta, lp

    def approx_sd(self) -> float:
        m = self.mixture
        second = float(np.dot(m.w, m.A * (m.A + 1) / ((m.A + m.B) * (m.A + m.B + 1))))
        return math.sqrt(max(second - m.mean() ** 2, 0.0))
