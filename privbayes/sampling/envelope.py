"""The public radial envelope of the exact logistic-regression sampler (docs/exact.md).

Everything here is a function of public inputs only — the dimension d, the prior precision
p = n beta / m, the bound kappa on the data's share of the curvature, the feature bound c,
the certified tolerances tau (gradient at the Newton point) and eta (Hessian error) — and
never sees data. In whitened coordinates u (||u|| = rho) around the Newton point, the
tempered log posterior relative to its value there is at most (docs/exact.md, Theorem 1)

    B(rho) = tau rho - (1 - eta) rho^2 / 2 + G((1 + eta) rho^2),
    G(R)   = max over A in [0, kappa R] of  A * h(c sqrt((R - A) / p)),
    h(x)   = 1/2 - psi(x),  psi(x) = (e^-x + x - 1) / x^2       (Bach 2010, Lemma 1).

The proposal is matched to this bound: a uniform direction and a radius whose density is a
step function over a grid of cells (plus a Gaussian-decaying tail) lying above
rho^(d-1) e^B(rho). Cell probabilities are integers over a common total, so the law we
sample from is exactly the law we divide by. Every bound is rounded upwards; the unit
roundoff is U = 2^-53 and gamma(k) = k U / (1 - k U) (Higham, Accuracy and Stability of
Numerical Algorithms, 2002, §3.1).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import special

U = 2.0**-53
WEIGHT_BITS = 40  # cell probabilities are integers N_k / sum N, N_k >= 2^40 m_k / m_max
NEGLIGIBLE = 60.0  # cells beyond the bulk keep their bound below peak - 60 (e^-60)
BULK_STEP = 0.01  # target variation of the log envelope across one bulk cell
MAX_CELLS = 200_000
G_CELLS = 512  # cells of the maximisation over A in g_upper, per envelope cell


def _float_down(q: Fraction) -> float:
    """The largest float <= the rational q (q > 0 assumed for a useful value)."""
    f = float(q)
    return math.nextafter(f, -math.inf) if Fraction(f) > q else f


def gamma(k: float) -> float:
    """Higham's gamma_k = k U / (1 - k U): the relative error bound of k roundings."""
    if k * U >= 0.5:
        raise ValueError(f"gamma({k}) is not defined: k U >= 1/2")
    return k * U / (1.0 - k * U)


# -- the one-dimensional bound ------------------------------------------------------------
_SERIES = [(-1.0) ** (k + 1) / math.factorial(k) for k in range(3, 16)]  # ends on k = 15: +


def h_upper(x) -> np.ndarray:
    """An upper bound on h(x) = 1/2 - psi(x) = (x^2/2 - x + 1 - e^-x) / x^2, for x >= 0.

    h is increasing from h(0) = 0 to 1/2, and h(x) <= x / 6. For x < 1 we sum the
    alternating series sum_{k>=3} (-1)^(k+1) x^(k-2) / k! up to k = 15: its terms decrease
    in magnitude, so a partial sum that ends on a positive term lies above h. For x >= 1
    the closed form loses at most ~110 U relatively (the numerator is >= 0.13 x^2); both
    are inflated by 256 U. Shape preserved; NaN never returned for finite x >= 0.
    """
    x = np.asarray(x, dtype=float)
    out = np.empty_like(x)
    small = x < 1.0
    xs = x[small]
    acc = np.zeros_like(xs)
    for coef in reversed(_SERIES):  # Horner in x: sum coef_k x^(k-3), times x
        acc = acc * xs + coef
    out[small] = acc * xs
    xl = x[~small]
    out[~small] = ((0.5 * xl - 1.0) * xl + 1.0 - np.exp(-xl)) / (xl * xl)
    out *= 1.0 + 256.0 * U
    return np.minimum(np.minimum(out, 0.5), x * ((1.0 + 4.0 * U) / 6.0))


def g_upper(big_r, kappa: float, p: float, c: float, cells: int = 1024) -> np.ndarray:
    """Upper bound on G(R) = max_{A in [0, kappa R]} A h(c sqrt((R - A) / p)), elementwise.

    In s = sqrt((R - A) / p) in [s_lo, s_hi] = [sqrt((1 - kappa) R / p), sqrt(R / p)] the
    objective is (R - p s^2) h(c s): on a cell [s_j, s_j+1] it is at most
    (R - p s_j^2) h(c s_j+1). The cells tile [s_lo, s_hi] (adjacent cells share their edge
    floats, s_lo is rounded down and s_hi up); the largest cell bound, rounded up, is
    returned. Cost: ``cells`` evaluations of h per value of R.
    """
    big_r = np.atleast_1d(np.asarray(big_r, dtype=float))
    s_lo = np.sqrt((1.0 - kappa) * big_r / p) * (1.0 - 8.0 * U)
    s_hi = np.sqrt(big_r / p) * (1.0 + 8.0 * U)
    frac = np.linspace(0.0, 1.0, cells + 1)
    out = np.empty_like(big_r)
    chunk = max(1, (1 << 22) // (cells + 1))
    for i in range(0, big_r.size, chunk):
        lo, hi, r_ = s_lo[i : i + chunk, None], s_hi[i : i + chunk, None], big_r[i : i + chunk]
        s = lo + (hi - lo) * frac  # (chunk, cells + 1); s[:, 0] = lo, s[:, -1] = hi
        s[:, -1] = hi[:, 0]
        a_up = r_[:, None] - p * s[:, :-1] ** 2  # A <= R - p s_j^2 on cell j
        a_up = np.maximum(a_up, 0.0) + 8.0 * U * r_[:, None]  # rounding of R - p s^2
        a_up = np.minimum(a_up, kappa * r_[:, None] * (1.0 + 4.0 * U))  # A <= kappa R
        vals = a_up * h_upper(c * s[:, 1:] * (1.0 + 2.0 * U))
        out[i : i + chunk] = vals.max(axis=1) * (1.0 + 4.0 * U)
    return out


def _e0(rho, d: int, tau: float, eta: float) -> np.ndarray:
    """(d - 1) log rho + tau rho - (1 - eta) rho^2 / 2: concave on rho > 0."""
    rho = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore"):
        lg = (d - 1) * np.log(rho) if d > 1 else np.zeros_like(rho)
    return lg + tau * rho - 0.5 * (1.0 - eta) * rho * rho


def _e0_error(rho, d: int, tau: float) -> np.ndarray:
    """Bound on the rounding error of _e0 (a few roundings per term)."""
    rho = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore"):
        lg = (d - 1) * np.abs(np.log(np.maximum(rho, 1e-300)))
    return 8.0 * U * (lg + tau * rho + rho * rho) + 1e-300


def _e0_peak(d: int, tau: float, eta: float) -> float:
    """The maximiser of _e0: root of (d - 1) / rho + tau - (1 - eta) rho."""
    a = 1.0 - eta
    return (tau + math.sqrt(tau * tau + 4.0 * a * (d - 1))) / (2.0 * a)


def _sup_e0(a: np.ndarray, b: np.ndarray, d: int, tau: float, eta: float) -> np.ndarray:
    """sup of _e0 over each cell [a, b] (concave: at the clamped peak), rounded up."""
    peak = _e0_peak(d, tau, eta)
    x = np.clip(peak, a, b)
    return _e0(x, d, tau, eta) + _e0_error(x, d, tau)


# -- the envelope --------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class RadialEnvelope:
    """A step-function envelope of the radial density rho^(d-1) e^B(rho), with a tail.

    Attributes
    ----------
    d, p, kappa, c, tau, eta : the public inputs it was built for.
    edges : (K + 1,) cell edges 0 = a_0 < ... < a_K = rho_K.
    weights : (K + 1,) int64 N_k: cell k (and the tail, last) is proposed with probability
        N_k / sum N.
    log_density : (K,) L_k, the log of the proposal's radial density on cell k times the
        common constant C = m_max sum N / 2^40; L_k >= sup of log rho^(d-1) e^B on cell k.
    tail_log_density, tail_slope, tail_curvature : on rho >= rho_K the proposal's radial
        density (times C) is exp(tail_log_density - s x - g x^2 / 2), x = rho - rho_K,
        s = tail_slope, g = tail_curvature: again above the bound (docs/exact.md, Lemma 4),
        and decaying like the bound itself, so that proposals far beyond rho_K are as rare
        as the bound allows (§7's edge).
    log_total : log W, W = S_(d-1) C: the proposal mass in u-space. The acceptance
        probability of one proposal is Z / W, Z = integral of the target in u-space.
    log_tail_bound : log of an upper bound on the bound's own mass beyond rho_K (u-space),
        hence on the target's mass there.
    log_density_error : bound on the rounding error of the stored log densities.
    """

    d: int
    p: float
    kappa: float
    c: float
    tau: float
    eta: float
    edges: np.ndarray
    weights: np.ndarray
    log_density: np.ndarray
    tail_log_density: float
    tail_slope: float
    tail_curvature: float
    log_total: float
    log_density_error: float
    log_tail_bound: float

    @property
    def rho_max(self) -> float:
        return float(self.edges[-1])

    def draw(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Radii (size,) from the proposal, and the log proposal density at each (times C).

        The cell is an exact uniform integer below sum N; within a cell the radius is
        uniform, in the tail rho_K + x with x drawn from the density proportional to
        exp(-s x - g x^2 / 2) on x >= 0 (``tail_draw``: exact given exact variates).
        """
        cum = np.cumsum(self.weights)
        pick = rng.integers(0, int(cum[-1]), size=size, dtype=np.int64)
        k = np.searchsorted(cum, pick, side="right")
        tail = k == self.weights.size - 1
        kc = np.minimum(k, self.log_density.size - 1)
        a, b = self.edges[kc], self.edges[kc + 1]
        rho = a + rng.random(size) * (b - a)
        log_q = self.log_density[kc].copy()
        if tail.any():  # rare (the tail's share is ~2^-40 of the weight)
            extra = tail_draw(rng, int(tail.sum()), self.tail_slope, self.tail_curvature)
            rho[tail] = self.rho_max + extra
            log_q[tail] = self._tail_log(extra)
        return rho, log_q

    def _tail_log(self, x: np.ndarray) -> np.ndarray:
        return self.tail_log_density - x * (self.tail_slope + 0.5 * self.tail_curvature * x)

    def log_q_error(self, rho: np.ndarray) -> np.ndarray:
        """Rounding-error bound of the log density returned by draw() at ``rho``."""
        x = np.maximum(np.asarray(rho, dtype=float) - self.rho_max, 0.0)
        tail_part = (
            8.0
            * U
            * (abs(self.tail_log_density) + x * (self.tail_slope + 0.5 * self.tail_curvature * x))
        )
        return self.log_density_error + np.where(rho > self.rho_max, tail_part, 0.0)

    def bound(self, rho) -> np.ndarray:
        """The proposal's log radial density (times C) at ``rho``: >= log rho^(d-1) e^B."""
        rho = np.asarray(rho, dtype=float)
        k = np.searchsorted(self.edges, rho, side="right") - 1
        k = np.clip(k, 0, self.log_density.size - 1)
        tail = self._tail_log(np.maximum(rho - self.rho_max, 0.0))
        return np.where(rho > self.rho_max, tail, self.log_density[k])

    def log_tail_beyond(self, x: float) -> float:
        """log P(a proposal's radius exceeds rho_K + x), x >= 0, rounded up (public)."""
        w = self.weights.astype(float)
        share = math.log(w[-1]) - math.log(w.sum())
        s, g = self.tail_slope, self.tail_curvature
        a = s / math.sqrt(g)
        out = -x * (s + 0.5 * g * x) + log_mills(a + math.sqrt(g) * x) - log_mills(a)
        return share + out + 1e-9 * (1.0 + abs(out) + abs(share))


def log_mills(b):
    """log of sqrt(pi / 2) erfcx(b / sqrt(2)) = log( e^(b^2/2) int_b^inf e^(-t^2/2) dt ),
    elementwise (scipy's erfcx: relative error far below the 1e-12 allowed for it)."""
    return np.log(special.erfcx(np.asarray(b, dtype=float) / math.sqrt(2.0))) + 0.5 * math.log(
        0.5 * math.pi
    )


def log_tail_mass(s: float, g: float) -> float:
    """log of int_0^inf exp(-s x - g x^2 / 2) dx = log_mills(s / sqrt g) - log(g) / 2."""
    return float(log_mills(s / math.sqrt(g))) - 0.5 * math.log(g)


def tail_draw(rng: np.random.Generator, count: int, s: float, g: float) -> np.ndarray:
    """``count`` draws of x >= 0 with density proportional to exp(-s x - g x^2 / 2).

    x = (Z - a) / sqrt(g), a = s / sqrt(g), Z a standard normal conditioned on Z >= a,
    drawn exactly (given exact variates) by Robert's (1995) rejection samplers: for a < 1,
    normals until one is >= a (acceptance >= 0.15); else a + E / alpha, E ~ Exp(1),
    alpha = (a + sqrt(a^2 + 4)) / 2, kept with probability exp(-(Z - alpha)^2 / 2)
    (acceptance >= 0.65). The number of variates used depends on the random stream only.
    """
    a = s / math.sqrt(g)
    out = np.empty(count)
    todo = np.arange(count)
    alpha = 0.5 * (a + math.sqrt(a * a + 4.0))
    while todo.size:
        if a < 1.0:
            z = rng.standard_normal(todo.size)
            ok = z >= a
        else:
            z = a + rng.exponential(size=todo.size) / alpha
            ok = rng.random(todo.size) <= np.exp(-0.5 * (z - alpha) ** 2)
        out[todo[ok]] = (z[ok] - a) / math.sqrt(g)
        todo = todo[~ok]
    return np.maximum(out, 0.0)


def log_sphere_area(d: int) -> float:
    """log S_(d-1) = log(2 pi^(d/2) / Gamma(d/2)), the area of the unit sphere in R^d."""
    return math.log(2.0) + 0.5 * d * math.log(math.pi) - float(special.gammaln(0.5 * d))


def log_bound_exact(
    rho, d: int, p: float, kappa: float, c: float, tau: float, eta: float, cells: int = 1024
):
    """log rho^(d-1) + B(rho) with G from g_upper (for tests and the grid search)."""
    rho = np.asarray(rho, dtype=float)
    return _e0(rho, d, tau, eta) + g_upper((1.0 + eta) * rho * rho, kappa, p, c, cells)


@functools.lru_cache(maxsize=64)
def build_envelope(
    d: int, p: float, kappa: float, c: float, tau: float, eta: float
) -> RadialEnvelope:
    """The envelope for these public inputs (cached: it never depends on data).

    Bulk: uniform cells on [0, rho_hi], where rho_hi is past the peak and the log bound has
    dropped NEGLIGIBLE below it; their width keeps the bound's variation across a cell near
    BULK_STEP. Beyond: cells chosen greedily from a geometric candidate grid so that each
    cell's bound stays NEGLIGIBLE below the peak. Tail from rho_K on: the tangent line of
    the concave functions whose maximum is the bound (docs/exact.md, Lemma 4).

    Raises ValueError when kappa is so close to 1 that the bound has no Gaussian tail
    (gamma = (1 - eta) - kappa (1 + eta) <= 0), or the envelope needs too many cells.
    """
    gam = (1.0 - eta) - kappa * (1.0 + eta)
    if not gam > 1e-300:
        raise ValueError(
            "the envelope has no tail: the prior's share of the curvature "
            f"1 - kappa = {1 - kappa:.3g} is below the Hessian error bound eta = {eta:.3g}"
        )
    # scan a coarse grid to locate the bulk (these values only choose cells)
    peak0 = _e0_peak(d, tau, eta)
    scan_max = peak0 + 10.0
    while True:
        rho = np.linspace(1e-9 * (1 + peak0), scan_max, 2001)
        val = log_bound_exact(rho, d, p, kappa, c, tau, eta, cells=64)
        top = int(np.argmax(val))
        below = np.flatnonzero(val[top:] < val[top] - NEGLIGIBLE)
        if below.size:
            rho_hi = float(rho[top + below[0]])
            break
        scan_max *= 2.0
        if scan_max > 1e8 * (1 + peak0):
            raise ValueError("the envelope does not decay: the posterior bound is too wide")
    peak_val = float(val[top])
    # Bulk cells: width (BULK_STEP + (peak - 12 - bound)_+ / 4) / (1 + |slope|): a cell's bound
    # exceeds the bound inside it by about BULK_STEP where the mass is, and by at most a
    # quarter of its distance below the peak elsewhere. Edges invert the cumulative count.
    rho, val = rho[: top + below[0] + 1], val[: top + below[0] + 1]
    slope = np.abs(np.gradient(val, rho))
    dens = (1.0 + slope) / (BULK_STEP + np.maximum(peak_val - val - 12.0, 0.0) / 4.0)
    count = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(rho))])
    n_bulk = int(math.ceil(count[-1])) + 16
    if n_bulk > MAX_CELLS:
        raise ValueError(f"the envelope needs {n_bulk} cells (> {MAX_CELLS})")
    bulk = np.interp(np.linspace(0.0, count[-1], n_bulk + 1), count, rho)
    bulk[0], bulk[-1] = 0.0, rho_hi
    bulk = np.unique(bulk)
    # tail start: the tangent slope gam rho - tau - (d - 1) / rho >= gam rho / 2
    rho_k = max(2.0 * rho_hi, (tau + math.sqrt(tau * tau + 2.0 * gam * (d - 1))) / gam)
    ratio = 1e-4
    cand = rho_hi * np.exp(np.arange(0.0, math.log(rho_k / rho_hi) + ratio, ratio))
    cand[-1] = max(cand[-1], rho_k)
    g_cand = np.maximum.accumulate(g_upper((1.0 + eta) * cand * cand, kappa, p, c, cells=64))
    e0_cand = _e0(cand, d, tau, eta) + _e0_error(cand, d, tau)  # decreasing past the peak
    outer = [0]
    i = 0
    threshold = peak_val - NEGLIGIBLE
    while i < cand.size - 1:
        # furthest j with e0(cand_i) + G(cand_j) below the threshold (G is nondecreasing)
        j = int(np.searchsorted(g_cand, threshold - e0_cand[i], side="right")) - 1
        j = min(max(j, i + 1), cand.size - 1)
        outer.append(j)
        i = j
        if len(outer) > MAX_CELLS:
            raise ValueError("the envelope needs too many cells beyond its bulk")
    edges = np.concatenate([bulk, cand[outer[1:]]])
    a, b = edges[:-1], edges[1:]
    g_b = g_upper((1.0 + eta) * b * b * (1.0 + 2.0 * U), kappa, p, c, cells=G_CELLS)
    heights = _sup_e0(a, b, d, tau, eta) + g_b
    heights += 8.0 * U * (np.abs(heights) + g_b)
    # tail: tangent of every concave piece at rho_K (docs/exact.md, Lemma 4)
    rk = float(edges[-1])
    tail_h = float(
        _e0(rk, d, tau, eta)
        + _e0_error(rk, d, tau)
        + g_upper((1.0 + eta) * rk * rk * (1.0 + 2.0 * U), kappa, p, c, cells=G_CELLS)[0]
    )
    tail_h += 8.0 * U * abs(tail_h)
    # gam and the slope lose relative precision to cancellation (gam can be ~1e-6): both in
    # exact rationals, rounded down (every concave piece has E'' <= -gam; Lemma 4)
    gam_q = (1 - Fraction(eta)) - Fraction(kappa) * (1 + Fraction(eta))
    slope_q = gam_q * Fraction(rk) - Fraction(tau) - (d - 1) / Fraction(rk)
    tail_s = _float_down(slope_q) * (1.0 - 4.0 * U)
    if not tail_s > 0:
        raise ValueError("the envelope's tail slope is not positive")
    tail_g = _float_down(gam_q) * (1.0 - 4.0 * U)
    log_tail_m = log_tail_mass(tail_s, tail_g)  # int_0^inf e^(-s x - g x^2/2) dx
    tail_err = 1e-12 * (1.0 + abs(log_tail_m))  # erfcx's error, generously
    # integer weights: N_k >= 2^40 m_k / m_max, m_k = e^H_k (b - a), tail e^H_T T(s, g)
    log_m = np.append(heights + np.log(b - a), tail_h + log_tail_m + tail_err)
    log_m_err = 8.0 * U * (np.abs(log_m) + 40.0) + 1e-15
    lm_max = float(log_m.max())
    ratio_up = np.exp(log_m - lm_max + log_m_err + 8.0 * U * abs(lm_max))
    weights = np.maximum(1, np.ceil(ratio_up * 2.0**WEIGHT_BITS)).astype(np.int64)
    total = int(weights.sum())  # exact in int64: <= (K + 1) (2^40 + 1) < 2^63
    if total >= 2**62:
        raise ValueError("the envelope has too many cells for 64-bit weights")
    const = lm_max - WEIGHT_BITS * math.log(2.0)
    log_density = np.log(weights[:-1].astype(float)) - np.log(b - a) + const
    tail_log_density = math.log(float(weights[-1])) - log_tail_m + const
    err = 8.0 * U * (float(np.abs(log_density).max()) + abs(tail_log_density) + 64.0)
    err += tail_err
    log_total = log_sphere_area(d) + math.log(float(total)) + const
    log_total += 8.0 * U * (abs(log_total) + 64.0)
    for arr in (edges, weights, log_density):
        arr.setflags(write=False)
    log_tail = log_sphere_area(d) + tail_h + log_tail_m + tail_err + 1e-12
    return RadialEnvelope(
        d, p, kappa, c, tau, eta, edges, weights, log_density, tail_log_density, tail_s,
        tail_g, log_total, err, log_tail,
    )  # fmt: skip


# -- lower bound on the target's mass --------------------------------------------------------
def _even_moment_ratio(sigma: float) -> float:
    """F(sigma) = E[E4(|a|)] / sigma^2 for a ~ N(0, sigma^2), rounded up.

    E4(x) = e^x - 1 - x - x^2/2 - x^3/6 = sum_{k>=4} x^k / k!, so
    F = sum_{k>=4} sigma^(k-2) E|N|^k / k!, E|N|^k = 2^(k/2) Gamma((k+1)/2) / sqrt(pi).
    Summed term by term (positive terms) until they are negligible, plus a geometric bound
    on the rest; increasing in sigma. inf (a valid, useless bound) when a term overflows
    or the series needs more than 10^5 terms (sigma in the hundreds: the prior is so flat
    that no finite mass bound is of use).
    """
    if sigma <= 0:
        return 0.0
    if not math.isfinite(sigma):
        return math.inf
    total, k = 0.0, 4
    while True:
        log_term = (
            (k - 2) * math.log(sigma)
            + 0.5 * k * math.log(2.0)
            + math.lgamma(0.5 * (k + 1))
            - 0.5 * math.log(math.pi)
            - math.lgamma(k + 1.0)
        )
        if log_term > 700.0:  # e^log_term would overflow: F is beyond any use
            return math.inf
        term = math.exp(log_term)
        total += term
        # successive ratio t_{k+1}/t_k = sigma sqrt(2) Gamma(k/2+1) / (Gamma((k+1)/2) (k+1))
        # <= sigma sqrt((k + 2) / 2) / (k + 1) * sqrt(2) (Gautschi), decreasing in k
        q = sigma * math.sqrt(k + 2.0) / (k + 1.0)
        if q < 0.5 and term < 1e-17 * total:
            return (total + term * q / (1.0 - q)) * (1.0 + 64.0 * U * k)
        k += 1
        if k > 100_000:
            return math.inf


def chi_even_moment_ratio(s: float, dof: int) -> float:
    """F_k(s) = E[E4(s X)] / (s^2 k) for X ~ chi with k = ``dof`` degrees of freedom,
    rounded up (docs/multinomial.md §6, Theorem M3; k = 1 is ``_even_moment_ratio``).

    E4(x) = sum_{j>=4} x^j / j!, E X^j = 2^(j/2) Gamma((k + j)/2) / Gamma(k/2): positive
    terms summed until negligible, plus a geometric bound on the rest (successive ratios
    are <= s sqrt(k + j) / (j + 1), decreasing in j: Wendel's Gamma(x + 1/2) <= sqrt(x)
    Gamma(x)). Increasing in s; inf when a term overflows or 10^5 terms do not suffice.
    """
    if s <= 0:
        return 0.0
    if not math.isfinite(s):
        return math.inf
    k = int(dof)
    base = -math.lgamma(0.5 * k) - 2.0 * math.log(s) - math.log(k)
    total, j = 0.0, 4
    while True:
        log_term = (
            j * math.log(s)
            + 0.5 * j * math.log(2.0)
            + math.lgamma(0.5 * (k + j))
            - math.lgamma(j + 1.0)
            + base
        )
        if log_term > 700.0:
            return math.inf
        term = math.exp(log_term)
        total += term
        q = s * math.sqrt(k + j + 1.0) / (j + 1.0)  # >= every later ratio
        if q < 0.5 and term < 1e-17 * total:
            return (total + term * q / (1.0 - q)) * (1.0 + 64.0 * U * (j + k))
        j += 1
        if j > 100_000:
            return math.inf


def log_mass_lower(
    d: int, p: float, c: float, eta: float, curvature_trace: float, spread_dof: int = 0
) -> float:
    """A lower bound on log Z, Z = integral of the target in u-space (docs/exact.md, Thm 2).

    Jensen's inequality under N(0, I_d): log Z >= (d/2) log(2 pi) - eta d / 2 - F(sigma)
    * trace, with sigma = c / sqrt(lambda_min(K)) >= the standard deviation of every margin
    perturbation and trace >= tr(K^-1 H_L) (public: (1 + eta) min(d kappa, r n c^2 / 4p)).
    ``spread_dof`` = K - 1 >= 1 for the K-class softmax family, whose per-record spread is
    F_(K-1)(sqrt(2) sigma) (docs/multinomial.md §6, Theorem M3); 0: the binary family's F.
    """
    sigma = c * math.sqrt((1.0 + eta) / p) * (1.0 + 4.0 * U)  # lambda_min(K) >= p/(1+eta)
    if spread_dof:
        spread = chi_even_moment_ratio(math.sqrt(2.0) * sigma * (1.0 + 2.0 * U), spread_dof)
    else:
        spread = _even_moment_ratio(sigma)
    loss = eta * d / 2.0 + (spread * curvature_trace if curvature_trace > 0 else 0.0)
    value = 0.5 * d * math.log(2.0 * math.pi) - loss
    return value - 8.0 * U * (abs(value) + loss)


def log_ball_mass_lower(d: int, p: float, radius: float, mode_norm: float) -> float:
    """log of a lower bound on P(||w|| <= radius) under a p-strongly log-concave law whose
    mode has norm <= mode_norm (docs/exact.md, Lemma 6): 1 - exp(-p s^2 / 2) with
    s = radius - mode_norm - sqrt(d / p) > 0; -inf when s <= 0."""
    s = (radius - mode_norm - math.sqrt(d / p)) * (1.0 - 16.0 * U)
    if not s > 0:
        return -math.inf
    return math.log(-math.expm1(-0.5 * p * s * s)) - 16.0 * U


def mixture_log_sup(env: RadialEnvelope, t_weight: float = 0.1, nu: float = 5.0) -> float:
    """log sup_u e^B(u) / q(u) for today's IMH proposal q = 0.9 N(0, I) + 0.1 t_nu(0, I) in
    u-space, evaluated on a dense radius grid (for comparison only: not a rigorous sup)."""
    d = env.d
    rho = np.linspace(1e-6, env.rho_max, 20_001)
    b = _e0(rho, d, env.tau, env.eta) + g_upper(
        (1.0 + env.eta) * rho * rho, env.kappa, env.p, env.c, cells=256
    )
    b = b - (d - 1) * np.log(rho) if d > 1 else b
    q2 = rho * rho
    log_n = -0.5 * d * math.log(2 * math.pi) - 0.5 * q2
    log_t = (
        special.gammaln((nu + d) / 2)
        - special.gammaln(nu / 2)
        - 0.5 * d * math.log(nu * math.pi)
        - 0.5 * (nu + d) * np.log1p(q2 / nu)
    )
    log_q = np.logaddexp(math.log1p(-t_weight) + log_n, math.log(t_weight) + log_t)
    return float((b - log_q).max())
