"""Closed-form Rényi divergences of Gamma and Normal distributions, evaluated stably.

Both are exponential families, so D_lam = [C(lam*eta1 + (1-lam)*eta2) - lam*C(eta1)
- (1-lam)*C(eta2)] / (lam - 1) (docs/background.md §3). Derivations and the stable forms:
docs/gamma_poisson.md (Gamma) and docs/normal.md (Normal), our own; tests check them
against mpmath at 60+ digits.

Gamma(a, b) (shape a, rate b), C(a, b) = lgamma(a) - a log b. With h = a1 - a2,
rho = (b1 - b2) / b2, z = rho / (1 + rho):

    D = T(a2, h, lam) + a2 * S(rho, lam) - lam * h * z * L((lam - 1) z),
    S(rho, lam) = -[log1p(lam rho) - lam log1p(rho)] / (lam - 1) >= 0,   L(x) = log1p(x)/x,

T the second difference of log-gamma of :mod:`privbayes.divergence`. For equal rates
(every conjugate mechanism here: the rate does not depend on the data) D = T(a2, h, lam),
with no cancellation at any size.

Normal N(mu, sigma^2): with e = sigma1^2/sigma2^2 - 1 and v = 1 - (lam - 1) e (the mixed
variance over sigma2^2),

    D = lam (mu1 - mu2)^2 / (2 sigma2^2 v) + [e L(-(lam - 1) e) - log1p(e)] / 2,

the second term from its own series when e is small (it is O(lam e^2)).
"""

from __future__ import annotations

import numpy as np

from .divergence import _dlgamma_quot, _second_difference

__all__ = ["renyi_gamma", "renyi_normal"]

_SERIES = 0.1  # series when the expansion variable is at most this (terms shrink like it)
_N_TERMS = 20  # 0.1**20: below the double precision of the leading term


def _orders(lam) -> np.ndarray:
    lam = np.asarray(lam, dtype=float)
    if np.isnan(lam).any() or (lam <= 0).any():
        raise ValueError(f"lam must be > 0 (order 1 gives KL, inf the max-divergence); got {lam}")
    return lam


def _positive(v, name: str) -> np.ndarray:
    arr = np.asarray(v, dtype=float)
    if not np.isfinite(arr).all() or (arr <= 0).any():
        raise ValueError(f"{name} must be finite and > 0; got {v!r}")
    return arr


def _finite(v, name: str) -> np.ndarray:
    arr = np.asarray(v, dtype=float)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite; got {v!r}")
    return arr


def _log1p_ratio(x: np.ndarray) -> np.ndarray:
    """L(x) = log1p(x) / x with L(0) = 1 (accurate for tiny x: log1p is)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log1p(x) / x
    return np.where(x == 0, 1.0, out)


def _log1p_second_difference(rho: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """S(rho, lam) = -[log1p(lam rho) - lam log1p(rho)] / (lam - 1) for finite lam > 0.

    Needs 1 + lam rho > 0 and 1 + rho > 0.

    Series sum_{k>=2} (-1)^k rho^k lam g_k / k (g_k = 1 + lam + ... + lam^(k-2)) when
    |lam rho| and |rho| are small; otherwise log1p(rho) - z L((lam - 1) z) with
    z = rho / (1 + rho), which has no 1/(lam - 1) cancellation near lam = 1.
    """
    out = np.empty(np.broadcast_shapes(rho.shape, lam.shape))
    rho, lam = np.broadcast_to(rho, out.shape), np.broadcast_to(lam, out.shape)
    ser = np.maximum(np.abs(lam * rho), np.abs(rho)) <= _SERIES
    if ser.any():
        r, lm = rho[ser], lam[ser]
        # rho^k lam g_k = pref * lt^(k-1) * G_k, arranged so that no power of lam
        # overflows: for lam >= 1, lt = lam rho, pref = rho, G_k = sum_{j<=k-2} lam^-j.
        big = lm >= 1.0
        base = np.where(big, 1.0 / lm, lm)
        lt = np.where(big, lm * r, r)
        pref = np.where(big, r, lm * r)
        acc, g, p, power = np.zeros(r.shape), np.zeros(r.shape), np.ones(r.shape), pref
        for k in range(2, _N_TERMS + 2):
            g = g + p
            p = p * base
            power = power * lt
            acc = acc + (-1.0) ** k * power * g / k
        out[ser] = acc
    rest = ~ser
    if rest.any():
        r, lm = rho[rest], lam[rest]
        z = r / (1.0 + r)
        out[rest] = np.log1p(r) - z * _log1p_ratio((lm - 1.0) * z)
    return out


def renyi_gamma(a1, b1, a2, b2, lam) -> np.ndarray | float:
    """Rényi divergence D_lam(Gamma(a1, b1) || Gamma(a2, b2)), shape a, rate b.

    Parameters
    ----------
    a1, b1, a2, b2 : array_like, finite and > 0, broadcast together (``lam`` too).
    lam : float or array_like, > 0. 1 gives KL; ``inf`` the max-divergence log sup p/q.

    Returns
    -------
    float or ndarray (nats); ``inf`` where lam*a1 + (1-lam)*a2 <= 0 or
    lam*b1 + (1-lam)*b2 <= 0 (finite lam), and for lam = inf unless a1 >= a2 and b1 > b2
    (or a1 = a2, b1 >= b2).

    Accuracy: equal rates (every mechanism in privbayes) go through the log-gamma second
    difference alone and agree with mpmath to ~1e-12 relative for shapes 1e-4 .. 1e12 and
    orders 1 + 1e-10 .. 1e3. With unequal rates the three terms are summed; when shape and
    rate change in the same proportion (nearly equal means) they cancel, and the relative
    error grows like 1e-16 times the ratio of the terms to the result (docs/gamma_poisson.md).

    Raises ValueError for non-positive or non-finite parameters and lam <= 0 or NaN.
    Source: docs/background.md §3 (exponential-family closed form); stable evaluation ours.
    """
    a1, b1 = _positive(a1, "a1"), _positive(b1, "b1")
    a2, b2 = _positive(a2, "a2"), _positive(b2, "b2")
    lam = _orders(lam)
    a1, b1, a2, b2, lam = np.broadcast_arrays(a1, b1, a2, b2, lam)
    shape = a1.shape
    a1, b1, a2, b2, lam = (v.ravel() for v in (a1, b1, a2, b2, lam))
    out = np.empty(a1.size)
    h, k = a1 - a2, b1 - b2
    rho = k / b2
    fin = np.isfinite(lam)
    if fin.any():
        f = fin
        t = _second_difference(a2[f], h[f], lam[f])
        lm, rr = lam[f], rho[f]
        ok = 1.0 + lm * rr > 0  # the mixed rate stays positive
        rate_part = np.zeros(t.shape)
        live = ok & (rr != 0)
        if live.any():
            lv, rv = lm[live], rr[live]
            z = rv / (1.0 + rv)
            s = _log1p_second_difference(rv, lv)
            rate_part[live] = a2[f][live] * s - lv * h[f][live] * z * _log1p_ratio((lv - 1.0) * z)
        with np.errstate(invalid="ignore"):
            val = np.where(ok & np.isfinite(t), t + rate_part, np.inf)
        out[f] = np.maximum(val, 0.0)
    inf = ~fin
    if inf.any():
        out[inf] = _gamma_max_divergence(a2[inf], h[inf], b1[inf], k[inf], rho[inf])
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out


def _gamma_max_divergence(a2, h, b1, k, rho) -> np.ndarray:
    """log sup p/q = h [log(h b1 / k) - 1 - Q(a2, h)] + a2 log1p(rho) where bounded."""
    out = np.full(a2.shape, np.inf)
    zero = (h == 0) & (k >= 0)
    out[zero] = np.maximum(a2[zero] * np.log1p(rho[zero]), 0.0)
    pos = (h > 0) & (k > 0)
    if pos.any():
        hp, ap = h[pos], a2[pos]
        q = _dlgamma_quot(ap, hp)  # (lgamma(a1) - lgamma(a2)) / h
        val = hp * (np.log(hp) + np.log(b1[pos]) - np.log(k[pos]) - 1.0 - q)
        out[pos] = np.maximum(val + ap * np.log1p(rho[pos]), 0.0)
    return out


def _variance_part(e: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """[e L(-(lam-1) e) - log1p(e)] / 2: the Rényi divergence of N(0, (1+e)) from N(0, 1).

    Series (1/2) sum_{j>=2} e^j / j [(lam-1)^(j-1) + (-1)^j] when e and (lam-1) e are small.
    """
    out = np.empty(np.broadcast_shapes(e.shape, lam.shape))
    e, lam = np.broadcast_to(e, out.shape), np.broadcast_to(lam, out.shape)
    eps1 = lam - 1.0
    ser = np.maximum(np.abs(e), np.abs(eps1 * e)) <= _SERIES
    if ser.any():
        es, ls = e[ser], eps1[ser]
        q = ls * es  # e^j (lam-1)^(j-1) = e q^(j-1): no overflow for huge lam
        acc = np.zeros(es.shape)
        pe, pq = es.copy(), es.copy()
        for j in range(2, _N_TERMS + 2):
            pe = pe * es  # e^j
            pq = pq * q  # e q^(j-1)
            acc = acc + (pq + (-1.0) ** j * pe) / j
        out[ser] = 0.5 * acc
    rest = ~ser
    if rest.any():
        es, ls = e[rest], eps1[rest]
        out[rest] = 0.5 * (es * _log1p_ratio(-ls * es) - np.log1p(es))
    return out


def renyi_normal(mu1, sigma1, mu2, sigma2, lam) -> np.ndarray | float:
    """Rényi divergence D_lam(N(mu1, sigma1^2) || N(mu2, sigma2^2)); sigma are standard deviations.

    Parameters
    ----------
    mu1, mu2 : array_like, finite. sigma1, sigma2 : array_like, finite and > 0.
    lam : float or array_like, > 0 (1 gives KL, inf the max-divergence). All broadcast.

    Returns
    -------
    float or ndarray (nats); ``inf`` where lam*sigma2^2 + (1-lam)*sigma1^2 <= 0 and, for
    lam = inf, unless sigma1 < sigma2 (or the two distributions are equal). Equal
    variances give lam (mu1 - mu2)^2 / (2 sigma^2): no pure-DP (lam = inf) bound exists.

    Raises ValueError for non-finite means, non-positive or non-finite sigmas, lam <= 0.
    Source: docs/background.md §3 (exponential-family closed form; Gil, Alajaji & Linder 2013
    give the same formula); stable evaluation ours (docs/normal.md).
    """
    mu1, mu2 = _finite(mu1, "mu1"), _finite(mu2, "mu2")
    s1, s2 = _positive(sigma1, "sigma1"), _positive(sigma2, "sigma2")
    lam = _orders(lam)
    mu1, s1, mu2, s2, lam = np.broadcast_arrays(mu1, s1, mu2, s2, lam)
    shape = mu1.shape
    mu1, s1, mu2, s2, lam = (v.ravel() for v in (mu1, s1, mu2, s2, lam))
    out = np.empty(mu1.size)
    d = mu1 - mu2
    e = (s1 - s2) * (s1 + s2) / s2 / s2  # sigma1^2/sigma2^2 - 1 without cancellation
    fin = np.isfinite(lam)
    if fin.any():
        lm, ef, df, sf = lam[fin], e[fin], d[fin], s2[fin]
        v = 1.0 - (lm - 1.0) * ef
        ok = v > 0
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            mean_part = lm * (df / sf) ** 2 / (2.0 * v)
            val = mean_part + _variance_part(ef, lm)
        out[fin] = np.where(ok, np.maximum(val, 0.0), np.inf)
    inf = ~fin
    if inf.any():
        ei, di, si = e[inf], d[inf], s2[inf]
        res = np.full(ei.shape, np.inf)
        res[(ei == 0) & (di == 0)] = 0.0
        lt = ei < 0
        with np.errstate(divide="ignore", over="ignore"):
            res[lt] = -0.5 * np.log1p(ei[lt]) + (di[lt] / si[lt]) ** 2 / (-2.0 * ei[lt])
        out[inf] = res
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out
