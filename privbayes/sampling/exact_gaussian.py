"""Exact draws for GLM families whose tempered posterior is Gaussian (linear regression),
truncated to the family's public ball (docs/linear_regression.md §4).

Target, for records (x_i, y_i) with ||x_i|| <= c, |y_i| <= y_bound and p = n beta / m:

    pi(w)  propto  exp(-(r / (2 sigma^2)) sum_i (y_i - w.x_i)^2 - (p / 2) ||w||^2)  on ||w|| <= R,

i.e. N(mu, A^-1) restricted to the ball, A = p I + (r / sigma^2) X^T X, A mu = (r / sigma^2) X^T y.

The release: one pass for S = X^T X and b = X^T y (row blocks of BLOCK rows, the blocks'
results added by a binary tree), the Cholesky factor L of A, mu_hat = A^-1 h, then a fixed,
public number N of proposals w = mu_hat + L^-T z (z ~ N(0, I)), of which the first ``size``
whose float norm is <= R are released. Everything that decides N, the failure probability
and the rounding allowance is a function of public inputs (n, d, beta, c, y_bound, sigma, R,
r, m, size, delta_f); nothing is decided from the data (no data-dependent refusal, retry or
early exit: the N proposals are always drawn).

Public bounds (docs/linear_regression.md §4-§5):

* ||mu|| <= min((r / sigma^2) n c y_b / p, sqrt(n) y_b sqrt(r / (sigma^2 p)) / 2) and the
  proposal's spread is <= 1 / sqrt(p - delta_K): so the proposal leaves the inner ball
  ||w|| <= R_in with probability <= tau = exp(-t^2 / 2), t = (R_in - M) sqrt(p - delta_K)
  - sqrt(d). The acceptance probability is >= 1 - tau (the budget), and the released law
  is within total variation tau / (1 - tau) per draw of the proposal restricted to the
  fixed ball of radius R_in (the float test's boundary is data-dependent only in a shell
  R_in < ||w|| <= R_out of relative width ~1e-13).
* delta_K >= ||A - L L^T|| from the sums' error (gamma_h n c^2), the scaling and Cholesky's
  backward error (Higham Thm 10.3), and e_h >= ||(r / sigma^2) b - L L^T mu_hat||; on the
  ball R_out the log-density of the proposal differs from the target's by a function
  within +-(R_out^2 delta_K / 2 + R_out e_h) of a constant: the rounding allowance e
  ("log_density_error", docs/exact.md §7's convention), which adds
  2 e (2 lam - 1) / (lam - 1) to the certificate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..glm.passes import is_rows
from .exact import DELTA_F, MAX_PROPOSALS, ExactInfeasibleError, ExactSamplingError, _budget

__all__ = ["BLOCK", "GaussianPlan", "gaussian_plan", "release_draw", "statistics"]

U = 2.0**-53
BLOCK = 256  # rows per block of the X^T X, X^T y sums (their error bound: gamma_h, h ~ BLOCK)
DASK_TREE = 64  # additions a Dask engine's ordered tree may add on each term's path
BATCH = 1024  # proposals per batch


def _gamma(k: float) -> float:
    """gamma_k = k U / (1 - k U), rounded up generously (x (1 + 1e-9))."""
    ku = k * U
    if not ku < 0.5:
        return math.inf
    return ku / (1.0 - ku) * (1.0 + 1e-9)


def _norm_error(d: int) -> float:
    """Relative error of a float 2-norm in d dims (both directions; docs/numerics.md §8)."""
    return (d + 2) * U + 2.0**-160


def _additions(n: int) -> int:
    """h: operations on each product's path in the sums of :func:`statistics` (the block's
    inner product, the binary tree over blocks, a Dask tree), as a public function of n."""
    blocks = max(1, math.ceil(n / BLOCK))
    return BLOCK + math.ceil(math.log2(blocks)) + 2 + DASK_TREE


@dataclass(frozen=True)
class GaussianPlan:
    """The public plan of an exact Gaussian release (every field public)."""

    n: int
    d: int
    p: float
    scale: float  # r / sigma^2 as used
    size: int
    delta_f: float
    proposals: int
    tau: float  # P(a proposal leaves the inner ball) <= tau, for every data set
    shell_tv: float  # size * tau / (1 - tau)
    radius: float
    radius_inner: float
    radius_outer: float
    mean_bound: float
    delta_k: float
    log_density_error: float
    max_proposals: int

    @property
    def acceptance_lower_bound(self) -> float:
        return 1.0 - self.tau

    @property
    def total_variation(self) -> float:
        """delta_f + the shell's total variation: what the release adds to delta."""
        return self.delta_f + self.shell_tv

    def public(self) -> dict:
        return {
            "backend": "exact",
            "sampler": "gaussian",
            "delta_f": self.delta_f,
            "shell_tv": self.shell_tv,
            "proposals": self.proposals,
            "size": self.size,
            "acceptance_lower_bound": self.acceptance_lower_bound,
            "radius": self.radius,
            "radius_inner": self.radius_inner,
            "radius_outer": self.radius_outer,
            "mean_bound": self.mean_bound,
            "log_density_error": self.log_density_error,
        }


def gaussian_plan(
    n: int,
    d: int,
    beta: float,
    c: float,
    r: float,
    m: float,
    family,
    *,
    size: int = 1,
    delta_f: float | None = None,
    max_proposals: int | None = None,
) -> GaussianPlan:
    """The public plan for n records of d features (``c``: the certified row bound, the
    model's ``c_bound``); ``family`` a Gaussian family with ``y_bound``, ``noise_sd`` and
    ``radius``. Raises :class:`ExactInfeasibleError` when the ball is too small for a
    public acceptance bound (the shell's total variation above delta_f), when the rounding
    bounds swamp the prior precision, or when N > max_proposals. Public inputs only."""
    delta_f = DELTA_F if delta_f is None else float(delta_f)
    cap = MAX_PROPOSALS if max_proposals is None else int(max_proposals)
    k = int(size)
    y_b, sigma, radius = family.y_bound, family.noise_sd, family.radius
    if radius is None:
        raise ExactInfeasibleError("the ball's radius is not resolved (model.resolve_beta(n, d))")
    p = n * beta / m
    scale = r / (sigma * sigma)
    if not (math.isfinite(p) and p > 0 and math.isfinite(scale) and scale > 0):
        raise ExactInfeasibleError(f"the prior precision {p!r} or r / sigma^2 is not usable")
    h = _additions(n)
    g_h, g_4, g_3, g_d1, g_2d = _gamma(h), _gamma(4), _gamma(3), _gamma(d + 1), _gamma(2 * d)
    nc2 = n * c * c * (1.0 + 4 * U)
    ncy = n * c * y_b * (1.0 + 4 * U)
    # ||A - A_hat|| (sums, scaling, diagonal) and ||A_hat - L L^T|| (Cholesky)
    delta_a = scale * g_h * nc2 + g_4 * (p * math.sqrt(d) + scale * nc2 * (1.0 + g_h))
    frob = (d * p + scale * nc2) * (1.0 + g_h) * (1.0 + g_4) / (1.0 - g_d1) * (1.0 + 1e-6)
    delta_k = 1.01 * (delta_a + g_d1 * frob)
    lower = p - delta_k - 2.01 * g_2d * frob
    if not (lower > 0.5 * p):
        raise ExactInfeasibleError(
            f"the rounding bounds of the sums and the Cholesky factor (~{delta_k:.3g}) are not "
            f"small next to the prior precision n beta / m = {p:.3g}: use backend='langevin'"
        )
    h_norm = 1.01 * scale * ncy * (1.0 + g_h + g_3)
    m_loose = h_norm / lower
    e_h = 1.01 * (scale * ncy * (g_h + g_3 * (1.0 + g_h)) + 2.01 * g_2d * frob * m_loose)
    m_tight = min(scale * ncy / p, math.sqrt(n) * y_b * math.sqrt(scale / p) / 2.0)
    mean_bound = (m_tight + (delta_k * m_loose + e_h) / p) * (1.0 + 1e-9)
    p_low = p - delta_k
    theta = math.sqrt(frob / p_low) * g_2d  # relative error of the triangular solve
    ne = _norm_error(d)
    v_max = 2.0 * (radius + mean_bound)
    err = 1.01 * (U * (mean_bound + v_max) + theta * v_max)
    r_out = radius * (1.0 + ne) + err
    r_in = radius * (1.0 - 2.0 * ne) - err
    r_cert = float(family.radius_cert())
    if not (theta < 0.5 and r_out <= r_cert and r_in > 0):
        raise ExactInfeasibleError(
            f"the float ball test's error ({err:.3g}) does not fit the certificate's radius "
            f"slack at R = {radius:g}: use backend='langevin'"
        )
    t = (r_in - mean_bound) * math.sqrt(p_low) - math.sqrt(d)
    tau = math.exp(-t * t / 2.0) if t > 0 else 1.0
    shell = k * tau / (1.0 - tau) if tau < 1.0 else math.inf
    if not shell <= delta_f:
        need = mean_bound + (
            math.sqrt(d) + math.sqrt(2.0 * math.log((k + 1) / delta_f))
        ) / math.sqrt(p_low)
        raise ExactInfeasibleError(
            f"the ball ||w|| <= R = {radius:.4g} cuts into the tempered posterior's public "
            f"range (its mean may lie at up to {mean_bound:.4g}, spread <= "
            f"{1 / math.sqrt(p_low):.3g}): the exact back-end needs R >= ~{need:.4g} "
            "(radius=None picks such a default) or use backend='langevin', whose projection "
            "handles any radius"
        )
    proposals = _budget(1.0 - tau, k, delta_f, cap)
    if proposals is None:
        raise ExactInfeasibleError(
            f"the exact back-end would need more than max_proposals={cap} proposals",
            max_proposals=cap,
        )
    log_err = 1.01 * (0.5 * r_out * r_out * delta_k + r_out * e_h)
    return GaussianPlan(
        n, d, p, scale, k, delta_f, int(proposals), tau, shell, radius, r_in, r_out,
        mean_bound, delta_k, log_err, cap,
    )  # fmt: skip


# -- the data pass ---------------------------------------------------------------------------
def _tree_sum(parts):
    """Sum a sequence of (S, b) pairs by a binary counter tree (depth <= log2(count) + 1)."""
    stack: list[tuple[int, np.ndarray, np.ndarray]] = []
    for s, b in parts:
        level = 0
        while stack and stack[-1][0] == level:
            _, s0, b0 = stack.pop()
            s, b = s0 + s, b0 + b
            level += 1
        stack.append((level, s, b))
    if not stack:
        return None
    _, s, b = stack.pop()
    while stack:
        _, s0, b0 = stack.pop()
        s, b = s0 + s, b0 + b
    return s, b


def _blocks(x: np.ndarray, y: np.ndarray):
    for start in range(0, x.shape[0], BLOCK):
        blk = x[start : start + BLOCK]
        yield blk.T @ blk, blk.T @ y[start : start + BLOCK]


def _chunk_stats(data) -> tuple[np.ndarray, np.ndarray]:
    x, y = data
    return _tree_sum(_blocks(x, y))


class _StatsKernel:
    """A picklable chunk kernel for the Dask engine."""

    def __call__(self, block, kind, d):
        from ..glm.passes import unpack

        return _chunk_stats(unpack(kind, d, block))


def statistics(data) -> tuple[np.ndarray, np.ndarray]:
    """(X^T X, X^T y) in the summation order :func:`gaussian_plan`'s bounds assume."""
    if is_rows(data):
        return data.reduce(_StatsKernel(), data.kind, data.d)
    x, y = data
    return _chunk_stats((np.ascontiguousarray(x, dtype=float), np.asarray(y, dtype=float)))


# -- the release -----------------------------------------------------------------------------
def release_draw(model, xy, cal, rng, *, size=None, **_ignored):
    """Released w (d,) or (size, d) and diagnostics (public numbers under "public").

    Draws exactly the plan's N proposals and keeps the first ``size`` whose float norm is
    <= R. Raises ExactInfeasibleError (public inputs, before the data are read) and
    ExactSamplingError (fewer than size inside: probability <= delta_f for every data set).
    """
    x, y = xy
    n, d = x.shape
    k = size or 1
    fam = model.family
    plan = gaussian_plan(
        n, d, model.beta, model.c_bound, cal.r, cal.m, fam, size=k,
        delta_f=model.delta_f, max_proposals=model.max_proposals,
    )  # fmt: skip
    data = x if is_rows(x) else fam.prepare(x, y)
    s, b = statistics(data)
    a = plan.scale * s
    a[np.diag_indices(d)] += plan.p
    chol = linalg.cholesky(a, lower=True, check_finite=False)
    mu = linalg.cho_solve((chol, True), plan.scale * b, check_finite=False)
    kept: list[np.ndarray] = []
    drawn = 0
    while drawn < plan.proposals:
        batch = min(BATCH, plan.proposals - drawn)
        z = rng.standard_normal((d, batch))
        v = linalg.solve_triangular(chol, z, lower=True, trans="T", check_finite=False)
        w = (mu[:, None] + v).T
        inside = np.linalg.norm(w, axis=1) <= plan.radius
        if len(kept) < k:
            kept.extend(w[inside][: k - len(kept)])
        drawn += batch
    public = plan.public()
    if len(kept) < k:
        raise ExactSamplingError(
            f"the exact back-end kept fewer of its {plan.proposals:,} proposals inside the "
            f"ball than the {k} draw(s) requested: nothing was released (probability "
            f"<= delta_f = {plan.delta_f:g} for every data set)",
            public=public,
        )
    values = np.array(kept[:k], dtype=float)
    value = values[0] if size is None else values
    value.setflags(write=False)
    return value, {"backend": "exact", "guarantee": "exact", "public": public}
