"""Linear regression with Gaussian noise as a GLM family, on a public ball.

Model: y = theta.x + N(0, sigma^2) with a public noise standard deviation sigma; the
per-record loss (negative log-likelihood up to a constant) is

    loss(theta; x, y) = (y - theta.x)^2 / (2 sigma^2),    |y| <= y_bound, ||x|| <= c,

and the parameter lives on the public ball ||theta|| <= R (the prior is truncated to it).
On the ball (docs/linear_regression.md §2, every constant proven there):

* gradient (theta.x - y) x / sigma^2; the replace-one difference is
  (x x^T - x' x'^T) theta / sigma^2 - (y x - y' x') / sigma^2, whose norm is at most
  G = c (c R + 2 y_bound) / sigma^2 (a difference of two PSD matrices of norm <= c^2 has
  norm <= c^2; ||y x - y' x'|| <= 2 y_bound c);
* curvature x x^T / sigma^2 <= (c^2 / sigma^2) I, everywhere;
* loss range 0 <= loss <= (y_bound + c R)^2 / (2 sigma^2) (OPS's pure eps0 = 2 t range).

R enters as R_cert = R (1 + 2^-20), which covers the rounding of every float norm test and
projection onto the ball (relative (d + 2) 2^-53 <= 2^-28 for d <= 2^24).

Data: (x (n, d) float64, y (n,) float64); in a Dask engine the rows [x, y] ("xy").
Source: docs/linear_regression.md.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .family import ResponseFamily
from .passes import family_pass, is_rows

__all__ = ["LinearGaussian", "RADIUS_SLACK", "check_bounded_family"]

RADIUS_SLACK = Fraction(1, 2**20)  # R_cert = R (1 + RADIUS_SLACK): float norms and projections
_ROWS = 1 << 16  # rows per block of the kernels


def check_bounded_family(value, name: str) -> float:
    """A family constant: a finite float in [1e-100, 1e100]."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number; got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and 1e-100 <= v <= 1e100):
        raise ValueError(f"{name} must be finite and in [1e-100, 1e100]; got {value!r}")
    return v


class LinearGaussian(ResponseFamily):
    """loss(theta; x, y) = (y - theta.x)^2 / (2 sigma^2) on the ball ||theta|| <= radius.

    ``y_bound``: |y| <= y_bound (public); ``noise_sd``: sigma (public); ``radius``: R, or
    None while the model's default radius is unresolved (the constants then raise).
    Constants: module docstring (docs/linear_regression.md §2).
    """

    name = "linear (Gaussian noise)"
    kind = "xy"
    outputs = 1
    self_concordance = None  # its exact back-end is privbayes.sampling.exact_gaussian
    gaussian = True  # the tempered posterior is Gaussian (before truncation)

    def __init__(self, y_bound: float, noise_sd: float, radius: float | None = None) -> None:
        self.y_bound = check_bounded_family(y_bound, "y_bound")
        self.noise_sd = check_bounded_family(noise_sd, "noise_sd")
        self.radius = None if radius is None else check_bounded_family(radius, "radius")

    def __repr__(self) -> str:
        return (
            f"LinearGaussian(y_bound={self.y_bound!r}, noise_sd={self.noise_sd!r}, "
            f"radius={self.radius!r})"
        )

    # -- constants (exact rationals) ---------------------------------------------------------
    def radius_cert(self) -> Fraction:
        """R (1 + 2^-20): a bound on the norm of every parameter the samplers keep."""
        if self.radius is None:
            raise ValueError("the ball's radius is not resolved yet (model.resolve_beta(n, d))")
        return Fraction(self.radius) * (1 + RADIUS_SLACK)

    @property
    def inv_var(self) -> Fraction:
        """1 / sigma^2, exactly."""
        return 1 / Fraction(self.noise_sd) ** 2

    def gradient_sensitivity_sq(self, c) -> Fraction:
        """G^2, G = c (c R_cert + 2 y_bound) / sigma^2 (docs/linear_regression.md, Lemma 1)."""
        c = Fraction(c)
        g = c * (c * self.radius_cert() + 2 * Fraction(self.y_bound)) * self.inv_var
        return g * g

    def curvature_bound(self, c) -> Fraction:
        """c^2 / sigma^2: grad^2 loss = x x^T / sigma^2 <= (c^2 / sigma^2) I."""
        return Fraction(c) ** 2 * self.inv_var

    def loss_range(self, c) -> Fraction:
        """sup - inf of one record's loss over the ball and the records: (y_b + c R)^2 / (2 s^2)."""
        return (Fraction(self.y_bound) + Fraction(c) * self.radius_cert()) ** 2 * self.inv_var / 2

    # -- responses -------------------------------------------------------------------------
    @property
    def label_text(self) -> str:
        return f"responses with |y| <= y_bound = {self.y_bound:g}"

    def bad_labels(self, y: np.ndarray) -> np.ndarray:
        """Mask of responses outside [-y_bound, y_bound] (NaN is refused before this)."""
        return ~(np.abs(y) <= self.y_bound)

    # -- kernels ---------------------------------------------------------------------------
    def loss_sums(self, data, w: np.ndarray, threads: int = 1) -> np.ndarray:
        """(B,): sum_i (y_i - w_b.x_i)^2 / (2 sigma^2) for the rows w_b of w (B, d)."""
        if is_rows(data):
            return family_pass(self, "loss_sums", data, w, 1)
        x, y = data
        total = np.zeros(w.shape[0])
        for start in range(0, x.shape[0], _ROWS):
            res = y[start : start + _ROWS, None] - x[start : start + _ROWS] @ w.T
            total += np.einsum("ij,ij->j", res, res)
        return total / (2.0 * self.noise_sd**2)

    def loss(self, data, w: np.ndarray) -> float:
        return float(self.loss_sums(data, np.asarray(w, dtype=float)[None, :])[0])

    def neg_grad_sums(self, data, w: np.ndarray, pool=None, threads: int = 1) -> np.ndarray:
        """(d, B): -sum_i grad loss = X^T (y - X w_b) / sigma^2 for the columns w_b of w."""
        if is_rows(data):
            return family_pass(self, "neg_grad_sums", data, w, None, 1)
        x, y = data
        g = np.zeros(w.shape)
        for start in range(0, x.shape[0], _ROWS):
            blk = x[start : start + _ROWS]
            g += blk.T @ (y[start : start + _ROWS, None] - blk @ w)
        g /= self.noise_sd**2
        return g

    def grad_hess(self, data, w: np.ndarray, r: float):
        """(r X^T (X w - y) / sigma^2, r X^T X / sigma^2) at one w (d,)."""
        if is_rows(data):
            return family_pass(self, "grad_hess", data, w, r)
        x, y = data
        scale = r / self.noise_sd**2
        return scale * (x.T @ (x @ w - y)), scale * (x.T @ x)
