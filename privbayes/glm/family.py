"""GLM families: the per-record loss and the public constants the GLM certificates need.

A Gaussian-prior GLM release (docs/glm.md, docs/langevin.md, docs/exact.md,
docs/multinomial.md) samples from, or runs noisy gradient descent on,

    U_D(theta) = r sum_i loss(theta; x_i, y_i) + (p / 2) ||theta||^2,   p = n beta / m,

with theta in R^P (P = d for binary logistic regression, d K for K-class softmax regression,
flattened row-major from a (d, K) matrix) and rows ||x_i|| <= c. Everything the samplers and
certificates need from the model is one :class:`GLMFamily`:

* ``loss_sums`` / ``loss`` / ``neg_grad_sums`` / ``grad_hess``: the data side (per-record
  negative log-likelihood summed over the rows, its gradient and its Hessian);
* ``sensitivity_sq``: (G / c)^2 for G = sup over theta and records z, z' with row norms
  <= c of ||grad loss(theta; z) - grad loss(theta; z')||, the replace-one gradient
  sensitivity (exact rational);
* ``curvature``: a bound k on the Hessian weights, grad^2 loss(theta; z) <= k ||x||^2 I
  (so the data part of the smoothness is r n c^2 k);
* ``self_concordance``: nu with |D^3 loss[v, v, v]| <= nu ||x|| ||v|| D^2 loss[v, v] along
  every line (the exact back-end's envelope, docs/exact.md), or None when the family's
  exact back-end is not the binary one (softmax: sqrt(2), irrational, with its own
  constants in privbayes.sampling.exact_softmax, docs/multinomial.md §6; any other
  family is refused by the exact back-end).

Binary logistic regression (:data:`BINARY_LOGISTIC`) and multinomial logistic regression
(:class:`MultinomialLogistic`) are the two families. Adding one = a subclass with these
members and its proofs in docs/. Source: docs/multinomial.md §7 (the interface), docs/glm.md
and docs/langevin.md §2 (binary constants), docs/multinomial.md §2-§4 (softmax constants).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np
from scipy import special

from .passes import family_pass, is_rows

__all__ = [
    "BINARY_LOGISTIC",
    "BinaryLogistic",
    "GLMFamily",
    "MultinomialLogistic",
    "ResponseFamily",
]

_CELLS = 1 << 21  # rows x proposals per block of margins (16 MB of float64)
_SPLIT = 1 << 16  # margins per block below which the elementwise part stays in one thread


class GLMFamily:
    """The interface a GLM family implements (see the module docstring).

    ``outputs``: K, the number of weight columns (1 for binary); the parameter has
    P = d * outputs entries, the flattening of a (d, outputs) matrix.
    """

    name: str = "glm"
    outputs: int = 1
    sensitivity_sq: Fraction
    curvature: Fraction
    self_concordance: Fraction | None = None
    # the layout of the rows in a Dask engine (privbayes.glm.passes): "binary" (u = y x),
    # "multinomial" ([x, class]) or "xy" ([x, y], y a real response)
    kind: str = "binary"
    # a public ball ||theta|| <= radius the parameter lives in (the prior is truncated to
    # it and Langevin projects onto it), or None: all of R^P. Families whose gradients are
    # unbounded (linear, Poisson regression) need it for their constants.
    radius: float | None = None

    def gradient_sensitivity_sq(self, c) -> Fraction:
        """G^2 exactly, for rows of norm <= c (an exact rational): the square of the
        replace-one gradient sensitivity sup ||grad loss(theta; z) - grad loss(theta; z')||
        over the parameters the family allows (on its ball, when it has one). Default:
        ``sensitivity_sq * c^2``."""
        return self.sensitivity_sq * Fraction(c) ** 2

    def start_sensitivity_sq(self, c) -> Fraction:
        """G0^2 exactly: the square of sup ||grad loss(0; z) - grad loss(0; z')|| at the
        sampler's start theta = 0 (docs/langevin.md §4, "The first step"), at most
        ``gradient_sensitivity_sq(c)``. Default: that bound (no gain)."""
        return self.gradient_sensitivity_sq(c)

    def curvature_bound(self, c) -> Fraction:
        """An exact rational k_c with grad^2 loss(theta; z) <= k_c I for rows of norm <= c
        (on the family's ball): the data part of the smoothness is then r n k_c.
        Default: ``curvature * c^2``."""
        return self.curvature * Fraction(c) ** 2

    def project(self, w: np.ndarray) -> np.ndarray:
        """Columns of w (P, B) projected onto the family's ball, in place (a no-op without
        one): w_b <- w_b min(1, R / ||w_b||), the 1-Lipschitz Euclidean projection."""
        if self.radius is None:
            return w
        norms = np.sqrt(np.einsum("ij,ij->j", w, w))
        with np.errstate(divide="ignore"):
            scale = np.minimum(1.0, self.radius / norms)
        w *= scale
        return w

    def sensitivity(self, c: float) -> float:
        """G = sqrt(sensitivity_sq) c, in floats (for messages; certificates use the
        exact rational ``sensitivity_sq``)."""
        return math.sqrt(float(self.sensitivity_sq)) * c

    def prepare(self, x: np.ndarray, y: np.ndarray):
        """The data in the form the kernels use (never leaves the release)."""
        raise NotImplementedError

    def n_rows(self, data) -> int:
        raise NotImplementedError

    def loss_sums(self, data, w: np.ndarray, threads: int) -> np.ndarray:
        """sum_i loss(w_b; x_i, y_i) for each row w_b of w (B, P): shape (B,)."""
        raise NotImplementedError

    def loss(self, data, w: np.ndarray) -> float:
        """sum_i loss(w; x_i, y_i) at one w (P,)."""
        raise NotImplementedError

    def neg_grad_sums(self, data, w: np.ndarray, pool, threads: int) -> np.ndarray:
        """-sum_i grad loss(w_b; x_i, y_i) for each column w_b of w (P, B): shape (P, B)."""
        raise NotImplementedError

    def grad_hess(self, data, w: np.ndarray, r: float) -> tuple[np.ndarray, np.ndarray]:
        """(r sum_i grad loss, r sum_i grad^2 loss) at one w (P,): shapes (P,), (P, P)."""
        raise NotImplementedError


# -- binary logistic regression ---------------------------------------------------------------
def softplus(z: np.ndarray) -> np.ndarray:
    """log(1 + exp(-z)) elementwise, without overflow; overwrites z."""
    a = np.abs(z)
    np.negative(a, out=a)
    np.exp(a, out=a)
    np.log1p(a, out=a)
    np.minimum(z, 0.0, out=z)
    a -= z  # log1p(exp(-|z|)) + max(-z, 0)
    return a


def softplus_sum(z: np.ndarray) -> np.ndarray:
    """Column sums of log(1 + exp(-z)), without overflow; overwrites z."""
    return softplus(z).sum(axis=0)


def sigmoid_neg(block: np.ndarray) -> None:
    """block <- sigmoid(-block) = 1 / (1 + exp(block)), in place (exp overflow gives 0)."""
    with np.errstate(over="ignore"):
        np.exp(block, out=block)
    block += 1.0
    np.reciprocal(block, out=block)


class ResponseFamily(GLMFamily):
    """A family whose data are (X, y) with a real response y kept as given (linear and
    Poisson regression): the kernels read float64 X (n, d) and y (n,)."""

    def prepare(self, x: np.ndarray, y: np.ndarray):
        return (np.ascontiguousarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))

    def n_rows(self, data) -> int:
        return data.n if is_rows(data) else int(data[0].shape[0])


class BinaryLogistic(GLMFamily):
    """loss(w; x, y) = log(1 + exp(-y w.x)), y in {-1, +1}; w in R^d.

    Constants (docs/glm.md, docs/langevin.md §2): ||grad loss|| <= ||x||, so the replace-one
    gradient sensitivity is G = 2c (sensitivity_sq = 4); the Hessian weight
    sigma(t) sigma(-t) <= 1/4 (curvature 1/4); |phi'''| <= phi'' for phi(t) = log(1 + e^-t)
    (Bach 2010), so nu = 1. Data: the rows u_i = y_i x_i, shape (n, d).
    """

    name = "binary logistic"
    outputs = 1
    sensitivity_sq = Fraction(4)
    curvature = Fraction(1, 4)
    self_concordance = Fraction(1)

    def start_sensitivity_sq(self, c) -> Fraction:
        """At w = 0, grad loss(0; u) = -u / 2: two records differ by ||u' - u|| / 2 <= c."""
        return Fraction(c) ** 2

    def prepare(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x * y[:, None], dtype=np.float64)  # y^2 = 1

    def n_rows(self, data: np.ndarray) -> int:
        return int(data.shape[0])

    def loss_sums(self, data: np.ndarray, w: np.ndarray, threads: int) -> np.ndarray:
        """One pass over the rows per call: per row block, the margins from one matrix
        product in this thread, the softplus sums split over ``threads`` threads."""
        if is_rows(data):  # rows in a Dask engine: the same kernel per chunk, summed there
            return family_pass(self, "loss_sums", data, w, 1)
        n = data.shape[0]
        rows = max(256, _CELLS // max(1, w.shape[0]))
        wt = np.ascontiguousarray(w.T)
        total = np.zeros(w.shape[0])
        pool = ThreadPoolExecutor(threads) if threads > 1 else None
        try:
            for start in range(0, n, rows):
                z = data[start : start + rows] @ wt  # margins y x.w, (rows, B)
                if pool is None or z.shape[0] < 512:
                    total += softplus_sum(z)
                else:
                    step = -(-z.shape[0] // threads)
                    parts = [z[i : i + step] for i in range(0, z.shape[0], step)]
                    for part in pool.map(softplus_sum, parts):
                        total += part
        finally:
            if pool is not None:
                pool.shutdown()
        return total

    def loss(self, data: np.ndarray, w: np.ndarray) -> float:
        if is_rows(data):
            return float(family_pass(self, "loss", data, w))
        z = data @ w
        return np.logaddexp(0.0, -z).sum()

    def neg_grad_sums(self, data: np.ndarray, w: np.ndarray, pool, threads: int) -> np.ndarray:
        """z^T sigmoid(-z w), shape (d, B), one pass over z = data (n, d), row blocks of at
        most _CELLS margins; the elementwise part is split over threads."""
        if is_rows(data):
            return family_pass(self, "neg_grad_sums", data, w, None, 1)
        n = data.shape[0]
        rows = max(256, _CELLS // w.shape[1])
        g = np.zeros(w.shape)
        for start in range(0, n, rows):
            blk = data[start : start + rows]
            mar = blk @ w  # margins y x.w, (rows, B)
            if pool is None or mar.size < _SPLIT:
                sigmoid_neg(mar)
            else:
                step = -(-mar.shape[0] // threads)
                list(pool.map(sigmoid_neg, [mar[i : i + step] for i in range(0, len(mar), step)]))
            g += blk.T @ mar
        return g

    def grad_hess(self, data: np.ndarray, w: np.ndarray, r: float):
        """(-r u^T sigmoid(-u w), r u^T diag(s (1 - s)) u) at one w (d,)."""
        from scipy.linalg import blas

        if is_rows(data):
            return family_pass(self, "grad_hess", data, w, r)
        z = data @ w
        s = special.expit(-z)
        g = -r * (data.T @ s)
        a = data * np.sqrt(r * s * (1.0 - s))[:, None]
        upper = blas.dsyrk(1.0, a.T, trans=0)  # a^T a (upper); ~8x a plain matmul here
        hess = np.triu(upper) + np.triu(upper, 1).T
        return g, hess


BINARY_LOGISTIC = BinaryLogistic()


# -- multinomial (softmax) logistic regression -----------------------------------------------
class MultinomialLogistic(GLMFamily):
    """loss(W; x, y) = logsumexp(W^T x) - (W^T x)_y, y in {0, ..., K-1}; W in R^(d x K),
    flattened row-major (entry (a, k) at a K + k).

    Constants (docs/multinomial.md): grad_W loss = x (softmax(W^T x) - e_y)^T has Frobenius
    norm ||x|| ||s - e_y|| <= sqrt(2) ||x||, and the replace-one sensitivity is
    G = 2 sqrt(2) c (sensitivity_sq = 8, the supremum for d >= 2); the Hessian weights
    diag(s) - s s^T have operator norm <= 1/2 (curvature 1/2). Its exact back-end lives in
    privbayes.sampling.exact_softmax (nu = sqrt(2) there; self_concordance None here).
    Data: (x (n, d), y (n,) int64).
    """

    name = "multinomial logistic"
    kind = "multinomial"
    sensitivity_sq = Fraction(8)
    curvature = Fraction(1, 2)
    self_concordance = None

    def __init__(self, n_classes: int) -> None:
        self.outputs = int(n_classes)

    def __repr__(self) -> str:
        return f"MultinomialLogistic({self.outputs})"

    def start_sensitivity_sq(self, c) -> Fraction:
        """At W = 0, grad loss = x (1/K - e_y)^T, of norm ||x|| sqrt((K - 1) / K): two
        records differ by at most 2 c sqrt((K - 1) / K) (x' = -x, y' = y attains it)."""
        k = self.outputs
        return 4 * Fraction(c) ** 2 * Fraction(k - 1, k)

    def prepare(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.ascontiguousarray(x, dtype=np.float64), np.asarray(y, dtype=np.int64))

    def n_rows(self, data: tuple) -> int:
        return data.n if is_rows(data) else int(data[0].shape[0])

    def _block_rows(self, cols: int) -> int:
        return max(64, _CELLS // max(1, cols))

    def loss_sums(self, data: tuple, w: np.ndarray, threads: int) -> np.ndarray:
        """(B,) loss sums for the rows of w (B, d K); row blocks of <= _CELLS scores."""
        if is_rows(data):
            return family_pass(self, "loss_sums", data, w, 1)
        x, y = data
        n, d = x.shape
        k = self.outputs
        b = w.shape[0]
        mat = np.ascontiguousarray(w.reshape(b, d, k).transpose(1, 0, 2).reshape(d, b * k))
        rows = self._block_rows(b * k)
        total = np.zeros(b)
        for start in range(0, n, rows):
            z = (x[start : start + rows] @ mat).reshape(-1, b, k)
            picked = np.take_along_axis(z, y[start : start + rows, None, None], axis=2)[..., 0]
            total += (special.logsumexp(z, axis=2) - picked).sum(axis=0)
        return total

    def loss(self, data: tuple, w: np.ndarray) -> float:
        return float(self.loss_sums(data, w[None, :], 1)[0])

    def neg_grad_sums(self, data: tuple, w: np.ndarray, pool, threads: int) -> np.ndarray:
        """(d K, B): -sum_i x_i (softmax(W_b^T x_i) - e_(y_i)), flattened row-major."""
        if is_rows(data):
            return family_pass(self, "neg_grad_sums", data, w, None, 1)
        x, y = data
        n, d = x.shape
        k = self.outputs
        b = w.shape[1]
        mat = np.ascontiguousarray(w.reshape(d, k, b).transpose(0, 2, 1).reshape(d, b * k))
        rows = self._block_rows(b * k)
        g = np.zeros((d, b * k))
        for start in range(0, n, rows):
            blk = x[start : start + rows]
            z = (blk @ mat).reshape(-1, b, k)
            s = special.softmax(z, axis=2)
            np.put_along_axis(
                s,
                y[start : start + rows, None, None],
                np.take_along_axis(s, y[start : start + rows, None, None], axis=2) - 1.0,
                axis=2,
            )
            g -= blk.T @ s.reshape(-1, b * k)
        return np.ascontiguousarray(g.reshape(d, b, k).transpose(0, 2, 1).reshape(d * k, b))

    def grad_hess(self, data: tuple, w: np.ndarray, r: float):
        """r sum_i x_i (s_i - e_(y_i)) and r sum_i (diag(s_i) - s_i s_i^T) kron x_i x_i^T
        (in the row-major flattening: entry ((a, j), (b, l))), in row blocks."""
        if is_rows(data):
            return family_pass(self, "grad_hess", data, w, r)
        x, y = data
        n, d = x.shape
        k = self.outputs
        size = d * k
        g = np.zeros(size)
        hess = np.zeros((size, size))
        rows = max(64, (1 << 22) // max(1, size))
        wm = w.reshape(d, k)
        for start in range(0, n, rows):
            blk = x[start : start + rows]
            s = special.softmax(blk @ wm, axis=1)
            e = s.copy()
            e[np.arange(blk.shape[0]), y[start : start + rows]] -= 1.0
            g += (blk.T @ e).ravel()
            # H[(a,j),(b,l)] = sum_i x_ia x_ib (s_ij delta_jl - s_ij s_il)
            p = (blk[:, :, None] * s[:, None, :]).reshape(-1, size)
            hess -= p.T @ p
            for j in range(k):
                hess[j::k, j::k] += (blk * s[:, j : j + 1]).T @ blk
        return r * g, r * hess
