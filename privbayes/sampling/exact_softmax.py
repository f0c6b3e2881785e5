"""The exact back-end's data side for K-class softmax regression (docs/multinomial.md §6).

The likelihood does not see the shift W -> W + v 1^T, and the prior is isotropic: with an
orthonormal basis [1/sqrt(K), Q] of R^K, W = Theta Q^T + m 1^T / sqrt(K) where m ~ N(0, I/p)
is independent of the data and Theta (d x (K - 1)) has the tempered posterior of the loss
L(Theta Q^T). The rejection sampler of privbayes.sampling.exact draws Theta exactly in
P = d (K - 1) dimensions, and ``full_weights`` adds the shift. The certificate covers the
release because Theta's law is certified with the same constant (||Q||_2 <= 1: the
gradient sensitivity cannot grow) and W is a data-free post-processing of (Theta, m).
What the softmax family changes is proven in docs/multinomial.md §6:

* the line constant: along W + tV the per-record loss has |third| <= R second and
  |fourth| <= R^2 second cumulant, R = range of V^T x <= sqrt(2) ||x|| ||V||_F, so the
  envelope runs with c' = sqrt(2) c (Lemma M1, Theorem M2);
* the curvature: lambda_max(H_L) <= r n c^2 / 2 and tr(H_L) <= r n c^2 (1 - 1/K);
* the acceptance bound's spread F_(K-1)(sqrt(2) sigma) (Theorem M3);
* the mode's norm (Lemma M4): p ||W*||^2 <= r n M_K, M_K = (1 - a) / a at the root of
  log(a (K - 1) / (1 - a)) = 1 / a;
* the rounding-error bounds of the kernels below (Lemma M5): every bound assumes the
  computation written here, and the tests check them against 80-bit and mpmath sums.

Data: X (n, d) float64, labels y (n,) int64 in {0, ..., K-1}; the sampled parameter is
Theta (d, K - 1) flattened row-major, the released one W (d, K) flattened row-major (entry
(a, k) at a K + k), as in MultinomialLogistic.
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
# Additions beyond the in-memory block sums allowed for in the sums' error bounds: the
# thread split of a block (<= 1024 threads) and a Dask engine's ordered tree (<= 7 per
# level, levels <= log_8 of the chunk count) both fit in 64 for any n below 2^60.
TREE = 64
GROUP = 256  # the proposals' log-likelihood differences are summed in groups of 256 rows
MAX_THREADS = 256  # row threads of one pass (the sums' bound allows this many partials)


# -- the shift-free basis ---------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def basis(k: int) -> np.ndarray:
    """Q (K, K - 1): the Helmert columns (1, ..., 1, -j, 0, ...) / sqrt(j (j + 1)), j = 1..K-1,
    orthonormal and orthogonal to 1 up to rounding, scaled by 1 - 8 U (sqrt(K) + 1) so that
    ||Q||_2 <= 1 holds for the stored floats (each entry is within 2 U of the exact one,
    so ||Q~ - Q||_2 <= 2 U sqrt(K - 1)). Read-only."""
    q = np.zeros((k, k - 1))
    for j in range(1, k):
        q[:j, j - 1] = 1.0 / math.sqrt(j * (j + 1))
        q[j, j - 1] = -j / math.sqrt(j * (j + 1))
    q *= 1.0 - 8.0 * U * (math.sqrt(k) + 1.0)
    q.setflags(write=False)
    return q


def to_weights(theta: np.ndarray, k: int) -> np.ndarray:
    """Theta (..., d, K - 1) -> Theta Q^T (..., d, K) (the scores' weights)."""
    return theta @ basis(k).T


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
    |t| <= 2 z_abs, then exp within 4 ulp (an ulp is up to 2 U relative: 8 U)."""
    return 1.01 * (2.0 * z_abs + 8.0) * U


def eval_error(z_abs, k: int):
    """|computed loss - L(z~)| for float scores |z~_k| <= z_abs (the kernel ``losses``):
    exp terms (rho_e), their sum (gamma_K), the log (4 ulp), m - z_y and the last sum."""
    return 1.1 * (_rho_e(z_abs) + gamma(k) + 10.0 * U * (math.log(k) + 1.0) + 5.0 * U * z_abs)


def softmax_rel_error(zeta, z_abs, k: int):
    """|s~_k - s_k(z)| <= rho_s s_k for softmax s~ computed by ``softmax`` from scores
    within zeta of z (each) and |z~| <= z_abs: s(z~)/s(z) in [e^-2zeta, e^2zeta] and the
    kernel's own rounding (rho_e, the sum, the division)."""
    rho_e = _rho_e(z_abs)
    rho_s_sum = rho_e + 1.01 * gamma(k)
    with np.errstate(over="ignore"):  # inf for absurd scores: refused by _check_small
        return 1.03 * (np.expm1(2.0 * np.asarray(zeta)) + 1.01 * (rho_e + rho_s_sum + U))


def _check_small(rho) -> None:
    if not float(np.max(rho)) < 1e-3:  # the linearised bounds above need small errors
        raise ValueError("the softmax rounding bound is not small: scores too large")


def delta_h(n, d, k, r, c_env, w_norm, lf2, p) -> float:
    """Bound on ||H - L L^T||_2 for the blocked softmax Hessian in Theta (``grad_hess``)
    and its Cholesky factor (Higham Thm 10.3): Lemma M5 (b). w_norm bounds ||Theta||_F;
    the scores' weights Theta Q^T are computed first (gamma_K more per score)."""
    zeta = gamma(d + k) * c_env * w_norm
    z_abs = c_env * w_norm * (1.0 + gamma(d + k))
    rho_s = float(softmax_rel_error(zeta, z_abs, k))
    _check_small(rho_s)
    nb = math.ceil(n / FIT_ROWS)
    per = (
        3.02 * rho_s
        + 8.1 * U
        + 2.02 * (gamma(FIT_ROWS) + gamma(2 * nb + TREE)) * (1.0 + rho_s) ** 2
        + 4.04 * k * gamma(k) * (1.0 + rho_s) ** 2  # Q^T H_W Q: two products of length K
    )
    hess = r * n * c_env * c_env * per * (1.0 + 4.0 * U) + 2.0 * U * p
    return (hess + gamma(d * (k - 1) + 1) * lf2 + 4.0 * U * p) * 1.01


def grad_error(n, d, k, r, c_env, w_norm, g_norm, p) -> float:
    """Bound on ||grad f(Theta) - g_computed||_2 for the blocked softmax gradient in Theta:
    Lemma M5 (a)."""
    zeta = gamma(d + k) * c_env * w_norm
    z_abs = c_env * w_norm * (1.0 + gamma(d + k))
    rho_s = float(softmax_rel_error(zeta, z_abs, k))
    _check_small(rho_s)
    nb = math.ceil(n / FIT_ROWS)
    sums = gamma(FIT_ROWS) + gamma(nb + TREE) + math.sqrt(k) * gamma(k)  # last: G_W Q
    per = rho_s + U + sums * (1.5 + rho_s) * 1.01
    return (r * n * c_env * per + 4.0 * U * (g_norm + p * w_norm)) * 1.01


def block_rows(k: int) -> int:
    """Rows per block of the proposals' pass for K classes (BATCH proposals per pass)."""
    return min(MAX_ROWS, max(GROUP, _CELLS // (BATCH * k)))


def grouped_sum(a: np.ndarray) -> np.ndarray:
    """Column sums of a (rows, cols) in groups of GROUP rows, then the group sums: a term
    passes through fewer than GROUP + rows / GROUP + 1 additions."""
    full = (a.shape[0] // GROUP) * GROUP
    out = a[full:].sum(axis=0)
    if full:
        out = out + a[:full].reshape(-1, GROUP, a.shape[1]).sum(axis=1).sum(axis=0)
    return out


def exact_rounded_sum(parts: list) -> np.ndarray:
    """The column sums of the arrays ``parts`` (each (cols,)), each correctly rounded
    (math.fsum): one rounding whatever the number of parts, so the thread partials and the
    block totals of a pass add one level each to the sums' error bounds, not their count."""
    stacked = np.asarray(parts, dtype=float).reshape(len(parts), -1)
    return np.array([math.fsum(col) for col in stacked.T]).reshape(np.shape(parts[0]))


def log_density_error(n, d, k, r, p, c_env, w_norm, v_norm, rho):
    """Bound on |computed - true| log pi(w_hat + v) - log pi(w_hat): Lemma M5 (c).

    Vectorised over v_norm and rho. Per record: the scores' dot products (gamma_d for
    W_hat and for V), the sum z0 + a, the two losses (2 ||score error||_inf each, since
    the loss gradient in the scores has l1 norm <= 2, plus ``eval_error``) and their
    difference; then the block and cross-block sums; then the prior term.
    """
    v_norm = np.asarray(v_norm, dtype=float)
    rho = np.asarray(rho, dtype=float)
    gd = gamma(d + k)  # the weights Theta Q^T first (gamma_K), then the dot products
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
    # each term passes through < GROUP additions in its group, then the group sums of a
    # block (<= rows / GROUP + 1), the thread partials and the block totals (each one
    # correctly rounded sum: exact_rounded_sum) and a Dask tree
    depth = GROUP + block_rows(k) // GROUP + 1 + 2 + TREE
    summed = n * (per + gamma(depth) * (2.0 * amax + per))
    loglik = r * summed * (1.0 + 4.0 * U) + 2.0 * U * r * n * (2.0 * amax + 1.0)
    dim = d * (k - 1)
    prior = p * (w_norm * v_norm + v_norm * v_norm) * (gamma(dim) + 8.0 * U)
    with np.errstate(divide="ignore"):
        lr = (dim - 1) * np.abs(np.log(np.maximum(rho, 5e-324)))
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


class _Weights:
    """Theta -> W for a problem with ``features``, ``k`` and the prior precision ``p``."""

    features: int
    k: int
    p: float

    def weights(self, theta: np.ndarray) -> np.ndarray:
        """Theta (d (K - 1),) -> the scores' weights W = Theta Q^T, shape (d, K)."""
        return to_weights(theta.reshape(self.features, self.k - 1), self.k)

    def full_weights(self, thetas: np.ndarray, rng) -> np.ndarray:
        """Released W (count, d K): Theta Q^T + m 1^T / sqrt(K), m ~ N(0, I_d / p) drawn
        here (count d normals: the data-free shift component of the posterior)."""
        return full_weights(thetas, self.features, self.k, self.p, rng)

    def compose(self, thetas: np.ndarray, normals: np.ndarray) -> np.ndarray:
        """W (count, d K) from Theta (count, d (K - 1)) and standard normals (count, d)."""
        return compose(thetas, normals, self.features, self.k, self.p)


class SoftmaxProblem(_Weights):
    """The exact back-end's data interface (as privbayes.sampling.exact.Problem) for the
    K-class softmax family, in the shift-free coordinates Theta: ``d`` is the sampled
    dimension d (K - 1); every pass forms the weights Theta Q^T first."""

    group = 1

    def __init__(self, x: np.ndarray, y: np.ndarray, k: int, r: float, p: float):
        from .imh import _threads

        self.x = np.ascontiguousarray(x, dtype=np.float64)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.k = int(k)
        self.n, self.features = self.x.shape
        self.d = self.features * (self.k - 1)
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
        """(scores z (n, K), gradient of f (P,), data Hessian H_L (P, P)) at Theta = w,
        P = d (K - 1): ``grad_hess_w`` at W = Theta Q^T, then G_W Q and
        (I kron Q)^T H_W (I kron Q), times r (error bounds: ``grad_error``, ``delta_h``)."""
        z, g_w, h_w = self.grad_hess_w(w, scores=True)
        g, h = theta_grad_hess(g_w, h_w, self.features, self.k)
        return z, self.r * g + self.p * w, self.r * h

    def grad_hess_w(self, w: np.ndarray, scores: bool = False):
        """Sums over the rows in W coordinates at W = Theta Q^T (without r): gradient
        sum_i x_i (s_i - e_y)^T (d K,) and Hessian sum_i (diag(s_i) - s_i s_i^T) kron
        x_i x_i^T (d K, d K); with ``scores`` also the scores (n, K) first.

        Per FIT_ROWS block: the scores X_b W (BLAS), the softmax, the gradient block
        X_b^T (s - e_y), and the Hessian block as sum_j diag-blocks (X_b s_j)^T X_b minus
        P^T P, P_i = x_i kron s_i; blocks are summed in order."""
        k, dx = self.k, self.features
        size = dx * k
        wm = self.weights(w)
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
        g = np.sum(gs, axis=0)
        return (np.concatenate(zs), g, h) if scores else (g, h)

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
        vw = to_weights(vt.reshape(dx, k - 1, cols).transpose(0, 2, 1), k)  # (d, cols, K)
        mat = np.ascontiguousarray(vw.reshape(dx, -1))
        rows = block_rows(k)  # whatever cols: the bound counts ceil(n / rows) blocks
        threads = min(self.threads, MAX_THREADS)
        total = []
        pool = ThreadPoolExecutor(threads) if threads > 1 else None

        def part(args):
            ab, z0b, yb, sp0b = args
            ab += z0b[:, None, :]
            return grouped_sum(losses(ab, yb[:, None]) - sp0b[:, None])

        try:
            for s0 in range(0, self.n, rows):
                ab = (self.x[s0 : s0 + rows] @ mat).reshape(-1, cols, k)
                args = (ab, z0[s0 : s0 + rows], self.y[s0 : s0 + rows], sp0[s0 : s0 + rows])
                if pool is None or ab.shape[0] < 1024:
                    total.append(part(args))
                else:
                    step = -(-ab.shape[0] // threads)
                    chunks = [tuple(a[i : i + step] for a in args) for i in range(0, len(ab), step)]
                    total.append(exact_rounded_sum(list(pool.map(part, chunks))))
        finally:
            if pool is not None:
                pool.shutdown()
        return exact_rounded_sum(total)


def theta_grad_hess(g_w: np.ndarray, h_w: np.ndarray, d: int, k: int):
    """The gradient (d K,) and Hessian (d K, d K) in W (row-major) -> in Theta: G_W Q and
    (I kron Q)^T H_W (I kron Q), shapes (d (K - 1),) and (d (K - 1), d (K - 1))."""
    q = basis(k)
    g = (g_w.reshape(d, k) @ q).ravel()
    h4 = h_w.reshape(d, k, d, k)
    h4 = np.einsum("ajbl,jm->ambl", h4, q)
    h4 = np.einsum("ambl,ln->ambn", h4, q)
    size = d * (k - 1)
    return g, np.ascontiguousarray(h4.reshape(size, size))


def compose(thetas: np.ndarray, normals: np.ndarray, d: int, k: int, p: float) -> np.ndarray:
    """Theta (count, d (K - 1)) and standard normals (count, d) -> W (count, d K):
    Theta Q^T + m 1^T / sqrt(K) with m = normals / sqrt(p)."""
    thetas = np.asarray(thetas, dtype=float).reshape(-1, d, k - 1)
    shift = np.asarray(normals, dtype=float).reshape(-1, d) / math.sqrt(p * k)
    w = to_weights(thetas, k) + shift[:, :, None]
    return w.reshape(thetas.shape[0], d * k)


def full_weights(thetas: np.ndarray, d: int, k: int, p: float, rng) -> np.ndarray:
    """Theta (count, d (K - 1)) -> W (count, d K): Theta Q^T + m 1^T / sqrt(K), with
    m ~ N(0, I_d / p) from ``rng`` (count d standard normals)."""
    count = np.asarray(thetas).reshape(-1, d * (k - 1)).shape[0]
    return compose(thetas, rng.standard_normal((count, d)), d, k, p)


# -- rows held in a Dask engine ---------------------------------------------------------------
def _chunk_problem(block: np.ndarray, d: int, k: int, r: float) -> SoftmaxProblem:
    """A one-thread SoftmaxProblem on a prepared chunk [x, y] (rows, d + 1)."""
    prob = SoftmaxProblem(block[:, :d], block[:, d].astype(np.int64), k, r, 0.0)
    prob.threads = 1
    return prob


def _scores(prob: SoftmaxProblem, w: np.ndarray) -> np.ndarray:
    """The scores X Theta Q^T in FIT_ROWS blocks, as ``grad_hess`` computes them."""
    wm = prob.weights(w)
    return np.concatenate(
        [prob.x[s : s + FIT_ROWS] @ wm for s in range(0, prob.n, FIT_ROWS)]
    ).reshape(-1, prob.k)


def _gh_chunk(block, d, k, w, r):
    """A chunk's gradient and Hessian sums in W (without r and the prior)."""
    prob = _chunk_problem(block, d, k, 1.0)
    return prob.grad_hess_w(w)


def _loglik_chunk(block, d, k, w_hat, vts):
    prob = _chunk_problem(block, d, k, 1.0)
    z0 = _scores(prob, w_hat)
    sp0 = prob.base(z0)
    return tuple(prob.loglik_diff(z0, sp0, vt) for vt in vts)


class DaskSoftmaxProblem(_Weights):
    """SoftmaxProblem's interface on rows held in a Dask engine (privbayes.glm.passes):
    every method is one pass (one graph, the chunk kernel on each chunk, an ordered sum in
    the engine); scores never leave the workers (a "scores" value here is the point w they
    are taken at, recomputed blockwise by the chunk kernels: the same floats). The chunks
    start on multiples of FIT_ROWS, so the blocks are the in-memory path's; the ordered
    tree adds at most 7 roundings per level (the bounds above allow for it)."""

    group = 32  # proposal batches per pass

    def __init__(self, rows, k: int, r: float, p: float):
        self.rows = rows
        self.k = int(k)
        self.n, self.features = rows.shape
        self.d = self.features * (self.k - 1)
        self.r, self.p = float(r), float(p)

    def subsample(self, rows: int) -> DaskSoftmaxProblem:
        if self.n <= rows:
            return self
        return DaskSoftmaxProblem(self.rows.subsample(rows), self.k, self.r * self.n / rows, self.p)

    def grad_hess(self, w: np.ndarray):
        g_w, h_w = self.rows.reduce(_gh_chunk, self.features, self.k, w, 1.0)
        g, h = theta_grad_hess(g_w, h_w, self.features, self.k)
        return np.array(w, dtype=float), self.r * g + self.p * w, self.r * h

    def base(self, z0: np.ndarray) -> None:
        return None

    def loglik_diffs(self, z0, sp0, vts: list[np.ndarray]) -> list[np.ndarray]:
        return list(self.rows.reduce(_loglik_chunk, self.features, self.k, z0, list(vts)))
