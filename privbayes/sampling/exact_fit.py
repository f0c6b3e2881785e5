"""The exact back-end's certified Newton fit (docs/exact.md §6).

The rejection sampler of privbayes.sampling.exact needs a point w_hat where the whitened
gradient is certified small (||L^-1 grad f(w_hat)|| <= tau) and a Cholesky factor L of the
Hessian there. This module finds it by damped Newton steps *until the certificate holds*,
and bounds, from public inputs only, the number of steps that can ever be needed
(Theorem 5): for every data set of size n with rows ||x|| <= c, the loop reaches the
certificate within ``FitBounds.max_steps`` steps, in floating point, so the back-end never
refuses a release because of the data. Only the running time depends on the data.

The public conditions under which Theorem 5 holds (Hessian and gradient rounding small
next to the prior precision, a contraction region that reaches the certificate) are
checked by :func:`fit_bounds`; when they fail, the exact back-end is refused before any
data is read (ExactInfeasibleError, raised by the caller).

f(w) = r sum_i loss_i(w) + (p / 2) ||w||^2, the loss generalized self-concordant with
constant M: |D^3 loss[u, u, v]| <= M ||v|| D^2 loss[u, u] (binary: M = c; softmax:
M = sqrt(2) c; docs/exact.md Lemma 1, docs/multinomial.md §6.2).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..errors import PrivBayesError
from .envelope import U, gamma

__all__ = ["FitBoundError", "FitBounds", "fit_bounds", "certified_fit"]

WARM_ROWS = 50_000  # the fit starts from a few steps on a fixed, evenly spread subsample
WARM_ITERATIONS = 8  # steps on it (a heuristic start: any failure there falls back to 0)
X1 = 0.5  # the local region: lambda < lambda_1 = X1 sqrt(p) / M (Theorem 5)
MAX_CONTRACTIONS = 400  # a local phase needing more steps is refused as infeasible


class FitBoundError(PrivBayesError, RuntimeError):
    """The certified fit took more steps than its public bound, or its Cholesky factor
    failed where the public conditions prove it succeeds. A bug in privbayes (Theorem 5,
    docs/exact.md §6 or its code): nothing was released."""


def omega_star(y: float) -> float:
    """(1 + y) log(1 + y) - y (>= 0; ~ y^2 / 2 near 0)."""
    if y < 1e-4:  # series: y^2/2 - y^3/6 + y^4/12 (alternating, error < y^5/20)
        return y * y * (0.5 - y / 6.0 + y * y / 12.0)
    return (1.0 + y) * math.log1p(y) - y


def q_factor(x: float) -> float:
    """(e^x - 1 - x) / x (0 at x = 0; ~ x / 2)."""
    if x < 1e-4:
        return x * (0.5 + x / 6.0)
    return (math.expm1(x) - x) / x


@dataclass(frozen=True)
class FitBounds:
    """Public constants of the certified fit (docs/exact.md §6, Theorem 5).

    m_self : M, the loss's self-concordance constant. p_low : the prior precision n beta /
    m, rounded down. kappa : >= the data's share of the curvature. lam1 : lambda_1, the
    local region's edge in the Newton decrement. lam_cert : a decrement at or below which
    the certificate provably passes. zeta1, xi : the step's relative and absolute error (in
    the Hessian norm). ratio : a / b, the damped step's safety factor. norm_err : the
    rounding factor of the computed M ||Delta||. w_bound : W, a bound on the norm of every
    iterate. decrease : D_1', the decrease of f per step outside the local region. f0 :
    f(0) = r n log K, rounded up. damped_steps : J_1 >= f0 / D_1'. local_steps : J_2,
    steps from lambda_1 down to lam_cert. max_steps : J_1 + J_2 + 2.
    """

    m_self: float
    p_low: float
    kappa: float
    lam1: float
    lam_cert: float
    zeta1: float
    xi: float
    ratio: float
    norm_err: float
    w_bound: float
    decrease: float
    f0: float
    damped_steps: int
    local_steps: int
    max_steps: int

    def t_min(self, lam: float) -> float:
        """A lower bound on every step length taken at decrement lam (Theorem 5 (b))."""
        y = (
            self.m_self * self.norm_err * ((1.0 + self.zeta1) * lam + self.xi)
            / math.sqrt(self.p_low) * self.ratio
        )  # fmt: skip
        return self.ratio * (math.log1p(y) / y if y > 0 else 1.0) * (1.0 - 8.0 * U)

    def contraction(self, lam: float) -> float:
        """R(lam): the next decrement is at most R(lam) when lam < lam1 (Theorem 5 (b))."""
        x = self.m_self * ((1.0 + self.zeta1) * lam + self.xi) / math.sqrt(self.p_low)
        s = 1.0 - self.t_min(lam)
        out = math.exp(x / 2.0) * (
            s * lam
            + self.zeta1 * lam
            + self.xi
            + self.kappa * q_factor(x) * ((1.0 + self.zeta1) * lam + self.xi)
        )
        return out * (1.0 + 1e-9)

    def public(self) -> dict:
        return {
            "newton_step_bound": self.max_steps,
            "newton_local_steps_bound": self.local_steps,
        }


def fit_bounds(
    *,
    n: int,
    dim: int,
    r: float,
    p_low: float,
    p_up: float,
    m_self: float,
    lam_bound: float,
    kappa: float,
    grad_record: float,
    f0: float,
    tau: float,
    w_max: float,
    lf2_max: float,
    trace_data: float,
    mode_norm: float,
    eta_cert: float,
    delta_h_cert: float,
    delta_h_at: Callable[[float, float], float],
    grad_error_at: Callable[[float, float], float],
) -> FitBounds:
    """The public step bound of the certified fit (Theorem 5); never touches data.

    ``delta_h_at(w_norm, lf2)`` and ``grad_error_at(w_norm, g_norm)`` are the family's
    rounding bounds (docs/exact.md Lemma 5, docs/multinomial.md Lemma M5) for the computed
    Hessian (with its Cholesky factor) and gradient at a point of norm ``w_norm``.
    ``lam_bound`` >= lambda_max(H_L) for every w; ``grad_record`` >= the norm of one
    record's loss gradient; ``f0`` >= f(0) = r n log K; ``w_max``, ``lf2_max``,
    ``eta_cert``, ``delta_h_cert`` are the sampler's public certificate bounds.

    Raises ValueError (with the reason) when the public conditions of Theorem 5 fail.
    """
    sq_p = math.sqrt(p_low)
    big = p_up + lam_bound  # >= lambda_max of every Hessian
    lam1 = X1 * sq_p / m_self
    # iterates: f(w) <= f0 outside the local region, ||w - w*|| <= sqrt(big) lam1 / p inside
    w_f = math.sqrt(2.0 * f0 / p_low) * (1.0 + 8.0 * U)
    w_loc = (mode_norm + math.sqrt(big) * lam1 / p_low) * (1.0 + 8.0 * U)
    w_it = max(w_f, w_loc)
    w_two = w_it + 2.0 * lam1 / sq_p  # ||w + v|| before the update is rounded
    # the direction's error: Hessian and Cholesky (delta_h_at), the two triangular solves
    # of cho_solve (backward errors gamma_2P |L| each), the gradient, the rounding of t
    # Delta and of w + v
    try:
        delta_it = delta_h_at(w_it, lf2_max)
        g_w = r * n * grad_record * (1.0 + 4.0 * U) + p_up * w_two
        e_grad = grad_error_at(w_it, g_w)
    except ValueError as err:
        raise ValueError(
            f"the fit's rounding cannot be bounded at ||w|| <= {w_it:.3g} ({err})"
        ) from None
    gs = gamma(2 * dim)
    delta_tot = (delta_it + (2.0 * gs + gs * gs) * lf2_max) * 1.01
    zeta = delta_tot / p_low
    if not zeta <= 0.05:
        raise ValueError(
            f"the Newton step's rounding-error bound {delta_tot:.3g} is not small next to "
            f"the prior precision n beta / m = {p_low:.3g}"
        )
    kappa_2 = (big + delta_tot) / (p_low - delta_tot)
    # Cholesky runs to completion under either classical sufficient condition: Wilkinson's
    # 20 n^(3/2) kappa_2 u <= 1, and Demmel's lambda_min(D^-1 H D^-1) > n gamma_(n+1) /
    # (1 - gamma_(n+1)) with D^2 = diag(H), where lambda_min(D^-1 H D^-1) >= 1 / kappa_2
    g1 = gamma(dim + 1)
    if not (20.0 * dim**1.5 * kappa_2 * U <= 1.0 and dim * g1 / (1.0 - g1) * kappa_2 < 1.0):
        raise ValueError(
            f"the Hessian's condition number can reach {kappa_2:.3g}: its Cholesky "
            "factorisation is not guaranteed to complete"
        )
    if not dim * delta_it <= 4e-7 * (dim * p_low + trace_data):  # ||L||_F^2 <= lf2_max
        raise ValueError("the Hessian's rounding is not small next to its trace")
    u_kappa = U * math.sqrt(big / p_low) * 1.01
    zeta_a = zeta / (1.0 - zeta)
    zeta1 = (zeta_a + u_kappa * (1.0 + zeta_a)) * 1.01
    xi_g = e_grad / (sq_p * (1.0 - zeta)) * (1.0 + u_kappa) * 1.01
    xi_w = math.sqrt(big) * U * w_two / 0.5 * 1.01  # t >= 1/2 (checked below)
    xi = xi_g + xi_w
    eps1 = zeta1 + xi / lam1
    if not eps1 <= 0.05:
        raise ValueError(
            f"the Newton step's error {eps1:.3g} (relative, at the local region's edge) is "
            "too large next to the step"
        )
    a, b = 1.0 - eps1, (1.0 + eps1) ** 2
    ratio = a / b * (1.0 - 4.0 * U)
    norm_err = 1.0 + (2.0 * dim + 16.0) * U  # x_e / (M ||Delta_hat||): rounding of both
    # phase 1 (lambda >= lam1): the damped step lowers f by >= D(lam1) - E_w
    k_slope = m_self * (1.0 + eps1) * norm_err / sq_p * ratio  # y <= k_slope lambda
    y1 = k_slope * lam1
    dec = (a * a / b) * omega_star(y1) / (k_slope * k_slope) * (1.0 - 1e-9)
    e_upd = (g_w * U * w_f + big * (U * w_f) ** 2 / 2.0) * 1.01  # rounding w + v
    decrease = dec - e_upd
    if not decrease >= 0.5 * dec > 0:
        raise ValueError("the rounding of the Newton update is not small next to its decrease")
    damped = math.ceil(f0 / decrease * (1.0 + 1e-9))

    bounds = FitBounds(
        m_self=m_self, p_low=p_low, kappa=kappa, lam1=lam1, lam_cert=0.0, zeta1=zeta1,
        xi=xi, ratio=ratio, norm_err=norm_err, w_bound=w_it, decrease=decrease, f0=f0,
        damped_steps=damped, local_steps=0, max_steps=0,
    )  # fmt: skip
    t_min, contraction = bounds.t_min, bounds.contraction

    if not t_min(lam1) >= 0.5:
        raise ValueError("the damped step is too short in the local region")
    # the certificate passes once lambda <= lam_cert (Lemma 5 applied at the point)
    inv_sqrt = math.sqrt((1.0 + eta_cert) / p_low) * (1.0 + 4.0 * U)
    gam_c = gamma(dim) * math.sqrt(lf2_max) * inv_sqrt
    zeta_c = delta_h_cert / p_low
    try:
        e_cert = grad_error_at(w_max, g_w) * inv_sqrt
    except ValueError as err:
        raise ValueError(f"the certificate's rounding cannot be bounded ({err})") from None
    if not (gam_c < 0.5 and zeta_c < 0.5):
        raise ValueError("the certificate's triangular solve is too ill-conditioned")
    head = tau * (1.0 - 1e-9) / ((1.0 + 8.0 * U) * (1.0 + 16.0 * U)) - e_cert
    growth = (1.0 + dim * U) * (1.0 + gam_c) / (1.0 - gam_c)
    lam_cert = math.sqrt(1.0 - zeta_c) * (head / growth - e_cert)
    # the runtime checks at the certificate: ||w_hat|| <= w_max and lf2 <= lf2_max follow
    # from lambda <= lam_cert <= tau and delta_h small (docs/exact.md §6)
    if not (dim * delta_h_cert <= 4e-7 * (dim * p_low + trace_data) and lam_cert <= tau):
        raise ValueError("the certificate's bounds leave no room for the Hessian's rounding")
    if not lam_cert > 0:
        raise ValueError(
            f"the gradient's rounding-error bound ({e_cert:.3g}, whitened) exceeds the "
            f"certificate's tolerance tau = {tau:g}: the fit can never be certified"
        )
    lam, local = lam1, 0
    if not contraction(lam1) < lam1:
        raise ValueError("Newton's local region does not contract (rounding too large)")
    while lam > lam_cert:
        nxt = contraction(lam)
        local += 1
        if not nxt < lam or local > MAX_CONTRACTIONS:
            raise ValueError(
                "Newton's iteration cannot be proven to reach the certificate's tolerance "
                f"(its floor, from the gradient's rounding, is near {nxt:.3g} > "
                f"{lam_cert:.3g})"
            )
        lam = nxt
    return dataclasses.replace(
        bounds, lam_cert=lam_cert, local_steps=local, max_steps=damped + local + 2
    )


# -- the data side -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Fit:
    w_hat: np.ndarray
    chol: np.ndarray  # lower L, L L^T within eta of the Hessian at w_hat
    z0: np.ndarray  # computed margins (scores) at w_hat, or w_hat itself (Dask)
    tau: float  # certified ||L^-1 grad f(w_hat)||
    delta_h: float  # certified ||H - L L^T||_2
    steps: int  # Newton steps on all rows (private: depends on the data)


def _step(prob, kern, w, z, g, chol, ratio: float, m_self: float, check_start: bool):
    """One guarded damped Newton step (docs/exact.md §6). Returns (w_next, restart).

    Candidates, evaluated in one pass: the damped step t_e = log(1 + ratio x) / x,
    x = M ||Delta|| (rounded up), which Theorem 5 analyses, and the full step t = 1, taken
    only if its computed value is below t_e's by more than both rounding bounds (so its
    true value is too). With ``check_start``, also the move back to 0: the start is kept
    only if f(w) <= f(0) is certain (else restart = True).
    """
    d, p, r = prob.d, prob.p, prob.r
    delta = linalg.cho_solve((chol, True), g)
    x_e = m_self * float(np.linalg.norm(delta)) * (1.0 + (d + 8.0) * U)
    t_e = math.log1p(ratio * x_e) / x_e if x_e > 0 else ratio
    cols = [-(t_e * delta), -delta]
    if check_start:
        cols.append(-w)
    vt = np.stack(cols, axis=1)
    s = prob.loglik_diffs(z, prob.base(z), [vt])[0]
    vv = np.einsum("ij,ij->j", vt, vt)
    value = r * s + p * (w @ vt) + 0.5 * p * vv  # f(w + v) - f(w), computed
    w_norm = float(np.linalg.norm(w)) * (1.0 + d * U)
    err = np.asarray(kern.line_error(prob, w_norm, np.sqrt(vv) * (1.0 + d * U)), dtype=float)
    if check_start and not value[2] - err[2] >= 0.0:  # f(0) - f(w) >= 0 not certain
        return None, True
    full = bool(value[1] + err[1] <= value[0] - err[0])
    return w + vt[:, 1 if full else 0], False


def certificate(prob, plan, kern, w, g, chol):
    """(tau, delta_h) when the public envelope is valid at w (docs/exact.md §7, Lemma 5),
    else None: ||w|| <= w_max, ||L||_F^2 <= lf2_max, delta_h <= plan's, tau <= plan's."""
    d = prob.d
    w_norm = float(np.linalg.norm(w)) * (1.0 + d * U)
    lf2 = float((chol * chol).sum()) * (1.0 + 2.0 * d * U)
    if not (w_norm <= plan.w_max and lf2 <= plan.lf2_max):
        return None
    delta_h = kern.delta_h(prob, w_norm, lf2)
    if not delta_h <= plan.delta_h:
        return None
    inv_sqrt = math.sqrt((1.0 + plan.eta) / plan.p) * (1.0 + 4.0 * U)  # >= ||L^-1||_2
    x_hat = linalg.solve_triangular(chol, g, lower=True)
    g_norm = float(np.linalg.norm(g))
    g_err = kern.grad_error(prob, w_norm, g_norm)
    tau = (
        float(np.linalg.norm(x_hat)) * (1.0 + gamma(d) * math.sqrt(lf2) * inv_sqrt)
        + g_err * inv_sqrt
    ) * (1.0 + 8.0 * U)
    return (tau, delta_h) if tau <= plan.tau else None


def _hessian_factor(h: np.ndarray, p: float) -> np.ndarray:
    h[np.diag_indices(h.shape[0])] += p
    try:
        return linalg.cholesky(h, lower=True)
    except linalg.LinAlgError:
        raise FitBoundError(
            "the certified fit's Hessian has no Cholesky factor although its public "
            "condition number bound proves it has one: a bug in privbayes; nothing was "
            "released"
        ) from None


def warm_start(prob, kern, plan) -> np.ndarray:
    """WARM_ITERATIONS guarded steps on the fixed subsample (rows chosen by n alone): only
    a starting point; the certified loop checks it against w = 0."""
    sub = prob.subsample(WARM_ROWS)
    w = np.zeros(prob.d)
    try:
        for _ in range(WARM_ITERATIONS):
            _z, g, h = sub.grad_hess(w)
            chol = _hessian_factor(h, sub.p)
            w, _ = _step(sub, kern, w, _z, g, chol, plan.fit.ratio, plan.fit.m_self, False)
    except (FitBoundError, ValueError, FloatingPointError):  # only a start: then from 0
        return np.zeros(prob.d)
    return w if np.isfinite(w).all() else np.zeros(prob.d)


def certified_fit(prob, plan, kern) -> Fit:
    """Damped Newton steps on all rows until the certificate holds (Theorem 5).

    Starts from the warm start (n > WARM_ROWS) if f there is certainly <= f(0), else from
    0. Every iteration is one pass for the gradient and Hessian (whose Cholesky factor and
    certificate are checked first) and, if not certified, one pass evaluating the step's
    candidates. Theorem 5: at most ``plan.fit.max_steps`` steps for every data set;
    exceeding it raises FitBoundError (a bug). The number of steps taken depends on the
    data (running time only; docs/privacy.md §6).
    """
    fb = plan.fit
    w = warm_start(prob, kern, plan) if prob.n > WARM_ROWS else np.zeros(prob.d)
    check_start = bool(np.any(w))
    steps = 0
    while True:
        z, g, h = prob.grad_hess(w)
        chol = _hessian_factor(h, prob.p)
        cert = certificate(prob, plan, kern, w, g, chol)
        if cert is not None:
            return Fit(w, chol, z, cert[0], cert[1], steps)
        if steps >= fb.max_steps:
            raise FitBoundError(
                f"the certified fit did not certify within its proven bound of "
                f"{fb.max_steps} steps: a bug in privbayes (docs/exact.md §6, Theorem 5); "
                "nothing was released"
            )
        w_next, restart = _step(prob, kern, w, z, g, chol, fb.ratio, fb.m_self, check_start)
        check_start = False
        w = np.zeros(prob.d) if restart else w_next
        steps += 1
