"""Certified numerics: bounds that hold for the exact real values, not just their floats.

A certificate is only as good as its last digit: the calibrator may report eps only if the
exact supremum of the Rényi divergence is <= eps. This module supplies the three tools the
certificates use (proofs in docs/numerics.md):

* exact rational arithmetic rounded up (:func:`round_up`), for closed forms;
* rigorous float bounds on the log-gamma second difference T (:func:`second_difference_bounds`)
  from Lemma 1 of docs/boundary.md and proven bounds on the trigamma function, evaluated with
  every rounding error accounted for — cheap, vectorised, and tight when x >> |lam h|;
* interval arithmetic (mpmath's interval context, directed rounding, adaptive precision,
  each log-gamma enclosure widened by a further 2^20 units of its last place) for T and
  for the pure-DP curve, where the float bounds are not tight.

mpmath is imported lazily: ``import privbayes`` stays fast.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction

import numpy as np

__all__ = [
    "round_up",
    "round_down",
    "second_difference_bounds",
    "second_difference_upper",
    "pure_dp_rdp_upper",
]

U = 2.0**-53  # unit roundoff of float64 (round to nearest)
TINY = 2.0**-1060  # bound on the absolute error that gradual underflow can add to a bound
_Z0 = 20.0  # trigamma: shift the argument to >= _Z0 before the asymptotic envelope
_INFLATE = 128 * U  # relative error budget of the float bounds (derived: < 60 u)
_TARGET_WIDTH = 2.0**-46  # intervals are refined until relative width <= this
_WIDEN_BITS = 20  # extra widening of each mpmath enclosure, in units of its last place
_FMAX = 1.7976931348623157e308
_LOCK = threading.Lock()  # the interval context's precision is shared state
_CTX = None


# -- exact rationals -------------------------------------------------------------------
def round_up(q: Fraction | int | float) -> float:
    """The smallest float >= q (``inf`` above the largest float). ``q`` exact rational."""
    q = Fraction(q)
    try:
        f = float(q)  # CPython rounds int / int correctly (to nearest)
    except OverflowError:
        return math.inf if q > 0 else -1.7976931348623157e308
    if math.isfinite(f) and Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def round_down(q: Fraction | int | float) -> float:
    """The largest float <= q."""
    return -round_up(-Fraction(q))


# -- rigorous float bounds on trigamma and on T ----------------------------------------------
def _trigamma_bounds(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on psi'(y) for exact float arrays y > 0.

    psi'(y) = sum_{j<N} (y+j)^-2 + psi'(z), z = y + N >= 20, and on z the Bernoulli
    envelope (docs/numerics.md §2): S9(z) <= psi'(z) <= S7(z) with
    S7 = 1/z + 1/(2z^2) + 1/(6z^3) - 1/(30z^5) + 1/(42z^7), S9 = S7 - 1/(30z^9).
    Every computed quantity has relative error < 60 u (docs/numerics.md §3); we widen by
    128 u and by TINY for underflow.
    """
    y = np.asarray(y, float)
    with np.errstate(over="ignore", divide="ignore", under="ignore", invalid="ignore"):
        shift = np.maximum(0.0, np.ceil(_Z0 - y))
        top = int(shift.max(initial=0.0))
        if top:
            j = np.arange(top, dtype=float).reshape((top,) + (1,) * y.ndim)
            head = np.where(j < shift, 1.0 / np.square(y + j), 0.0).sum(axis=0)
        else:
            head = np.zeros(y.shape)
        z = y + shift
        w = 1.0 / z
        w2 = w * w
        s7 = w * (1.0 + w * (0.5 + w * (1.0 / 6.0 + w2 * (-1.0 / 30.0 + w2 * (1.0 / 42.0)))))
        s9 = s7 - w * w2**4 / 30.0
        lo = (head + s9) * (1.0 - _INFLATE) - TINY
        up = (head + s7) * (1.0 + _INFLATE) + TINY
    # an overflowed lower bound is no bound: cap it at the largest float
    return np.clip(np.nan_to_num(lo, nan=0.0), 0.0, _FMAX), np.where(np.isnan(up), np.inf, up)


def second_difference_bounds(x, h, lam) -> tuple[np.ndarray, np.ndarray]:
    """Proven (lower, upper) bounds on T(x, h, lam) (see :mod:`privbayes.divergence`).

    ``x`` > 0, ``h`` != 0 exact floats, ``lam`` >= 1 finite floats (broadcast). From
    (lam-1) T = h^2 int_0^lam K(u) psi'(x + u h) du (docs/boundary.md, Lemma 1) and the
    convexity of psi': the chord of psi' over [x, x + lam h] bounds T above,

        T <= h^2/6 [(2 lam - 1) psi'(x) + (lam + 1) psi'(x + lam h)],

    and Jensen's inequality at the kernel's mean u = (lam+1)/3 bounds it below,

        T >= lam h^2/2 psi'(x + (lam + 1) h / 3)

    (docs/numerics.md §4). The upper bound is inf where x + lam h may be <= 0. Both are
    within a relative (lam h / x)^2 of T, so they certify on their own when x >> |lam h|.
    """
    x, h, lam = np.broadcast_arrays(
        np.asarray(x, float), np.asarray(h, float), np.asarray(lam, float)
    )
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        lh = lam * h
        y = x + lh
        y_lo = y - 4 * U * (np.abs(lh) + np.abs(y)) - TINY  # <= the exact x + lam h
        third = (lam + 1.0) / 3.0 * h
        ym = x + third
        ym_hi = ym + 8 * U * (np.abs(x) + np.abs(third)) + TINY  # >= the exact mean point
        ok = y_lo > 0
        good_m = ym_hi > 0
        # one call for the three arguments (numpy's per-call cost dominates small arrays)
        lo3, up3 = _trigamma_bounds(
            np.stack([x, np.where(ok, y_lo, 1.0), np.where(good_m, ym_hi, 1.0)])
        )
        psi_x_up, psi_y_up, psi_m_lo = up3[0], up3[1], lo3[2]
        h2 = h * h
        up = h2 / 6.0 * ((2.0 * lam - 1.0) * psi_x_up + (lam + 1.0) * psi_y_up)
        up = np.where(ok, up * (1.0 + 32 * U) + TINY, np.inf)
        lo = np.where(good_m, lam / 2.0 * h2 * psi_m_lo * (1.0 - 32 * U) - TINY, 0.0)
    up = np.where(np.isnan(up), np.inf, up)
    return np.clip(np.nan_to_num(lo, nan=0.0), 0.0, _FMAX), up


# -- interval arithmetic ----------------------------------------------------------------
def _ctx():
    global _CTX
    if _CTX is None:
        from mpmath.ctx_iv import MPIntervalContext

        _CTX = MPIntervalContext()  # our own: a user's mpmath.iv settings are untouched
    return _CTX


def _upper_float(v) -> float:
    """Smallest float >= the upper end of interval ``v``."""
    from mpmath import libmp

    b = v._mpi_[1]
    if b == libmp.finf:
        return math.inf
    if b == libmp.fnan:
        return math.inf
    f = libmp.to_float(b)
    if math.isfinite(f) and libmp.mpf_lt(libmp.from_float(f), b):
        f = math.nextafter(f, math.inf)
    return f


def _lower_float(v) -> float:
    from mpmath import libmp

    a = v._mpi_[0]
    if a == libmp.fninf:
        return -math.inf
    f = libmp.to_float(a)
    if math.isfinite(f) and libmp.mpf_gt(libmp.from_float(f), a):
        f = math.nextafter(f, -math.inf)
    return f


def _widen(ctx, v, bits: int):
    """``v`` widened by |v| 2^-(prec - _WIDEN_BITS): covers a slip in mpmath's rounding."""
    mag = max(abs(_lower_float(v)), abs(_upper_float(v)))
    if not math.isfinite(mag):
        return v
    w = math.ldexp(mag, _WIDEN_BITS - bits) + TINY
    return v + ctx.mpf([-w, w])


def _rel_width(v) -> float:
    lo, up = _lower_float(v), _upper_float(v)
    if not (math.isfinite(lo) and math.isfinite(up)):
        return math.inf
    return (up - lo) / max(abs(up), 1e-300)


_LG_CACHE: dict = {}
_T_CACHE: dict = {}
_LG_CACHE_MAX = 8192


def _loggamma_point(z, bits: int):
    """mpmath's log-gamma of the exact binary number ``z`` (raw mpf) at ``bits`` bits."""
    key = (z, bits)
    v = _LG_CACHE.get(key)
    if v is None:
        from mpmath.libmp import mpf_loggamma

        if len(_LG_CACHE) >= _LG_CACHE_MAX:
            _LG_CACHE.clear()
        v = _LG_CACHE[key] = mpf_loggamma(z, bits)
    return v


def second_difference_upper(x: float, h: float, lam: float, estimate: float = 0.0) -> float:
    """Proven upper bound on T(x, h, lam), from high-precision log-gamma values.

    The arguments x + lam h, x + h and x are exact binary numbers (sums and products of
    floats, formed without rounding). Each log-gamma is evaluated by mpmath at p bits and
    trusted to 2^20 units of its last place (mpmath aims at < 1; docs/numerics.md §5); the
    combination (lam-1) T = lg(x+lam h) - lam lg(x+h) + (lam-1) lg(x) is formed exactly,
    the error bound (|lg| terms) 2^(20-p) added, and the quotient rounded up. p starts at
    80 + log2(|lg| terms / ((lam-1) T)) (the cancellation, from ``estimate``) and grows
    until the bound is within 2^-46 relative. inf when x + lam h <= 0 (T is infinite).
    """
    x, h, lam = float(x), float(h), float(lam)
    key = (x, h, lam)
    if key in _T_CACHE:
        return _T_CACHE[key]
    if len(_T_CACHE) >= _LG_CACHE_MAX:
        _T_CACHE.clear()
    _T_CACHE[key] = value = _second_difference_upper(x, h, lam, estimate)
    return value


def _second_difference_upper(x: float, h: float, lam: float, estimate: float) -> float:
    from mpmath import libmp as lm

    X, H, L = lm.from_float(x), lm.from_float(h), lm.from_float(lam)
    A = lm.mpf_add(X, lm.mpf_mul(L, H))  # exact (no precision given)
    B = lm.mpf_add(X, H)
    if lm.mpf_sign(A) <= 0 or lm.mpf_sign(B) <= 0 or not x > 0:
        return math.inf
    lm1 = lm.mpf_sub(L, lm.fone)
    y = x + lam * h
    mag = abs(math.lgamma(max(y, 1e-300))) + lam * abs(math.lgamma(max(x + h, 1e-300)))
    mag += (lam - 1.0) * abs(math.lgamma(x)) + 1.0
    v_est = (lam - 1.0) * estimate if estimate > 0 else (lam - 1.0) * h * h * 1e-3 / (1 + x)
    bits = 80 + max(0, math.ceil(math.log2(mag / max(v_est, 1e-300))))
    bits = 32 * -(-bits // 32)  # a coarse ladder, so that cached log-gammas are reused
    best = math.inf
    for _ in range(6):
        va, vb, vc = (_loggamma_point(z, bits) for z in (A, B, X))
        num = lm.mpf_add(lm.mpf_sub(va, lm.mpf_mul(L, vb)), lm.mpf_mul(lm1, vc))
        err = lm.mpf_add(
            lm.mpf_add(lm.mpf_abs(va), lm.mpf_mul(L, lm.mpf_abs(vb))),
            lm.mpf_mul(lm1, lm.mpf_abs(vc)),
        )
        err = lm.mpf_shift(err, _WIDEN_BITS - bits)
        top = lm.mpf_div(lm.mpf_add(num, err), lm1, 64, lm.round_ceiling)
        best = min(best, _raw_up(top))
        bottom = lm.mpf_sub(num, err)
        if lm.mpf_sign(bottom) > 0 and lm.mpf_lt(lm.mpf_shift(err, 1), lm.mpf_shift(bottom, -46)):
            break
        bits += 64
    return best


def _raw_up(v) -> float:
    """Smallest float >= the raw mpf ``v``."""
    from mpmath import libmp

    if v == libmp.finf or v == libmp.fnan:
        return math.inf
    f = libmp.to_float(v)
    if math.isfinite(f) and libmp.mpf_lt(libmp.from_float(f), v):
        f = math.nextafter(f, math.inf)
    return f


def _log1p_iv(ctx, s):
    """log(1 + s) for an interval s >= 0, tight for tiny s (mpmath's log1p is not)."""
    up = _upper_float(s)
    if up < 2.0**-30:
        # s - s^2/2 <= log1p(s) <= s - s^2/2 + s^3/3 for s >= 0
        s2 = s * s
        base = s - s2 / 2
        return base + ctx.mpf([0, 1]) * (s2 * s / 3)
    return ctx.log1p(s)


def pure_dp_rdp_upper(orders, eps0: float) -> np.ndarray:
    """Proven upper bounds on the tight RDP curve of a pure eps0-DP mechanism.

    The curve (Bun & Steinke 2016; randomized response with flip odds e^eps0) is
    D(lam) = log1p(2 sinh^2(t e/2) + tanh(e/2) sinh(t e)) / t with t = lam - 1, e = eps0,
    evaluated in intervals with sinh and tanh written through expm1 (no cancellation), the
    log form e' - log(...) for t e > 700, lam = 1 as the KL limit e tanh(e/2) and lam = inf
    as eps0; capped at eps0 (D_lam <= D_inf). It increases with eps0 (docs/numerics.md §6),
    so an upper bound on eps0 gives an upper bound on the curve.
    """
    lam = np.asarray(orders, dtype=float)
    e = float(eps0)
    out = np.full(lam.shape, e)
    if e == 0:
        return np.zeros(lam.shape)
    flat, res = lam.ravel(), out.ravel()
    cache: dict[float, float] = {}
    for idx, order in enumerate(flat):
        if math.isinf(order):
            continue
        if order not in cache:
            cache[order] = min(e, _pure_dp_point(order, e))
        res[idx] = cache[order]
    return res.reshape(lam.shape)


def _pure_dp_point(order: float, e: float) -> float:
    t_f = order - 1.0  # exact for orders in [1, 2^53]... checked in the interval below
    bits = 90 + max(0, math.ceil(2 * math.log2(max(1.0, 1.0 / e))))
    bits += max(0, math.ceil(math.log2(max(1.0, 1.0 / max(t_f, 1e-300)))))
    best = math.inf
    with _LOCK:
        ctx = _ctx()
        for _ in range(5):
            ctx.prec = bits
            E = ctx.mpf(e)
            em1 = ctx.expm1(E)
            tanh_half = em1 / (em1 + 2)
            if order == 1.0:
                val = E * tanh_half
            else:
                T = ctx.mpf(order) - 1
                y = T * E
                if _upper_float(y) <= 700.0:
                    ey = ctx.expm1(y)
                    emy = ctx.exp(-y)
                    cosh_m1 = ey * ey / (2 * (ey + 1))  # cosh y - 1 = (e^y - 1)^2 / (2 e^y)
                    sinh = ey * (1 + emy) / 2
                    val = _log1p_iv(ctx, cosh_m1 + tanh_half * sinh) / T
                else:
                    # t D = y + log((1+s)/2 + (1-s)/2 e^{-2y}), s = tanh(e/2); e^{-2y} < 2^-2000
                    small = ctx.mpf([0, 2.0**-2000])
                    val = (y + ctx.log((1 + tanh_half) / 2 + (1 - tanh_half) / 2 * small)) / T
            best = min(best, _upper_float(val))
            if _rel_width(val) <= _TARGET_WIDTH:
                break
            bits += 64
    return best
