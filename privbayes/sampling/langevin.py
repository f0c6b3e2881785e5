"""Certified noisy gradient descent (unadjusted Langevin) for Gaussian-prior GLMs.

Written below for binary logistic regression; any GLM family (privbayes.glm.family)
runs the same way with its own loss gradient, its sensitivity G (s = eta r G) and its
curvature bound k (L = r n c^2 k + prec): softmax regression in docs/multinomial.md §4.

The mechanism (docs/langevin.md): with U(w) = r sum_i log(1 + exp(-y_i x_i.w)) + (prec/2)||w||^2
(prec the sampler's own public precision: the prior's n beta / m for the "stationary"
schedule; for "utility" 0 with diffused and direct, n beta (1/m - 1) with concentrated),
run from the fixed start w_0 = 0

    w_{k+1} = w_k - eta grad U(w_k) + noise * N(0, I_d),    k = 0, ..., K - 1,

and release w_K; each release is the final state of its own chain. The gradients of B chains
are one pass over X: X^T (y * sigmoid(-y * X W)), two matrix products.

Its certificate is for the law of w_K itself, not for the posterior, so nothing about
convergence gates a release. Theorem 1 of docs/langevin.md (shifted Rényi divergences:
privacy amplification by iteration) gives, for every order lam >= 1,

    eps(lam) = lam * rho,
    rho = s^2 / (2 noise^2) * F(kappa, K),
    F(kappa, K) = (1 + kappa)(1 - kappa^K) / ((1 - kappa)(1 + kappa^K)),

with s = 2 eta r c (how far the two neighbours' gradient steps can move a point) and
kappa = 1 - eta prec (their contraction factor; F(1, K) = K, the K-fold Gaussian
composition), valid when eta (2 prec + r n c^2 / 4) <= 2. From the start 0 the first
gradient difference is at most r c, half of 2 r c, and the certificate takes the smaller of
Theorem 1 and (s0^2 + s^2 F(kappa, K - 1)) / (2 noise^2), s0 = s / 2 (§4). ``certificate``
evaluates it in exact rational arithmetic of the floats the sampler uses and rounds up.

The step and the number of steps follow a public rule (``schedule``): eta = h * 2 / (mu + L)
(h = ``step_scale``, default 1/2, so eta is about 1/L) and K by one of two named rules
(``kind``, docs/langevin.md §6):

* "utility" (the models' default): no pull from the model's prior (prec = 0 for diffused
  and direct; concentrated pulls with the extra precision n beta (1/m - 1) its knob adds),
  and K = ceil(1 / (2 eta p)), p = n beta / m: noisy gradient descent on the r-weighted loss
  from 0 (the prior mean), stopped where a stated excess-risk bound (bias of stopping early
  at the prior's scale + the spread the privacy noise leaves) is smallest. In DP-GD's units
  it is DP-GD (step 1/L on the mean loss, Gaussian noise on each step) with the first step
  charged a quarter; *not* an approximate posterior draw. At knob 1 (r = m = 1)
  calibration runs it as long as the target allows, up to the stationary rule's K;
* "stationary": the chain of the tempered posterior (prec = n beta / m) run for the
  smallest K with kappa^K <= TAU (the start forgotten to 1%), whose output approximates
  the chain's stationary law, a posterior draw.

Both are capped at ``max_steps``; the certificate holds for every K, and its guarantee is
"algorithm" either way. Nothing depends on the data but n.
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
from ..glm.steps import parsed, shifts
from ..validation import user_stacklevel
from .imh import _threads

ALGORITHM = "langevin"
TAU = 1e-2  # K: the smallest number of steps with kappa^K <= TAU (start forgotten to 1%)
STEP_SCALE = 0.5  # eta = STEP_SCALE * 2 / (mu + L): about 1/L
MAX_STEPS = 10_000
UTILITY = "utility"  # no prior pull, K = ceil(1 / (2 eta p)): the bound's minimiser (§6)
STATIONARY = "stationary"  # K = smallest with kappa^K <= TAU: a draw near the posterior
SCHEDULES = (UTILITY, STATIONARY)
SCHEDULE = UTILITY  # the models' default
UTILITY_DIVISOR = 2  # utility K = ceil(1 / (UTILITY_DIVISOR eta p)) (docs/langevin.md §6)
_BITS = 256  # kappa^K is bounded below on a 2^-256 grid (a smaller power only costs 2^-255)
_CHAIN_BATCH = 256  # chains per pass over X
# X is stored column-major: the two products per step then cost 0.5x (one chain) to 0.9x
# (64 chains) of their row-major CPU time (measured single-threaded, Adult-sized)


# -- the public rule ------------------------------------------------------------------------
def _step(prec: float, curv: Fraction, step_scale: float) -> float:
    """eta = step_scale * 2 / (2 prec + curv), nudged down until eta (2 prec + curv) <= 2
    holds exactly (curv = r n k_c, the data part of L, exact)."""
    eta = 2.0 * step_scale / (2.0 * prec + float(curv))
    lipschitz_sum = 2 * Fraction(prec) + curv  # mu + L
    for _ in range(64):
        if eta > 0 and Fraction(eta) * lipschitz_sum <= 2:
            break
        eta = math.nextafter(eta, 0.0)
    if not (eta > 0 and math.isfinite(eta) and math.sqrt(2.0 * eta) > 0):
        raise ValueError(f"the step size eta = {eta!r} is not representable")
    return eta


def schedule(
    n: int,
    beta: float,
    c: float,
    r: float,
    m: float,
    step_scale: float = STEP_SCALE,
    max_steps: int = MAX_STEPS,
    family=None,
    kind: str = STATIONARY,
) -> dict:
    """The sampler's public parameters for data sets of size ``n`` (no data involved).

    ``kind`` (docs/langevin.md §6):

    * "stationary" (this function's default): the chain of the tempered posterior, with
      the prior's precision prec = n beta / m, run for the smallest K >= 1 with
      kappa^K <= TAU (a draw near its stationary law);
    * "utility": noisy gradient descent on the r-weighted loss from 0 with *no* pull
      from the model's prior (prec = n beta (1/m - 1): 0 for diffused and direct, kappa = 1;
      for concentrated the extra precision the concentration adds), stopped at
      K = ceil(1 / (2 eta0 p)), eta0 the no-pull step 2 h / (r n c^2 k) and p = n beta / m
      the (concentrated) prior's precision: the
      minimiser of the stated excess-risk bound whose comparator scale is the prior's,
      B^2 = d / p.

    Both at most ``max_steps``. ``family``: the GLM family (default binary logistic), whose
    Hessian-weight bound k (``family.curvature``: 1/4 binary, 1/2 multinomial) gives
    L = r n c^2 k + prec. ``c`` is the certified feature bound (the model's c with its
    validation slack). Returns ``{"algorithm": "langevin", "guarantee": "algorithm",
    "step": eta, "steps": K, "start": 0.0, "noise": sqrt(2 eta) as used, "prec": the
    iteration's precision as used (0.0 for "utility" at m = 1), "capped": bool,
    "schedule": kind}``;
    ``start`` 0.0 is the zero vector. eta = step_scale * 2 / (2 prec + L_data), nudged down
    until the contraction condition eta (2 prec + r n c^2 k) <= 2 holds exactly; ``capped``
    says the cap bound. Raises ValueError when the parameters are not representable (a
    prior precision that overflows, a step that underflows).
    """
    if kind not in SCHEDULES:
        raise ValueError(f"kind must be one of {SCHEDULES}; got {kind!r}")
    prior_prec = n * beta / m
    if not (math.isfinite(prior_prec) and prior_prec > 0):
        raise ValueError(
            f"the prior precision n beta / m = {prior_prec!r} is not a positive double"
        )
    k_c = (BINARY_LOGISTIC if family is None else family).curvature_bound(Fraction(c))
    curv = Fraction(r) * n * k_c  # data part of L, exact
    # utility: no pull from the prior itself, only the extra precision concentration adds
    # (0 at m = 1), so that the concentrated knob still reaches every eps > 0 (§6)
    prec = n * beta * (1.0 / m - 1.0) if kind == UTILITY else prior_prec
    eta = _step(prec, curv, step_scale)
    noise = math.sqrt(2.0 * eta)
    if kind == UTILITY:  # the bound's minimiser at the prior's scale (§6), on the data's
        # time scale (the no-pull step), so K grows with the knob whatever the pull
        eta0 = eta if prec == 0.0 else _step(0.0, curv, step_scale)
        needed = 1.0 / (UTILITY_DIVISOR * eta0 * prior_prec)
    else:
        rate = -math.log1p(-eta * prec)  # -log kappa > 0 (inf when kappa = 0)
        needed = math.log(1.0 / TAU) / rate if rate > 0 else math.inf
    wanted = max_steps + 1 if not needed <= max_steps else max(1, math.ceil(needed))
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
        "schedule": kind,
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


def _spread(kappa: Fraction, steps: int) -> Fraction:
    """An upper bound on F(kappa, j) = (1 + kappa)(1 - kappa^j) / ((1 - kappa)(1 + kappa^j))
    = S^2 / Q (S, Q the sums of kappa^i, kappa^2i over i < j): j at kappa = 1, 0 at j = 0.
    F decreases in kappa^j, which is bounded below (``_pow_lower``)."""
    if steps == 0:
        return Fraction(0)
    if kappa == 1:
        return Fraction(steps)
    t = _pow_lower(kappa, steps)
    return (1 + kappa) * (1 - t) / ((1 - kappa) * (1 + t))


def certificate(sampler: dict, n: int, r: float, c: float, family=None) -> float:
    """rho with eps(lam) <= lam * rho for every order lam >= 1, rounded up.

    rho = min(Theorem 1, the first-step bound) of docs/langevin.md §4:
    s^2 F(kappa, K) / (2 noise^2) and, from the start 0, (s0^2 + s^2 F(kappa, K - 1)) /
    (2 noise^2), with s = eta r G, s0 = eta r G0 (G0 the gradient sensitivity at 0,
    ``family.start_sensitivity_sq``) and kappa = 1 - eta prec; at prec = 0 (kappa = 1)
    F(1, K) = K, the K-fold Gaussian composition.

    ``sampler``: the dict from :func:`schedule` (step, steps, noise, prec, start are used,
    as the exact rationals of their doubles), ``n`` the public size, ``r`` the likelihood
    weight, ``c`` the certified feature bound. The contraction condition
    step * (2 prec + r n c^2 k) <= 2 is checked exactly. kappa^j is bounded from below (the
    bound decreases in it), every other operation is exact, and the result is the smallest
    double >= the exact bound. ``family`` (default binary logistic) supplies G^2 =
    ``gradient_sensitivity_sq(c)``, G0^2 and the curvature k. Raises ValueError when the
    condition fails or a parameter is not a positive number (prec may be 0).
    """
    fam = BINARY_LOGISTIC if family is None else family
    eta, noise, prec, start, steps = parsed(sampler)
    if eta * (2 * prec + Fraction(r) * n * fam.curvature_bound(Fraction(c))) > 2:
        raise ValueError(
            "the step violates the contraction condition eta (mu + L) <= 2 "
            f"(eta = {float(eta):g}, mu = {float(prec):g}, L = r n c^2 k + mu): "
            "Theorem 1 of docs/langevin.md does not apply"
        )
    kappa = 1 - eta * prec  # in (0, 1] under the condition
    s2, s02 = shifts(eta, r, c, fam, start)
    spread = s2 * _spread(kappa, steps)
    if start == 0.0:  # both chains take their first step from 0: shift s0 <= s (§4)
        spread = min(spread, s02 + s2 * _spread(kappa, steps - 1))
    return _round_up(spread / (2 * noise * noise))


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
    _refuse_ops(method, model)
    fam = _family(model)
    lam = np.asarray(orders, dtype=float)
    if sampler is None:
        sampler = schedule(
            n, model.beta, model._c_cert(), r, m, model.step_scale, model.max_steps, fam,
            _kind(model),
        )  # fmt: skip
    return curve(lam, certificate(sampler, n, r, model._c_cert(), fam))


def _family(model):
    """The model's GLM family (binary logistic regression when it declares none)."""
    return getattr(model, "family", None) or BINARY_LOGISTIC


def _kind(model) -> str:
    """The model's named step rule ("utility" or "stationary")."""
    return getattr(model, "schedule", None) or SCHEDULE


def _longest_run(sched: dict, longest: dict, fits) -> dict:
    """The utility schedule ``sched`` at knob 1 run for the largest K in
    [sched["steps"], longest["steps"]] with ``fits(sampler)`` (the certificate meets the
    target; non-decreasing in K, §5), by bisection over the integers."""
    lo, hi = int(sched["steps"]), int(longest["steps"])
    if hi <= lo or not fits(dict(sched, steps=lo)):
        return sched
    if fits(dict(sched, steps=hi)):
        return dict(sched, steps=hi, capped=longest["capped"], extended=True)
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(dict(sched, steps=mid)):
            lo = mid
        else:
            hi = mid
    return dict(sched, steps=lo, capped=False, extended=lo > int(sched["steps"]))


def _exact_alternative(model) -> str | None:
    """The model's back-end with exact draws (OPS, a finite eps at lam = inf), if any: "imh"
    for the logistic families, "exact" for linear regression, None for Poisson."""
    backends = getattr(model, "backends", ("imh",))
    return next((b for b in ("imh", "exact") if b in backends), None)


def _refuse_ops(method: str, model=None) -> None:
    if method == "ops":
        alt = _exact_alternative(model)
        raise ValueError(
            "method='ops' is not available with backend='langevin': OPS certifies exact "
            "draws from a truncated posterior, and Langevin's certificate is for its own "
            "K-step output law. Use method='diffused', 'concentrated' or 'direct'"
            + (f", or backend={alt!r} for OPS" if alt else "")
        )


def calibrate(model, n: int, lam: float, eps: float, method: str) -> Calibration:
    """Largest knob (r for diffused, m for concentrated; none for direct) whose Langevin
    certificate at ``lam`` is <= ``eps``, with the public schedule at that knob.

    Public inputs only: n, the model's beta, c, step_scale and max_steps, lam, eps, method.
    Raises ValueError for method="ops", InfeasiblePrivacyError at lam = inf (Gaussian noise
    has no finite pure-DP bound) or when direct cannot meet eps (saying what it reaches).
    """
    _refuse_ops(method, model)
    if n == 0:  # nothing to protect: the release ignores the (empty) data
        return Calibration(method, 1.0, 1.0, lam, 0.0, eps, 0, None, 0, model)
    if eps == 0:
        raise InfeasiblePrivacyError(
            "eps=0 needs a release that ignores the data: sample from the prior instead",
            reachable={"eps": "> 0"},
        )
    if math.isinf(lam):
        alt = _exact_alternative(model)
        hint = {"imh": ", or use backend='imh' with method='ops'",
                "exact": ", or use backend='exact'"}.get(alt, "")  # fmt: skip
        raise InfeasiblePrivacyError(
            "backend='langevin' has no finite eps at lam=inf (Gaussian noise gives no pure DP; "
            f"its curve grows like lam); ask for a finite lam{hint}",
            reachable={"lam": "finite"},
        )
    c = model._c_cert()
    fam = _family(model)
    kind = _kind(model)
    evals = 0

    def rule(r: float, m: float, which: str = kind) -> dict:
        return schedule(n, model.beta, c, r, m, model.step_scale, model.max_steps, fam, which)

    def certified(knob: float) -> float:
        nonlocal evals
        evals += 1
        r, m = mechanisms.knobs(method, knob)
        try:
            sched = rule(r, m)
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
    sched = rule(r, m)
    if kind == UTILITY and knob < 1.0 and achieved < eps * (1.0 - 1e-6):
        # K(knob) is an integer: where its jump stopped the knob short of eps (by up to 5x
        # at K = 1 -> 2, the first step being charged a quarter), raise the knob at the K
        # found; the certificate at a fixed K is non-decreasing in the knob, and the bound
        # only improves (same K, larger r or m; docs/langevin.md §6, "Filling"); a fill that
        # reaches knob 1 is then lengthened like any run at knob 1, below
        steps = int(sched["steps"])

        def at_steps(kn: float) -> float:
            nonlocal evals
            evals += 1
            rr, mm = mechanisms.knobs(method, kn)
            try:
                run = dict(rule(rr, mm), steps=steps, capped=sched["capped"])
            except ValueError:
                return math.inf
            return float(curve(lam, certificate(run, n, rr, c, fam)))

        lo, hi = math.log(knob), 0.0
        if at_steps(1.0) <= eps:
            lo = 0.0
        else:
            for _ in range(60):  # bisection in log-knob: at_steps(e^lo) <= eps < at_steps(e^hi)
                mid = 0.5 * (lo + hi)
                if at_steps(math.exp(mid)) <= eps:
                    lo = mid
                else:
                    hi = mid
        better = min(1.0, math.exp(lo))
        got = at_steps(better)
        if better > knob and got <= eps:
            knob, achieved = better, got
            r, m = mechanisms.knobs(method, knob)
            sched = dict(rule(r, m), steps=steps, capped=sched["capped"], filled=True)
    if kind == UTILITY and knob == 1.0:
        # r = m = 1 leaves nothing to trade: a longer run only lowers the bound's bias
        # (docs/langevin.md §6), so run as long as the target allows, up to the stationary
        # rule's K at this knob (a public length: beyond it the bias is < 1/9 of the noise)

        def fits(sampler: dict) -> bool:
            nonlocal evals
            evals += 1
            return float(curve(lam, certificate(sampler, n, r, c, fam))) <= eps

        sched = _longest_run(sched, rule(r, m, STATIONARY), fits)
        achieved = float(curve(lam, certificate(sched, n, r, c, fam)))
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
    if sampler["capped"] and sampler.get("schedule") == UTILITY:  # public
        warnings.warn(
            f"backend='langevin' hit its step cap: the utility schedule's rule asks for more "
            f"than max_steps={sampler['steps']} steps, so the run stops before the bound's "
            "optimum (the privacy certificate holds for the run made). What helps: a larger "
            "cap (max_steps= of the model or of PrivateLogisticRegression, --max-steps on "
            "the command line; at most 10**7), or a larger beta (docs/langevin.md §6)",
            StepCapWarning,
            stacklevel=user_stacklevel(),
        )
    elif sampler["capped"]:  # public: known before the data are read
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
        "schedule": sampler.get("schedule", STATIONARY),
        "chains": k,
    }
    return value, diagnostics
