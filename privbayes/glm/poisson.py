"""Poisson regression (log link) as a GLM family, on a public ball.

Model: y ~ Poisson(exp(theta.x)), counts y in {0, ..., max_count}; the per-record loss
(negative log-likelihood up to the data-only log y!) is

    loss(theta; x, y) = exp(theta.x) - y theta.x,    ||x|| <= c, ||theta|| <= R.

On the ball |theta.x| <= c R, so (docs/linear_regression.md §7):

* gradient (exp(theta.x) - y) x with exp(theta.x) - y in [-max_count, e^(cR)]: its norm is
  at most c max(e^(cR), max_count), and the replace-one difference is at most
  G = 2 c max(e^(cR), max_count);
* curvature exp(theta.x) x x^T <= e^(cR) c^2 I.

R enters as R_cert = R (1 + 2^-20) (float norms and projections). e^(cR) is bounded above
in exact rationals (numpy/libm exp is within a few ulps: a relative 2^-48 more).
Adding a family is this file plus its model (privbayes.models.poisson) and the export.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .family import ResponseFamily
from .linear import RADIUS_SLACK, check_bounded_family
from .passes import family_pass, is_rows

__all__ = ["PoissonLog"]

_ROWS = 1 << 16
MAX_LOG_RATE = 700.0  # c R above it: e^(cR) overflows a double


def _float_up(q: Fraction) -> float:
    f = float(q)
    return f if Fraction(f) >= q else math.nextafter(f, math.inf)


class PoissonLog(ResponseFamily):
    """loss(theta; x, y) = exp(theta.x) - y theta.x on ||theta|| <= radius, y in 0..max_count."""

    name = "Poisson (log link)"
    kind = "xy"
    outputs = 1
    self_concordance = None

    def __init__(self, max_count: int, radius: float | None = None) -> None:
        if (
            isinstance(max_count, bool)
            or not isinstance(max_count, int | np.integer)
            or not 1 <= max_count <= 10**15
        ):
            raise ValueError(f"max_count must be an integer in [1, 10**15]; got {max_count!r}")
        self.max_count = int(max_count)
        self.radius = None if radius is None else check_bounded_family(radius, "radius")

    def __repr__(self) -> str:
        return f"PoissonLog(max_count={self.max_count}, radius={self.radius!r})"

    def radius_cert(self) -> Fraction:
        if self.radius is None:
            raise ValueError("Poisson regression needs a radius (its ball ||theta|| <= R)")
        return Fraction(self.radius) * (1 + RADIUS_SLACK)

    def rate_bound(self, c) -> Fraction:
        """An exact rational >= e^(c R_cert); ValueError when c R is above 700."""
        a = _float_up(Fraction(c) * self.radius_cert())
        if a > MAX_LOG_RATE:
            raise ValueError(
                f"c R = {a:.4g} > {MAX_LOG_RATE:g}: the rate bound e^(cR) overflows; use a "
                "smaller radius or a smaller c"
            )
        return Fraction(math.exp(a)) * (1 + Fraction(1, 2**48))

    def gradient_sensitivity_sq(self, c) -> Fraction:
        """G^2, G = 2 c max(e^(c R_cert), max_count) (docs/linear_regression.md §7)."""
        g = 2 * Fraction(c) * max(self.rate_bound(c), Fraction(self.max_count))
        return g * g

    def curvature_bound(self, c) -> Fraction:
        """e^(c R_cert) c^2."""
        return self.rate_bound(c) * Fraction(c) ** 2

    @property
    def label_text(self) -> str:
        return f"counts in {{0, 1, ..., {self.max_count}}} (max_count)"

    def bad_labels(self, y: np.ndarray) -> np.ndarray:
        return ~((y >= 0) & (y <= self.max_count) & (np.floor(y) == y))

    def loss_sums(self, data, w: np.ndarray, threads: int = 1) -> np.ndarray:
        if is_rows(data):
            return family_pass(self, "loss_sums", data, w, 1)
        x, y = data
        total = np.zeros(w.shape[0])
        for start in range(0, x.shape[0], _ROWS):
            a = x[start : start + _ROWS] @ w.T
            total += (np.exp(a) - y[start : start + _ROWS, None] * a).sum(axis=0)
        return total

    def loss(self, data, w: np.ndarray) -> float:
        return float(self.loss_sums(data, np.asarray(w, dtype=float)[None, :])[0])

    def neg_grad_sums(self, data, w: np.ndarray, pool=None, threads: int = 1) -> np.ndarray:
        """(d, B): sum_i (y_i - exp(w_b.x_i)) x_i."""
        if is_rows(data):
            return family_pass(self, "neg_grad_sums", data, w, None, 1)
        x, y = data
        g = np.zeros(w.shape)
        for start in range(0, x.shape[0], _ROWS):
            blk = x[start : start + _ROWS]
            g += blk.T @ (y[start : start + _ROWS, None] - np.exp(blk @ w))
        return g

    def grad_hess(self, data, w: np.ndarray, r: float):
        if is_rows(data):
            return family_pass(self, "grad_hess", data, w, r)
        x, y = data
        mu = np.exp(x @ w)
        return r * (x.T @ (mu - y)), r * ((x * mu[:, None]).T @ x)
