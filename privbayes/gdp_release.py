"""Which privbayes releases carry a proven GDP bound, and which bound (docs/gdp.md §6).

* The exact back-end of the GLMs (``BayesianLogisticRegression`` and
  ``MultinomialLogisticRegression``, ``backend="exact"``, methods direct / diffused /
  concentrated): an exact draw from pi ∝ e^(-F), F (n beta / m)-strongly convex on R^p and
  F - F' rG-Lipschitz for neighbours, is (rG / sqrt(n beta / m))-GDP (Gopi, Lee & Liu
  2022); mu^2 = 2 rho with rho the model's own zCDP constant (``_rho_exact``: the same
  G, the samplers' float precision, the certified row bound), so lam mu^2 / 2 is the
  model's RDP curve. The release is not an exact draw: its density is within e^(+-2 e)
  of pi's, e the plan's ``log_density_error``, and it fails with probability <= tv, so
  its bound is GdpBound(mu sqrt(k), 2 k e, tv) for k draws (docs/gdp.md §4, §6).
* The Langevin back-end of the GLMs (``backend="langevin"``, direct / diffused /
  concentrated, any schedule): each of its K steps adds N(0, noise^2 I) to a map of the
  last state whose dependence on the data moves by at most s = eta r G (s0 = eta r G0 for
  the first step from the start 0), so the run is the adaptive composition of K Gaussian
  mechanisms: mu^2 = (s0^2 + (K - 1) s^2) / noise^2 exactly (docs/langevin.md §4; pulls,
  projections and the start are data-free post-processing). For the utility schedule's
  no-pull runs this is 2 rho of its RDP certificate, so the GDP claim only tightens the
  conversion; where the pull's contraction makes Theorem 1 smaller, both bounds hold and
  every conversion takes the smaller.
* Any release on n = 0 records (there are no neighbouring data sets): 0-GDP.
* Nothing else: OPS (pure DP on a ball), the approximate back-ends, the conjugate models
  and the noise-aware discrete Gaussian give None.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .accounting.gdp import GdpBound, sqrt_up
from .certified import round_up

__all__ = ["calibration_gdp_bound", "release_gdp_bound"]

_GDP_METHODS = ("direct", "diffused", "concentrated")


def _langevin_bound(cal) -> tuple[Fraction, float] | None:
    """(mu^2 exact, 0) of one Langevin chain (the composition of its K Gaussian steps),
    or None when the calibration is not a Langevin one."""
    from .glm.steps import composition_mu_sq

    sampler = cal.sampler
    if not sampler or sampler.get("algorithm") != "langevin":
        return None
    if cal.method not in _GDP_METHODS or cal.guarantee != "algorithm":
        return None
    family = getattr(cal.model, "family", None)  # None: binary logistic regression
    try:
        mu_sq = composition_mu_sq(sampler, cal.n, cal.r, cal.model._c_cert(), family)
    except (ValueError, TypeError, KeyError):
        return None
    return mu_sq, 0.0


def _glm_bound(cal) -> tuple[Fraction, float] | None:
    """(mu^2 exact, per-draw log-density allowance 2e) of one certified GLM draw (exact
    back-end: Gopi, Lee & Liu; Langevin: Gaussian composition), or None."""
    model = cal.model
    if getattr(model, "backend", None) == "langevin":
        return _langevin_bound(cal)
    if getattr(model, "backend", None) != "exact" or not hasattr(model, "_rho_exact"):
        return None
    if cal.method not in _GDP_METHODS or cal.guarantee != "exact":
        return None
    sampler = cal.sampler
    e = 0.0
    if sampler is not None:
        if set(sampler) != {"log_density_error"}:
            return None  # parameters this proof does not cover
        e = sampler["log_density_error"]
        if (
            isinstance(e, bool)
            or not isinstance(e, int | float)
            or not (e >= 0 and math.isfinite(e))
        ):
            return None
    rho = model._rho_exact(cal.n, cal.r, cal.m)
    if rho is None:
        return None
    return 2 * rho, round_up(2 * Fraction(e))


def calibration_gdp_bound(cal) -> GdpBound | None:
    """The proven GDP bound of one draw of the mechanism a Calibration certifies, None
    where none is proven. Public inputs only."""
    if cal.n == 0:  # no records: one data set, no neighbours
        return GdpBound(0.0)
    got = _glm_bound(cal)
    if got is None:
        return None
    mu_sq, a = got
    return GdpBound(sqrt_up(mu_sq), a)


def release_gdp_bound(cal, size: int | None, tv: float) -> GdpBound | None:
    """The proven GDP bound of a release of ``size`` draws (None: one) of ``cal``'s
    mechanism with failure allowance ``tv``: mu sqrt(k), k times the per-draw density
    allowance, and tv (docs/gdp.md §4, Lemma 3); None where none is proven."""
    k = 1 if size is None else int(size)
    if cal.n == 0:  # no records: one data set, no neighbours
        return GdpBound(0.0, 0.0, tv)
    got = _glm_bound(cal)
    if got is None:
        return None
    mu_sq, a = got
    return GdpBound(sqrt_up(k * mu_sq), round_up(k * Fraction(a)), tv)
