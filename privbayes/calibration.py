"""Calibration: the largest knob (r or m) whose certified eps meets the target.

Generic over models: a model supplies ``eps_of(knob)`` (its certified sup over
neighbouring data sets at the requested order, computed from public inputs only) and the
knob value where that sup becomes infinite. We solve ``log eps_of(e^t) = log eps`` with
Brent's method in t = log(knob) — the curve is close to a straight line there (slope 2 for
r, 1 for m), so Brent converges in a handful of evaluations — and then step down until the
recomputed eps is <= the target, so the returned knob is always on the safe side.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from .errors import InfeasiblePrivacyError
from .validation import check_eps, check_lam, check_n

__all__ = ["Calibration", "calibrate", "solve_knob"]

_T_MIN = -745.0  # log of the smallest positive double
_MAX_BRENT_ITER = 100
_MAX_SAFETY_STEPS = 64
_MAX_BRACKET_STEPS = 200


@dataclass(frozen=True)
class Calibration:
    """A certificate: the mechanism's knobs and its privacy at order ``lam``.

    Attributes
    ----------
    method : "direct", "diffused", "concentrated" (or a GLM method).
    r, m : the likelihood weight and the prior divisor actually used (1.0 when unused).
    lam : the Rényi order the target was set at.
    eps : the certified eps at ``lam`` (nats), always <= ``target_eps``.
    target_eps : the eps that was asked for.
    n : the public data set size.
    pair : the worst neighbouring pair of (hypothetical) data sets at ``lam``, as count
        vectors — a fact about the mechanism, never about the data. None when n = 0.
    iterations : evaluations of the certified sup spent by the search.
    model : the (public) model, prior included.
    """

    method: str
    r: float
    m: float
    lam: float
    eps: float
    target_eps: float
    n: int
    pair: dict | None
    iterations: int
    model: Any = field(repr=False)

    def rdp(self, orders) -> np.ndarray:
        """Certified RDP curve eps(orders) of this mechanism (same r, m, n).

        ``orders``: scalar or array of orders >= 1 (1 gives the KL bound) or inf.
        Returns an array of the same shape, ``inf`` where no finite bound exists.
        """
        return self.model.rdp(self.n, orders, r=self.r, m=self.m, method=self.method)


def calibrate(model, n, lam, eps, method: str = "diffused") -> Calibration:
    """Calibrate ``method`` for ``model`` to (lam, eps)-RDP on data sets of size ``n``.

    Uses only public inputs: the model (its prior), n, lam, eps and the method.

    Parameters
    ----------
    model : a privbayes model (BetaBernoulli, DirichletCategorical, ...).
    n : int >= 0, the public number of records. n = 0 releases the prior (eps = 0).
    lam : float > 1 or inf, the Rényi order.
    eps : float > 0, the target eps at ``lam`` (nats).
    method : "direct", "diffused" (tunes r) or "concentrated" (tunes m).

    Returns
    -------
    Calibration, with ``eps <= target`` guaranteed (the sup is recomputed at the returned
    knob).

    Raises
    ------
    InfeasiblePrivacyError (a ValueError) when the target cannot be met, saying what can.
    ValueError / TypeError for malformed arguments.

    Source: paper §3 (boundary pairs, binary search); the reduction proof and the search are
    ours (docs/boundary.md).
    """
    if not hasattr(model, "_calibrate"):
        raise TypeError(f"model must be a privbayes model; got {type(model).__name__}")
    return model._calibrate(check_n(n), check_lam(lam), check_eps(eps), method)


def solve_knob(
    eps_of: Callable[[float], float],
    eps: float,
    cap: float,
    slope: float,
    knob_name: str,
) -> tuple[float, float, int]:
    """Largest knob in (0, 1] with ``eps_of(knob) <= eps``; returns (knob, eps_of(knob), evals).

    ``eps_of`` must be finite on (0, cap) and increasing (checked numerically for the
    conjugate models, BACKGROUND.md §3); ``slope`` is d log eps / d log knob for small knobs,
    used only to find a lower bracket quickly. Within 1e-12 relative of the true root.
    """
    memo: dict[float, float] = {}  # Brent re-evaluates its bracket ends

    def ev(knob: float) -> float:
        if knob not in memo:
            memo[knob] = float(eps_of(knob))
        return memo[knob]

    hi = 1.0 if cap > 1.0 else cap * (1.0 - 2.0**-40)
    e_hi = ev(hi)
    if e_hi <= eps:
        return hi, e_hi, len(memo)

    log_eps = math.log(eps)

    def f(t: float) -> float:
        e = ev(math.exp(t))
        return (math.log(e) if e > 0 else _T_MIN) - log_eps

    # Bracket the root with secant steps in log-log space. Steps after the first overshoot
    # by half, so consecutive points fall on either side of the root: a tight bracket.
    t_prev, f_prev = math.log(hi), math.log(e_hi) - log_eps
    lo, up = None, (t_prev, f_prev)  # best points with f <= 0 and f > 0
    s, t, steps = slope, t_prev - f_prev / slope, 0
    while steps < _MAX_BRACKET_STEPS:
        steps += 1
        t = max(t, _T_MIN)
        f_t = f(t)
        if f_t <= 0:
            lo = (t, f_t) if lo is None or t > lo[0] else lo
        else:
            up = (t, f_t) if t < up[0] else up
            if t <= _T_MIN:
                raise InfeasiblePrivacyError(
                    f"eps={eps:g} is below what any {knob_name} >= 1e-323 certifies "
                    f"({ev(math.exp(_T_MIN)):g}); ask for a larger eps",
                    reachable={"min_eps": ev(math.exp(_T_MIN))},
                )
        if lo is not None and (steps > 1 or f_t == 0) and (f_t <= 0) != (f_prev <= 0):
            break
        if t != t_prev:
            s = min(max((f_t - f_prev) / (t - t_prev), slope / 4), 4 * slope)
        t_prev, f_prev, t = t, f_t, t - (1.5 if steps > 0 else 1.0) * f_t / s
    if lo is None:
        raise RuntimeError("calibration found no bracket; please report this as a bug")
    t = lo[0]
    if lo[1] != 0:
        t = optimize.brentq(
            f, lo[0], up[0], xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=_MAX_BRENT_ITER
        )
    knob = min(math.exp(t), hi)
    achieved = ev(knob)
    # Brent returns the better end of its bracket, which may sit above the root.
    for k in range(_MAX_SAFETY_STEPS):
        if achieved <= eps:
            return knob, achieved, len(memo)
        knob *= 1.0 - 2.0 ** (k - 52)
        achieved = ev(knob)
    knob = math.exp(lo[0])  # the bracket's safe end; always certified
    return knob, ev(knob), len(memo)
