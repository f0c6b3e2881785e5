"""Calibrate mechanisms to an (eps, delta)-DP target with privbayes' RDP accountant.

Every privbayes release carries an RDP curve (``model.rdp(n, orders, r=, m=, method=)``,
the same function ``Calibration.rdp`` and ``PrivateSample.rdp`` call). Its (eps, delta)-DP
guarantee is the accountant's conversion (improved conversion of Canonne, Kamath & Steinke
2020 / Balle et al. 2020, minimised over the order; ``RdpAccountant.get_epsilon``). The
knob of each mechanism (r, m, the OPS tempering t, a zCDP rho) only ever makes the curve
larger when it grows, so the converted eps is monotone in the knob and the largest knob
that meets a target is found by bisection in log space.

We aim at ``eps * (1 - SAFETY)`` so that rounding in the conversion (relative error of a
few ulps) can never put the verified value above ``eps``; callers verify the release they
actually made with :func:`converted_eps` again.

The analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) is the exact (eps, delta)
calibration of Gaussian noise: the peer that the count mechanisms are compared with.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from privbayes.accounting import OrdersWarning, RdpAccountant, zcdp_rdp

SAFETY = 1e-9  # relative margin under the target eps for the searches
_RTOL = 1e-10  # relative precision of a knob search (in log knob)

Curve = Callable[[np.ndarray], np.ndarray]


def converted_eps(curve, delta: float, count: int = 1) -> tuple[float, float]:
    """(eps, order) of (eps, delta)-DP for ``count`` compositions of one RDP curve, by
    privbayes' accountant.

    ``curve``: a function ``orders -> eps`` or anything with an ``rdp`` method (a release).
    The accountant's default orders grid over (1, 1024] and inf, refined continuously
    (exactly for releases and partials of privbayes curves; from a fine grid fixed at
    composition for other functions, docs/accounting.md §5); an optimum at the end of the
    grid is still a valid (if slightly loose) bound, so the accountant's OrdersWarning is
    silenced here.
    """
    acc = RdpAccountant().compose(curve, count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        eps, lam = acc.get_epsilon_and_order(delta)
    return float(eps), float(lam)


def _check_target(eps: float, delta: float) -> None:
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be finite and > 0; got {eps!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1); got {delta!r}")


def max_knob(
    curve_of: Callable[[float], Curve], eps: float, delta: float, high: float = 1.0
) -> tuple[float, float, float]:
    """Largest knob v in (0, high] whose curve converts to (eps, delta)-DP.

    ``curve_of(v)``: the RDP curve of the mechanism at knob v, non-decreasing in v.
    Returns (v, its converted eps <= eps (1 - SAFETY), the order that attains it).
    Raises ValueError when no knob down to 1e-300 meets the target.
    """
    _check_target(eps, delta)
    target = eps * (1.0 - SAFETY)

    def conv(v: float) -> tuple[float, float]:
        return converted_eps(curve_of(v), delta)

    top = conv(high)
    if top[0] <= target:
        return float(high), *top
    hi = high
    while True:  # geometric steps down to a knob that meets the target
        lo = hi * 1e-3
        if lo < 1e-300:
            raise ValueError(f"no knob meets eps={eps:g} at delta={delta:g}")
        if conv(lo)[0] <= target:
            break
        hi = lo
    # Brent's method on log(knob), then the safe side: the returned knob meets the target
    root = optimize.brentq(
        lambda t: conv(math.exp(t))[0] - target,
        math.log(lo),
        math.log(hi),
        xtol=_RTOL,
        rtol=4 * np.finfo(float).eps,
    )
    v = min(math.exp(root), hi)
    for k in range(60):
        found = conv(v)
        if found[0] <= target:
            return float(v), *found
        v = max(v * (1.0 - _RTOL * 2.0**k), lo)
    return float(lo), *conv(lo)


def max_rho(eps: float, delta: float) -> tuple[float, float, float]:
    """Largest rho such that rho-zCDP (eps(lam) = rho lam) converts to (eps, delta)-DP.

    Returns (rho, converted eps, order). The GLM curves of privbayes and composed Gaussian
    mechanisms (DP-GD) are of this form.
    """
    _check_target(eps, delta)
    # eps >= rho + 2 sqrt(rho log(1/delta)) - small terms: rho <= eps bounds it from above
    return max_knob(lambda rho: functools.partial(zcdp_rdp, rho=rho), eps, delta, high=eps)


# -- the analytic Gaussian mechanism (Balle & Wang 2018) ---------------------------------


def gaussian_delta(eps: float, sigma: float, sensitivity: float) -> float:
    """Exact delta(eps) of the Gaussian mechanism N(f(D), sigma^2 I), L2 sensitivity Delta.

    Balle & Wang (2018), Thm 8: Phi(Delta/(2 sigma) - eps sigma/Delta)
    - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta); the second term in logs.
    """
    a, b = sensitivity / (2.0 * sigma), eps * sigma / sensitivity
    first = special.ndtr(a - b)
    second = math.exp(eps + special.log_ndtr(-a - b))
    return float(max(first - second, 0.0))


def analytic_gaussian_sigma(eps: float, delta: float, sensitivity: float) -> float:
    """Smallest sigma (rounded up) for which the Gaussian mechanism is (eps, delta)-DP.

    Root of ``gaussian_delta(eps, sigma) = delta`` in log sigma (delta falls as sigma
    grows), then raised by a relative 1e-9 and checked, so the returned sigma is never
    below the exact one.
    """
    _check_target(eps, delta)
    if not sensitivity > 0:
        raise ValueError(f"sensitivity must be > 0; got {sensitivity!r}")

    def gap(log_s: float) -> float:
        return gaussian_delta(eps, math.exp(log_s), sensitivity) - delta

    lo = hi = math.log(sensitivity)
    while gap(lo) < 0:
        lo -= 2.0
    while gap(hi) > 0:
        hi += 2.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-14, rtol=1e-14)
    sigma = math.exp(root) * (1.0 + 1e-9)
    while gaussian_delta(eps, sigma, sensitivity) > delta:
        sigma *= 1.0 + 1e-9
    return sigma
