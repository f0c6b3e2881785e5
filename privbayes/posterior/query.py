"""The mean query given a noisy fixed-point sum (docs/noise_aware.md §6).

The data's mean F = S / n of n values in [0, 1] is released as T~ = T + Z, T = floor(2^8 S),
Z ~ N_Z(0, sigma^2). With N = 2^8 n, T is the cell of F: F in [T/N, (T+1)/N).

* :meth:`QueryPosterior.confidence_interval` is exact and needs no prior: with z the
  smallest integer such that P[|Z| <= z] >= prob, [(T~ - z)/N, (T~ + z + 1)/N] clipped to
  [0, 1] covers F with probability >= prob for every data set.
* The posterior takes the model's Beta(alpha, beta) as a prior on F itself: p(F | T~) is
  proportional to Beta(F; alpha, beta) N_Z(T~ - cell(F); sigma^2), a mixture over the
  cells, truncated to a window with the proven bound of the mixtures (docs/noise_aware.md
  §3). Within a cell narrower than 1e-6 the prior's density is taken as constant (exact
  for the default Beta(1, 1); otherwise the cell's mass and conditional law are exact
  incomplete-beta values).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..noise.discrete_gaussian import discrete_gaussian_quantile
from ._mixture import BetaMixture, window
from ._statistics import GRID

_NARROW = 1e-6  # cells narrower than this: the prior's density is constant across them


def confidence_interval(statistic, n: int, sigma2: float, prob: float):
    """Theorem 3 of docs/noise_aware.md §6: [(T~ - z)/N, (T~ + z + 1)/N] clipped to [0, 1],
    N = 2^8 n, z the smallest integer with P[|Z| <= z] >= prob. ``statistic`` may be an
    array of released T~ (then lo, hi are arrays). (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    z = discrete_gaussian_quantile(prob, sigma2)
    big = GRID * n
    t = np.asarray(statistic, dtype=float)
    lo = np.clip((t - z) / big, 0.0, 1.0)
    hi = np.clip((t + z + 1) / big, 0.0, 1.0)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


class QueryPosterior:
    """p(F | T~) and the exact confidence interval for :class:`privbayes.models.MeanQuery`.

    Parameters
    ----------
    model : MeanQuery (its Beta(alpha, beta) is the prior on F). n : int >= 0.
    statistic : int, the released noisy T~ (units of 2^-8). sigma2 : float > 0.
    """

    var_name = "mean"
    diagnostics = None

    def __init__(self, model, n: int, statistic: int, sigma2: float) -> None:
        self.model, self.n, self.statistic, self.sigma2 = model, int(n), int(statistic), sigma2
        a, b = model.alpha, model.beta
        self._a, self._b = a, b
        if self.n == 0:
            self.truncation = 0.0
            self._prior = BetaMixture(np.array([a]), np.array([b]), np.array([1.0]))
            return
        self._prior = None
        big = GRID * self.n
        self.cells = big

        def log_mass(t):
            lo, hi = self._edges(t)
            with np.errstate(divide="ignore"):  # the cell {1} (T = N) has prior mass 0
                return np.log(self._mass(lo, hi))

        t, w, tv = window(log_mass, 0, big, float(statistic), sigma2)
        keep = w > 0
        self.support, self.weights, self.truncation = t[keep], w[keep], tv
        self.lo, self.hi = self._edges(self.support)
        self._cum = np.cumsum(self.weights)

    def _edges(self, t):
        t = np.asarray(t, dtype=float)
        return t / self.cells, np.minimum((t + 1.0) / self.cells, 1.0)

    def _mass(self, lo, hi):
        """Prior mass of [lo, hi] (arrays): incomplete-beta differences, from the nearer
        tail; Simpson's rule on narrow interior cells (the difference cancels there)."""
        a, b = self._a, self._b
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        upper = lo >= 0.5
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(
                upper,
                special.betaincc(a, b, lo) - special.betaincc(a, b, hi),
                special.betainc(a, b, hi) - special.betainc(a, b, lo),
            )
            narrow = (hi - lo < _NARROW) & (lo > 0) & (hi < 1)
            if narrow.any():
                ln, hn = lo[narrow], hi[narrow]
                mid = 0.5 * (ln + hn)

                def pdf(x):
                    return np.exp(
                        (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - special.betaln(a, b)
                    )

                m[narrow] = (hn - ln) / 6.0 * (pdf(ln) + 4.0 * pdf(mid) + pdf(hn))
        return np.maximum(m, 0.0)

    def _within(self, lo, hi, u):
        """The point of [lo, hi] at prior-conditional CDF u (arrays)."""
        a, b = self._a, self._b
        x = lo + u * (hi - lo)
        wide = hi - lo >= _NARROW
        if wide.any() and not (a == 1.0 and b == 1.0):
            il = special.betainc(a, b, lo[wide])
            ih = special.betainc(a, b, hi[wide])
            x[wide] = np.clip(
                special.betaincinv(a, b, il + u[wide] * (ih - il)), lo[wide], hi[wide]
            )
        return x

    def draw(self, size: int | None, rng: np.random.Generator):
        """(F, (log F, log(1 - F))): a float and shape (2,), or shapes (size,), (size, 2)."""
        k = 1 if size is None else size
        if self._prior is not None:
            lp = self._prior.log_draws(k, rng)
        else:
            u = rng.random(k) * self._cum[-1]
            idx = np.minimum(np.searchsorted(self._cum, u, side="right"), self._cum.size - 1)
            f = self._within(self.lo[idx], self.hi[idx], rng.random(k))
            with np.errstate(divide="ignore"):
                lp = np.stack([np.log(f), np.log1p(-f)], axis=-1)
        f = np.exp(lp[:, 0])
        if size is None:
            return float(f[0]), lp[0]
        return f, lp

    def mean(self) -> float:
        if self._prior is not None:
            return self._prior.mean()
        a, b = self._a, self._b
        lo, hi = self.lo, self.hi
        mid = 0.5 * (lo + hi)
        wide = hi - lo >= _NARROW
        if wide.any():
            num = (a / (a + b)) * (
                special.betainc(a + 1, b, hi[wide]) - special.betainc(a + 1, b, lo[wide])
            )
            mid[wide] = num / np.maximum(self._mass(lo[wide], hi[wide]), 1e-300)
        return float(np.dot(self.weights, mid))

    def _quantile(self, q: float) -> float:
        if self._prior is not None:
            return self._prior.quantile(q)
        target = q * self._cum[-1]
        j = int(min(np.searchsorted(self._cum, target, side="left"), self._cum.size - 1))
        before = self._cum[j - 1] if j > 0 else 0.0
        frac = min(max((target - before) / self.weights[j], 0.0), 1.0)
        return float(self._within(self.lo[j : j + 1], self.hi[j : j + 1], np.array([frac]))[0])

    def interval(self, prob: float) -> tuple[float, float]:
        tail = (1.0 - prob) / 2.0
        return self._quantile(tail), self._quantile(1.0 - tail)

    def confidence_interval(self, prob: float) -> tuple[float, float]:
        """[(T~ - z)/N, (T~ + z + 1)/N] clipped to [0, 1]: covers F with probability >= prob
        for every data set (z: the smallest integer with P[|Z| <= z] >= prob)."""
        return confidence_interval(self.statistic, self.n, self.sigma2, prob)

    def shape(self) -> tuple[int, ...]:
        return ()

    def approx_sd(self) -> float:
        if self._prior is not None:
            a, b = self._a, self._b
            return math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
        mid = 0.5 * (self.lo + self.hi)
        m = float(np.dot(self.weights, mid))
        return math.sqrt(max(float(np.dot(self.weights, (mid - m) ** 2)), 0.0))
