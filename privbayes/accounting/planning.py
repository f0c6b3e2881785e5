"""What still fits in an (eps, delta) budget: how many more copies of a charge, and the
largest eps at an order that a new release may ask for (docs/accounting.md §10).

Both answers use the ledger's own conversion ``spent(total, tv) -> eps`` (grid orders,
rounded up, failure allowances included), which is non-decreasing in the composed curve
and in tv: so "k copies fit" is monotone in k, and bisection finds the exact largest k.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_FLOOR, Decimal
from fractions import Fraction

import numpy as np

from .exact import ExactSum

__all__ = ["copies_that_fit", "largest_eps_at", "TABLE_ORDERS"]

#: The orders for which a refusal says what eps still fits (with the request's own order).
TABLE_ORDERS = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)

Spent = Callable[[ExactSum, Fraction], float]
_K_CAP = 2**62  # exponential search stops here (the answer is then "unbounded")


def _fits(spent: Spent, total: ExactSum, curve, k: int, tv0: Fraction, tv: Fraction, eps, delta):
    tv_k = tv0 + k * tv
    if tv_k > 0 and not tv_k < Fraction(delta):
        return False  # the ledger refuses allowances that reach delta
    t = total.copy()
    t.add(curve, k)
    return spent(t, tv_k) <= eps


def copies_that_fit(
    spent: Spent, total: ExactSum, tv0: Fraction, curve: np.ndarray, tv: float, eps, delta
) -> int | float:
    """The largest integer k >= 0 such that composing k more copies of ``curve`` (with
    allowance ``tv`` each) onto ``total`` (allowances ``tv0``) keeps ``spent`` <= ``eps``
    and the allowances below ``delta``: exactly what k further charges would pass. inf
    when every k fits (the curve is 0 where the conversion is decided and tv = 0)."""
    tv_f = Fraction(tv)
    args = (tv0, tv_f, eps, delta)
    if not _fits(spent, total, curve, 1, *args):
        return 0
    if tv_f == 0:  # the limit k -> inf: inf wherever the curve is not 0
        limit = ExactSum(len(curve))
        limit.add(np.where(np.asarray(curve) == 0, total.upper(), np.inf))
        if spent(limit, tv0) <= eps:
            return math.inf
    lo, hi = 1, 2
    while _fits(spent, total, curve, hi, *args):
        lo, hi = hi, 2 * hi
        if hi > _K_CAP:
            return math.inf
    while hi - lo > 1:  # lo fits, hi does not
        mid = (lo + hi) // 2
        if _fits(spent, total, curve, mid, *args):
            lo = mid
        else:
            hi = mid
    return lo


def largest_eps_at(
    spent: Spent, total: ExactSum, tv0: Fraction, orders: np.ndarray, lam: float, tv, eps, delta
) -> float:
    """The largest eps_lam (rounded down, to ~1e-9 relative) such that a curve that is
    eps_lam at the order ``lam`` and unknown (inf) at every other order fits, with
    allowance ``tv``: so any charge whose curve at ``lam`` is <= eps_lam fits, whatever its
    values elsewhere (the conversion may use order ``lam`` alone). 0.0 when not even
    eps_lam = 0 fits; nan when ``lam`` is not one of ``orders`` (finite, > 1)."""
    at = orders == lam
    if not (math.isfinite(lam) and lam > 1 and at.any()):
        return math.nan

    def ok(e: float) -> bool:
        return _fits(spent, total, np.where(at, e, np.inf), 1, tv0, Fraction(tv), eps, delta)

    if not ok(0.0):
        return 0.0
    hi = max(1.0, float(eps))
    while ok(hi):
        hi *= 2
        if hi > 1e300:
            return math.inf
    lo = 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if not lo < mid < hi or hi - lo <= 1e-9 * hi:
            break
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def fmt_down(x: float) -> str:
    """``x`` to 4 significant digits, rounded down exactly (a value shown as fitting must
    fit)."""
    if not (math.isfinite(x) and x > 0):
        return f"{x:g}"
    d = Decimal(x)  # exact
    q = Decimal(1).scaleb(d.adjusted() - 3)
    return (
        f"{d.quantize(q, rounding=ROUND_FLOOR).normalize():f}"
        if d.adjusted() > -5
        else (f"{d.quantize(q, rounding=ROUND_FLOOR).normalize():e}")
    )
