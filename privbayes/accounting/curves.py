"""RDP curves eps(orders) of standard mechanisms, vectorised over orders (docs/background.md §1-§2).

Every function takes ``orders`` (scalar or array, each >= 1 or inf; order 1 is the KL
limit) and returns an array of the same shape, in nats, ``inf`` where unbounded.

Every value is an upper bound on the exact one: each formula is evaluated in a form
without cancellation or overflow, and then rounded up by a bound on its own floating-
point error (docs/accounting.md §1-§2). A value is exactly 0 only where the mechanism is
exactly non-informative (sensitivity 0, q = 0, eps0 = 0, rho = 0, p = 1/2); otherwise it
is at least the smallest positive double, even where the exact value underflows.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
from scipy import integrate, special

from ..certified import round_up

_U = 2.0**-53  # unit roundoff of doubles


def _orders(orders) -> np.ndarray:
    arr = np.asarray(orders)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"orders must be numbers; got dtype {arr.dtype}")
    arr = arr.astype(float)
    if np.isnan(arr).any() or (arr < 1).any():
        raise ValueError(f"orders must be >= 1 (1 = KL) or inf; got {orders!r}")
    return arr


def _number(value, name: str, high: float = math.inf) -> float:
    """A real number in [0, high] (finite); strings and bools are refused."""
    if isinstance(value, str | bool):
        raise TypeError(f"{name} must be a number; got {value!r}")
    v = float(value)
    if not (0 <= v <= high and math.isfinite(v)):  # NaN fails too
        raise ValueError(f"{name} must be finite and lie in [0, {high:g}]; got {value!r}")
    return v


def _nonneg(value, name: str) -> float:
    return _number(value, name)


def _exact_nonneg(value, name: str) -> Fraction:
    """A finite number >= 0 as the exact rational it is: ints (of any size), Fractions and
    floats (NumPy's long double too) are never rounded. Through a float, an int above 2^53
    (e.g. Gamma-Poisson's Delta^2 = max_count^2) or a Fraction may round *down*, and a
    certificate computed from it would fall below the exact one."""
    if isinstance(value, str | bool | np.bool_):
        raise TypeError(f"{name} must be a number; got {value!r}")
    if isinstance(value, int | np.integer):
        q = Fraction(int(value))
    elif isinstance(value, Fraction):
        q = value
    elif isinstance(value, float | np.floating):
        if not np.isfinite(value):  # NaN and inf
            raise ValueError(f"{name} must be finite and lie in [0, inf); got {value!r}")
        q = Fraction(*value.as_integer_ratio())
    else:
        q = Fraction(_number(value, name))
    if not q >= 0:
        raise ValueError(f"{name} must be finite and lie in [0, inf); got {value!r}")
    return q


def _probability(value, name: str) -> float:
    return _number(value, name, 1.0)


def _up(x, rel: float = 8 * _U) -> np.ndarray:
    """Round a non-negative value computed with relative error <= ``rel`` up past the exact
    value: x (1 + rel + 2u), then one more ulp (so a value that underflowed to 0 becomes the
    smallest positive double). inf stays inf."""
    x = np.asarray(x, float)
    with np.errstate(over="ignore"):
        return np.nextafter(x * (1.0 + rel + 2 * _U), np.inf)


def _ratio_squared(num: float, den: float) -> float:
    """(num / den)^2 in IEEE arithmetic (inf on overflow, never OverflowError)."""
    with np.errstate(over="ignore", under="ignore"):
        r = np.float64(num) / np.float64(den)
        return float(r * r)


def _two_point_rdp(t: np.ndarray, ell: float, skew: float) -> np.ndarray:
    """RDP at orders 1 + t of a privacy loss that is +ell w.p. (1+skew)/2, -ell otherwise
    (randomized response; pure DP's tight curve is the case skew = tanh(ell/2)).

    log E[e^(t L)] / t = log1p(2 sinh^2(t ell / 2) + skew sinh(t ell)) / t: both terms >= 0,
    so nothing cancels for small t or ell; for large t ell the same value in log space.
    Relative error <= 12 u (docs/accounting.md §1).
    """
    with np.errstate(over="ignore", under="ignore"):
        x = t * ell
        out = np.empty(np.shape(t))
        small = x < 20
        xs, ts = x[small], t[small]
        out[small] = np.log1p(2 * np.sinh(xs / 2) ** 2 + skew * np.sinh(xs)) / ts
        xl, tl = x[~small], t[~small]
        # e^x (1 + skew)/2 + e^-x (1 - skew)/2, in logs
        out[~small] = (xl + np.log((1 + skew) / 2 + (1 - skew) / 2 * np.exp(-2 * xl))) / tl
    return out


def pure_dp_rdp(orders, eps0: float) -> np.ndarray:
    """Tight RDP curve of a pure eps0-DP mechanism (Bun & Steinke 2016; docs/background.md §1).

    ``1/(lam-1) * log[(sinh(lam e) - sinh((lam-1) e)) / sinh(e)]``, which is randomized
    response with p = e^e / (1 + e^e); evaluated as ``log1p(2 sinh^2(t e/2) + tanh(e/2)
    sinh(t e)) / t`` with t = lam - 1 (our rearrangement: every term >= 0, so neither tiny
    e nor orders near 1 cancel), in logs for large t e. lam = 1 gives the KL limit
    ``e * tanh(e / 2)``, lam = inf gives eps0. Rounded up, never above eps0.
    """
    lam = _orders(orders)
    e = _nonneg(eps0, "eps0")
    if e == 0:
        return np.zeros(lam.shape)
    out = np.full(lam.shape, e)
    mid = np.isfinite(lam) & (lam > 1)
    out[mid] = _up(_two_point_rdp(lam[mid] - 1, e, math.tanh(e / 2)), 16 * _U)
    out[lam == 1] = _up(e * math.tanh(e / 2))
    return np.minimum(out, e)  # the exact curve never exceeds eps0


def zcdp_rdp(orders, rho: float) -> np.ndarray:
    """rho-zCDP as an RDP curve: eps(lam) = rho * lam (inf at lam = inf unless rho = 0)."""
    lam = _orders(orders)
    rho = _nonneg(rho, "rho")
    if rho == 0:
        return np.zeros(lam.shape)
    with np.errstate(over="ignore"):
        return _up(rho * lam)


def gaussian_rdp(orders, sigma: float, sensitivity: float = 1.0) -> np.ndarray:
    """Gaussian mechanism, noise std ``sigma``: eps(lam) = lam Delta^2 / (2 sigma^2) (Table II).

    sigma = 0 (no noise) is unbounded at every order; sensitivity 0 is 0 everywhere.
    Evaluated as lam (Delta / sigma)^2 / 2 (no overflow in the intermediate squares).
    """
    lam = _orders(orders)
    sigma = _nonneg(sigma, "sigma")
    sens = _nonneg(sensitivity, "sensitivity")
    if sens == 0:
        return np.zeros(lam.shape)
    if sigma == 0:
        return np.full(lam.shape, np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        out = _up(lam * _ratio_squared(sens, sigma) / 2)
    return np.where(np.isinf(lam), np.inf, out)  # also when the ratio underflows to 0


def _laplace_near(lm: np.ndarray, t: np.ndarray, s: float) -> np.ndarray:
    """(lam e^(t s) + t e^(-lam s)) / (2 lam - 1) - 1 for lam s < 1/2, as the series
    lam t / (2 lam - 1) sum_{k>=2} s^k (t^(k-1) + (-1)^k lam^(k-1)) / k! of
    docs/accounting.md §1, whose terms decrease by a factor <= lam s / 3."""
    acc = np.zeros(lm.shape)
    for k in range(2, 26):
        m = k - 1
        if m % 2:  # t^m + lam^m
            p = t**m + lm**m
        else:  # t^m - lam^m = -(lam - t) sum_j lam^j t^(m-1-j), and lam - t = 1
            p = -sum(lm**j * t ** (m - 1 - j) for j in range(m))
        acc += p * s**k / math.factorial(k)
    return lm * t / (2 * lm - 1) * acc


def laplace_rdp(orders, b: float, sensitivity: float = 1.0) -> np.ndarray:
    """Laplace mechanism with scale ``b`` (Mironov 2017, Table II), in log space.

    ``1/(lam-1) log[lam/(2lam-1) e^((lam-1)/b') + (lam-1)/(2lam-1) e^(-lam/b')]`` with
    b' = b / sensitivity; lam = 1: 1/b' + e^(-1/b') - 1; lam = inf: 1/b'. Small lam / b'
    uses the cancellation-free series of docs/accounting.md §1.
    """
    lam = _orders(orders)
    b = _nonneg(b, "b")
    sens = _nonneg(sensitivity, "sensitivity")
    if sens == 0:
        return np.zeros(lam.shape)
    if b == 0:
        return np.full(lam.shape, np.inf)
    with np.errstate(over="ignore", under="ignore"):
        s = float(np.float64(sens) / np.float64(b))
    if s == math.inf:
        return np.full(lam.shape, np.inf)
    cap = float(_up(s))  # s is rounded; the exact 1/b' is below this
    out = np.full(lam.shape, cap)
    mid = np.isfinite(lam) & (lam > 1)
    lm = lam[mid]
    t = lm - 1
    val = np.empty(lm.shape)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        series = lm * s < 0.5
        if series.any():
            val[series] = np.log1p(_laplace_near(lm[series], t[series], s)) / t[series]
        direct = ~series & (t * s < 50)
        ld, td = lm[direct], t[direct]
        near = (ld * np.expm1(td * s) + td * np.expm1(-ld * s)) / (2 * ld - 1)
        val[direct] = np.log1p(near) / td
        big = ~series & ~direct
        lb, tb = lm[big], t[big]
        terms = np.stack([np.log(lb / (2 * lb - 1)) + tb * s, np.log(tb / (2 * lb - 1)) - lb * s])
        val[big] = special.logsumexp(terms, axis=0) / tb
    out[mid] = _up(val, 32 * _U)
    if s < 0.5:  # KL = s + expm1(-s) = sum_{k>=2} (-s)^k / k!
        kl = sum((-s) ** k / math.factorial(k) for k in range(2, 30))
    else:
        kl = s + math.expm1(-s)
    out[lam == 1] = _up(kl, 8 * _U)
    return np.clip(out, 0.0, cap)


def randomized_response_rdp(orders, p: float) -> np.ndarray:
    """Randomized response telling the truth with probability p (Mironov 2017, Table II).

    ``1/(lam-1) log(p^lam (1-p)^(1-lam) + (1-p)^lam p^(1-lam))``; lam = 1:
    (2p-1) log(p/(1-p)); lam = inf: |log(p/(1-p))|. p in [0, 1]; p = 0 or 1 is unbounded
    at every order, p = 1/2 is 0. For p in [1/4, 3/4], log(p/(1-p)) is formed as
    log1p(|2p-1| / min(p, 1-p)) (exact numerator, so no cancellation near p = 1/2).
    """
    lam = _orders(orders)
    p = _probability(p, "p")
    if p in (0.0, 1.0):
        return np.full(lam.shape, np.inf)
    if p == 0.5:
        return np.zeros(lam.shape)
    skew = abs(2 * p - 1)  # exact for p in [1/4, 3/4]
    if min(p, 1 - p) >= 0.25:  # |privacy loss|, relative error <= 3u
        ell = math.log1p(skew / min(p, 1 - p))
    else:  # far from 1/2 the two logs do not cancel (and 1/p may overflow)
        ell = abs(math.log(p) - math.log1p(-p))
    out = np.full(lam.shape, float(_up(ell)))
    mid = np.isfinite(lam) & (lam > 1)
    out[mid] = _up(_two_point_rdp(lam[mid] - 1, ell, skew), 24 * _U)
    out[lam == 1] = _up(skew * ell, 8 * _U)
    return np.minimum(out, float(_up(ell)))  # the exact curve never exceeds |ell|


# -- Poisson-subsampled Gaussian ---------------------------------------------------------
#
# A(alpha) = E_mu0[f^alpha] with f = (1 - q) + q mu1/mu0, mu0 = N(0, sigma^2), mu1 = N(1,
# sigma^2), and eps(alpha) = log A / (alpha - 1). We compute log(A - 1), never A: A - 1 is a
# sum or integral of terms >= 0 (docs/accounting.md §2), so nothing cancels when A is near 1
# (tiny q, large sigma, orders near 1), and logs never overflow (tiny sigma).

_INT_MAX = 4096  # integer orders up to here use the exact finite sum
_GL = [np.polynomial.legendre.leggauss(n) for n in (16, 32)]
_QUAD_TOL = 1e-14  # relative accuracy asked of the quadrature


def _eps_from_log_am1(log_am1: float, t: float) -> float:
    """eps = log(1 + (A - 1)) / t from log(A - 1), without underflow when A - 1 < t."""
    if log_am1 == -math.inf:
        return 0.0
    if log_am1 > 35:
        return (log_am1 + math.log1p(math.exp(-log_am1))) / t
    y = math.exp(log_am1)
    ratio = math.log1p(y) / y if y > 0 else 1.0  # log1p(y) / y, in (0, 1]
    return math.exp(log_am1 - math.log(t)) * ratio


def _sg_int(q: float, rho: float, alpha: int) -> tuple[float, float]:
    """log(A - 1) at integer alpha >= 2 and a bound on its absolute rounding error.

    A - 1 = sum_{k>=2} C(alpha, k) q^k (1-q)^(alpha-k) expm1((k^2 - k) rho): the k = 0, 1
    terms of the binomial sum (Mironov et al. 2019) are absorbed by subtracting
    sum_k C(alpha, k) q^k (1-q)^(alpha-k) = 1, leaving terms >= 0 (docs/accounting.md §2).
    """
    k = np.arange(2, alpha + 1, dtype=float)
    with np.errstate(over="ignore", divide="ignore"):
        c = (k * k - k) * rho
        log_em1 = np.where(c > 1, c + np.log1p(-np.exp(-np.minimum(c, 1e308))), 0.0)
        small = c <= 1
        log_em1[small] = np.log(np.expm1(c[small]))
    g_a = special.gammaln(alpha + 1.0)
    g_k, g_ak = special.gammaln(k + 1), special.gammaln(alpha - k + 1)
    lq, l1q = math.log(q), math.log1p(-q)
    terms = g_a - g_k - g_ak + k * lq + (alpha - k) * l1q + log_em1
    log_am1 = float(special.logsumexp(terms))
    if not math.isfinite(log_am1):
        return log_am1, 0.0
    # each term's log has absolute error <= 4u * (sum of the magnitudes it is built from)
    mag = g_a + g_k + g_ak + np.abs(k * lq) + np.abs((alpha - k) * l1q) + np.abs(log_em1) + c
    weights = np.exp(terms - log_am1)
    err = 8 * _U * (float(np.sum(weights * mag)) + abs(log_am1) + math.log(alpha))
    return log_am1, err


def _sg_log_psi(z: np.ndarray, q: float, rho: float, alpha: float):
    """log of the integrand mu0(z) psi(z) with psi = (f^alpha - 1 - alpha (f - 1)) / t,
    t = alpha - 1 (psi = f log f - (f - 1) at t = 0), whose integral is (A - 1)/t (the KL
    at t = 0); psi >= 0 by convexity. Returns (log integrand, magnitude of its parts)."""
    t = alpha - 1.0
    lq, l1q = math.log(q), math.log1p(-q)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        w = 2 * rho * (z - 0.5)  # log(mu1/mu0)
        lf = np.logaddexp(l1q, lq + w)  # log f
        em1 = np.expm1(np.minimum(w, 1.0))  # only its sign is used above w = 1
        # log |f - 1| = log q + log |expm1(w)|: no overflow, no subnormal products
        log_u = math.log(q) + np.where(w > 1, w + np.log1p(-np.exp(-w)), np.log(np.abs(em1)))
        log_psi = np.empty(z.shape)
        series = log_u < min(math.log(0.1), math.log(0.25 / (alpha + 1)))
        # psi = u^2 sum_{k>=2} c_k u^(k-2), c_2 = alpha/2, c_(k+1) = c_k (alpha - k)/(k + 1)
        us = np.copysign(np.exp(log_u[series]), em1[series])
        coef = [alpha / 2]
        for j in range(2, 40):
            coef.append(coef[-1] * (alpha - j) / (j + 1))
        poly = np.zeros(us.shape)
        for cf in reversed(coef):
            poly = poly * us + cf
        log_psi[series] = 2 * log_u[series] + np.log(poly)
        neg = ~series & (lf <= 0)  # f < 1: every quantity is moderate
        ln = lf[neg]
        e_n = np.expm1(t * ln) / t if t > 0 else ln
        log_psi[neg] = ln + np.log(e_n + np.expm1(-ln))
        pos = ~series & (lf > 0)
        lp = lf[pos]
        if t > 0:  # log E, E = expm1(t lf) / t, without overflow
            x = t * lp
            log_e = np.empty(x.shape)
            sm = x < 1
            log_e[sm] = np.log(np.expm1(x[sm]) / t)
            log_e[~sm] = x[~sm] + np.log1p(-np.exp(-x[~sm])) - math.log(t)
        else:
            log_e = np.log(lp)
        # psi = f (E - (1 - 1/f)) with E = expm1(t lf)/t >= lf > 1 - 1/f
        log_psi[pos] = lp + log_e + np.log1p(np.expm1(-lp) * np.exp(-log_e))
        log_mu0 = -rho * z * z + 0.5 * math.log(rho / math.pi)
        # a bound on |each part| of log(integrand): its rounding error is a few u times it
        mag = rho * z * z + abs(0.5 * math.log(rho / math.pi)) + alpha * (np.abs(w) - lq) + 1
        mag = mag + np.abs(np.where(np.isfinite(log_psi), log_psi, 0.0))
    return log_mu0 + log_psi, mag


def _sg_peaks(q: float, rho: float, alpha: float) -> list[float]:
    """Where the integrand can peak: mu0 and mu1 bulk (0, 1, 2), the switch z0 of f from
    1 - q to q mu1/mu0, and the stable fixed points of z = alpha r(z) (the modes of
    mu0 f^alpha, r = q mu1 / (mu0 f) a logistic function of z)."""
    w0 = math.log1p(-q) - math.log(q)
    z0 = 0.5 + w0 / (2 * rho)

    def fixed(z: float) -> float:
        for _ in range(60):
            x = 2 * rho * (z - 0.5) - w0
            r = 1 / (1 + math.exp(-x)) if x > -700 else 0.0
            z_new = alpha * r
            if abs(z_new - z) <= 1e-6 * (1 + abs(z)):
                return z_new
            z = z_new
        return z

    return [0.0, 1.0, 2.0, z0, alpha, fixed(0.0), fixed(alpha)]


def _lse(x: np.ndarray, axis=None) -> np.ndarray:
    """log sum exp along ``axis`` (-inf for empty or all -inf)."""
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out.squeeze(axis) if axis is not None else float(out.ravel()[0])


_NODES = np.concatenate([_GL[0][0], _GL[1][0]])
_LOGW16, _LOGW32 = np.log(_GL[0][1]), np.log(_GL[1][1])


def _log_quad(logf, breaks: np.ndarray, tol: float) -> tuple[float, float, float]:
    """log of the integral of exp(logf) over [breaks[0], breaks[-1]], by adaptive
    Gauss-Legendre panels (16 vs 32 nodes, bisecting panels whose two rules disagree),
    all in logs. Returns (log integral, relative error estimate, max part magnitude)."""
    a, b = breaks[:-1], breaks[1:]
    keep = b > a
    a, b = a[keep], b[keep]
    done_log, done_err, done_mag = [], [], []
    for _ in range(60):
        if a.size == 0 or a.size > 2000:
            break
        mid, half = (a + b) / 2, (b - a) / 2
        lv, mag = logf((mid[:, None] + half[:, None] * _NODES).ravel())
        lv, mag = lv.reshape(a.size, -1), mag.reshape(a.size, -1)
        log_half = np.log(half)
        l16 = _lse(lv[:, :16] + _LOGW16, axis=1) + log_half
        l32 = _lse(lv[:, 16:] + _LOGW32, axis=1) + log_half
        empty = np.isneginf(l32) & np.isneginf(l16)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            log_err = l32 + np.log(np.abs(np.expm1(l16 - l32)))
        log_err = np.where(empty, -np.inf, log_err)
        total = _lse(np.concatenate([done_log, l32]))
        ok = (log_err <= math.log(tol) + total) | empty
        ok |= half <= 1e-15 * np.maximum(np.abs(mid), 1e-300)  # cannot split further
        # the parts' magnitude averaged with each node's share of the panel's integral
        with np.errstate(invalid="ignore"):
            share = np.exp(lv[:, 16:] + _LOGW32 + log_half[:, None] - l32[:, None])
        panel_mag = np.sum(np.where(share > 0, share * mag[:, 16:], 0.0), axis=1)
        done_log.extend(l32[ok].tolist())
        done_err.extend(log_err[ok].tolist())
        done_mag.extend(panel_mag[ok].tolist())
        a, b, mid = a[~ok], b[~ok], mid[~ok]
        a, b = np.concatenate([a, mid]), np.concatenate([mid, b])
    if a.size:  # not converged: let the caller fall back
        return math.nan, math.inf, math.inf
    log_i = _lse(np.array(done_log))
    if log_i == -math.inf:
        return log_i, 0.0, 0.0
    rel_err = math.exp(_lse(np.array(done_err)) - log_i) if done_err else 0.0
    shares = np.exp(np.array(done_log) - log_i)
    return log_i, rel_err, float(np.sum(np.where(shares > 0, shares * done_mag, 0.0)))


def _sg_quad(q: float, rho: float, alpha: float) -> tuple[float, float]:
    """log H and a bound on its error, H = (A - 1)/(alpha - 1) (H = KL at alpha = 1), by
    quadrature of mu0 psi >= 0 (docs/accounting.md §2)."""
    sig = math.sqrt(0.5 / rho)
    peaks = [p for p in _sg_peaks(q, rho, alpha) if math.isfinite(p)]
    lo, hi = min(peaks) - 13 * sig, max(peaks) + 13 * sig
    pts = sorted({lo, hi} | {p + k * sig for p in peaks for k in (-8, -4, -2, -1, 0, 1, 2, 4, 8)})
    breaks = [lo]
    for x in pts:  # panels at least sigma / 4 wide (closer points add nothing)
        if lo < x < hi and x - breaks[-1] >= sig / 4:
            breaks.append(x)
    breaks.append(hi)
    breaks = np.array(breaks)
    log_i, rel, mag = _log_quad(lambda z: _sg_log_psi(z, q, rho, alpha), breaks, _QUAD_TOL)
    if not math.isfinite(log_i) or rel > 1e-10:
        log_i, rel, mag = _sg_quad_scipy(q, rho, alpha, breaks)
    return log_i, 2 * rel + 1e-14 + 8 * _U * mag


def _sg_quad_scipy(q, rho, alpha, breaks) -> tuple[float, float, float]:
    """Fallback: scipy's adaptive quad over the same panels, scaled by the largest value."""
    z = np.linspace(breaks[0], breaks[-1], 4001)
    lv, mag = _sg_log_psi(np.concatenate([z, breaks]), q, rho, alpha)
    m = float(np.max(lv))

    def f(x: float) -> float:
        return float(np.exp(_sg_log_psi(np.array([x]), q, rho, alpha)[0][0] - m))

    total = err = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        for lo, hi in zip(breaks[:-1], breaks[1:], strict=True):
            v, e = integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=200)
            total, err = total + v, err + e
    if total <= 0:
        return -math.inf, 0.0, 0.0
    return m + math.log(total), err / total, float(np.max(mag))


def subsampled_gaussian_rdp(orders, q: float, sigma: float) -> np.ndarray:
    """One step of the Poisson-subsampled Gaussian mechanism (add/remove neighbours,
    sensitivity 1): sampling rate ``q``, noise multiplier ``sigma``.

    Exact, not an upper bound up to rounding (then rounded up): integer orders up to 4096
    by the binomial sum of Mironov, Talwar & Zhang (2019) rearranged into terms >= 0;
    other orders (order 1 = KL included) by adaptive quadrature of a non-negative
    integrand, all in logs (docs/accounting.md §2). q = 0 is 0 everywhere, q = 1 the plain
    Gaussian alpha / (2 sigma^2), sigma = 0 unbounded, order inf unbounded for q > 0.
    sigma so small that 1 / (2 sigma^2) overflows (sigma < 5e-155) gives inf (an upper
    bound; the exact values exceed 1e300 unless q is below about 1e-300).

    Neighbours here are add/remove (as in DP-SGD accountants), not privbayes's replace-one:
    ``functools.partial(subsampled_gaussian_rdp, q=..., sigma=...)`` carries that relation,
    and accountants and ledgers refuse to compose it with replace-one curves
    (NeighbourRelationError; docs/accounting.md §9). A bare function or array of it
    carries none: compose it with ``relation="add/remove"``.
    """
    lam = _orders(orders)
    q = _probability(q, "q")
    sigma = _nonneg(sigma, "sigma")
    if q == 0:
        return np.zeros(lam.shape)
    if sigma == 0:
        return np.full(lam.shape, np.inf)
    if q == 1:
        return gaussian_rdp(lam, sigma)
    with np.errstate(over="ignore", under="ignore"):
        rho = float(0.5 / (np.float64(sigma) * np.float64(sigma)))
    flat = lam.ravel()
    out = np.empty(flat.shape)
    for idx, a in enumerate(flat.tolist()):
        if math.isinf(a) or math.isinf(rho):
            out[idx] = math.inf
            continue
        t = a - 1.0
        if a.is_integer() and 2 <= a <= _INT_MAX:
            log_am1, err = _sg_int(q, rho, int(a))
            out[idx] = _eps_from_log_am1(log_am1 + err, t)
        else:
            log_h, err = _sg_quad(q, rho, a)
            if t == 0:
                out[idx] = math.exp(log_h + err) if log_h > -math.inf else 0.0
            else:
                out[idx] = _eps_from_log_am1(math.log(t) + log_h + err, t)
    return _up(out.reshape(lam.shape), 8 * _U)


# -- the discrete Gaussian (Canonne, Kamath & Steinke 2020) ---------------------------------


def discrete_gaussian_rdp(orders, sigma2: float, sensitivity_sq: float = 1.0) -> np.ndarray:
    """Discrete Gaussian mechanism N_Z(0, sigma2) on an integer statistic whose neighbours
    differ by an integer vector of squared L2 norm <= ``sensitivity_sq`` (Delta^2):
    eps(lam) = lam Delta^2 / (2 sigma2) (Canonne, Kamath & Steinke 2020, Prop. 5 and
    Thm. 15 for vectors of independent coordinates; docs/noise_aware.md §2).

    Evaluated in exact rationals and rounded up at every order (so it is an upper bound
    however extreme the parameters). It equals the exact divergence of the worst pair at
    the orders where (lam - 1) Delta is an integer (e.g. every integer order for Delta = 1)
    and exceeds it elsewhere by less than 4 exp(-2 pi^2 sigma2) / (lam - 1) (docs/
    noise_aware.md §2). Order 1 is the KL limit Delta^2 / (2 sigma2); order inf is inf.
    sigma2 = 0 is unbounded at every order; sensitivity 0 is 0 everywhere.
    """
    lam = _orders(orders)
    s2 = _exact_nonneg(sigma2, "sigma2")
    d2 = _exact_nonneg(sensitivity_sq, "sensitivity_sq")
    if d2 == 0:
        return np.zeros(lam.shape)
    if s2 == 0:
        return np.full(lam.shape, np.inf)
    scale = d2 / (2 * s2)
    flat = lam.ravel()
    out = np.empty(flat.shape)
    memo: dict[float, float] = {}
    for i, a in enumerate(flat.tolist()):
        if a not in memo:
            memo[a] = math.inf if math.isinf(a) else round_up(Fraction(a) * scale)
        out[i] = memo[a]
    return out.reshape(lam.shape)
