"""Noise-aware private posteriors: release the sufficient statistic once, with exact
discrete Gaussian noise, and return the whole posterior given it (docs/noise_aware.md).

``privbayes.posterior(model, data, lam, eps, ...)`` (this module is callable: it is
:func:`privbayes.posterior.release.posterior`) charges one release and returns a
:class:`PrivatePosterior`; :func:`plan` finds the eps a target interval width needs,
before any data are read. One module per model family holds the posterior given the
noisy statistic: ``beta_bernoulli`` and ``gamma_poisson`` (finite mixtures with a proven
truncation bound), ``normal`` (closed form), ``dirichlet`` (a Gibbs sampler over the
latent counts with public diagnostics) and ``query`` (the mean query's posterior and
exact confidence interval).
"""

from __future__ import annotations

import sys
import types

from ._statistics import Spec, spec_of
from .planning import Plan, plan
from .release import NOISE_AWARE, PrivatePosterior, calibrate_noise, family_of, posterior

__all__ = [
    "NOISE_AWARE",
    "Plan",
    "PrivatePosterior",
    "Spec",
    "calibrate_noise",
    "family_of",
    "plan",
    "posterior",
    "spec_of",
]


class _CallableModule(types.ModuleType):
    """``privbayes.posterior`` is both this package and the function of its name."""

    def __call__(self, *args, **kwargs) -> PrivatePosterior:
        return posterior(*args, **kwargs)

    @property
    def __signature__(self):
        import inspect

        return inspect.signature(posterior)


sys.modules[__name__].__class__ = _CallableModule
