"""Certified numerics: bounds that hold for the exact real values, not just their floats.

A certificate is only as good as its last digit: the calibrator may report eps only if the
exact supremum of the Rényi divergence is <= eps. This module supplies the three tools the
certificates use (proofs in docs/numerics.md):

* exact rational arithmetic rounded up (:func:`round_up`), for closed forms;
* rigorous float bounds on the log-gamma second difference T (:func:`second_difference_bounds`)
  from Lemma 1 of docs/boundary.md and proven bounds on the trigamma function, evaluated with
  every rounding error accounted for — cheap, vectorised, and tight when x >> |lam h|;
* high-precision evaluation with a proven error bound (mpmath's log-gamma, exp and log1p
  at p bits, each trusted to 2^20 units of its last place; the rest exact or forward
  error analysis; adaptive p) for T and for the pure-DP curve, where the float bounds
  are not tight.

mpmath is imported lazily: ``import privbayes`` stays fast.
"""

from __future__ import annotations

import math
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
_WIDEN_BITS = 20  # mpmath's values are trusted to 2^20 units of their last place
_FMAX = 1.7976931348623157e308


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
    128 u and by TINY for underflow. Evaluated once per distinct value.
    """
    y = np.asarray(y, float)
    uniq, inverse = np.unique(y.ravel(), return_inverse=True)
    with np.errstate(over="ignore", divide="ignore", under="ignore", invalid="ignore"):
        shift = np.maximum(0.0, np.ceil(_Z0 - uniq))
        head = np.zeros(uniq.shape)
        need = np.flatnonzero(shift > 0)
        if need.size:
            ys, sh = uniq[need], shift[need]
            j = np.arange(int(sh.max()), dtype=float)[:, None]
            head[need] = np.where(j < sh, 1.0 / np.square(ys + j), 0.0).sum(axis=0)
        z = uniq + shift
        w = 1.0 / z
        w2 = w * w
        s7 = w * (1.0 + w * (0.5 + w * (1.0 / 6.0 + w2 * (-1.0 / 30.0 + w2 * (1.0 / 42.0)))))
        s9 = s7 - w * w2**4 / 30.0
        lo = (head + s9) * (1.0 - _INFLATE) - TINY
        up = (head + s7) * (1.0 + _INFLATE) + TINY
    # an overflowed lower bound is no bound: cap it at the largest float
    lo = np.clip(np.nan_to_num(lo, nan=0.0), 0.0, _FMAX)
    up = np.where(np.isnan(up), np.inf, up)
    return lo[inverse].reshape(y.shape), up[inverse].reshape(y.shape)


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


# -- high-precision bounds ---------------------------------------------------------------
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

    if h == 0.0 and x > 0:
        # equal shapes: (lam - 1) T = lg(x) - lam lg(x) + (lam - 1) lg(x) = 0 exactly
        return 0.0
    X, H, L = lm.from_float(x), lm.from_float(h), lm.from_float(lam)
    A = lm.mpf_add(X, lm.mpf_mul(L, H))  # exact (no precision given)
    B = lm.mpf_add(X, H)
    if lm.mpf_sign(A) <= 0 or lm.mpf_sign(B) <= 0 or not x > 0:
        return math.inf
    lm1 = lm.mpf_sub(L, lm.fone)
    # working precision: 80 bits beyond the cancellation, log2(|lg| terms / ((lam-1) T))
    y = x + lam * h
    lgs = [abs(math.lgamma(max(v, 1e-300))) + 1.0 for v in (y, x + h, x)]
    log_mag = max(
        math.log2(lgs[0]), math.log2(lam) + math.log2(lgs[1]), math.log2(lam) + math.log2(lgs[2])
    )
    log_v = math.log2(lam - 1.0) if lam < 2.0 else math.log2(lam) - 1.0
    if estimate > 0 and math.isfinite(estimate):
        log_v += math.log2(estimate)
    else:
        # T ~ h^2 psi'(x) / 2 and psi'(x) ~ (1 + x) / x^2 (x small: 1/x^2, large: 1/x)
        log_v += 2 * (math.log2(abs(h)) - math.log2(x)) - 10 + math.log2(1.0 + x)
    bits = 82 + max(0, math.ceil(log_mag - log_v))
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


def pure_dp_rdp_upper(orders, eps0: float) -> np.ndarray:
    """Proven upper bounds on the tight RDP curve of a pure eps0-DP mechanism.

    The curve (Bun & Steinke 2016; randomized response with flip odds e^eps0) is
    D(lam) = log1p(cosh(y) - 1 + s sinh(y)) / t with t = lam - 1, y = t e, e = eps0,
    s = tanh(e/2), every term positive; for y > 700 the log form
    (y + log1p(-(1 - s)(1 - e^(-2y)) / 2)) / t. lam = 1 is the KL limit e s and lam = inf
    is eps0; capped at eps0 (D_lam <= D_inf). Evaluated at 2^-100 working precision by
    mpmath and rounded up by a forward error bound (docs/numerics.md §6): no step cancels,
    so the result is within 16 * 2^(20-p) of its true value. The curve increases with
    eps0, so an upper bound on eps0 gives an upper bound on the curve.
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


def _expm1(lm, x, prec: int):
    """e^x - 1 for a raw mpf x >= 0, with relative accuracy of ~prec bits."""
    mag = x[2] + x[3]  # x < 2^mag
    extra = max(0, -mag) + 8
    return lm.mpf_sub(lm.mpf_exp(x, prec + extra), lm.fone, prec)


def _log1p(lm, x, prec: int):
    """log(1 + x) for a raw mpf x > -1: 1 + x formed exactly, then one logarithm; for
    |x| < 2^-(2 prec) simply x (relative error |x|/2 < 2^-2prec)."""
    if x == lm.fzero or x[2] + x[3] < -2 * prec:
        return x
    return lm.mpf_log(lm.mpf_add(lm.fone, x), prec)


def _pure_dp_point(order: float, e: float) -> float:
    from mpmath import libmp as lm

    if e >= 1000.0:
        # t D = t e + log1p(e^((1-2 lam) e)) - log1p(e^-e) <= t e: D <= e, tight to e^-1000
        return e
    p = 100
    E = lm.from_float(e)
    em1 = _expm1(lm, E, p)
    s = lm.mpf_div(em1, lm.mpf_add(em1, lm.from_int(2), p), p)  # tanh(e/2)
    if order == 1.0:
        val, ops = lm.mpf_mul(E, s, p), 4
    else:
        T = lm.mpf_sub(lm.from_float(order), lm.fone)  # exact
        y = lm.mpf_mul(T, E)  # exact
        if lm.mpf_le(y, lm.from_int(700)):
            ey = _expm1(lm, y, p)
            emy = lm.mpf_exp(lm.mpf_neg(y), p)
            two = lm.from_int(2)
            cosh_m1 = lm.mpf_div(
                lm.mpf_mul(ey, ey, p), lm.mpf_mul(two, lm.mpf_add(ey, lm.fone, p)), p
            )
            sinh = lm.mpf_shift(lm.mpf_mul(ey, lm.mpf_add(lm.fone, emy, p), p), -1)
            inner = lm.mpf_add(cosh_m1, lm.mpf_mul(s, sinh, p), p)
            val, ops = lm.mpf_div(_log1p(lm, inner, p), T, p), 16
        else:
            # 1 - s = 2 / (e^e + 1). Dropping e^(-2y) < 2^-2000 lowers the log term by less
            # than 2^-2000, far inside the error bound added below
            one_m_s = lm.mpf_div(lm.from_int(2), lm.mpf_add(em1, lm.from_int(2), p), p)
            w = lm.mpf_shift(one_m_s, -1)
            log_term = _log1p(lm, lm.mpf_neg(w), p)  # <= 0, |.| <= log 2 << y
            val, ops = lm.mpf_div(lm.mpf_add(y, log_term, p), T, p), 16
    # every step is positive or well-conditioned: relative error <= ops * 2^(20 - p)
    bound = lm.mpf_mul(val, lm.from_man_exp(1 + 2 * ops * 2**20, -p), 64, lm.round_ceiling)
    return _raw_up(lm.mpf_add(val, bound, 64, lm.round_ceiling))
