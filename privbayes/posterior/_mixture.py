"""Finite mixtures over a latent integer statistic, truncated with a proven tail bound.

The posterior given a noisy statistic s~ = s + Z, Z ~ N_Z(0, sigma^2), is

    p(theta | s~) = sum_s w_s p(theta | s),   w_s proportional to m(s) exp(-(s - s~)^2 / (2 v)),

m the prior predictive pmf of the latent s (Beta-Binomial, negative binomial, ...), v the
noise variance (sigma^2; sigma^2 / 2 for a Gibbs pair update) and p(theta | s) the conjugate
posterior. :func:`window` keeps the s of one window around s~ and bounds what it drops:
the dropped weights, relative to the kept ones, are at most
exp(-d^2 / (2 v)) / sum_kept m(s) exp(-(s - s~)^2 / (2 v)), d the distance from s~ to the
nearest dropped s (m sums to at most 1 over the dropped s), and the total-variation
distance between the truncated and the full mixture is at most that (docs/noise_aware.md
§3). Everything here reads the released statistic and public inputs only.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

TOL = 2.0**-40  # total-variation bound asked of every truncation (~9.1e-13)
_STIRLING_X = 10.0  # lgamma differences use Stirling's series from this argument up
_BELOW_ONE = 1.0 - 2.0**-53  # the largest float below 1


def lgamma_diff(x, d: float, top=None) -> np.ndarray:
    """lgamma(x + d) - lgamma(x) for x > 0, x + d > 0, without the cancellation of the
    direct difference at large x (its error there is ~u x log x).

    For x >= 10 and |d| <= x/2: Stirling's series, (x - 1/2) log1p(d/x) + d log(x + d) - d
    + [r(x + d) - r(x)], r(y) = 1/(12 y) - 1/(360 y^3) + 1/(1260 y^5) - 1/(1680 y^7)
    + 1/(1188 y^9) (the next term is below 2e-14 at y >= 5); elsewhere the direct
    difference (x < 10, or |d| > x/2 where the result is as large as the terms).

    ``top`` (optional, shaped like x): x + d as the caller computed it more accurately
    than the float sum x + d (see :func:`lgamma_shift`); used by the direct difference.
    """
    x = np.asarray(x, dtype=float)
    if d == 0:
        return np.zeros(x.shape)
    out = np.empty(x.shape)
    big = (x >= _STIRLING_X) & (abs(d) <= 0.5 * x)
    xs = x[~big]
    ys = xs + d if top is None else np.broadcast_to(np.asarray(top, dtype=float), x.shape)[~big]
    out[~big] = special.gammaln(ys) - special.gammaln(xs)
    xb = x[big]
    y = xb + d
    out[big] = (xb - 0.5) * np.log1p(d / xb) + d * np.log(y) - d + (_series(y) - _series(xb))
    return out


def lgamma_shift(s, a: float) -> np.ndarray:
    """lgamma(s + a) - lgamma(s + 1) for s >= 0 and a > 0: lgamma_diff(s + 1, a - 1) with
    the direct difference's argument taken as s + a, not (s + 1) + (a - 1). The latter
    rounds a tiny a away (a = 1e-300: a - 1 = -1.0, so s = 0 gave lgamma(0) = inf and an
    infinite prior predictive mass); a >= 1e-300 is a valid prior concentration."""
    s = np.asarray(s, dtype=float)
    return lgamma_diff(s + 1.0, a - 1.0, top=s + a)


def _series(y: np.ndarray) -> np.ndarray:
    """Stirling's correction lgamma(y) - [(y - 1/2) log y - y + log(2 pi)/2], five terms."""
    w = 1.0 / (y * y)
    return (1.0 / y) * (1 / 12 + w * (-1 / 360 + w * (1 / 1260 + w * (-1 / 1680 + w * (1 / 1188)))))


def log_betabinom(s, n: int, a: float, b: float) -> np.ndarray:
    """log P[S = s] for S ~ Beta-Binomial(n, a, b), s integers in [0, n] (normalised):
    lgS(s, a) + lgS(n - s, b) - lgS(n, a + b) - log B(a, b),
    lgS(s, a) = lgamma(s + a) - lgamma(s + 1) (:func:`lgamma_shift`)."""
    s = np.asarray(s, dtype=float)
    const = float(lgamma_shift(np.array([float(n)]), a + b)[0]) + special.betaln(a, b)
    return lgamma_shift(s, a) + lgamma_shift(n - s, b) - const


def log_negbinom(s, n: int, a: float, b: float) -> np.ndarray:
    """log P[S = s] for S = sum of n Poisson(theta) counts, theta ~ Gamma(a, rate b):
    the negative binomial lgamma(a + s) - lgamma(a) - lgamma(s + 1) + a log(b/(b + n)) +
    s log(n/(b + n)) (normalised over s >= 0)."""
    s = np.asarray(s, dtype=float)
    if n == 0:
        return np.where(s == 0, 0.0, -np.inf)
    log_q = -math.log1p(b / n)  # log(n / (b + n))
    log_p = -math.log1p(n / b)  # log(b / (b + n))
    return lgamma_shift(s, a) - special.gammaln(a) + a * log_p + s * log_q


def _gap(lo: int, hi: int, c: float) -> float:
    """min |s - c| over the integers s in [lo, hi] (inf for an empty range)."""
    if lo > hi:
        return math.inf
    if lo <= c <= hi:
        return 0.0
    return min(abs(lo - c), abs(hi - c))


def window(log_m, lo: int, hi: int, centre: float, v: float, tol: float = TOL):
    """(s, weights, tv): the latent values kept, their normalised weights and the proven
    bound on the total-variation distance between the truncated and the full mixture.

    Parameters
    ----------
    log_m : function of an int array s -> log m(s), the *normalised* prior predictive pmf
        of the latent statistic on [lo, hi] (its sum over any set is at most 1).
    lo, hi : the latent's range (integers, lo <= hi). centre : the released statistic
        (s~; a half-integer for a Gibbs pair). v : the noise variance (> 0).
    tol : the bound asked for (default 2^-40).

    The window starts at centre +- sqrt(2 v (log(1/tol) + 40)) and doubles until the
    bound (times 1 + 1e-9 for its own rounding) is at most ``tol`` or it covers [lo, hi]
    (bound 0). Returns s (int64, shape (L,)), weights (float, shape (L,), sum 1), tv.
    """
    lo, hi = int(lo), int(hi)
    mid = int(min(max(round(centre), lo), hi))
    half = int(math.ceil(math.sqrt(2.0 * v * (math.log(1.0 / tol) + 40.0)))) + 1
    while True:
        left, right = max(lo, mid - half), min(hi, mid + half)
        s = np.arange(left, right + 1, dtype=np.int64)
        lw = log_m(s) - (s - centre) ** 2 / (2.0 * v)
        top = float(np.max(lw))
        if not math.isfinite(top):
            raise ArithmeticError("every weight of the window is zero or not finite")
        rel = np.exp(lw - top)
        total = float(np.sum(rel))
        if left == lo and right == hi:
            return s, rel / total, 0.0
        d = min(_gap(lo, left - 1, centre), _gap(right + 1, hi, centre))
        log_bound = -(d * d) / (2.0 * v) - (top + math.log(total))
        tv = math.exp(min(log_bound, 0.0)) * (1.0 + 1e-9)
        if tv <= tol:
            return s, rel / total, tv
        half *= 2


def _logit_solve(cdf, q: float, lo: float, hi: float) -> float:
    """The x in [lo, hi] (0 <= lo <= hi <= 1) with cdf(x) = q, solved in logit(x) so that
    quantiles near 0 or 1 keep their relative accuracy."""
    if hi <= lo:
        return lo
    eps = 1e-300

    def f(t: float) -> float:
        return cdf(special.expit(t)) - q

    a = special.logit(max(lo, eps))
    b = special.logit(min(hi, _BELOW_ONE))  # 1 - 1e-17 would round to 1: logit inf
    fa, fb = f(a), f(b)
    if fa >= 0:
        return float(special.expit(a))
    if fb <= 0:
        return float(special.expit(b))
    t = optimize.brentq(f, a, b, xtol=1e-13, rtol=1e-15, maxiter=200)
    return float(special.expit(t))


def _log_solve(cdf, q: float, lo: float, hi: float) -> float:
    """The x in [lo, hi] (0 < lo <= hi) with cdf(x) = q, solved in log(x)."""
    if hi <= lo:
        return lo

    def f(t: float) -> float:
        return cdf(math.exp(t)) - q

    a, b = math.log(lo), math.log(hi)
    if f(a) >= 0:
        return lo
    if f(b) <= 0:
        return hi
    return math.exp(optimize.brentq(f, a, b, xtol=1e-13, rtol=1e-15, maxiter=200))


class ScalarMixturePosterior:
    """What the one-parameter mixture posteriors share (``self.mixture`` a BetaMixture or
    GammaMixture): the mean, the central interval from the mixture CDF, a scalar shape."""

    mixture: BetaMixture | GammaMixture

    def mean(self) -> float:
        return self.mixture.mean()

    def interval(self, prob: float) -> tuple[float, float]:
        tail = (1.0 - prob) / 2.0
        return self.mixture.quantile(tail), self.mixture.quantile(1.0 - tail)

    def shape(self) -> tuple[int, ...]:
        return ()


class BetaMixture:
    """sum_j w_j Beta(A_j, B_j): draws (in log space), mean, CDF and quantiles.

    A, B : arrays of shape (J,) > 0; w : weights, shape (J,), summing to 1.
    """

    def __init__(self, A: np.ndarray, B: np.ndarray, w: np.ndarray) -> None:
        self.A = np.asarray(A, dtype=float)
        self.B = np.asarray(B, dtype=float)
        self.w = np.asarray(w, dtype=float)

    def log_draws(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """(log theta, log(1 - theta)) of ``size`` draws: shape (size, 2)."""
        from ..sampling.conjugate import sample_dirichlet_log

        idx = _choose(self.w, size, rng)
        params = np.stack([self.A[idx], self.B[idx]], axis=-1)
        return sample_dirichlet_log(params, rng)

    def mean(self) -> float:
        return float(np.dot(self.w, self.A / (self.A + self.B)))

    def cdf(self, x: float) -> float:
        return float(np.dot(self.w, special.betainc(self.A, self.B, x)))

    def quantile(self, q: float) -> float:
        # the mixture's quantile lies between its components' (a weighted average of CDFs)
        keep = self.w > 0
        qs = special.betaincinv(self.A[keep], self.B[keep], q)
        return _logit_solve(self.cdf, q, float(np.min(qs)), float(np.max(qs)))


class GammaMixture:
    """sum_j w_j Gamma(A_j, rate): draws (in log space), mean, CDF and quantiles."""

    def __init__(self, A: np.ndarray, rate: float, w: np.ndarray) -> None:
        self.A = np.asarray(A, dtype=float)
        self.rate = float(rate)
        self.w = np.asarray(w, dtype=float)

    def log_draws(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """log theta of ``size`` draws: shape (size,)."""
        from ..sampling.conjugate import log_gamma_variates

        idx = _choose(self.w, size, rng)
        return log_gamma_variates(self.A[idx], rng) - math.log(self.rate)

    def mean(self) -> float:
        return float(np.dot(self.w, self.A)) / self.rate

    def cdf(self, x: float) -> float:
        return float(np.dot(self.w, special.gammainc(self.A, self.rate * x)))

    def quantile(self, q: float) -> float:
        keep = self.w > 0
        qs = special.gammaincinv(self.A[keep], q) / self.rate
        lo, hi = float(np.min(qs)), float(np.max(qs))
        if lo <= 0:
            lo = min(hi, 1e-300) if hi > 0 else 1e-300
        return _log_solve(self.cdf, q, lo, max(hi, lo))


def _choose(w: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` component indices drawn with probabilities ``w`` (inverse CDF)."""
    if w.size == 1:
        return np.zeros(size, dtype=np.intp)
    cum = np.cumsum(w)
    u = rng.random(size) * cum[-1]
    return np.minimum(np.searchsorted(cum, u, side="right"), w.size - 1)
