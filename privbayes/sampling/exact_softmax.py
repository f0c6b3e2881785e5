"""The exact back-end's data side for K-class softmax regression (docs/multinomial.md §6).

The rejection sampler of privbayes.sampling.exact is generic in the parameter dimension
P = d K; what the softmax family changes is proven in docs/multinomial.md §6:

* the line constant: along W + tV the per-record loss has |third| <= R second and
  |fourth| <= R^2 second cumulant, R = range of V^T x <= sqrt(2) ||x|| ||V||_F, so the
  envelope runs with c' = sqrt(2) c (Theorem M1, M2);
* the curvature: lambda_max(H_L) <= r n c^2 / 2 and tr(H_L) <= r n c^2 (1 - 1/K);
* the acceptance bound's spread F_K(sqrt(2) sigma) (Theorem M3);
* the mode's norm (Lemma M4): p ||W*||^2 <= r n M_K, M_K = (1 - a) / a at the root of
  log(a (K - 1) / (1 - a)) = 1 / a;
* the rounding-error bounds of the kernels below (Lemma M5): every bound assumes the
  computation written here, and the tests check them against 80-bit and mpmath sums.

Data: X (n, d) float64, labels y (n,) int64 in {0, ..., K-1}; the parameter w is W (d, K)
flattened row-major (entry (a, k) at a K + k), as in MultinomialLogistic.
"""

from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .envelope import U, gamma

FIT_ROWS = 32_768  # rows per block of the gradient / Hessian sums (as the binary fit)
MAX_ROWS = 65_536  # rows per block of the proposals' log-likelihood sums
BATCH = 256  # proposals per pass (the binary back-end's)
_CELLS = 1 << 21  # scores per block of the proposals' pass (16 MB of float64)


# -- public constants -----------------------------------------------------------------------
def c_self(c_env: float) -> float:
    """sqrt(2) c, rounded up: the range of V^T x over ||x|| <= c per unit ||V||_F."""
    return math.sqrt(2.0) * c_env * (1.0 + 4.0 * U)


@functools.lru_cache(maxsize=256)
def mode_constant(k: int) -> float:
    """An upper bound on M_K = max over the simplex of z_y - s.z = H(s) + log s_y.

    Maximised with the other classes equal: f(a) = (1 - a) log(a (K - 1) / (1 - a)),
    f' = -kappa(a), kappa(a) = log(a (K - 1) / (1 - a)) - 1 / a increasing; at the root
    f = (1 - a) / a, decreasing in a. Bisection keeps a_lo with kappa(a_lo) < -1e-9 (far
    beyond the float error of kappa), so a_lo < a* and (1 - a_lo) / a_lo >= M_K.
    """
    k = int(k)

    def kap(a: float) -> float:
        return math.log(a * (k - 1) / (1.0 - a)) - 1.0 / a

    lo, hi = 1e-12, 1.0 - 1e-16
    while kap(lo) >= -1e-9:
        lo /= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if kap(mid) < -1e-9:
            lo = mid
        else:
            hi = mid
    return (1.0 - lo) / lo * (1.0 + 1e-12)


def mode_norm_bound(n: int, r: float, c_env: float, p: float, k: int) -> float:
    """Public bound on ||W*||_F, W* the mode, for every data set (Lemma M4): p ||W*|| <=
    r n sqrt(2) c and p ||W*||^2 <= r n M_K."""
    return min(r * n * c_self(c_env) / p, math.sqrt(mode_constant(k) * r * n / p)) * (
        1.0 + 16.0 * U
    )


# -- rounding-error bounds (Lemma M5) --------------------------------------------------------
def _rho_e(z_abs):
    """Relative error of exp(fl(z_k - max z)) for |z| <= z_abs: argument rounding U |t|,
    |t| <= 2 z_abs, then exp within 4 ulp."""
    return 1.01 * (2.0 * z_abs + 4.0) * U


def eval_error(z_abs, k: int):
    """|computed loss - L(z~)| for float scores |z~_k| <= z_abs (the kernel ``losses``):
    exp terms (rho_e), their sum (gamma_K), the log (4 ulp), m - z_y and the last sum."""
    return 1.1 * (_rho_e(z_abs) + gamma(k) + 6.0 * U * (math.log(k) + 1.0) + 5.0 * U * z_abs)


def softmax_rel_error(zeta, z_abs, k: int):
    """|s~_k - s_k(z)| <= rho_s s_k for softmax s~ computed by ``softmax`` from scores
    within zeta of z (each) and |z~| <= z_abs: s(z~)/s(z) in [e^-2zeta, e^2zeta] and the
    kernel's own rounding (rho_e, the sum, the division)."""
    rho_e = _rho_e(z_abs)
    rho_s_sum = rho_e + 1.01 * gamma(k)
    return 1.03 * (np.expm1(2.0 * np.asarray(zeta)) + 1.01 * (rho_e + rho_s_sum + U))


def _check_small(rho) -> None:
    if not float(np.max(rho)) < 1e-3:  # the linearised bounds above need small errors
        raise ValueError("the softmax rounding bound is not small: scores too large")


def delta_h(n, d, k, r, c_env, w_norm, lf2, p) -> float:
    """Bound on ||H - L L^T||_2 for the blocked softmax Hessian (``grad_hess``) and its
    Cholesky factor (Higham Thm 10.3): Lemma M5 (b)."""
    zeta = gamma(d) * c_env * w_norm
    z_abs = c_env * w_norm * (1.0 + gamma(d))
    rho_s = float(softmax_rel_error(zeta, z_abs, k))
    _check_small(rho_s)
    nb = math.ceil(n / FIT_ROWS)
    per = 3.02 * rho_s + 8.1 * U + 2.02 * (gamma(FIT_ROWS) + gamma(2 * nb + 2)) * (1.0 + rho_s) ** 2
    hess = r * n * c_env * c_env * per * (1.0 + 4.0 * U) + 2.0 * U * p
    return (hess + gamma(d * k + 1) * lf2 + 4.0 * U * p) * 1.01


def grad_error(n, d, k, r, c_env, w_norm, g_norm, p) -> float:
    """Bound on ||grad f(w) - g_computed||_2 for the blocked softmax gradient: Lemma M5 (a)."""
    zeta = gamma(d) * c_env * w_norm
    z_abs = c_env * w_norm * (1.0 + gamma(d))
    rho_s = float(softmax_rel_error(zeta, z_abs, k))
    _check_small(rho_s)
    nb = math.ceil(n / FIT_ROWS)
    per = rho_s + U + (gamma(FIT_ROWS) + gamma(nb + 1)) * (1.5 + rho_s) * 1.01
    return (r * n * c_env * per + 4.0 * U * (g_norm + p * w_norm)) * 1.01


def block_rows(k: int) -> int:
    """Rows per block of the proposals' pass for K classes and BATCH proposals (fewer
    proposals give more rows, up to MAX_ROWS)."""
    return min(MAX_ROWS, max(256, _CELLS // (BATCH * k)))


def log_density_error(n, d, k, r, p, c_env, w_norm, v_norm, rho):
    """Bound on |computed - true| log pi(w_hat + v) - log pi(w_hat): Lemma M5 (c).

    Vectorised over v_norm and rho. Per record: the scores' dot products (gamma_d for
    W_hat and for V), the sum z0 + a, the two losses (2 ||score error||_inf each, since
    the loss gradient in the scores has l1 norm <= 2, plus ``eval_error``) and their
    difference; then the block and cross-block sums; then the prior term.
    """
    v_norm = np.asarray(v_norm, dtype=float)
    rho = np.asarray(rho, dtype=float)
    gd = gamma(d)
    z0 = c_env * w_norm * (1.0 + gd)
    amax = c_env * v_norm * (1.0 + gd)
    zeta0 = gd * c_env * w_norm
    delta1 = zeta0 + gd * c_env * v_norm + U * (z0 + amax)
    per = (
        2.0 * delta1
        + eval_error(z0 + amax + delta1, k)
        + 2.0 * zeta0
        + eval_error(z0, k)
        + U * (2.0 * amax + 1.0)
    )
    nb = math.ceil(n / block_rows(k))
    summed = n * (per + (gamma(MAX_ROWS) + gamma(nb + 1)) * (2.0 * amax + per))
    loglik = r * summed * (1.0 + 4.0 * U) + 2.0 * U * r * n * (2.0 * amax + 1.0)
    dim = d * k
    prior = p * (w_norm * v_norm + v_norm * v_norm) * (gamma(dim) + 8.0 * U)
    with np.errstate(divide="ignore"):
        lr = (dim - 1) * np.abs(np.log(np.maximum(rho, 1e-300)))
    combine = 4.0 * U * (r * n * (2.0 * amax + 1.0) + p * (w_norm + v_norm) * v_norm + lr)
    return 1.1 * (loglik + prior + 4.0 * U * lr + combine)


# -- kernels --------------------------------------------------------------------------------
def losses(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """logsumexp(z) - z_y along the last axis (z (..., K), y broadcastable to z[..., 0]);
    overwrites z. The computation Lemma M5 bounds: m = max z, exp(z - m), their sum, its
    log, plus (m - z_y)."""
    picked = np.take_along_axis(z, np.broadcast_to(y, z.shape[:-1])[..., None], axis=-1)
    mx = z.max(axis=-1, keepdims=True)
    gap = (mx - picked)[..., 0]
    z -= mx
    np.exp(z, out=z)
    out = np.log(z.sum(axis=-1))
    out += gap
    return out


def softmax(z: np.ndarray) -> np.ndarray:
    """exp(z - max z) / sum, along the last axis; overwrites z."""
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


class SoftmaxProblem:
    """The exact back-end's data interface (as privbayes.sampling.exact._Problem) for the
    K-class softmax family: ``d`` is the parameter dimension d K."""

    group = 1

    def __init__(self, x: np.ndarray, y: np.ndarray, k: int, r: float, p: float):
        from .imh import _threads

        self.x = np.ascontiguousarray(x, dtype=np.float64)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.k = int(k)
        self.n, self.features = self.x.shape
        self.d = self.features * self.k
        self.r, self.p = float(r), float(p)
        self.threads = _threads()

    def subsample(self, rows: int) -> SoftmaxProblem:
        """The problem on ``rows`` evenly spread rows, likelihood weighted by n / rows."""
        if self.n <= rows:
            return self
        pick = (np.arange(rows) * self.n) // rows
        sub = SoftmaxProblem(self.x[pick], self.y[pick], self.k, self.r * self.n / rows, self.p)
        sub.threads = self.threads
        return sub

    def _blocks(self, rows: int):
        return [(s, min(s + rows, self.n)) for s in range(0, self.n, rows)]

    def grad_hess(self, w: np.ndarray):
        """(scores z (n, K), gradient of f (d K,), data Hessian H_L (d K, d K)) at w.

        Per FIT_ROWS block: the scores X_b W (BLAS), the softmax, the gradient block
        X_b^T (s - e_y), and the Hessian block sum_i (diag(s_i) - s_i s_i^T) kron x_i x_i^T
        as sum_j diag-blocks (X_b s_j)^T X_b minus P^T P, P_i = x_i kron s_i; blocks are
        summed in order (their error bounds: ``grad_error``, ``delta_h``)."""
        k, dx, size = self.k, self.features, self.d
        wm = w.reshape(dx, k)
        h = np.zeros((size, size))
        gs, zs = [], []
        for s0, e0 in self._blocks(FIT_ROWS):
            xb, yb = self.x[s0:e0], self.y[s0:e0]
            z = xb @ wm
            zs.append(z)
            s = softmax(z.copy())
            e = s.copy()
            e[np.arange(e.shape[0]), yb] -= 1.0
            gs.append((xb.T @ e).ravel())
            pm = (xb[:, :, None] * s[:, None, :]).reshape(-1, size)
            h -= pm.T @ pm
            for j in range(k):
                h[j::k, j::k] += (xb * s[:, j : j + 1]).T @ xb
        g = self.r * np.sum(gs, axis=0) + self.p * w
        return np.concatenate(zs), g, self.r * h

    def line_values(self, z: np.ndarray, step: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """sum_i [L_i(z_i - t b_i) - L_i(z_i)], b_i = step^T x_i, for each t (one pass)."""
        sm = step.reshape(self.features, self.k)
        out = np.zeros(ts.size)
        for s0, e0 in self._blocks(FIT_ROWS):
            zb, yb = z[s0:e0], self.y[s0:e0]
            b = self.x[s0:e0] @ sm
            base = losses(zb.copy(), yb)
            for i, t in enumerate(ts):
                out[i] += (losses(zb - t * b, yb) - base).sum()
        return out

    def base(self, z0: np.ndarray) -> np.ndarray:
        """The per-record losses at w_hat, L_i(z0_i): shape (n,)."""
        return losses(z0.copy(), self.y)

    def loglik_diffs(self, z0, sp0, vts: list[np.ndarray]) -> list[np.ndarray]:
        return [self.loglik_diff(z0, sp0, vt) for vt in vts]

    def loglik_diff(self, z0: np.ndarray, sp0: np.ndarray, vt: np.ndarray) -> np.ndarray:
        """S_j = sum_i [L_i(z0_i + V_j^T x_i) - L_i(z0_i)] for the columns v_j of vt (d K,
        cols): one pass over X, a matrix product per block of block_rows(K) rows (or more
        for fewer columns, up to MAX_ROWS), the elementwise part split over threads."""
        k, dx = self.k, self.features
        cols = vt.shape[1]
        mat = np.ascontiguousarray(vt.reshape(dx, k, cols).transpose(0, 2, 1).reshape(dx, -1))
        rows = min(MAX_ROWS, max(256, _CELLS // max(1, cols * k)))
        total = []
        pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

        def part(args):
            ab, z0b, yb, sp0b = args
            ab += z0b[:, None, :]
            return (losses(ab, yb[:, None]) - sp0b[:, None]).sum(axis=0)

        try:
            for s0 in range(0, self.n, rows):
                ab = (self.x[s0 : s0 + rows] @ mat).reshape(-1, cols, k)
                args = (ab, z0[s0 : s0 + rows], self.y[s0 : s0 + rows], sp0[s0 : s0 + rows])
                if pool is None or ab.shape[0] < 1024:
                    total.append(part(args))
                else:
                    step = -(-ab.shape[0] // self.threads)
                    chunks = [tuple(a[i : i + step] for a in args) for i in range(0, len(ab), step)]
                    total.append(np.sum(list(pool.map(part, chunks)), axis=0))
        finally:
            if pool is not None:
                pool.shutdown()
        return np.sum(total, axis=0)
