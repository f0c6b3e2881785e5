"""Normal mean (known variance) given a noisy fixed-point sum: closed form (docs/noise_aware.md §4).

The released statistic is T~ = T + Z with T = floor(2^8 sum_i (x_i - low) / R), R = high - low,
and Z ~ N_Z(0, sigma^2). With k = 2^8 / R, 2^8 (S - n low) / R = T + U for the sum S of the
records and some U in [0, 1), so

    y = n low + (T~ + 1/2) / k = S + e,   e = (U - 1/2 - Z) / k.

The posterior uses S | theta ~ N(n theta, n s^2) (s = noise_sigma) and e ~ N(0, v_e),
v_e = (Var Z + 1/12) / k^2: the prior N(mu, sigma^2) then gives a Normal posterior with

    precision tau = 1/sigma^2 + n^2 / (n s^2 + v_e),
    mean = (mu / sigma^2 + n y / (n s^2 + v_e)) / tau.

Two approximations, both in the likelihood (never in the release or its certificate):
the records are modelled as N(theta, s^2) although they lie in [low, high] (the
conjugate posterior of ``sample`` makes the same one), and the law of e -- a discrete
Gaussian plus the floor's rounding, spread over one grid step -- is replaced by the
Gaussian of the same variance. tests/test_noise_aware.py's calibration checks show both
are harmless at the sizes tested.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..noise.discrete_gaussian import discrete_gaussian_variance
from ._statistics import GRID


class NormalPosterior:
    """p(theta | T~) for :class:`privbayes.NormalKnownVariance` (public inputs and T~ only).

    Parameters
    ----------
    model : NormalKnownVariance. n : int >= 0. statistic : int, the released noisy sum T~
        (units of 2^-8 of the range). sigma2 : float > 0, the noise's sigma^2 (in those
        units). Attributes ``loc`` and ``scale``: the posterior's mean and sd.
    """

    var_name = "theta"
    diagnostics = None
    truncation = 0.0

    def __init__(self, model, n: int, statistic: int, sigma2: float) -> None:
        self.model, self.n, self.statistic, self.sigma2 = model, int(n), int(statistic), sigma2
        prior_prec = 1.0 / model.sigma**2
        if self.n == 0:
            self.loc, self.scale = model.mu, model.sigma
            return
        k = GRID / (model.high - model.low)
        v_e = (discrete_gaussian_variance(sigma2) + 1.0 / 12.0) / (k * k)
        y = self.n * model.low + (self.statistic + 0.5) / k
        var_y = self.n * model.noise_sigma**2 + v_e
        tau = prior_prec + self.n * (self.n / var_y)
        self.loc = (model.mu * prior_prec + self.n * (y / var_y)) / tau
        self.scale = 1.0 / math.sqrt(tau)

    def draw(self, size: int | None, rng: np.random.Generator):
        """(theta, None): a float, or an array of shape (size,)."""
        z = rng.standard_normal(1 if size is None else size)
        theta = self.loc + self.scale * z
        if size is None:
            return float(theta[0]), None
        return theta, None

    def mean(self) -> float:
        return float(self.loc)

    def interval(self, prob: float) -> tuple[float, float]:
        z = float(special.ndtri(0.5 + prob / 2.0))
        return self.loc - z * self.scale, self.loc + z * self.scale

    def shape(self) -> tuple[int, ...]:
        return ()

    def approx_sd(self) -> float:
        return float(self.scale)
