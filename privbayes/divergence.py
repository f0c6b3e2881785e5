"""Closed-form Rényi divergences, evaluated stably (docs/background.md §1, §3).

Inside one exponential family with log-partition C,

    D_lam(p1 || p2) = [C(lam*eta1 + (1-lam)*eta2) - lam*C(eta1) - (1-lam)*C(eta2)] / (lam-1).

For Beta and Dirichlet, C(a) = sum_k lgamma(a_k) - lgamma(sum_k a_k). Writing
x = a2 (the second argument) and h = a1 - a2, each log-gamma enters through

    T(x, h, lam) = [lgamma(x + lam*h) - lam*lgamma(x + h) + (lam-1)*lgamma(x)] / (lam-1),

a second difference that is O(lam*h^2/x) while each log-gamma value is O(x log x). With
x ~ 1e8 (a concentrated prior at small eps, or n ~ 1e7) the plain formula loses every digit
and can even turn negative. We evaluate T from its Taylor series in h,

    T = sum_{k>=2} psi^{(k-1)}(x) h^k lam (1 + lam + ... + lam^(k-2)) / k!
      = sum_{k>=2} (-1)^k zeta(k, x) h^k lam g_k / k,

when |lam*h| <= x/4 (fast convergence, no cancellation), and otherwise from the split form
T = h*[Q(x+h, (lam-1)h) - Q(x, h)] with Q(y, d) = (lgamma(y+d) - lgamma(y))/d, whose two
terms are of comparable size in that regime. Both forms are finite at lam = 1, where they
give the KL divergence. Derivation: docs/divergence.md (our own; tested against mpmath).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

__all__ = [
    "renyi_beta",
    "renyi_dirichlet",
    "renyi_expfam",
]

_SERIES_RHO = 0.1  # T's series when |lam*h|/x <= this (at most 18 terms)
_POLE_REL = 1e-6  # x + lam*h below this fraction of |x| + |lam*h|: near the pole
_ROUND = 8 * 2.0**-53  # bound on the relative rounding error of x + lam*h and its inputs
_QUOT_SERIES = 1e-3  # Q's series when |d|/y <= this (a handful of terms)
_LOG_EPS = 36.8  # -log(1e-16)


def _zeta_scaled(kmax: int, y: np.ndarray) -> np.ndarray:
    """zeta(k, y) * y**k for k = 2..kmax: shape (kmax-1, y.size).

    Written as 1 + y**k zeta(k, y+1) below 1 (no overflow for tiny y) and through logs
    above (no overflow of y**k, harmless underflow of zeta for huge y).
    """
    k = np.arange(2, kmax + 1, dtype=float)[:, None]
    small = y < 1.0
    ys = np.where(small, y, 0.5)
    yb = np.where(small, 2.0, y)
    low = 1.0 + ys**k * special.zeta(k, ys + 1.0)
    high = np.exp(np.log(special.zeta(k, yb)) + k * np.log(yb))
    return np.where(small, low, high)


def _n_terms(rho_max: float) -> int:
    """Highest k needed for a series whose k-th term shrinks like rho_max**k."""
    return 2 + int(np.ceil(_LOG_EPS / -np.log(max(rho_max, 1e-300))))


def _dlgamma_quot(y: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Q(y, d) = (lgamma(y + d) - lgamma(y)) / d, with Q(y, 0) = digamma(y).

    Requires y > 0 and y + d > 0 (1-D arrays of equal length). Series in d/y when tiny.
    """
    out = special.digamma(y)
    ser = (d != 0) & (np.abs(d) <= _QUOT_SERIES * y)
    if ser.any():
        ys, ds = y[ser], d[ser]
        t = ds / ys
        # psi^(k-1)(y) d^(k-1) / k! = (-1)^k zeta(k, y) d^(k-1) / k
        kmax = _n_terms(float(np.abs(t).max()))
        k = np.arange(2, kmax + 1)[:, None]
        acc = ((-1.0) ** k * _zeta_scaled(kmax, ys) * t ** (k - 1) / k).sum(axis=0)
        out[ser] += acc / ys
    direct = (d != 0) & ~ser
    if direct.any():
        ys, ds = y[direct], d[direct]
        out[direct] = (special.gammaln(ys + ds) - special.gammaln(ys)) / ds
    return out


def _second_difference(x, h, lam) -> np.ndarray:
    """T(x, h, lam) for finite lam > 0; inf where x + lam*h <= 0; exactly 0 where h == 0."""
    x, h, lam = np.broadcast_arrays(
        np.asarray(x, float), np.asarray(h, float), np.asarray(lam, float)
    )
    shape = x.shape
    x, h, lam = x.ravel(), h.ravel(), lam.ravel()
    out = np.zeros(x.size)
    with np.errstate(all="ignore"):
        live = h != 0
        bad = live & (x + lam * h <= 0)
        out[bad] = np.inf
        live &= ~bad
        rho = np.abs(lam * h) / x
        ser = live & (rho <= _SERIES_RHO)
        if ser.any():
            xs, hs, ls = x[ser], h[ser], lam[ser]

            t = hs / xs
            kmax = _n_terms(float(rho[ser].max()))
            z = _zeta_scaled(kmax, xs)
            k = np.arange(2, kmax + 1)[:, None]
            # lam * g_k * t^k with g_k = 1 + lam + ... + lam^(k-2), arranged so that no
            # power of lam overflows: (lam t)^(k-1) t sum_i lam^-i for lam >= 1.
            big = ls >= 1.0
            base = np.where(big, 1.0 / ls, ls)
            g = np.cumsum(base ** np.arange(0, kmax - 1)[:, None], axis=0)
            lt = np.where(big, ls * t, t)
            pref = np.where(big, t, ls * t)
            terms = (-1.0) ** k * z * lt ** (k - 1) * pref * g / k
            out[ser] = terms.sum(axis=0)
        # Near the pole, y = x + lam*h is a small difference of large numbers; its rounding
        # error would move lgamma(y) either way. Use a lower bound on y instead (lgamma
        # decreases there), so the result can only err upwards: safe for a certificate.
        scale = np.abs(x) + np.abs(lam * h)
        y = x + lam * h
        pole = live & ~ser & (y < _POLE_REL * scale) & (y < 0.5)
        y_lo = y - _ROUND * scale
        out[pole & (y_lo <= 0)] = np.inf
        pole &= y_lo > 0
        if pole.any():
            xs, hs, ls, yl = x[pole], h[pole], lam[pole], y_lo[pole]
            out[pole] = (special.gammaln(yl) - special.gammaln(xs + hs)) / (ls - 1.0) - (
                special.gammaln(xs + hs) - special.gammaln(xs)
            )
        split = live & ~ser & ~pole & np.isfinite(out)
        if split.any():
            xs, hs, ls = x[split], h[split], lam[split]
            out[split] = hs * (_dlgamma_quot(xs + hs, (ls - 1.0) * hs) - _dlgamma_quot(xs, hs))
        out[np.isnan(out)] = np.inf  # never certify from a NaN
    return out.reshape(shape)


_zeta = special.zeta
_digamma = special.digamma

# -- scalar twins of the above, for the calibrator's inner loop (numpy's per-call cost
#    dominates on a handful of numbers). Tests check they agree with the array versions.


def _dlgamma_quot_1(y: float, d: float) -> float:
    """Scalar Q(y, d)."""
    if d == 0:
        return _digamma(y)
    t = d / y
    if abs(t) > _QUOT_SERIES:
        return (math.lgamma(y + d) - math.lgamma(y)) / d
    acc = 0.0
    for k in range(2, _n_terms(abs(t)) + 1):
        acc += (-1.0) ** k * _zeta_scaled_1(k, y) * t ** (k - 1) / k
    return _digamma(y) + acc / y


def _second_difference_1(x: float, h: float, lam: float) -> float:
    """Scalar T(x, h, lam) for finite lam >= 1."""
    if h == 0:
        return 0.0
    if x + lam * h <= 0:
        return math.inf
    rho = abs(lam * h) / x
    if rho > _SERIES_RHO:
        scale = abs(x) + abs(lam * h)
        y = x + lam * h
        if y < _POLE_REL * scale and y < 0.5:  # see _second_difference
            y_lo = y - _ROUND * scale
            if y_lo <= 0:
                return math.inf
            lx, lxh = math.lgamma(x), math.lgamma(x + h)
            return (math.lgamma(y_lo) - lxh) / (lam - 1.0) - (lxh - lx)
        return h * (_dlgamma_quot_1(x + h, (lam - 1.0) * h) - _dlgamma_quot_1(x, h))
    t = h / x
    lt = lam * t
    kmax = _n_terms(rho)
    if kmax > 6:  # one vectorised zeta call beats many scalar ones
        k = _KS[: kmax - 1]
        g = np.cumsum((1.0 / lam) ** (k - 2))  # g_k / lam^(k-2) = sum_{i<=k-2} lam^-i
        if x < 1.0:
            z = 1.0 + x**k * _zeta(k, x + 1.0)
        else:
            with np.errstate(divide="ignore"):
                z = np.exp(np.log(_zeta(k, x)) + k * math.log(x))
        return float((_SIGNS[: kmax - 1] * z * lt ** (k - 1) * t * g / k).sum())
    inv = 1.0 / lam
    acc, g, p = 0.0, 0.0, 1.0
    for k in range(2, kmax + 1):
        g += p
        p *= inv
        acc += (-1.0) ** k * _zeta_scaled_1(k, x) * lt ** (k - 1) * t * g / k
    return acc


_KS = np.arange(2.0, 64.0)
_SIGNS = (-1.0) ** _KS


def _zeta_scaled_1(k: int, y: float) -> float:
    """zeta(k, y) * y**k at one point (see _zeta_scaled)."""
    if y < 1.0:
        return 1.0 + y**k * _zeta(k, y + 1.0)
    z = _zeta(k, y)
    return math.exp(math.log(z) + k * math.log(y)) if z > 0 else 0.0


def _as_orders(lam) -> np.ndarray:
    lam = np.asarray(lam, dtype=float)
    if np.isnan(lam).any() or (lam <= 0).any():
        raise ValueError(f"lam must be > 0 (order 1 gives KL, inf the max-divergence); got {lam}")
    return lam


def _dirichlet_shift(x: np.ndarray, h: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """D_lam(Dir(x + h) || Dir(x)) for x of shape (..., K), lam broadcast against (...).

    Taking the shift h directly (not a1 - a2) keeps it exact for large parameters.
    """
    lam = np.asarray(lam, float)
    shape = np.broadcast_shapes(lam.shape, x.shape[:-1], h.shape[:-1])
    x = np.broadcast_to(x, shape + x.shape[-1:])
    h = np.broadcast_to(h, shape + h.shape[-1:])
    lam = np.broadcast_to(lam, shape)
    out = np.empty(shape)
    inf = np.isinf(lam)
    fin = ~inf
    if fin.any():
        lf = lam[fin]
        xs, hs = x[fin], h[fin]
        terms = _second_difference(xs, hs, lf[..., None]).sum(axis=-1)
        total = _second_difference(xs.sum(axis=-1), hs.sum(axis=-1), lf)
        # The total's mix is positive whenever every coordinate's is; inf - inf is inf here.
        with np.errstate(invalid="ignore"):
            out[fin] = np.where(np.isinf(terms), np.inf, terms - total)
    if inf.any():
        out[inf] = _dirichlet_max_divergence(x[inf], h[inf])
    # Rounding can leave -1e-300-sized values where the divergence is exactly 0.
    return np.maximum(out, 0.0)


def _dirichlet_max_divergence(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """D_inf(Dir(x+h) || Dir(x)) = log sup p/q: finite iff every h_k >= 0."""
    out = np.full(x.shape[:-1], np.inf)
    ok = (h >= 0).all(axis=-1)
    if ok.any():
        xs, hs = x[ok], h[ok]
        big_h = hs.sum(axis=-1)
        delta = hs * _dlgamma_quot(xs, hs)  # lgamma(x+h) - lgamma(x)
        delta_tot = big_h * _dlgamma_quot(xs.sum(axis=-1), big_h)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(hs > 0, hs * np.log(hs / big_h[..., None]), 0.0)
        out[ok] = np.where(big_h > 0, -delta.sum(-1) + delta_tot + frac.sum(-1), 0.0)
    return out


def _check_params(a, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if a.ndim == 0 or a.shape[-1] < 2:
        raise ValueError(f"{name} must have a last axis of length K >= 2; got shape {a.shape}")
    if not np.isfinite(a).all() or (a <= 0).any():
        raise ValueError(f"{name} must be finite and > 0; got {a}")
    return a


def renyi_dirichlet(a1, a2, lam) -> np.ndarray | float:
    """Rényi divergence D_lam(Dir(a1) || Dir(a2)) of order ``lam``.

    Parameters
    ----------
    a1, a2 : array_like, shape (..., K), K >= 2, entries finite and > 0.
    lam : float or array_like, > 0. ``lam = 1`` gives KL(P || Q); ``lam = inf`` the
        max-divergence log sup p/q. Broadcast against the batch shape ``a1.shape[:-1]``
        (pass ``lam[:, None]`` for every order against every pair).

    Returns
    -------
    float or ndarray (nats); ``inf`` where lam*a1 + (1-lam)*a2 leaves the parameter
    space (for lam = inf: where some a1_k < a2_k).

    Raises
    ------
    ValueError : non-positive or non-finite parameters, lam <= 0 or NaN.

    Source: docs/background.md §3 (closed form); stable evaluation is our derivation
    (docs/divergence.md), tested against mpmath.
    """
    a1 = _check_params(a1, "a1")
    a2 = _check_params(a2, "a2")
    if a1.shape[-1] != a2.shape[-1]:
        raise ValueError(f"a1 and a2 differ in K: {a1.shape[-1]} != {a2.shape[-1]}")
    lam = _as_orders(lam)
    out = _dirichlet_shift(a2, a1 - a2, lam)
    return out[()] if out.ndim == 0 else out


def renyi_beta(a1, b1, a2, b2, lam) -> np.ndarray | float:
    """Rényi divergence D_lam(Beta(a1, b1) || Beta(a2, b2)); the K = 2 Dirichlet case.

    Arguments broadcast together (``lam`` too). Returns ``inf`` where
    lam*a1 + (1-lam)*a2 <= 0 or lam*b1 + (1-lam)*b2 <= 0. See :func:`renyi_dirichlet`.
    """
    a1, b1, a2, b2 = np.broadcast_arrays(*(np.asarray(v, float) for v in (a1, b1, a2, b2)))
    return renyi_dirichlet(np.stack([a1, b1], -1), np.stack([a2, b2], -1), lam)


def renyi_expfam(
    log_partition: Callable[[np.ndarray], np.ndarray],
    eta1,
    eta2,
    lam,
    in_domain: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray | float:
    """Generic closed form inside one exponential family (docs/background.md §3).

    ``D = [C(lam*eta1 + (1-lam)*eta2) - lam*C(eta1) - (1-lam)*C(eta2)] / (lam - 1)``.

    Parameters
    ----------
    log_partition : C, mapping natural parameters of shape (..., d) to shape (...).
    eta1, eta2 : array_like, shape (..., d), natural parameters.
    lam : float or array of finite orders > 1, broadcast against the batch shape.
    in_domain : optional predicate on natural parameters (shape (..., d) -> bool (...)).
        Where it is False at lam*eta1 + (1-lam)*eta2, or C is not finite, the result is inf.

    Plain evaluation: it cancels when C is large; use :func:`renyi_dirichlet` for Beta
    and Dirichlet. Raises ValueError for lam <= 1 or lam = inf (no generic sup formula).
    """
    lam = _as_orders(lam)
    if (lam <= 1).any() or np.isinf(lam).any():
        raise ValueError(f"renyi_expfam needs finite lam > 1; got {lam}")
    eta1 = np.asarray(eta1, float)
    eta2 = np.asarray(eta2, float)
    lam_b = lam[..., None]
    mix = lam_b * eta1 + (1.0 - lam_b) * eta2
    with np.errstate(invalid="ignore", over="ignore"):
        c_mix = np.asarray(log_partition(mix), float)
        val = (c_mix - lam * log_partition(eta1) - (1.0 - lam) * log_partition(eta2)) / (lam - 1.0)
    ok = np.isfinite(c_mix)
    if in_domain is not None:
        ok &= np.asarray(in_domain(mix), bool)
    out = np.where(ok, np.maximum(val, 0.0), np.inf)
    return out[()] if np.ndim(out) == 0 else out
