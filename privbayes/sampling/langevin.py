"""Certified noisy gradient descent (unadjusted Langevin) for Gaussian-prior GLMs.

Written below for binary logistic regression; any GLM family (privbayes.glm.family)
runs the same way with its own loss gradient, its sensitivity G (s = eta r G) and its
curvature bound k (L = r n c^2 k + prec): softmax regression in docs/multinomial.md §4.

The mechanism (docs/langevin.md): with U(w) = r sum_i log(1 + exp(-y_i x_i.w)) + (prec/2)||w||^2,
prec = n beta / m, run from the fixed start w_0 = 0

    w_{k+1} = w_k - eta grad U(w_k) + noise * N(0, I_d),    k = 0, ..., K - 1,

and release w_K; each release is the final state of its own chain. The gradients of B chains
are one pass over X: X^T (y * sigmoid(-y * X W)), two matrix products.

Its certificate is for the law of w_K itself, not for the posterior, so nothing about
convergence gates a release. Theorem 1 of docs/langevin.md (shifted Rényi divergences:
privacy amplification by iteration) gives, for every order lam >= 1,

    eps(lam) = lam * rho,
    rho = s^2 / (2 noise^2) * (1 + kappa)(1 - kappa^K) / ((1 - kappa)(1 + kappa^K)),

with s = 2 eta r c (how far the two neighbours' gradient steps can move a point) and
kappa = 1 - eta prec (their contraction factor), valid when eta (2 prec + r n c^2 / 4) <= 2,
i.e. eta <= 2 / (mu + L) for mu = prec and L = r n c^2 / 4 + prec. The bound is attained by
a quadratic U with a constant gradient difference (docs/langevin.md, "Tightness"), so no
argument that uses only (mu, L, s) can improve it. ``certificate`` evaluates it in exact
rational arithmetic of the floats the sampler uses and rounds up.

The step and the number of steps follow a public rule (``schedule``): eta = h * 2 / (mu + L)
(h = ``step_scale``, default 1/2, so eta is about 1/L) and the smallest K with kappa^K <= TAU,
capped at ``max_steps``. Nothing depends on the data but n.
"""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np

from .. import mechanisms
from ..calibration import Calibration, solve_knob, step_down
from ..errors import InfeasiblePrivacyError, StepCapWarning
from ..glm.family import BINARY_LOGISTIC
from ..glm.passes import is_rows
from ..validation import user_stacklevel
from .imh import _threads

ALGORITHM = "langevin"
TAU = 1e-2  # K: the smallest number of steps with kappa^K <= TAU (start forgotten to 1%)
STEP_SCALE = 0.5  # eta = STEP_SCALE * 2 / (mu + L): about 1/L
MAX_STEPS = 10_000
_BITS = 256  # kappa^K is bounded below on a 2^-256 grid (a smaller power only costs 2^-255)
_CHAIN_BATCH = 256  # chains per pass over X
# X is stored column-major: the two products per step then cost 0.5x (one chain) to 0.9x
# (64 chains) of their row-major CPU time (measured single-threaded, Adult-sized)


# -- the public rule ------------------------------------------------------------------------
def schedule(
    n: int,
    beta: float,
    c: float,
    r: float,
    m: float,
    step_scale: float = STEP_SCALE,
    max_steps: int = MAX_STEPS,
    family=None,
) -> dict:
    """The sampler's public parameters for data sets of size ``n`` (no data involved).

    ``family``: the GLM family (default binary logistic), whose Hessian-weight bound k
    (``family.curvature``: 1/4 binary, 1/2 multinomial) gives L = r n c^2 k + prec.

    ``c`` is the certified feature bound (the model's c with its validation slack). Returns
    ``{"algorithm": "langevin", "guarantee": "algorithm", "step": eta, "steps": K,
    "start": 0.0, "noise": sqrt(2 eta) as used, "prec": n beta / m as used, "capped": bool}``;
    ``start`` 0.0 is the zero vector. eta = step_scale * 2 / (mu + L), nudged down until the
    contraction condition eta (2 prec + r n c^2 / 4) <= 2 holds exactly; K the smallest
    integer >= 1 with (1 - eta prec)^K <= TAU, at most ``max_steps`` (``capped`` says the
    cap bound). Raises ValueError when the parameters are not representable (a prior
    precision that overflows, a step that underflows).
    """
    prec = n * beta / m
    if not (math.isfinite(prec) and prec > 0):
        raise ValueError(f"the prior precision n beta / m = {prec!r} is not a positive double")
    k_c = (BINARY_LOGISTIC if family is None else family).curvature_bound(Fraction(c))
    curv = float(Fraction(r) * n * k_c)  # data part of L (rounding corrected below)
    eta = 2.0 * step_scale / (2.0 * prec + curv)
    lipschitz_sum = 2 * Fraction(prec) + Fraction(r) * n * k_c  # mu + L
    for _ in range(64):
        if eta > 0 and Fraction(eta) * lipschitz_sum <= 2:
            break
        eta = math.nextafter(eta, 0.0)
    noise = math.sqrt(2.0 * eta)
    if not (eta > 0 and noise > 0 and math.isfinite(noise)):
        raise ValueError(f"the step size eta = {eta!r} is not representable")
    rate = -math.log1p(-eta * prec)  # -log kappa > 0 (inf when kappa = 0)
    needed = math.log(1.0 / TAU) / rate if rate > 0 else math.inf
    wanted = max_steps + 1 if needed > max_steps else max(1, math.ceil(needed))
    steps = min(max_steps, wanted)
    return {
        "algorithm": ALGORITHM,
        "guarantee": "algorithm",
        "step": eta,
        "steps": int(steps),
        "start": 0.0,
        "noise": noise,
        "prec": prec,
        "capped": wanted > max_steps,
    }


# -- the certificate (docs/langevin.md, Theorem 1) -------------------------------------------
def _round_up(q: Fraction) -> float:
    """The smallest double >= q (q >= 0); inf beyond the largest double."""
    try:
        f = float(q)  # int / int division: correctly rounded
    except OverflowError:
        return math.inf
    return f if Fraction(f) >= q else math.nextafter(f, math.inf)


def _pow_lower(x: Fraction, k: int, bits: int = _BITS) -> Fraction:
    """A lower bound on x^k for 0 <= x <= 1: binary powering, each product floored to 2^-bits."""
    one = 1 << bits
    base = (x.numerator << bits) // x.denominator
    acc = one
    while k:
        if k & 1:
            acc = (acc * base) >> bits
        base = (base * base) >> bits
        k >>= 1
    return Fraction(acc, one)


def certificate(sampler: dict, n: int, r: float, c: float, family=None) -> float:
    """rho with eps(lam) <= lam * rho for every order lam >= 1 (Theorem 1), rounded up.

    ``sampler``: the dict from :func:`schedule` (step, steps, noise, prec are used, as the
    exact rationals of their doubles), ``n`` the public size, ``r`` the likelihood weight,
    ``c`` the certified feature bound. The contraction condition
    step * (2 prec + r n c^2 / 4) <= 2 is checked exactly. kappa^K is bounded from below
    (the bound decreases in it), every other operation is exact, and the result is the
    smallest double >= the exact bound. ``family`` (default binary logistic) supplies the
    sensitivity G^2 = family.sensitivity_sq c^2 (s = eta r G) and the curvature k of the
    condition step * (2 prec + r n c^2 k) <= 2. Raises ValueError when the condition
    fails or a parameter is not a positive number.
    """
    fam = BINARY_LOGISTIC if family is None else family
    try:
        eta, noise, prec = (Fraction(float(sampler[k])) for k in ("step", "noise", "prec"))
        steps = sampler["steps"]
    except (KeyError, TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"sampler must be a Langevin schedule; got {sampler!r}") from err
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"sampler['steps'] must be an integer >= 1; got {steps!r}")
    if not (eta > 0 and noise > 0 and prec > 0):
        raise ValueError(f"step, noise and prec must be > 0; got {sampler!r}")
    fr, fc = Fraction(r), Fraction(c)
    if eta * (2 * prec + fr * n * fam.curvature_bound(fc)) > 2:
        raise ValueError(
            "the step violates the contraction condition eta (mu + L) <= 2 "
            f"(eta = {float(eta):g}, mu = {float(prec):g}, L = r n c^2 k + mu): "
            "Theorem 1 of docs/langevin.md does not apply"
        )
    kappa = 1 - eta * prec  # in (0, 1) under the condition
    t = _pow_lower(kappa, int(steps))
    s2 = eta * eta * fr * fr * fam.gradient_sensitivity_sq(fc)  # s^2, s = eta r G
    rho = s2 / (2 * noise * noise) * (1 + kappa) * (1 - t) / ((1 - kappa) * (1 + t))
    return _round_up(rho)


def curve(orders, rho: float) -> np.ndarray:
    """lam * rho at every order (>= 1, or inf), each rounded up; inf at lam = inf."""
    lam = np.asarray(orders, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.nextafter(lam * rho, np.inf)  # above the exact product (round to nearest)
    return np.where(rho == 0, 0.0, out)


def model_rdp(model, n: int, orders, r: float, m: float, method: str, sampler=None):
    """The Langevin certificate of ``model`` (``backend="langevin"``) at ``orders``.

    ``sampler`` None recomputes the public schedule for (n, r, m).
    """
    _refuse_ops(method)
    fam = _family(model)
    lam = np.asarray(orders, dtype=float)
    if sampler is None:
        sampler = schedule(
            n, model.beta, model._c_cert(), r, m, model.step_scale, model.max_steps, fam
        )
    return curve(lam, certificate(sampler, n, r, model._c_cert(), fam))


def _family(model):
    """The model's GLM family (binary logistic regression when it declares none)."""
    return getattr(model, "family", None) or BINARY_LOGISTIC


def _refuse_ops(method: str) -> None:
    if method == "ops":
        raise ValueError(
            "method='ops' is not available with backend='langevin': OPS certifies exact "
            "draws from a truncated posterior, and Langevin's certificate is for its own "
            "K-step output law. Use method='diffused', 'concentrated' or 'direct', or "
            "backend='imh' for OPS"
        )


def calibrate(model, n: int, lam: float, eps: float, method: str) -> Calibration:
    """Largest knob (r for diffused, m for concentrated; none for direct) whose Langevin
    certificate at ``lam`` is <= ``eps``, with the public schedule at that knob.

    Public inputs only: n, the model's beta, c, step_scale and max_steps, lam, eps, method.
    Raises ValueError for method="ops", InfeasiblePrivacyError at lam = inf (Gaussian noise
    has no finite pure-DP bound) or when direct cannot meet eps (saying what it reaches).
    """
    _refuse_ops(method)
    if n == 0:  # nothing to protect: the release ignores the (empty) data
        return Calibration(method, 1.0, 1.0, lam, 0.0, eps, 0, None, 0, model)
    if eps == 0:
        raise InfeasiblePrivacyError(
            "eps=0 needs a release that ignores the data: sample from the prior instead",
            reachable={"eps": "> 0"},
        )
    if math.isinf(lam):
        raise InfeasiblePrivacyError(
            "backend='langevin' has no finite eps at lam=inf (Gaussian noise gives no pure DP; "
            "its curve grows like lam); ask for a finite lam, or use backend='imh' with "
            "method='ops'",
            reachable={"lam": "finite"},
        )
    c = model._c_cert()
    fam = _family(model)
    evals = 0

    def certified(knob: float) -> float:
        nonlocal evals
        evals += 1
        r, m = mechanisms.knobs(method, knob)
        try:
            sched = schedule(n, model.beta, c, r, m, model.step_scale, model.max_steps, fam)
        except ValueError:
            return math.inf  # not representable: never certified
        return float(curve(lam, certificate(sched, n, r, c, fam)))

    name = mechanisms.KNOB[method] or "knob"
    top = certified(1.0)
    if top <= eps:
        knob = 1.0
    elif method == "direct":
        raise InfeasiblePrivacyError(
            f"direct Langevin sampling certifies eps={top:.6g} at lam={float(lam)!r} for n={n}, "
            f"beta={model.beta:g}, c={model.c:g}; ask for eps >= {top:.6g} or use "
            "method='diffused' or 'concentrated'",
            reachable={"min_eps": top},
        )
    else:
        slope = 2.0 if method == "diffused" else 1.0
        knob, _, _ = solve_knob(certified, eps, 2.0, slope, name)
    knob, achieved = step_down(knob, certified, eps, name)  # the final guard
    r, m = mechanisms.knobs(method, knob)
    sched = schedule(n, model.beta, c, r, m, model.step_scale, model.max_steps, fam)
    return Calibration(method, r, m, lam, achieved, eps, n, None, evals, model, sched)


# -- the sampler ----------------------------------------------------------------------------


def _grad_sum(z: np.ndarray, w: np.ndarray, pool, threads: int) -> np.ndarray:
    """z^T sigmoid(-z w), shape (d, B): minus the binary loss gradients' sum over z (n, d)."""
    return BINARY_LOGISTIC.neg_grad_sums(z, w, pool, threads)


def run_chains(
    x: np.ndarray, y: np.ndarray, r: float, sampler: dict, chains: int, rng, family=None
):
    """Final states (chains, P) of ``chains`` independent Langevin chains of ``sampler``.

    x (n, d), y (n,) (binary: {-1, +1}); ``family`` the GLM family (default binary
    logistic; P = d * family.outputs). Each chain runs sampler["steps"] steps from
    sampler["start"]: w <- (1 - eta prec) w - eta r sum_i grad loss(w; x_i, y_i)
    + noise N(0, I), which is w - eta grad U(w) + noise N(0, I).
    """
    fam = BINARY_LOGISTIC if family is None else family
    batch = min(chains, _CHAIN_BATCH)
    if is_rows(x):  # rows held in a Dask engine: one pass (one graph) per step
        z = x
    elif fam is BINARY_LOGISTIC:
        z = np.empty(x.shape, order="F")
        np.multiply(x, y[:, None], out=z)  # rows u_i = y_i x_i
    else:
        z = fam.prepare(x, y)
    d = x.shape[1] * fam.outputs
    eta, noise, prec = float(sampler["step"]), float(sampler["noise"]), float(sampler["prec"])
    decay, gain = 1.0 - eta * prec, eta * r
    out = np.empty((chains, d))
    threads = _threads()
    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        for first in range(0, chains, batch):
            b = min(batch, chains - first)
            w = np.full((d, b), float(sampler["start"]))
            for _ in range(int(sampler["steps"])):
                g = fam.neg_grad_sums(z, w, pool, threads)
                w *= decay
                g *= gain
                w += g
                w += noise * rng.standard_normal((d, b))
                fam.project(w)  # onto the family's ball, if it has one (docs/linear_regression.md)
            out[first : first + b] = w.T
    finally:
        if pool is not None:
            pool.shutdown()
    return out


def release_draw(model, xy, cal: Calibration, rng, *, size=None, **_ignored):
    """Released weight vector(s), (d,) or (size, d), and public diagnostics.

    One chain per release, run for the calibrated number of steps; no convergence check
    (the certificate covers this law). The diagnostics hold public values only.
    """
    sampler = cal.sampler
    if not sampler or sampler.get("algorithm") != ALGORITHM:
        raise ValueError("this calibration was not made for backend='langevin'")
    if sampler["capped"]:  # public: known before the data are read
        warnings.warn(
            f"backend='langevin' hit its step cap: max_steps={sampler['steps']} steps are "
            "fewer than the chain needs to forget its start (prior precision n beta / m = "
            f"{sampler['prec']:.3g}), so the draw may be far from the posterior (the privacy "
            "certificate still holds: it is for the law run). What helps: a larger beta (a "
            "stronger prior contracts faster), "
            + (
                "method='concentrated' (its m < 1 strengthens the prior), "
                if cal.method == "diffused"
                else ""
            )
            + "a larger cap (max_steps= of the model or of PrivateLogisticRegression, "
            "--max-steps on the command line; at most 10**7), or backend='exact'; a larger "
            "eps does not help (its larger knob slows the contraction) (docs/langevin.md)",
            StepCapWarning,
            stacklevel=user_stacklevel(),  # the user's line, past decorators and fit()
        )
    x, y = xy
    k = size or 1
    values = run_chains(x, y, cal.r, sampler, k, rng, _family(model))
    value = np.array(values[0] if size is None else values, dtype=float)
    value.setflags(write=False)
    diagnostics = {
        "backend": ALGORITHM,
        "guarantee": "algorithm",
        "step": sampler["step"],
        "steps": sampler["steps"],
        "steps_capped": sampler["capped"],
        "chains": k,
    }
    return value, diagnostics
