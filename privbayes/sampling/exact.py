"""Exact posterior draws for logistic regression by rejection sampling (docs/exact.md).

Target: pi(w) ∝ exp(-f(w)), f(w) = r sum_i log(1 + exp(-y_i x_i.w)) + (p/2) ||w||^2,
p = n beta / m (OPS: r is the tempering t, m = 1, and a draw is kept only if ||w|| <= R).
Every release is an exact draw of pi (of its restriction to the ball, for OPS), so the
certificate proven for exact draws (docs/glm.md) holds as stated; no diagnostic gates
anything.

How (docs/exact.md):

1. **Fit.** Damped Newton steps from a warm start (a few steps on a fixed subsample)
   or from w = 0, *until the fit is certified*: the whitened gradient
   ||L^-1 grad f(w_hat)|| is at most the public tolerance GRAD_TOL and L L^T is within a
   public relative error eta of the true Hessian (privbayes.sampling.exact_fit). Their
   rounding errors are bounded (blocked sums). Theorem 5 bounds the number of steps from
   public inputs for every data set, so the back-end never refuses because of the data;
   only the running time depends on it (docs/exact.md §6).
2. **Envelope.** In u = L^T (w - w_hat), the logistic loss's generalized self-concordance
   (|phi'''| <= phi'', Bach 2010) bounds log pi(w) - log pi(w_hat) by a function B of
   ||u|| that depends on public inputs only (privbayes.sampling.envelope).
3. **Proposal.** Uniform direction, radius from a step-function density above
   rho^(d-1) e^B(rho): every proposal's ratio pi/q is at most the proposal mass W, so a
   proposal is accepted with probability exactly proportional to pi/q.
4. **Fixed budget.** Exactly N proposals are evaluated per release (public: from the
   public lower bound a_min on the acceptance probability, valid for every data set of
   size n with rows ||x|| <= c, and the failure probability delta_f), in ceil(N / BATCH)
   passes over X (one matrix product per batch). The release is the first accepted
   proposal (the first k for size=k); with fewer accepted, nothing is released and
   ExactSamplingError is raised. P(failure) <= delta_f for every data set, so the release
   is within total variation delta_f of an exact draw: (lam, eps)-RDP of the exact draw
   gives (eps', delta + delta_f)-DP wherever it gives (eps', delta)-DP (eps' <= 700).

A computed ratio above the envelope (beyond the bounded rounding error) is a bug and raises
EnvelopeViolationError; nothing is then released.
"""

from __future__ import annotations

import functools
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, special
from scipy.linalg import blas

from ..errors import InfeasiblePrivacyError, PrivBayesError, SamplingError
from ..glm.passes import is_rows
from . import bernoulli
from . import envelope as env_mod
from .envelope import U, gamma
from .exact_fit import (  # WARM_ITERATIONS: for auto's public cost model (models.logistic)
    WARM_ITERATIONS,  # noqa: F401
    WARM_ROWS,
    FitBoundError,
    certified_fit,
    fit_bounds,
)
from .imh import _threads

__all__ = [
    "DELTA_F",
    "DaskProblem",
    "Problem",
    "MAX_PROPOSALS",
    "EnvelopeViolationError",
    "ExactInfeasibleError",
    "FitBoundError",
    "ExactPlan",
    "ExactSamplingError",
    "exact_feasibility",
    "clear_plan_cache",
    "exact_plan",
    "release_draw",
]

DELTA_F = 1e-12  # default failure probability: P(no release) for every data set
MAX_PROPOSALS = 10**6  # default cap on proposals per call (size=k shares one budget)
GRAD_TOL = 1e-4  # certified whitened gradient ||L^-1 grad f(w_hat)|| at the Newton point
# the fit: WARM_ITERATIONS steps on a fixed subsample of WARM_ROWS rows (exact_fit), then
# steps on all rows until certified (measured: 2-6 on Abalone, Adult, MNIST and
# adversarial arrangements; Theorem 5 bounds them for every data set)
EDGE_EPS = 700.0  # the conversion's eps' up to which the proposals' edge event is covered
EDGE_SHARE = 2.0**-10  # share of delta_f given to the edge event (docs/exact.md §7)
BATCH = 256  # proposals per pass over X
FIT_ROWS = 32_768  # rows per block of the gradient / Hessian sums (their error bound)
LOGLIK_ROWS = 8_192  # rows per block of the proposals' pass (2^21 margins at BATCH = 256)
_CELLS = 1 << 21  # rows x proposals per block (16 MB of float64)
PHI3_MAX = 0.0963  # max |phi'''| = max s (1 - s) |1 - 2 s| over s in (0, 1) (< 0.09623)


# -- errors ----------------------------------------------------------------------------------
class ExactInfeasibleError(InfeasiblePrivacyError, PrivBayesError, ValueError):
    """The exact back-end cannot serve these public inputs (raised before any data is read).

    An :class:`~privbayes.InfeasiblePrivacyError` (so also a PrivBayesError and a
    ValueError), exported as ``privbayes.ExactInfeasibleError``. ``proposals`` is the
    number of proposals the release would need (None when the envelope does not exist),
    ``max_proposals`` the cap, ``expected_proposals_per_draw`` the public bound 1 / a_min.
    All public.
    """

    def __init__(self, message: str, *, proposals=None, max_proposals=None, expected=None):
        super().__init__(message)
        self.proposals = proposals
        self.max_proposals = max_proposals
        self.expected_proposals_per_draw = expected


class ExactSamplingError(SamplingError):
    """Fewer proposals than requested draws were accepted within the public budget: nothing
    was released. Happens with probability <= delta_f for every data set. ``public`` holds
    the budget (public inputs only)."""

    def __init__(self, message: str, *, public: dict | None = None) -> None:
        super().__init__(message)
        self.public = dict(public or {})


class EnvelopeViolationError(PrivBayesError, RuntimeError):
    """A proposal's computed pi/q exceeded the proven envelope beyond its rounding-error
    bound. This is a bug in privbayes (the envelope or its proof): nothing was released."""


def check_family(family) -> int:
    """The exact back-end's envelope is proven for binary logistic regression
    (docs/exact.md) and K-class softmax regression (docs/multinomial.md §6). Returns the
    ``classes`` argument of :func:`exact_plan` for the family (0: binary; K: softmax);
    any other GLM family is refused, from public inputs, with ExactInfeasibleError."""
    from ..glm.family import BINARY_LOGISTIC, MultinomialLogistic

    if family is None or family is BINARY_LOGISTIC:
        return 0
    if isinstance(family, MultinomialLogistic):
        return int(family.outputs)
    raise ExactInfeasibleError(
        f"backend='exact' is proven for binary and multinomial logistic regression only, "
        f"not for the {family.name} family (no proven envelope); use backend='langevin' "
        "(certified) or 'imh' (approximate)"
    )


# -- the public plan -------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ExactPlan:
    """Everything the exact back-end fixes before it sees data (public inputs only).

    proposals : N, the number of proposals every call evaluates (all of them, always).
    passes : ceil(N / BATCH), batched passes over X for the proposals.
    size : k draws released per call.
    delta_f : bound on P(fewer than k accepted) — i.e. P(nothing released) — for every
        data set of size n with rows ||x|| <= c.
    acceptance_lower_bound : a_min, a lower bound on each proposal's acceptance
        probability (times, for OPS, the public lower bound on the ball's mass).
    expected_proposals_per_draw : 1 / a_min.
    log_envelope : log(W / Z_low): a_min = e^(-2 e) (e^-log_envelope - Z(tail) / W) times, for
        OPS, the ball factor (docs/exact.md, Theorem 3).
    log_density_error : ē, the bound on the rounding error of a computed log-density
        ratio (the triangular solve's included) for every proposal of radius up to
        ``edge_radius`` (docs/exact.md §7).
    edge_radius : the radius beyond which the bound ē is not claimed; the probability that
        any of the N proposals lands beyond it is at most e^log_edge_probability (public:
        the radii are drawn from the public envelope), covered by delta_f (§7).
    fit : the certified Newton fit's public bounds (exact_fit.FitBounds, Theorem 5).
    """

    n: int
    d: int
    r: float
    p: float
    c_env: float
    c_self: float
    classes: int
    kappa: float
    tau: float
    eta: float
    delta_h: float
    w_max: float
    lf2_max: float
    size: int
    delta_f: float
    proposals: int
    passes: int
    acceptance_lower_bound: float
    log_envelope: float
    log_ball_mass: float | None
    radius: float | None
    log_density_error: float
    max_proposals: int
    lam_bound: float
    edge_radius: float
    log_edge_probability: float
    fit: object = field(repr=False)
    envelope: env_mod.RadialEnvelope = field(repr=False)

    @property
    def expected_proposals_per_draw(self) -> float:
        return 1.0 / self.acceptance_lower_bound

    def public(self) -> dict:
        """The plan as a small dict of public numbers (safe to publish with the release)."""
        out = {
            "backend": "exact",
            "delta_f": self.delta_f,
            "proposals": self.proposals,
            "passes": self.passes,
            "size": self.size,
            "acceptance_lower_bound": self.acceptance_lower_bound,
            "expected_proposals_per_draw": self.expected_proposals_per_draw,
            "log_envelope": self.log_envelope,
            "newton_warm_rows": min(self.n, WARM_ROWS) if self.n > WARM_ROWS else 0,
            **self.fit.public(),
            "log_density_error": self.log_density_error,
            "edge_radius": self.edge_radius,
        }
        if self.log_ball_mass is not None:
            out["ops_ball_mass_lower_bound"] = math.exp(self.log_ball_mass)
        return out


def _check_public(n, d, beta, c, r, m, size, delta_f, max_proposals):
    from ..validation import check_n, check_positive, check_unit_knob

    n = check_n(n)
    if n < 1:
        raise ValueError("n must be >= 1 for the exact back-end (n = 0 releases the prior)")
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d must be an integer >= 1; got {d!r}")
    beta, c = check_positive(beta, "beta"), check_positive(c, "c")
    r, m = check_unit_knob(r, "r"), check_unit_knob(m, "m")
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise ValueError(f"size must be an integer >= 1; got {size!r}")
    delta_f = float(delta_f)
    if not 1e-300 <= delta_f <= 0.5:
        raise ValueError(f"delta_f must lie in [1e-300, 0.5]; got {delta_f!r}")
    if (
        isinstance(max_proposals, bool)
        or not isinstance(max_proposals, int | np.integer)
        or max_proposals < 1
    ):
        raise ValueError(f"max_proposals must be an integer >= 1; got {max_proposals!r}")
    return n, int(d), beta, c, r, m, int(size), delta_f, int(max_proposals)


def exact_plan(
    n: int,
    d: int,
    beta: float,
    c: float,
    r: float = 1.0,
    m: float = 1.0,
    *,
    method: str = "diffused",
    radius: float | None = None,
    size: int = 1,
    delta_f: float = DELTA_F,
    max_proposals: int = MAX_PROPOSALS,
    classes: int = 0,
) -> ExactPlan:
    """The exact back-end's public plan for a release; never touches data.

    Parameters
    ----------
    n, d : records and features (public). beta, c : prior precision per record and the
        feature-norm bound (the model's). r, m : the calibrated knobs (``cal.r``, ``cal.m``;
        for ``method="ops"``, r is the tempering t and m must be 1).
    method : "direct", "diffused", "concentrated" or "ops". radius : OPS's R (default c /
        beta, the model's default).
    size : draws per call (they share one budget of N proposals).
    delta_f : the failure probability, in [1e-300, 0.5]. max_proposals : the cap on N.
    classes : 0 for binary logistic regression (parameter dimension d); K >= 2 for K-class
        softmax regression (parameter dimension d K; docs/multinomial.md §6).

    Returns an :class:`ExactPlan` (N = ``proposals``, a_min, ...). Cached.

    Raises
    ------
    ExactInfeasibleError when N would exceed ``max_proposals`` or the envelope does not
    exist for these inputs (prior too weak against the data term, or, for OPS, a ball that
    may hold too little of the posterior); ValueError / TypeError for bad arguments.

    Source: docs/exact.md (Theorems 1-3); docs/multinomial.md §6 for classes >= 2.
    """
    n, d, beta, c, r, m, size, delta_f, max_proposals = _check_public(
        n, d, beta, c, r, m, size, delta_f, max_proposals
    )
    if (
        isinstance(classes, bool)
        or not isinstance(classes, int | np.integer)
        or classes == 1
        or classes < 0
    ):
        raise ValueError(f"classes must be 0 (binary) or an integer K >= 2; got {classes!r}")
    if method not in ("direct", "diffused", "concentrated", "ops"):
        raise ValueError(f"method must be direct, diffused, concentrated or ops; got {method!r}")
    if method == "ops":
        if m != 1.0:
            raise ValueError("OPS does not concentrate the prior: m must be 1")
        if radius is None:  # the model's default: c / beta (softmax: sqrt(2) c / beta)
            radius = (math.sqrt(2.0) if classes else 1.0) * c / beta
        radius = float(radius)
        if not (math.isfinite(radius) and radius > 0):
            raise ValueError(f"radius must be finite and > 0; got {radius!r}")
    else:
        radius = None
    return _plan(n, d, beta, c, r, m, radius, size, delta_f, max_proposals, int(classes))


def clear_plan_cache() -> None:
    """Forget the cached plans of :func:`exact_plan` (benchmarks time a cold first plan)."""
    _plan.cache_clear()


@functools.lru_cache(maxsize=128)
def _plan(n, d, beta, c, r, m, radius, size, delta_f, max_proposals, classes=0) -> ExactPlan:
    from . import exact_softmax as sm

    # rows pass validation at ||x|| <= c (1 + 1e-12) computed; the true norm is then below
    # c (1 + 1e-12) (1 + gamma_d): 2e-12 covers d < 1e3, and more generously below.
    c_env = c * (1.0 + 2e-12 + gamma(d + 2))
    # d: the sampled parameter's dimension from here on; softmax samples the d (K - 1)
    # shift-free coordinates (docs/multinomial.md §6)
    features, d = d, d * max(1, classes - 1)
    p = n * beta / m * (1.0 + 4.0 * U)  # an upper bound; p_low below
    p_low = n * beta / m * (1.0 - 4.0 * U)
    tau = GRAD_TOL
    if classes:  # softmax: docs/multinomial.md §6
        c_self = sm.c_self(c_env)
        lam_bound = r * n * c_env * c_env / 2.0 * (1.0 + 4.0 * U)  # >= lambda_max(H_L)
        trace_data = r * n * c_env * c_env * (1.0 - 1.0 / classes) * (1.0 + 4.0 * U)
        mode_norm = sm.mode_norm_bound(n, r, c_env, p_low, classes)
    else:
        c_self = c_env
        lam_bound = r * n * c_env * c_env / 4.0 * (1.0 + 4.0 * U)  # >= lambda_max(H_L)
        trace_data = lam_bound  # >= tr(H_L)
        mode_norm = _mode_norm_bound(n, r, c_env, p_low)
    kappa = min(lam_bound / (lam_bound + p_low) * (1.0 + 4.0 * U), 1.0)
    shape = f"d={features}, K={classes}" if classes else f"d={features}"  # for messages
    curv_text = "r n c^2 / 2" if classes else "r n c^2 / 4"
    w_max = (mode_norm + 2.0 * tau * math.sqrt(p + lam_bound) / p_low) * 1.01
    lf2_max = (d * p + trace_data) * (1.0 + 1e-6)
    try:
        if classes:
            delta_h = sm.delta_h(n, features, classes, r, c_env, w_max, lf2_max, p)
        else:
            delta_h = _delta_h(n, d, r, c_env, w_max, lf2_max, p)
    except ValueError:
        raise ExactInfeasibleError(
            f"the exact back-end cannot bound its rounding for n={n}, {shape}, beta={beta:g}, "
            f"c={c:g}: the scores can reach c ||W|| = {c_env * w_max:.3g} for some data set "
            "(the mode's public norm bound); use a larger beta or a smaller c, or another "
            "back-end"
        ) from None
    if not delta_h < p_low / 4:
        raise ExactInfeasibleError(
            f"the Hessian's rounding-error bound {delta_h:.3g} is not small next to the prior "
            f"precision n beta / m = {p_low:.3g}: the exact back-end cannot certify its fit"
        )
    eta = delta_h / (p_low - delta_h) * (1.0 + 8.0 * U)
    try:
        env = env_mod.build_envelope(d, p_low, kappa, c_self, tau, eta)
    except ValueError as err:
        raise ExactInfeasibleError(
            f"no envelope for n={n}, {shape}, beta={beta:g}, r={r:g}, m={m:g}: {err}; "
            "use a larger beta (or a smaller m) or another back-end"
        ) from None
    trace = (1.0 + eta) * min(d * kappa, trace_data / p_low) * (1.0 + 4.0 * U)
    log_z = env_mod.log_mass_lower(d, p_low, c_env, eta, trace, spread_dof=max(0, classes - 1))
    log_env = env.log_total - log_z
    # the fit's public step bound (Theorem 5): refused here if it cannot be proven
    kern = _Kernels(c_env, classes, features)
    try:
        fit = fit_bounds(
            n=n, dim=d, r=r, p_low=p_low, p_up=p, m_self=c_self, lam_bound=lam_bound,
            kappa=kappa, grad_record=c_self if classes else c_env,
            f0=r * n * math.log(classes or 2) * (1.0 + 8.0 * U), tau=tau, w_max=w_max,
            lf2_max=lf2_max, trace_data=trace_data, mode_norm=mode_norm, eta_cert=eta,
            delta_h_cert=delta_h,
            delta_h_at=lambda wn, lf2: kern.delta_h_n(n, r, p, wn, lf2),
            grad_error_at=lambda wn, gn: kern.grad_error_n(n, r, p, wn, gn),
        )  # fmt: skip
    except ValueError as err:
        raise ExactInfeasibleError(
            f"the exact back-end cannot certify its Newton fit for n={n}, {shape}, "
            f"beta={beta:g}, c={c:g}, r={r:g}, m={m:g}: {err}; use a larger beta or "
            "another back-end"
        ) from None
    # the triangular solves' rounding factor (Lemma 7b), then the allowance e_pub at an
    # edge radius (§7): every proposal up to the edge has e(u) <= e_pub
    inv_l = math.sqrt((1.0 + eta) / p_low) * (1.0 + 4.0 * U)  # >= ||L^-1||_2
    gam_s = gamma(2 * d) * math.sqrt(lf2_max) * inv_l
    if not gam_s < 0.5:
        raise ExactInfeasibleError(
            f"the exact back-end's triangular solves are too ill-conditioned for n={n}, "
            f"{shape}, beta={beta:g}, c={c:g} (rounding factor {gam_s:.3g})"
        )
    grad_all = r * n * (c_self if classes else c_env) * (1.0 + 4.0 * U)

    def allowance(edge: float) -> float:
        v_edge = edge * inv_l / (1.0 - gam_s)  # >= ||v_hat|| for rho <= edge
        rho_lr = np.array([edge, _RHO_FLOOR])  # the (d - 1) log rho term peaks at an end
        return float(
            np.max(kern.log_density_n(n, d, r, p, w_max, v_edge, rho_lr))
            + env.log_q_error(np.array([edge]))[0]
            + solve_error(
                c_self, lam_bound, p, p_low, eta, tau, lf2_max, d, edge, v_edge, grad_all, w_max
            )
            + float(bernoulli.error(bernoulli.FLOOR))
        )

    tail_share = math.exp(env.log_tail_bound - env.log_total)  # >= Z(tail) / W
    core = math.exp(-log_env) * (1.0 - 8.0 * U) - tail_share
    log_core = math.log(core) if core > 0 else -math.inf
    log_ball = None
    if radius is not None:
        # the kept set is {||w|| computed (1 + 4 d U) <= R}: a ball of radius >= R (1 - 8dU);
        # softmax: the ball is on W = (Theta Q^T + m 1^T / sqrt(K)), d K dims, whose law is
        # p-strongly log-concave in (Theta, m) with ||W|| <= ||(Theta, m)|| (1 + 4 sqrt(K) U)
        dim = features * classes if classes else d
        shrink = 1 - 8 * (dim + (math.sqrt(classes) + 1 if classes else 0)) * U
        log_ball = env_mod.log_ball_mass_lower(dim, p_low, radius * shrink, mode_norm)
        if log_ball == -math.inf:
            raise ExactInfeasibleError(
                f"OPS: the ball ||w|| <= R = {radius:g} may hold little of the posterior for "
                f"some data set (its mode can lie at norm {mode_norm:.4g}, and its spread is "
                f"sqrt(P / (n beta)) = {math.sqrt(dim / p_low):.3g}); use a larger radius or "
                "another back-end"
            )
    # per proposal: P(accept) = int q alpha >= e^(-2 e_pub) (Z_low - Z(tail)) / W (times
    # the ball's mass for OPS; Theorem 3). The edge is set for at most ``cap`` proposals and
    # (1 + e^EDGE_EPS) P(any beyond it) <= EDGE_SHARE delta_f; a second pass sets it for the
    # budget N the first gave (N can only shrink: e_pub shrinks with the edge).
    cap = max_proposals
    for _ in range(2):
        edge, log_edge = _edge(env, cap, delta_f)
        e_pub = allowance(edge)
        log_a = log_core - 2.0 * e_pub + (log_ball if log_ball is not None else 0.0)
        if log_a == -math.inf:
            break
        a_min = math.exp(log_a) * (1.0 - 64.0 * U)
        first = _budget(a_min, size, delta_f * (1.0 - EDGE_SHARE), cap)
        if first is None or first == cap:
            break
        cap = first
    a_min = math.exp(log_a) * (1.0 - 64.0 * U)
    expected = 1.0 / a_min if a_min > 0 else math.inf
    if log_a == -math.inf:
        # the mass bound (or the envelope) is useless: a prior this flat next to the data's
        # curvature leaves no positive public acceptance bound at any budget
        raise ExactInfeasibleError(
            f"the exact back-end has no positive public acceptance bound for n={n}, {shape}, "
            f"beta={beta:g}, c={c:g}, r={r:g}, m={m:g}: the prior precision n beta / m = "
            f"{p_low:.3g} is too weak for the feature bound (a step of one prior standard "
            f"deviation moves a score by up to c sqrt(m / (n beta)) = "
            f"{c_self / math.sqrt(p_low):.3g}; the data's curvature {curv_text} = "
            f"{lam_bound:.3g}); use a larger beta, a smaller c, or another back-end (no "
            "max_proposals suffices)",
            max_proposals=max_proposals,
            expected=math.inf,
        )
    proposals = _budget(a_min, size, delta_f * (1.0 - EDGE_SHARE), max_proposals)
    if proposals is None:
        raise ExactInfeasibleError(
            f"the exact back-end needs more than max_proposals={max_proposals:,} proposals "
            f"for {size} draw(s) at failure probability delta_f={delta_f:g} (public "
            f"acceptance bound a_min = {a_min:.3g}: about {expected:.3g} proposals per draw, "
            f"log envelope {log_env:.2f}) for n={n}, {shape}, beta={beta:g}, r={r:g}, m={m:g}; "
            "use another back-end, a larger beta, or raise max_proposals",
            proposals=(
                _budget(a_min, size, delta_f * (1.0 - EDGE_SHARE), None) if a_min > 1e-12 else None
            ),
            max_proposals=max_proposals,
            expected=expected,
        )
    return ExactPlan(
        n=n, d=d, r=r, p=p_low, c_env=c_env, c_self=c_self, classes=classes, kappa=kappa,
        tau=tau, eta=eta, delta_h=delta_h,
        w_max=w_max, lf2_max=lf2_max, size=size, delta_f=delta_f, proposals=proposals,
        passes=math.ceil(proposals / BATCH), acceptance_lower_bound=a_min,
        log_envelope=log_env, log_ball_mass=log_ball, radius=radius,
        log_density_error=e_pub, max_proposals=max_proposals, lam_bound=lam_bound,
        edge_radius=edge, log_edge_probability=log_edge, fit=fit, envelope=env,
    )  # fmt: skip


ZSIG_MAX = 0.278465  # max over z of z sigma(-z) = z / (1 + e^z) (at z = 1.2785; 0.2784645...)


def _edge(env: env_mod.RadialEnvelope, max_proposals: int, delta_f: float):
    """(edge radius, log t): with N <= max_proposals proposals, t bounds the probability
    that a proposal lands beyond the edge or has its acceptance cut at bernoulli.FLOOR,
    and (1 + e^EDGE_EPS) t <= EDGE_SHARE delta_f (public: the radii's law is the
    envelope's; docs/exact.md §7)."""
    log_n = math.log(max_proposals)
    budget = math.log(delta_f * EDGE_SHARE) - EDGE_EPS - math.log1p(math.exp(-EDGE_EPS))
    floor_part = log_n + bernoulli.FLOOR  # each proposal's acceptance below e^FLOOR
    room = math.log(-math.expm1(floor_part - budget)) + budget  # budget - floor part
    if env.log_tail_beyond(0.0) + log_n <= room:
        return env.rho_max, float(np.logaddexp(env.log_tail_beyond(0.0) + log_n, floor_part))
    lo, hi = 0.0, 1.0
    while env.log_tail_beyond(hi) + log_n > room:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if env.log_tail_beyond(mid) + log_n > room:
            lo = mid
        else:
            hi = mid
    total = np.logaddexp(env.log_tail_beyond(hi) + log_n, floor_part)
    return env.rho_max + hi * (1.0 + 8.0 * U), float(total)


def _mode_norm_bound(n: int, r: float, c_env: float, p: float) -> float:
    """Public bound on ||argmin f|| for every data set (docs/exact.md, Lemma 6).

    At the mode p w = r sum_i sigma(-z_i) y_i x_i, z_i = y_i x_i.w; so p ||w|| <= r n c and,
    taking the inner product with w, p ||w||^2 = r sum_i z_i sigma(-z_i) <= r n ZSIG_MAX.
    """
    return min(r * n * c_env / p, math.sqrt(ZSIG_MAX * r * n / p)) * (1.0 + 16.0 * U)


def _budget(a_min: float, size: int, delta_f: float, cap: int | None) -> int | None:
    """Smallest N with P(Binomial(N, a_min) < size) <= delta_f, or None when above ``cap``.

    size = 1: (1 - a)^N <= delta_f. Otherwise the binomial tail summed in log space, with a
    1e-6 relative margin (its rounding error is far below that for N < 2^40).
    """
    if not a_min > 0:
        return None
    log_d = math.log(delta_f)
    if a_min >= 1.0:
        return size
    log1m = math.log1p(-a_min)
    if size == 1:
        n_needed = math.ceil(log_d / log1m * (1.0 + 1e-12))
        return n_needed if cap is None or n_needed <= cap else None

    def log_tail(n_trials: int) -> float:
        j = np.arange(size, dtype=float)
        terms = (
            special.gammaln(n_trials + 1.0)
            - special.gammaln(j + 1.0)
            - special.gammaln(n_trials - j + 1.0)
            + j * math.log(a_min)
            + (n_trials - j) * log1m
        )
        return float(special.logsumexp(terms)) + 1e-6

    lo = size
    hi = max(size, math.ceil((size + math.sqrt(size * -log_d) * 2 - log_d) / a_min))
    while log_tail(hi) > log_d:
        hi *= 2
        if cap is not None and hi > 4 * cap:
            break
    if cap is not None and lo > cap:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if log_tail(mid) <= log_d:
            hi = mid
        else:
            lo = mid + 1
    if log_tail(lo) > log_d or (cap is not None and lo > cap):
        return None
    return lo


def exact_feasibility(
    n: int,
    d: int,
    beta: float,
    c: float,
    r: float = 1.0,
    m: float = 1.0,
    *,
    method: str = "diffused",
    radius: float | None = None,
    size: int = 1,
    delta_f: float = DELTA_F,
    max_proposals: int = MAX_PROPOSALS,
    classes: int = 0,
) -> tuple[int, float]:
    """(N, expected proposals per draw): the exact back-end's budget for a release.

    Public inputs only (the lead calls it before any ledger charge and to choose a back-end
    automatically). N is the number of proposals every such call evaluates; the expected
    number per exact draw is at most 1 / a_min for every data set. Raises
    ExactInfeasibleError when N > max_proposals or no envelope exists. Arguments as in
    :func:`exact_plan`.
    """
    plan = exact_plan(
        n, d, beta, c, r, m, method=method, radius=radius, size=size, delta_f=delta_f,
        max_proposals=max_proposals, classes=classes,
    )  # fmt: skip
    return plan.proposals, plan.expected_proposals_per_draw


def _delta_h(n, d, r, c_env, w_norm, lf2, p) -> float:
    """Bound on ||H - L L^T||_2: Hessian sums and Cholesky (docs/exact.md, Lemma 5)."""
    nb = math.ceil(n / FIT_ROWS)
    per_record = PHI3_MAX * gamma(d) * c_env * w_norm + 8.0 * U
    summation = (gamma(FIT_ROWS) + gamma(nb + 1)) / 4.0 * (1.0 + 4.0 * U)
    hess = r * n * c_env * c_env * (per_record + summation)
    return (hess + gamma(d + 1) * lf2 + 4.0 * U * p) * 1.01


def _grad_error(n, d, r, c_env, w_norm, g_norm, p) -> float:
    """Bound on ||grad f(w) - g_computed||_2 for the blocked gradient (Lemma 5)."""
    nb = math.ceil(n / FIT_ROWS)
    per_record = gamma(d) * c_env * w_norm / 4.0 + 9.0 * U + gamma(FIT_ROWS) + gamma(nb + 1)
    return (r * n * c_env * per_record + 4.0 * U * (g_norm + p * w_norm)) * 1.01


def _log_density_error(n, d, r, p, c_env, w_norm, v_norm, rho):
    """Bound on |computed - true| log pi(w_hat + v) - log pi(w_hat) (docs/exact.md, Lemma 7).

    Vectorised over v_norm and rho. Per record: the margins' dot products (gamma_d), the
    sum z0 + a, two softplus evaluations (10 U relative each, exp and log1p being within
    4 ulp; softplus(z) <= log 2 + |z|) and their difference; then the block and
    cross-block sums; then the prior term.
    """
    v_norm = np.asarray(v_norm, dtype=float)
    rho = np.asarray(rho, dtype=float)
    gd = gamma(d)
    amax = c_env * v_norm * (1.0 + gd)
    da, d0 = gd * c_env * v_norm, gd * c_env * w_norm
    z0 = c_env * w_norm + d0
    per = (
        da
        + U * (z0 + amax + da)
        + d0 * amax / 4.0
        + 10.0 * U * (2.0 * math.log(2.0) + 2.0 * z0 + amax + da)
        + U * (amax + da)
    )
    # sums in groups of 256 rows, then the group sums of a block, the thread partials, the
    # block totals and a Dask engine's tree (exact_softmax.TREE): each term's path
    # (the thread partials and the block totals: one correctly rounded sum each)
    from .exact_softmax import GROUP, TREE

    depth = GROUP + LOGLIK_ROWS // GROUP + 1 + 2 + TREE
    summed = n * (per + gamma(depth) * (amax + per))
    loglik = r * summed * (1.0 + 4.0 * U) + 2.0 * U * r * n * (z0 + amax + 1.0)
    prior = p * (w_norm * v_norm + v_norm * v_norm) * (gd + 8.0 * U)
    with np.errstate(divide="ignore"):
        lr = (d - 1) * np.abs(np.log(np.maximum(rho, _RHO_FLOOR)))
    combine = 4.0 * U * (r * n * (z0 + amax + 1.0) + p * (w_norm + v_norm) * v_norm + lr)
    return 1.1 * (loglik + prior + 4.0 * U * lr + combine)


_RHO_FLOOR = 5e-324  # the smallest positive float: |log rho| <= 744.5 for every rho > 0


def solve_error(m_self, lam_bound, p_up, p_low, eta, tau, lf2, d, rho, v_norm, grad, w_norm):
    """Bound on |log pi(w_hat + v_hat) - log pi(w_hat + L^-T u)|, v_hat the computed
    solution of L^T v = u (docs/exact.md §7, Lemma 7b). Vectorised over rho, v_norm.

    The solve's backward error (|Delta| <= gamma_2d |L^T| per column; Higham Thm 8.5,
    doubled for blocked BLAS-3 solves) gives ||L^T (v_hat - v)|| <= gamma_2d ||L||_F
    ||v_hat||; with H <= (1 + eta) L L^T and the gradient of f along the segment bounded in
    the Hessian norm by ||H^-1/2 g|| + min((e^x - 1)/x, (p + lambda)/p) ||H^1/2 v'||,
    x = M ||v'|| (generalized self-concordance), the difference is at most their product.
    ``v_norm`` >= ||v_hat||, ``lf2`` >= ||L||_F^2, ``tau`` >= ||L^-1 g||. Or, whichever is
    smaller, ||grad f|| <= ``grad`` + p ||w|| (``grad`` >= r n times a record's gradient
    bound, ``w_norm`` >= ||w_hat||) times ||v_hat - v|| <= ||L^-1|| gamma_2d ||L||_F ||v_hat||.
    """
    rho = np.asarray(rho, dtype=float)
    v_norm = np.asarray(v_norm, dtype=float)
    r_err = gamma(2 * d) * math.sqrt(lf2) * v_norm  # >= ||L^T (v_hat - v)||
    inv_l = math.sqrt((1.0 + eta) / p_low) * (1.0 + 4.0 * U)
    seg = v_norm + inv_l * r_err  # >= ||v'|| on the segment [v, v_hat]
    # the same difference in Euclidean terms: ||grad f|| <= r n G + p ||w|| everywhere
    euclid = (grad + p_up * (w_norm + seg)) * inv_l * r_err * 1.01
    x = m_self * seg * (1.0 + 4.0 * U)
    with np.errstate(over="ignore", invalid="ignore"):
        grow = np.where(x < 700.0, np.expm1(np.minimum(x, 700.0)) / np.maximum(x, 1e-300), np.inf)
    grow = np.where(x > 0, grow, 1.0)
    grow = np.minimum(grow, (p_up + lam_bound) / p_low * (1.0 + 4.0 * U))
    s1 = math.sqrt(1.0 + eta)
    g_part = tau / math.sqrt(1.0 - eta)  # >= ||H^-1/2 g||
    return np.minimum(1.01 * (g_part + grow * s1 * (rho + r_err)) * s1 * r_err, euclid)


@dataclass(frozen=True)
class _Kernels:
    """The family's rounding-error bounds (binary: Lemmas 5, 7; softmax: docs/multinomial.md
    Lemma M5) for a problem ``prob`` (its n, r and p) or for public (n, r, p)."""

    c_env: float
    classes: int
    features: int

    def delta_h_n(self, n, r, p, w_norm, lf2):
        if self.classes:
            from . import exact_softmax as sm

            return sm.delta_h(n, self.features, self.classes, r, self.c_env, w_norm, lf2, p)
        return _delta_h(n, self.features, r, self.c_env, w_norm, lf2, p)

    def grad_error_n(self, n, r, p, w_norm, g_norm):
        if self.classes:
            from . import exact_softmax as sm

            k = self.classes
            return sm.grad_error(n, self.features, k, r, self.c_env, w_norm, g_norm, p)
        return _grad_error(n, self.features, r, self.c_env, w_norm, g_norm, p)

    def log_density_n(self, n, dim, r, p, w_norm, v_norm, rho):
        if self.classes:
            from . import exact_softmax as sm

            k = self.classes
            return sm.log_density_error(n, self.features, k, r, p, self.c_env, w_norm, v_norm, rho)
        return _log_density_error(n, dim, r, p, self.c_env, w_norm, v_norm, rho)

    # the problem-bound forms used by privbayes.sampling.exact_fit
    def delta_h(self, prob, w_norm, lf2):
        return self.delta_h_n(prob.n, prob.r, prob.p, w_norm, lf2)

    def grad_error(self, prob, w_norm, g_norm):
        return self.grad_error_n(prob.n, prob.r, prob.p, w_norm, g_norm)

    def line_error(self, prob, w_norm, v_norm):
        """Bound on |computed - true| of f(w + v) - f(w) as exact_fit computes it (the
        proposals' log-density kernel and its Lemma 7 / M5 bound, without log rho)."""
        try:
            return self.log_density_n(prob.n, prob.d, prob.r, prob.p, w_norm, v_norm, 1.0)
        except ValueError:  # no bound (absurd scores): the comparison is not certain
            return np.full(np.shape(v_norm), np.inf)


def _kernels(plan: ExactPlan) -> _Kernels:
    features = plan.d // (plan.classes - 1) if plan.classes else plan.d
    return _Kernels(plan.c_env, plan.classes, features)


# -- the data side: certified Newton fit ----------------------------------------------------
def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b. Matrix-vector (and few-column) products avoid BLAS: its threads spin on a
    loaded machine (measured 25x slower than numpy's own loop at 32768 x 20); matrix-matrix
    products keep it."""
    if b.ndim == 1:
        return np.einsum("ij,j->i", a, b)
    if b.shape[1] <= 8:
        return np.einsum("ij,jk->ik", a, b)
    return a @ b


def _softplus(z: np.ndarray) -> np.ndarray:
    """log(1 + exp(-z)) elementwise, without overflow; overwrites z (the binary family's
    kernel, privbayes.glm.family.softplus)."""
    from ..glm.family import softplus

    return softplus(z)


class Problem:
    """The data (x_i y_i rows), r and p; passes over X in row blocks spread over threads."""

    def __init__(self, x: np.ndarray, y: np.ndarray, r: float, p: float):
        self.xy = np.ascontiguousarray(x * y[:, None], dtype=np.float64)
        self.n, self.d = self.xy.shape
        self.r, self.p = float(r), float(p)
        self.threads = _threads()

    group = 1  # proposal batches per pass (the Dask problem groups several)

    def base(self, z0: np.ndarray) -> np.ndarray:
        """softplus(z0) (the log-likelihood terms at w_hat), for loglik_diff."""
        return _softplus(z0.copy())

    def loglik_diffs(self, z0, sp0, vts: list[np.ndarray]) -> list[np.ndarray]:
        """loglik_diff for each batch of proposals in ``vts`` (one pass each in memory)."""
        return [self.loglik_diff(z0, sp0, vt) for vt in vts]

    def subsample(self, rows: int) -> Problem:
        """The problem on ``rows`` evenly spread rows, likelihood weighted by n / rows (self
        when n <= rows). The rows chosen depend on n only."""
        if self.n <= rows:
            return self
        sub = object.__new__(Problem)
        sub.xy = np.ascontiguousarray(self.xy[(np.arange(rows) * self.n) // rows])
        sub.n, sub.d = sub.xy.shape
        sub.r, sub.p, sub.threads = self.r * self.n / rows, self.p, self.threads
        return sub

    def _map(self, fn, rows: int, then=None):
        """fn over row blocks, ``self.threads`` blocks at a time in a thread pool (numpy's
        elementwise work and einsum are single-threaded); ``then`` runs on each result in
        this thread, in block order — BLAS calls go there, so BLAS's own threads never
        compete with ours. Returns the results of fn (or of then) in block order."""
        blocks = [(s, min(s + rows, self.n)) for s in range(0, self.n, rows)]
        out = []
        pool = ThreadPoolExecutor(self.threads) if self.threads > 1 and len(blocks) > 1 else None
        try:
            for i in range(0, len(blocks), self.threads):
                group = blocks[i : i + self.threads]
                res = list(pool.map(fn, group)) if pool is not None else [fn(b) for b in group]
                out.extend(res if then is None else [then(x) for x in res])
        finally:
            if pool is not None:
                pool.shutdown()
        return out

    def grad_hess(self, w: np.ndarray):
        """(margins z (n,), gradient (d,), data Hessian H_L (d, d)) at w, in FIT_ROWS blocks.

        Block gradients are combined with math.fsum per coordinate, block Hessians by
        plain sums (their error bounds are in _grad_error and _delta_h).
        """
        r = self.r
        h = np.zeros((self.d, self.d))

        def block(bounds):
            s, e = bounds
            xb = self.xy[s:e]
            z = _product(xb, w)
            sm = special.expit(-z)  # sigma(-z) = -phi'(z)
            curv = sm * special.expit(z)  # phi''(z), accurate for large |z|
            g = np.einsum("ij,i->j", xb, sm)
            return z, g, xb * np.sqrt(r * curv)[:, None]

        def hessian(part):
            nonlocal h
            h += blas.dsyrk(1.0, part[2].T, trans=0)  # a^T a, upper triangle
            return part[0], part[1]

        parts = self._map(block, FIT_ROWS, then=hessian)
        z = np.concatenate([pt[0] for pt in parts])
        gs = np.array([pt[1] for pt in parts])
        g = np.array([math.fsum(gs[:, j]) for j in range(self.d)])
        g = -r * g + self.p * w
        h = np.triu(h) + np.triu(h, 1).T
        return z, g, h

    def loglik_diff(self, z0: np.ndarray, sp0: np.ndarray, vt: np.ndarray) -> np.ndarray:
        """S_j = sum_i [phi(z0_i + x_i y_i . v_j) - phi(z0_i)] for the columns v_j of vt.

        One pass over X: per row block a matrix product (BLAS threads as configured) and
        the softplus differences split over the row threads, as imh.Target does.
        """
        from .exact_softmax import MAX_THREADS, exact_rounded_sum, grouped_sum

        rows = LOGLIK_ROWS  # whatever cols: the bound counts ceil(n / rows) blocks
        threads = min(self.threads, MAX_THREADS)
        total = []
        pool = ThreadPoolExecutor(threads) if threads > 1 else None

        def part(args):
            zb, z0b, sp0b = args
            zb += z0b[:, None]
            return grouped_sum(_softplus(zb) - sp0b[:, None])

        try:
            for s in range(0, self.n, rows):
                zb = _product(self.xy[s : s + rows], vt)  # (rows, cols)
                z0b, sp0b = z0[s : s + rows], sp0[s : s + rows]
                if pool is None or zb.shape[0] < 1024:
                    total.append(part((zb, z0b, sp0b)))
                else:
                    step = -(-zb.shape[0] // threads)
                    chunks = [
                        (zb[i : i + step], z0b[i : i + step], sp0b[i : i + step])
                        for i in range(0, zb.shape[0], step)
                    ]
                    total.append(exact_rounded_sum(list(pool.map(part, chunks))))
        finally:
            if pool is not None:
                pool.shutdown()
        return exact_rounded_sum(total)


def _rows_problem(u: np.ndarray, r: float) -> Problem:
    """A one-thread Problem on prepared rows u (a chunk on a Dask worker)."""
    prob = object.__new__(Problem)
    prob.xy = u
    prob.n, prob.d = u.shape
    prob.r, prob.p, prob.threads = float(r), 0.0, 1
    return prob


def _gh_chunk(u: np.ndarray, w: np.ndarray, r: float):
    """A chunk's part of Problem.grad_hess: (per-coordinate exact sums of its FIT_ROWS
    block gradients (privbayes.data.exact_sum), its block Hessians summed in order). The
    chunk starts on a multiple of FIT_ROWS, so its blocks are the in-memory path's."""
    from ..data import exact_sum

    r = float(r)
    h = np.zeros((u.shape[1], u.shape[1]))
    gs = []
    for s in range(0, u.shape[0], FIT_ROWS):
        xb = u[s : s + FIT_ROWS]
        z = _product(xb, w)
        sm = special.expit(-z)
        curv = sm * special.expit(z)
        gs.append(np.einsum("ij,i->j", xb, sm))
        h += blas.dsyrk(1.0, (xb * np.sqrt(r * curv)[:, None]).T, trans=0)
    g = np.array(gs).reshape(-1, u.shape[1])
    return tuple(exact_sum(g[:, j]) for j in range(u.shape[1])), h


def _margins(u: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The margins u w in FIT_ROWS blocks, as Problem.grad_hess computes them."""
    return np.concatenate([_product(u[s : s + FIT_ROWS], w) for s in range(0, len(u), FIT_ROWS)])


def _loglik_chunk(u: np.ndarray, w_hat: np.ndarray, vts: list) -> tuple:
    """The chunk's loglik_diff sums, one array (cols,) per batch of proposals."""
    prob = _rows_problem(u, 0.0)
    z0 = _margins(u, w_hat)
    sp0 = _softplus(z0.copy())
    return tuple(prob.loglik_diff(z0, sp0, vt) for vt in vts)


class DaskProblem:
    """The Problem interface on rows held in a Dask engine (privbayes.glm.passes).

    Every method is one pass: one graph, the chunk kernel on each chunk, an ordered sum in
    the engine. The margins never leave the workers: a "margins" value here is the point w
    they are taken at, and the chunk kernels recompute them (the same floats, blockwise).
    """

    group = 32  # proposal batches per pass: 8192 proposals per graph

    def __init__(self, rows, r: float, p: float):
        self.rows = rows
        self.n, self.d = rows.shape
        self.r, self.p = float(r), float(p)

    def subsample(self, rows: int) -> DaskProblem:
        if self.n <= rows:
            return self
        return DaskProblem(self.rows.subsample(rows), self.r * self.n / rows, self.p)

    def grad_hess(self, w: np.ndarray):
        from ..data import fraction_to_float

        ints, h = self.rows.reduce(_gh_chunk, w, self.r)
        g = np.array([fraction_to_float(t) for t in ints])
        g = -self.r * g + self.p * w
        h = np.triu(h) + np.triu(h, 1).T
        return np.array(w, dtype=float), g, h

    def base(self, z0: np.ndarray) -> None:
        return None

    def loglik_diffs(self, z0, sp0, vts: list[np.ndarray]) -> list[np.ndarray]:
        out = self.rows.reduce(_loglik_chunk, z0, list(vts))
        return list(out)


def _fit(prob, plan: ExactPlan):
    """The certified Newton point for ``prob`` under ``plan`` (exact_fit.certified_fit):
    damped Newton steps until the certificate holds, within the plan's public step bound
    (Theorem 5, docs/exact.md §6). Returns an exact_fit.Fit."""
    return certified_fit(prob, plan, _kernels(plan))


# -- the release -----------------------------------------------------------------------------
def _directions(rng: np.random.Generator, count: int, d: int) -> np.ndarray:
    z = rng.standard_normal((count, d))
    norm = np.linalg.norm(z, axis=1)
    norm[norm == 0] = 1.0  # probability zero; keeps the shape
    return z / norm[:, None]


def run(prob: Problem, plan: ExactPlan, rng: np.random.Generator, *, _shift: float = 0.0):
    """All N proposals of one release: (accepted values in order (a, d), public dict,
    private stats). ``_shift`` lowers the envelope (tests only: the mutant)."""
    t0 = time.perf_counter()
    fit = _fit(prob, plan)
    t_fit = time.perf_counter() - t0
    d, p, r = prob.d, prob.p, prob.r
    env = plan.envelope
    w_hat, chol = fit.w_hat, fit.chol
    z0 = fit.z0
    sp0 = prob.base(z0)
    w_norm = float(np.linalg.norm(w_hat)) * (1.0 + d * U)
    lf2 = float((chol * chol).sum()) * (1.0 + 2.0 * d * U)
    kern = _kernels(plan)
    grad_all = prob.n * r * (plan.c_self if plan.classes else plan.c_env) * (1.0 + 4.0 * U)
    kept: list[np.ndarray] = []
    accepted = inside = 0
    worst = -math.inf
    err_max = 0.0
    remaining = plan.proposals
    pending: list = []
    while remaining > 0 or pending:
        if not pending:  # draw up to prob.group batches, then one pass evaluates them all
            batches = []
            while remaining > 0 and len(batches) < prob.group:
                count = min(BATCH, remaining)
                remaining -= count
                rho, log_q = env.draw(rng, count)
                u = rho[:, None] * _directions(rng, count, d)
                first = rng.random(count)  # the accept tests' first uniform words
                # (d, count): L^T v = u
                v = linalg.solve_triangular(chol, u.T, trans="T", lower=True)
                # softmax OPS: the shift of every proposal (a fixed count of normals), so
                # the ball test sees the released W (docs/multinomial.md §3b)
                shift = (
                    rng.standard_normal((count, prob.features))
                    if plan.classes and plan.radius is not None
                    else None
                )
                batches.append((count, rho, log_q, first, shift, v))
            sums = prob.loglik_diffs(z0, sp0, [b[-1] for b in batches])
            pending = [(*b, sm) for b, sm in zip(batches, sums, strict=True)]
        count, rho, log_q, first, shift, v, s = pending.pop(0)
        vv = np.einsum("ij,ij->j", v, v)
        ell = -r * s - p * (w_hat @ v) - 0.5 * p * vv
        v_norm = np.sqrt(vv) * (1.0 + d * U)
        err = kern.log_density_n(prob.n, d, r, p, w_norm, v_norm, rho) + env.log_q_error(rho)
        # the test is evaluated at w_hat + v_hat, the proposal is w_hat + L^-T u (Lemma 7b)
        err = err + solve_error(
            plan.c_self, plan.lam_bound, p, plan.p, plan.eta, fit.tau, lf2, d, rho, v_norm,
            grad_all, w_norm,
        )  # fmt: skip
        with np.errstate(divide="ignore"):
            lr = (d - 1) * np.log(rho) if d > 1 else np.zeros(count)
        log_alpha = ell - err + lr - (log_q - _shift)
        # the exact Bernoulli decision accepts with probability in
        # [exp(log_alpha - e_bern), exp(log_alpha)]: part of the law's allowance
        err = err + bernoulli.error(log_alpha)
        worst = max(worst, float(log_alpha.max()))
        err_max = max(err_max, float(err.max()))
        if worst > 0.0 or np.isnan(log_alpha).any():  # -inf (rho = 0) is a rejection
            raise EnvelopeViolationError(
                f"a proposal's computed log pi/q exceeds the proven envelope by {worst:.3g} "
                "(after its rounding-error allowance): this is a bug in privbayes; nothing "
                "was released"
            )
        acc = bernoulli.accept_exp(rng, first, log_alpha)  # P = exp(log_alpha), exactly
        accepted += int(acc.sum())
        w = w_hat[:, None] + v[:, acc]
        if plan.radius is not None and plan.classes:
            w = prob.compose(w.T, shift[acc]).T  # the released W, (d K, accepted)
        if plan.radius is not None:
            norms = np.linalg.norm(w, axis=0) * (1.0 + 4.0 * w.shape[0] * U)
            keep = norms <= plan.radius
            inside += int(keep.sum())
            w = w[:, keep]
        kept.extend(w.T)
    public = plan.public()
    stats = {
        "accepted": accepted,
        "acceptance": accepted / plan.proposals,
        "max_log_ratio": worst,
        "log_density_error_max": err_max,
        "gradient_bound": fit.tau,
        "newton_steps": fit.steps,
        "seconds_fit": t_fit,
        "seconds_proposals": time.perf_counter() - t0 - t_fit,
    }
    if plan.radius is not None:
        stats["inside_ball"] = inside
    return kept, public, stats


def release_draw(model, xy, cal, rng, *, size=None, **_ignored):
    """Released weight vector(s), (d,) or (size, d), and diagnostics; the exact back-end.

    Evaluates exactly N proposals (``exact_plan``'s budget; public) and releases the first
    ``size`` (default 1) accepted ones, each an exact draw of the tempered posterior (for
    OPS: of its restriction to ||w|| <= R). ``diagnostics["public"]`` holds the plan's
    public numbers (delta_f, proposals, the acceptance bound, ...); the other keys
    (``accepted``, ``acceptance``, ...) are computed on the private data.

    Raises ExactInfeasibleError (public inputs; before the data are touched),
    ExactSamplingError (fewer than ``size`` accepted; probability <= delta_f),
    EnvelopeViolationError and FitBoundError (bugs: a proven bound was exceeded).
    """
    classes = check_family(getattr(model, "family", None))
    x, y = xy
    n, d = x.shape
    k = size or 1
    plan = exact_plan(
        n, d, model.beta, model.c_bound, cal.r, cal.m, method=cal.method,
        radius=model.radius if cal.method == "ops" else None, size=k,
        delta_f=getattr(model, "delta_f", None) or DELTA_F,
        max_proposals=getattr(model, "max_proposals", None) or MAX_PROPOSALS,
        classes=classes,
    )  # fmt: skip
    if classes:
        from .exact_softmax import DaskSoftmaxProblem, SoftmaxProblem

        if is_rows(x):  # rows held in a Dask engine: the same passes, run there
            prob = DaskSoftmaxProblem(x, classes, cal.r, n * model.beta / cal.m)
        else:
            prob = SoftmaxProblem(x, y, classes, cal.r, n * model.beta / cal.m)
    elif is_rows(x):  # rows held in a Dask engine: the same passes, run there
        prob = DaskProblem(x, cal.r, n * model.beta / cal.m)
    else:
        prob = Problem(x, y, cal.r, n * model.beta / cal.m)
    kept, public, stats = run(prob, plan, rng)
    if len(kept) < k:
        raise ExactSamplingError(
            f"the exact back-end accepted {len(kept)} of {plan.proposals:,} proposals, fewer "
            f"than the {k} draw(s) requested: nothing was released (this happens with "
            f"probability <= delta_f = {plan.delta_f:g} for every data set)",
            public=public,
        )
    values = np.array(kept[:k], dtype=float)
    if classes and cal.method != "ops":  # Theta -> W, the data-free shift drawn here (OPS:
        values = prob.full_weights(values, rng)  # run() kept W itself)
    value = values[0] if size is None else values
    value.setflags(write=False)
    return value, {"backend": "exact", "public": public, **stats}
