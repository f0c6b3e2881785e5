"""Noise mechanisms for releasing exact statistics (docs/noise_aware.md).

:mod:`privbayes.noise.discrete_gaussian`: the discrete Gaussian mechanism of Canonne,
Kamath & Steinke (2020) -- an exact sampler in integer arithmetic, its pmf, the
calibration of sigma^2 from public inputs, and the mechanism object whose certified RDP
curve the ledger and the accountants compose.
"""

from .discrete_gaussian import (
    DiscreteGaussianMechanism,
    calibrate_sigma2,
    discrete_gaussian_logpmf,
    discrete_gaussian_pmf,
    discrete_gaussian_tail,
    discrete_gaussian_variance,
    log_normalizer,
    sample_discrete_gaussian,
)

__all__ = [
    "DiscreteGaussianMechanism",
    "calibrate_sigma2",
    "discrete_gaussian_logpmf",
    "discrete_gaussian_pmf",
    "discrete_gaussian_tail",
    "discrete_gaussian_variance",
    "log_normalizer",
    "sample_discrete_gaussian",
]
