"""The data-dependent shifts of the Langevin back-end's noisy gradient steps, shared by its
RDP certificate (privbayes.sampling.langevin) and its Gaussian-DP bound
(privbayes.gdp_release): a step moves by at most s = eta r G between neighbouring data
sets, the first step from the start 0 by s0 = eta r G0 (docs/langevin.md §2, §4). Exact
rationals of the sampler's doubles; no data involved.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .family import BINARY_LOGISTIC

__all__ = ["composition_mu_sq", "parsed", "shifts"]


def parsed(sampler: dict) -> tuple[Fraction, Fraction, Fraction, float, int]:
    """(eta, noise, prec) as the exact rationals of the sampler's doubles, its start (nan
    when absent) and its number of steps; ValueError for anything else."""
    try:
        eta, noise, prec = (Fraction(float(sampler[k])) for k in ("step", "noise", "prec"))
        start = float(sampler.get("start", math.nan))
        steps = sampler["steps"]
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as err:
        raise ValueError(f"sampler must be a Langevin schedule; got {sampler!r}") from err
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"sampler['steps'] must be an integer >= 1; got {steps!r}")
    if not (eta > 0 and noise > 0 and prec >= 0):
        raise ValueError(f"step and noise must be > 0 and prec >= 0; got {sampler!r}")
    return eta, noise, prec, start, int(steps)


def shifts(eta: Fraction, r: float, c: float, fam, start: float) -> tuple[Fraction, Fraction]:
    """(s^2, s0^2): the squared shift of a step, s = eta r G, and of the first step from
    the start, s0 = eta r G0 from 0 (s0 = s from any other start; §4)."""
    scale = eta * eta * Fraction(r) ** 2
    s2 = scale * fam.gradient_sensitivity_sq(Fraction(c))
    return s2, (scale * fam.start_sensitivity_sq(Fraction(c)) if start == 0.0 else s2)


def composition_mu_sq(sampler: dict, n: int, r: float, c: float, family=None) -> Fraction:
    """mu^2 of the Gaussian-DP bound of one chain, exactly: the adaptive composition of its
    K Gaussian steps (Dong, Roth & Su, Corollary 3.3), (s0^2 + (K - 1) s^2) / noise^2 with
    s = eta r G and s0 = eta r G0 from the start 0 (s0 = s from any other start). Valid for
    any pull (prec) and projection: data-free maps of the last state. At prec = 0 it is
    2 rho of ``langevin.certificate`` (the same sum), at prec > 0 at least that. Raises
    ValueError for a sampler that is not a Langevin schedule (docs/langevin.md §4,
    docs/gdp.md §6)."""
    fam = BINARY_LOGISTIC if family is None else family
    eta, noise, _prec, start, steps = parsed(sampler)
    s2, s02 = shifts(eta, r, c, fam, start)
    return (s02 + (steps - 1) * s2) / (noise * noise)
