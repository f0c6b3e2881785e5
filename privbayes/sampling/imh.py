"""Mode-fitted independence Metropolis–Hastings (IMH) for the logistic-regression posteriors.

(Generic over the GLM family, privbayes.glm.family: softmax regression uses its loss
and block Hessian, docs/multinomial.md §4; written below for the binary loss.)

Target (docs/glm.md): log pi(w) = -r sum_i log(1 + exp(-y_i x_i.w)) - (prec / 2) ||w||^2,
prec = n beta / m; OPS restricts it to ||w|| <= R, which we apply by rejection.

Proposal: q = (1 - delta) N(w_hat, H^-1) + delta t_nu(w_hat, H^-1), with w_hat the mode and
H the Hessian of -log pi there (a Laplace fit, found by Newton's method). Proposals do not
depend on the chains' states, so the proposals of many chains and steps are evaluated
together: one pass over X per block of up to 256 proposals (a matrix-matrix product), split
by rows over the cores.

Why this is exact, and how fast it forgets its start (docs/glm.md, "Sampling"): an IMH
chain leaves pi invariant for any q that is positive where pi is. log pi is prec-strongly
concave, so pi has Gaussian tails while the t component gives q polynomial tails: the
weight pi/q is bounded by some M and the chain is uniformly ergodic,
||P^t(x, .) - pi||_TV <= (1 - 1/M)^t from every start (Mengersen & Tweedie 1996, Thm 2.1).
M is not known in closed form: we estimate it from a pilot of independent proposals, take
twice the burn-in that makes the estimated bound <= 1e-6, and then check the run: R-hat across
chains started from an overdispersed law, the Pareto k-hat of the weights (Vehtari et al.
2024), and the estimated bound again with every weight seen. Each release is the final
state of its own chain, so releases are independent given the data.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg, special

from ..errors import ConvergenceError, SamplingError
from ..glm.family import BINARY_LOGISTIC
from ..glm.passes import is_rows
from . import diagnostics

NU = 5.0  # t component's degrees of freedom: heavy tails, so the weights stay bounded
T_WEIGHT = 0.1  # its mixture weight
START_SCALE = 2.0  # chains start from t_nu(w_hat, 4 H^-1): overdispersed, for R-hat
TV_TARGET = 1e-6  # burn-in so that the estimated (1 - 1/M)^tune is below this
RHAT_MAX = 1.01
PARETO_K_MAX = 0.7  # above it, importance weights pi/q are unreliable (Vehtari et al.)
PILOT = 256
OPS_MIN_SHARE = 1e-4  # below it OPS's rejection is refused as hopeless
OPS_BATCH = 4096  # chains per OPS batch
DRAWS_X_SQRT_CHAINS = 1000
MIN_DRAWS = 100
MAX_TUNE = 100_000
_COLS = 256  # proposals per pass over X
_CELLS = 1 << 21  # rows x proposals per block (16 MB of float64)


def _threads() -> int:
    """Row threads per log-density pass: the usable cores (at most 8), or the integer in
    $PRIVBAYES_NUM_THREADS (e.g. 1 when running one release per process in a pool)."""
    env = os.environ.get("PRIVBAYES_NUM_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"PRIVBAYES_NUM_THREADS must be a positive integer; got {env!r}")
        return int(env)
    try:
        return max(1, min(len(os.sched_getaffinity(0)), 8))
    except AttributeError:  # not on Linux
        return max(1, min(os.cpu_count() or 1, 8))


class Target:
    """The tempered (and for OPS truncated) posterior; log density up to a constant.

    x : (n, d) features, y : (n,) labels (binary: {-1, +1}), r : likelihood weight (OPS:
    t), prec : prior precision n beta / m, family : the GLM family (default binary
    logistic; privbayes.glm.family). The parameter has P = d * family.outputs
    entries. (OPS's ball is applied by rejection, outside.)
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, r: float, prec: float, family=None):
        self.family = BINARY_LOGISTIC if family is None else family
        # rows held in a Dask engine (privbayes.glm.passes) arrive prepared
        self.data = x if is_rows(x) else self.family.prepare(x, y)
        if self.family is BINARY_LOGISTIC:
            self.xy = self.data
        self.r, self.prec = float(r), float(prec)
        self.n = self.family.n_rows(self.data)
        self.d = int(x.shape[1]) * self.family.outputs  # the parameter's dimension P
        self.threads = _threads()

    def log_density(self, w: np.ndarray) -> np.ndarray:
        """log pi at the rows of w, shape (B, P) -> (B,)."""
        return -self.r * self._loss(w) - 0.5 * self.prec * np.einsum("ij,ij->i", w, w)

    def _loss(self, w: np.ndarray) -> np.ndarray:
        """sum_i loss(w; x_i, y_i) for each row of w: one pass over X (the family's kernel:
        row blocks, the elementwise part split over ``self.threads`` threads; no
        process-wide BLAS limit is touched)."""
        return self.family.loss_sums(self.data, w, self.threads)

    def mode(self, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """(w_hat, Cholesky factor L of H = L L^T) by damped Newton on -log pi (untruncated)."""
        w = np.zeros(self.d)
        f = self._neg(w)
        for _ in range(max_iter):
            g, hess = self.family.grad_hess(self.data, w, self.r)
            g = g + self.prec * w
            hess[np.diag_indices(self.d)] += self.prec
            try:
                chol = linalg.cholesky(hess, lower=True)
            except linalg.LinAlgError:
                raise SamplingError(
                    "the posterior's Hessian is numerically singular (prior precision "
                    f"n beta / m = {self.prec:.3g} is negligible next to the data term); use "
                    "a larger beta"
                ) from None
            step = linalg.cho_solve((chol, True), g)
            dec = float(g @ step)  # Newton decrement squared
            if dec < 1e-12:
                return w, chol
            t = 1.0
            while True:  # backtracking (Armijo): -log pi is convex
                f_new = self._neg(w - t * step)
                if f_new <= f - 0.25 * t * dec or t < 1e-10:
                    break
                t *= 0.5
            w, f = w - t * step, f_new
        raise SamplingError("Newton's method did not find the posterior mode in 100 steps")

    def _neg(self, w: np.ndarray) -> float:
        return float(self.r * self.family.loss(self.data, w) + 0.5 * self.prec * w @ w)


@dataclass(frozen=True)
class Proposal:
    """q = (1 - T_WEIGHT) N(mean, H^-1) + T_WEIGHT t_NU(mean, H^-1), scaled by ``scale``."""

    mean: np.ndarray
    chol: np.ndarray  # lower Cholesky factor of H
    scale: float = 1.0

    def draw(self, rng: np.random.Generator, size: int, spread: float = 1.0):
        """(proposals (size, d), log q up to a constant shared by every draw)."""
        d = self.mean.size
        z = rng.standard_normal((size, d))
        heavy = rng.random(size) < T_WEIGHT
        g = rng.chisquare(NU, size) / NU
        u = z * np.where(heavy, 1.0 / np.sqrt(g), 1.0)[:, None] * spread
        w = (
            self.mean
            + self.scale * linalg.solve_triangular(self.chol, u.T, trans="T", lower=True).T
        )
        return w, self._log_q((u * u).sum(axis=1))

    def log_q(self, w: np.ndarray) -> np.ndarray:
        u = (w - self.mean) @ self.chol / self.scale  # L^T (w - mean) / scale, row-wise
        return self._log_q((u * u).sum(axis=1))

    def _log_q(self, q2: np.ndarray) -> np.ndarray:
        d = self.mean.size
        log_n = -0.5 * d * math.log(2 * math.pi) - 0.5 * q2
        log_t = (
            special.gammaln((NU + d) / 2)
            - special.gammaln(NU / 2)
            - 0.5 * d * math.log(NU * math.pi)
            - 0.5 * (NU + d) * np.log1p(q2 / NU)
        )
        return np.logaddexp(math.log1p(-T_WEIGHT) + log_n, math.log(T_WEIGHT) + log_t)


def _log_mean_exp(a: np.ndarray) -> float:
    return float(special.logsumexp(a) - math.log(a.size))


def burn_in(log_m: float) -> int:
    """Steps t with (1 - 1/M)^t <= TV_TARGET, for log M >= 0."""
    if log_m <= 1e-12:
        return 1
    return math.ceil(math.log(TV_TARGET) / math.log1p(-math.exp(-log_m)))


def run_chains(target: Target, proposal: Proposal, chains: int, tune: int, draws: int, rng):
    """Run ``chains`` IMH chains for tune + draws steps.

    Returns (final states (chains, d), traces (chains, draws, d), log-density traces
    (chains, draws), acceptance rate after tuning, log weights of every proposal).
    """
    d = target.d
    state, _ = proposal.draw(rng, chains, spread=START_SCALE)
    lp = target.log_density(state)
    lw = lp - proposal.log_q(state)
    traces = np.empty((chains, draws, d))
    lp_trace = np.empty((chains, draws))
    weights = []
    accepted = 0
    per_block = max(1, _COLS // chains)
    step, total = 0, tune + draws
    while step < total:
        steps = min(per_block, total - step)
        prop, log_q = proposal.draw(rng, steps * chains)
        prop_lp = target.log_density(prop)
        prop_lw = prop_lp - log_q
        weights.append(prop_lw)
        prop = prop.reshape(steps, chains, d)
        prop_lp, prop_lw = prop_lp.reshape(steps, chains), prop_lw.reshape(steps, chains)
        log_u = np.log(rng.random((steps, chains)))
        for s in range(steps):
            acc = log_u[s] < prop_lw[s] - lw
            state = np.where(acc[:, None], prop[s], state)
            lp = np.where(acc, prop_lp[s], lp)
            lw = np.where(acc, prop_lw[s], lw)
            if step >= tune:
                accepted += int(acc.sum())
                traces[:, step - tune] = state
                lp_trace[:, step - tune] = lp
            step += 1
    return state, traces, lp_trace, accepted / (chains * draws), np.concatenate(weights)


def _diagnostics(traces, lp_trace, acceptance, log_w, tune: int) -> dict:
    # Our own R-hat/ESS/k-hat (diagnostics.py): ArviZ costs 2-3 s to import. np.max and
    # np.min propagate NaN, so an undefined R-hat (constant chains) fails the checks.
    both = np.concatenate([traces, lp_trace[:, :, None]], axis=2)  # w and log pi
    log_m = float(np.max(log_w) - _log_mean_exp(log_w))
    return {
        "backend": "imh",
        "rhat_max": float(np.max(diagnostics.split_rhat(both))),
        "ess_bulk_min": float(np.min(diagnostics.ess_bulk(both))),
        "ess_tail_min": float(np.min(diagnostics.ess_tail(both))),
        "acceptance": float(acceptance),
        "pareto_k": diagnostics.pareto_k(log_w),
        "weight_ratio_max": math.nan if math.isnan(log_m) else math.exp(min(log_m, 700.0)),
        "tv_bound_est": _tv_bound(log_m, tune),
        "chains": traces.shape[0],
        "draws": traces.shape[1],
        "tune": tune,
    }


def _tv_bound(log_m: float, tune: int) -> float:
    """(1 - 1/M)^tune; NaN when log M is NaN (a NaN must fail the check, not pass it)."""
    if math.isnan(log_m):
        return math.nan
    return math.exp(tune * math.log1p(-math.exp(-log_m))) if log_m > 0 else 0.0


def _problems(diag: dict) -> list[str]:
    out = []
    if not diag["rhat_max"] <= RHAT_MAX:  # NaN counts as a failure
        out.append(f"R-hat {diag['rhat_max']:.4f} > {RHAT_MAX}")
    if not diag["pareto_k"] <= PARETO_K_MAX:
        out.append(
            f"Pareto k-hat of the weights {diag['pareto_k']:.2f} > {PARETO_K_MAX} (the "
            "proposal does not cover the posterior)"
        )
    if not diag["tv_bound_est"] <= TV_TARGET:
        out.append(f"estimated distance from the posterior {diag['tv_bound_est']:.2g} > 1e-6")
    return out


def _converged_chains(target, proposal, chains: int, needed: int, model, rng, on_bad: str):
    """Final states (chains, d) of chains that passed the diagnostics, and the diagnostics.

    A run that fails them is repeated with twice the burn-in and draws, ``model.reruns``
    times; then ConvergenceError (or, with on_bad="warn", a warning and the last run).
    """
    # R-hat's sampling noise falls like 1 / (draws sqrt(chains)); for the max over d + 1
    # quantities to resolve 1.01 (measured on iid chains, then allowing for IMH's
    # rejections) we take draws = 1000 / sqrt(chains) unless set.
    # At least MIN_DRAWS: with few draws per chain, rejections (autocorrelation time tau of
    # 1.2-2) bias split R-hat upwards by ~(tau - 1) / draws, whatever the number of chains.
    draws = model.draws or max(MIN_DRAWS, math.ceil(DRAWS_X_SQRT_CHAINS / math.sqrt(chains)))
    for attempt in range(model.reruns + 1):
        scale = 2**attempt
        tune = max(model.tune, 2 * needed) * scale  # twice the estimate: M-hat is low
        if tune > MAX_TUNE:
            raise ConvergenceError(
                f"the burn-in would be {tune} steps (> {MAX_TUNE}; from tune={model.tune} and "
                "the estimated weight bound, doubled per rerun): the proposal fits the "
                "posterior too poorly, so nothing was released. A ledger charge made for this "
                "call stays spent: the chains read the data. What helps: a stronger prior "
                "(larger beta), proposal_scale nearer 1, or another back-end",
                diagnostics={"backend": "imh", "tune": tune, "attempts": attempt + 1},
            )
        state, traces, lp_trace, acc, log_w = run_chains(
            target, proposal, chains, tune, draws * scale, rng
        )
        diag = _diagnostics(traces, lp_trace, acc, log_w, tune)
        diag["attempts"] = attempt + 1
        problems = _problems(diag)
        if not problems:
            return state, diag
    # "warn" releases a run that narrowly failed, never one that did not move: chains that
    # (almost) never accept, or weights with no finite mean, sit near their starting law.
    # NaN (an undefined R-hat or k-hat) counts as not moving.
    hopeless = not (
        diag["acceptance"] >= 0.01 and diag["pareto_k"] <= 1.0 and not math.isnan(diag["rhat_max"])
    )
    hint = "proposal_scale nearer 1" if model.proposal_scale != 1 else ""
    if on_bad == "raise" or hopeless:
        message = diagnostics.convergence_message(
            problems, diag["attempts"], can_warn=not hopeless, hint=hint
        )
        raise ConvergenceError(message, diagnostics=diag)
    message = diagnostics.convergence_message(
        problems, diag["attempts"], can_warn=True, hint=hint, released=True
    )
    warnings.warn(message, RuntimeWarning, stacklevel=5)
    return state, diag


def release_draw(model, xy, cal, rng, *, size=None, on_bad: str = "raise", **_ignored):
    """Released weight vector(s), (d,) or (size, d), and diagnostics.

    Runs max(model.chains, size) chains; each release is the final state of its own chain.
    OPS: the chains target the untruncated tempered posterior, and a chain's final state is
    kept only when it lies in the ball ||w|| <= R (rejection at a fixed time, so a kept
    state is a draw from the truncated posterior); enough chains are run for ``size``
    kept states. Raises ConvergenceError when the diagnostics fail after ``model.reruns``
    reruns (each doubles the burn-in and draws), SamplingError when the OPS ball holds
    too little of the posterior.
    """
    x, y = xy
    family = getattr(model, "family", BINARY_LOGISTIC)
    prec = x.shape[0] * model.beta / cal.m
    if family is BINARY_LOGISTIC:
        target = Target(x, y, cal.r, prec)
    else:
        target = Target(x, y, cal.r, prec, family)
    w_hat, chol = target.mode()
    proposal = Proposal(w_hat, chol, model.proposal_scale)
    k = size or 1
    # Pilot: independent proposals, used only to choose the burn-in (and OPS's chains).
    pilot_w, pilot_q = proposal.draw(rng, PILOT)
    pilot = target.log_density(pilot_w) - pilot_q
    log_m = float(pilot.max() - _log_mean_exp(pilot))
    if not math.isfinite(log_m):
        raise ConvergenceError(
            "the proposal's importance weights are not finite (a degenerate Laplace fit or "
            "proposal_scale); nothing was released",
            diagnostics={"backend": "imh"},
        )
    needed = burn_in(log_m)
    if cal.method != "ops":
        state, diag = _converged_chains(
            target, proposal, max(model.chains, k), needed, model, rng, on_bad
        )
        values = state[rng.choice(len(state), size=k, replace=False)]
    else:
        values, diag = _ops_rejection(
            model, target, proposal, pilot_w, pilot, needed, k, rng, on_bad
        )
    value = np.array(values[0] if size is None else values, dtype=float)
    value.setflags(write=False)
    return value, diag


def _ops_rejection(model, target, proposal, pilot_w, pilot, needed, k, rng, on_bad):
    radius = model.radius
    weights = np.exp(pilot - pilot.max())
    inside_share = float(weights[np.linalg.norm(pilot_w, axis=1) <= radius].sum() / weights.sum())
    if inside_share < OPS_MIN_SHARE:
        raise SamplingError(
            f"OPS rejection: about {inside_share:.2g} of the tempered posterior lies in the "
            f"ball ||w|| <= R = {radius:g} (from {PILOT} weighted pilot proposals); use a "
            "larger radius (the certificate weakens as R grows: eps0 = 2 t c R for two "
            "classes, docs/multinomial.md §3b for K)"
        )
    kept, run, diag = [], 0, {}
    budget = math.ceil(3 * k / inside_share) + OPS_BATCH  # chains, if the estimate holds
    while len(kept) < k:
        if run >= budget:
            raise SamplingError(
                f"OPS rejection: only {len(kept)} of {run} chains ended in the ball "
                f"||w|| <= R = {radius:g}, {k} needed; use a larger radius (the certificate "
                "weakens as R grows)"
            )
        want = math.ceil(1.2 * (k - len(kept)) / inside_share)
        chains = min(max(model.chains, want), OPS_BATCH)
        state, batch = _converged_chains(target, proposal, chains, needed, model, rng, on_bad)
        diag = _worst(diag, batch) if diag else batch
        run += chains
        kept.extend(state[np.linalg.norm(state, axis=1) <= radius])
    diag["ops_acceptance"] = len(kept) / run
    diag["chains"] = run
    return np.array(kept[:k]), diag


def _worst(a: dict, b: dict) -> dict:
    """Diagnostics of two OPS batches combined: each check at its worse value (NaN, an
    undefined diagnostic, wins: np.maximum/np.minimum propagate it, Python's max does not)."""
    out = dict(b)
    for key in ("rhat_max", "pareto_k", "weight_ratio_max", "tv_bound_est", "tune", "attempts"):
        out[key] = np.maximum(a[key], b[key]).item()
    for key in ("ess_bulk_min", "ess_tail_min", "acceptance"):
        out[key] = np.minimum(a[key], b[key]).item()
    return out
