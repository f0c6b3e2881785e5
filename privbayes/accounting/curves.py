"""RDP curves eps(orders) of standard mechanisms, vectorised over orders (BACKGROUND.md §1-§2).

Every function takes ``orders`` (scalar or array, each >= 1 or inf; order 1 is the KL
limit) and returns an array of the same shape, in nats, ``inf`` where unbounded.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import integrate, special


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


def _probability(value, name: str) -> float:
    return _number(value, name, 1.0)


def _two_point_rdp(t: np.ndarray, ell: float, skew: float) -> np.ndarray:
    """RDP at orders 1 + t of a privacy loss that is +ell w.p. (1+skew)/2, -ell otherwise
    (randomized response; pure DP's tight curve is the case skew = tanh(ell/2)).

    log E[e^(t L)] / t = log1p(2 sinh^2(t ell / 2) + skew sinh(t ell)) / t: both terms >= 0,
    so nothing cancels for small t or ell; for large t ell the same value in log space.
    """
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
    """Tight RDP curve of a pure eps0-DP mechanism (Bun & Steinke 2016; BACKGROUND.md §1).

    ``1/(lam-1) * log[(sinh(lam e) - sinh((lam-1) e)) / sinh(e)]``, which is randomized
    response with p = e^e / (1 + e^e); evaluated as ``log1p(2 sinh^2(t e/2) + tanh(e/2)
    sinh(t e)) / t`` with t = lam - 1 (our rearrangement: every term >= 0, so neither tiny
    e nor orders near 1 cancel), in logs for large t e. lam = 1 gives the KL limit
    ``e * tanh(e / 2)``, lam = inf gives eps0.
    """
    lam = _orders(orders)
    e = _nonneg(eps0, "eps0")
    if e == 0:
        return np.zeros(lam.shape)
    out = np.full(lam.shape, e)
    mid = np.isfinite(lam) & (lam > 1)
    out[mid] = _two_point_rdp(lam[mid] - 1, e, np.tanh(e / 2))
    out[lam == 1] = e * np.tanh(e / 2)
    return np.minimum(out, e)  # rounding guard: the curve never exceeds eps0


def zcdp_rdp(orders, rho: float) -> np.ndarray:
    """rho-zCDP as an RDP curve: eps(lam) = rho * lam (inf at lam = inf unless rho = 0)."""
    lam = _orders(orders)
    rho = _nonneg(rho, "rho")
    if rho == 0:
        return np.zeros(lam.shape)
    return rho * lam


def gaussian_rdp(orders, sigma: float, sensitivity: float = 1.0) -> np.ndarray:
    """Gaussian mechanism, noise std ``sigma``: eps(lam) = lam Delta^2 / (2 sigma^2) (Table II).

    sigma = 0 (no noise) is unbounded at every order.
    """
    lam = _orders(orders)
    sigma = _nonneg(sigma, "sigma")
    sens = _nonneg(sensitivity, "sensitivity")
    if sens == 0:
        return np.zeros(lam.shape)
    if sigma == 0:
        return np.full(lam.shape, np.inf)
    return lam * sens**2 / (2 * sigma**2)


def laplace_rdp(orders, b: float, sensitivity: float = 1.0) -> np.ndarray:
    """Laplace mechanism with scale ``b`` (Mironov 2017, Table II), in log space.

    ``1/(lam-1) log[lam/(2lam-1) e^((lam-1)/b') + (lam-1)/(2lam-1) e^(-lam/b')]`` with
    b' = b / sensitivity; lam = 1: 1/b' + e^(-1/b') - 1; lam = inf: 1/b'.
    """
    lam = _orders(orders)
    b = _nonneg(b, "b")
    sens = _nonneg(sensitivity, "sensitivity")
    if sens == 0:
        return np.zeros(lam.shape)
    if b == 0:
        return np.full(lam.shape, np.inf)
    inv = sens / b
    out = np.full(lam.shape, inv)
    mid = np.isfinite(lam) & (lam > 1)
    lm = lam[mid]
    t = lm - 1
    with np.errstate(over="ignore"):
        # near order 1 the log's argument is 1 + O(t): form that O(t) part directly
        near = (lm * np.expm1(t * inv) + t * np.expm1(-lm * inv)) / (2 * lm - 1)
        small = np.log1p(near) / t
    terms = np.stack([np.log(lm / (2 * lm - 1)) + t * inv, np.log(t / (2 * lm - 1)) - lm * inv])
    large = special.logsumexp(terms, axis=0) / t
    out[mid] = np.where((t < 1) & (t * inv < 50), small, large)
    out[lam == 1] = inv + np.expm1(-inv)
    return np.clip(out, 0.0, inv)


def randomized_response_rdp(orders, p: float) -> np.ndarray:
    """Randomized response telling the truth with probability p (Mironov 2017, Table II).

    ``1/(lam-1) log(p^lam (1-p)^(1-lam) + (1-p)^lam p^(1-lam))``; lam = 1:
    (2p-1) log(p/(1-p)); lam = inf: |log(p/(1-p))|. p in [0, 1]; p = 0 or 1 is unbounded
    (except at... every order > 1 and at 1), p = 1/2 is 0.
    """
    lam = _orders(orders)
    p = _probability(p, "p")
    if p in (0.0, 1.0):
        return np.full(lam.shape, np.inf)
    lp, lq = math.log(p), math.log1p(-p)
    ell = lp - lq  # the privacy loss is +ell with probability p, -ell with 1 - p
    out = np.full(lam.shape, abs(ell))
    mid = np.isfinite(lam) & (lam > 1)
    lm = lam[mid]
    t = lm - 1
    out[mid] = _two_point_rdp(t, abs(ell), abs(2 * p - 1))
    out[lam == 1] = (2 * p - 1) * (lp - lq)
    return np.maximum(out, 0.0)


# -- Poisson-subsampled Gaussian ---------------------------------------------------------

_SERIES_MAX_TERMS = 300
_NEAR_ONE = 0.01  # orders below 1 + this use quadrature


def _log_add(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi, lo = max(a, b), min(a, b)
    return hi + math.log1p(math.exp(lo - hi))


def _log_sub(a: float, b: float) -> float:
    """log(e^a - e^b) for a >= b (a tiny negative difference from rounding gives -inf)."""
    if b == -math.inf:
        return a
    if b >= a:
        return -math.inf
    return a + math.log(-math.expm1(b - a))


def _log_a_int(q: float, sigma: float, alpha: int) -> float:
    """log E[(mu/mu0)^alpha] for integer alpha: a finite binomial sum (Mironov et al. 2019)."""
    k = np.arange(alpha + 1, dtype=float)
    log_terms = (
        special.gammaln(alpha + 1)
        - special.gammaln(k + 1)
        - special.gammaln(alpha - k + 1)
        + k * math.log(q)
        + (alpha - k) * math.log1p(-q)
        + (k * k - k) / (2 * sigma**2)
    )
    return float(special.logsumexp(log_terms))


def _log_erfc(x: float) -> float:
    return math.log(2.0) + special.log_ndtr(-x * math.sqrt(2.0))


def _near_one_quad(q: float, sigma: float, alpha: float) -> float:
    """eps at an order in [1, 1.01): log1p(I)/(alpha - 1) with I = A - 1 = O(alpha - 1)
    by quadrature; at alpha = 1 exactly the KL divergence, the integral of
    mu0 (f log f - (f - 1)) >= 0."""
    if alpha > 1:
        return _log_a_quad(q, sigma, alpha) / (alpha - 1)
    s2 = sigma * sigma

    def integrand(z: float) -> float:
        u = q * math.expm1((2 * z - 1) / (2 * s2))
        g = (1 + u) * math.log1p(u) - u
        return math.exp(-z * z / (2 * s2)) / math.sqrt(2 * math.pi * s2) * g

    parts = [(-40 * sigma, 0.5), (0.5, 2.0 + 40 * sigma)]
    return sum(
        integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-12, limit=400)[0] for lo, hi in parts
    )


def _log_a_quad(q: float, sigma: float, alpha: float) -> float:
    """log E_{mu0}[f^alpha], f = (1-q) + q mu1/mu0, by adaptive quadrature of the
    non-negative integrand mu0 (f^alpha - 1 - alpha (f - 1)) (its integral is A - 1, as
    E f = 1), so nothing cancels even for alpha near 1."""
    s2 = sigma * sigma

    def integrand(z: float) -> float:
        u = q * math.expm1((2 * z - 1) / (2 * s2))  # f - 1, exact for small values
        if abs(u) < 0.1:  # (1+u)^alpha - 1 - alpha u as its binomial series
            term, acc, k = u * u * alpha * (alpha - 1) / 2, 0.0, 2
            while abs(term) > 1e-17 * abs(acc) or k == 2:
                acc += term
                term *= u * (alpha - k) / (k + 1)
                k += 1
            g = acc
        else:  # the same quantity, with both terms O(alpha - 1): no cancellation near 1
            g = (1 + u) * math.expm1((alpha - 1) * math.log1p(u)) - (alpha - 1) * u
        return math.exp(-z * z / (2 * s2)) / math.sqrt(2 * math.pi * s2) * g

    # the integrand's mass sits between the two Gaussians' bulk and alpha's tilt
    hi = 1.0 + alpha + 40 * sigma
    parts = [(-40 * sigma, 0.5), (0.5, hi)]
    with warnings.catch_warnings():  # quad's roundoff notices at 1e-12 requested accuracy
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        total = sum(
            integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-12, limit=400)[0]
            for lo, hi in parts
        )

    return math.log1p(total)


def _log_a_frac(q: float, sigma: float, alpha: float) -> float:
    """log E[(mu/mu0)^alpha] for fractional alpha: the exact two-series expansion of
    Mironov, Talwar & Zhang (2019, §3.3), summed until the terms fall below e^-33 of the
    running total, with signs handled in log space. Near alpha = 1 with a large q the
    series converges too slowly (dp-accounting drops such orders); we switch to
    :func:`_log_a_quad`, which is exact too."""
    log_a0 = log_a1 = -math.inf
    z0 = sigma**2 * math.log(1 / q - 1) + 0.5
    s2, lq, l1q = 2 * sigma**2, math.log(q), math.log1p(-q)
    coef = 1.0
    for i in range(_SERIES_MAX_TERMS):
        if i:
            coef *= (alpha - i + 1) / i  # binom(alpha, i) by recurrence
        log_coef = math.log(abs(coef))
        j = alpha - i
        log_s0 = (
            log_coef
            + i * lq
            + j * l1q
            + (i * i - i) / s2
            + float(special.log_ndtr((z0 - i) / sigma))
        )
        log_s1 = (
            log_coef
            + j * lq
            + i * l1q
            + (j * j - j) / s2
            + float(special.log_ndtr((j - z0) / sigma))
        )
        if coef > 0:
            log_a0, log_a1 = _log_add(log_a0, log_s0), _log_add(log_a1, log_s1)
        else:
            log_a0, log_a1 = _log_sub(log_a0, log_s0), _log_sub(log_a1, log_s1)
        total = _log_add(log_a0, log_a1)
        if max(log_s0, log_s1) < total - 33.0:
            return total
    return _log_a_quad(q, sigma, alpha)


def subsampled_gaussian_rdp(orders, q: float, sigma: float) -> np.ndarray:
    """One step of the Poisson-subsampled Gaussian mechanism (add/remove neighbours,
    sensitivity 1): sampling rate ``q``, noise multiplier ``sigma``.

    Integer orders: the exact binomial sum. Fractional orders: the exact series of Mironov,
    Talwar & Zhang (2019) — not an upper bound; tests compare it with quadrature — or, where
    it converges too slowly or cancels (orders below 1.01), adaptive quadrature of the
    defining integral. Order 1 is the KL divergence. q = 0 is 0 everywhere, q = 1 the plain
    Gaussian alpha / (2 sigma^2), sigma = 0 unbounded, order inf unbounded for q > 0.

    Neighbours here are add/remove (as in DP-SGD accountants), not privbayes's replace-one:
    do not compose the two kinds in one accountant.
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
    flat = lam.ravel()
    out = np.empty(flat.shape)
    for idx, a in enumerate(flat):
        if math.isinf(a):
            out[idx] = math.inf
            continue
        if a - 1 < _NEAR_ONE:  # the series cancels there; quadrature stays exact
            out[idx] = _near_one_quad(q, sigma, a)
            continue
        if float(a).is_integer():
            log_a = _log_a_int(q, sigma, int(a))
        else:
            log_a = _log_a_frac(q, sigma, a)
        out[idx] = max(log_a, 0.0) / (a - 1)
    return out.reshape(lam.shape)
