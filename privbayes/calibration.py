"""Calibration: the largest knob (r or m) whose certified eps meets the target.

Generic over models: a model supplies ``eps_of(knob)`` (its certified sup over
neighbouring data sets at the requested order, computed from public inputs only) and the
knob value where that sup becomes infinite. We solve ``log eps_of(e^t) = log eps`` with
Brent's method in t = log(knob) — the curve is close to a straight line there (slope 2 for
r, 1 for m), so Brent converges in a handful of evaluations — and then step down until the
recomputed eps is <= the target, so the returned knob is always on the safe side.

The search runs on plain floats; the reported eps never does. :func:`certify_down` checks
the final knob with the model's proven upper bound (exact parameters, rigorous bounds and
interval arithmetic: docs/numerics.md) and steps down until that bound meets the target.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, special

from .capping import public_entry
from .errors import InfeasiblePrivacyError, PrivBayesError
from .kinds import register_calibration
from .validation import check_eps, check_lam, check_n

__all__ = [
    "Calibration",
    "calibrate",
    "certify_down",
    "check_target",
    "guarded",
    "GDP_BACKENDS",
    "knob_of",
    "ranks_above",
    "solve_knob",
]

UNDETERMINED = "undetermined (pass d)"  # Calibration.guarantee when d decides the back-end
_T_MIN = -690.0  # knobs down to ~1e-300
_MAX_BRENT_ITER = 100
_MAX_SAFETY_STEPS = 64
_MAX_BRACKET_STEPS = 200


@register_calibration  # so accounting can recognise it without importing this module
@dataclass(frozen=True, slots=True)
class Calibration:
    """A certificate: the mechanism's knobs and its privacy at order ``lam``.

    Attributes
    ----------
    method : "direct", "diffused", "concentrated" (or a GLM method).
    r, m : the likelihood weight and the prior divisor actually used (1.0 when unused).
    lam : the Rényi order the target was set at.
    eps : the certified eps at ``lam`` (nats): a proven upper bound on the exact sup over
        neighbouring data sets of what the sampler draws (docs/numerics.md), always
        <= ``target_eps``.
    target_eps : the eps that was asked for.
    n : the public data set size.
    pair : the worst neighbouring pair of (hypothetical) data sets at ``lam``, as count
        vectors — a fact about the mechanism, never about the data. None when n = 0.
    iterations : evaluations of the certified sup spent by the search.
    model : the (public) model, prior included.
    sampler : None when the certificate is for exact posterior draws; otherwise the public
        parameters of the randomized algorithm whose own output law it covers (Langevin:
        ``{"algorithm", "guarantee": "algorithm", "step", "steps", "start", "noise",
        "prec", "capped"}``, docs/langevin.md), passed to the model's ``rdp``.
    delta, dp_eps, dp_target : for an (eps, delta) target (``calibrate(..., eps=, delta=)``
        without ``lam``): the delta asked for, the certified eps of (eps, delta)-DP at that
        delta (<= ``dp_target``, the eps asked for) and, in ``lam`` / ``eps``, the order the
        search chose and the RDP eps there (docs/dp_target.md); None for an RDP target.
    dp_tv : with an (eps, delta) target, the failure allowance that target's conversion
        included (the exact GLM back-end's delta_f for one draw; 0 otherwise). Kept for
        reporting only: a Calibration composed into an accountant carries no allowance (a
        release's :class:`~privbayes.charges.Charge` does).
    """

    method: str
    r: float
    m: float
    lam: float
    eps: float
    target_eps: float
    n: int
    pair: dict | None
    iterations: int
    model: Any = field(repr=False)
    sampler: dict | None = None
    delta: float | None = None
    dp_eps: float | None = None
    dp_target: float | None = None
    dp_tv: float = 0.0

    @property
    def guarantee(self) -> str:
        """What the certificate covers for this mechanism's releases: "exact" (exact draws
        of the distribution it is proven for: conjugate models, the GLM exact back-end),
        "algorithm" (the law of the released algorithm itself: Langevin) or "approximate"
        (an MCMC draw; the certificate is for the exact posterior); "undetermined (pass
        d)" when :func:`calibrate` got a GLM with backend="auto" and no d (the back-end,
        hence the guarantee, depends on d)."""
        if getattr(self.model, "backend", None) == "auto":
            return UNDETERMINED  # calibrate() without d: the back-end is not chosen yet
        return getattr(self.model, "guarantee", "exact")

    @property
    def t(self) -> float | None:
        """OPS's tempering t (stored in ``r``, which the samplers read); None otherwise."""
        return self.r if self.method == "ops" else None

    def rdp(self, orders) -> np.ndarray:
        """Certified RDP curve eps(orders) of this mechanism (same r, m, n).

        ``orders``: scalar or array of orders >= 1 (1 gives the KL bound) or inf.
        Returns an array of the same shape, ``inf`` where no finite bound exists. Every
        value is a proven upper bound (docs/numerics.md); at ``lam`` itself it is at most
        ``eps`` (the smaller of two proven bounds).
        """
        extra = {} if self.sampler is None else {"sampler": self.sampler}
        curve = np.asarray(
            self.model.rdp(self.n, orders, r=self.r, m=self.m, method=self.method, **extra),
            float,
        )
        at_lam = np.asarray(orders, dtype=float) == self.lam
        return np.where(at_lam, np.minimum(curve, self.eps), curve)

    @property
    def gdp_bound(self):
        """The proven GDP bound of one draw (:class:`privbayes.accounting.GdpBound`: mu, a
        density allowance, tv = 0), None where no GDP guarantee is proven: exact GLM draws
        (with the exact back-end's rounding allowance when ``sampler`` carries it) and
        curves that are 0; docs/gdp.md §6."""
        from .gdp_release import calibration_gdp_bound

        return calibration_gdp_bound(self)

    @property
    def gdp(self) -> float | None:
        """mu when one draw of this mechanism is proven mu-GDP outright (no allowance),
        else None (docs/gdp.md §6): e.g. ``pb.calibrate`` of an exact-back-end GLM without
        d (the exact posterior's certificate); a release's plan adds an allowance, so its
        calibration reports None here and its bound in :attr:`gdp_bound`."""
        bound = self.gdp_bound
        return bound.mu if bound is not None and bound.exact else None

    def epsilon(self, delta: float | None = None) -> float:
        """eps of (eps, delta)-DP certified for one draw of this mechanism: its whole RDP
        curve converted by an accountant (improved conversion, refined over the order,
        rounded up; docs/accounting.md §5), or the GDP conversion of :attr:`gdp_bound`
        where it is proven and smaller (docs/gdp.md). ``delta``: default the target's
        ``delta`` (ValueError when there is none). At the target's delta it is <=
        ``dp_eps``."""
        from .dp_target import release_epsilon

        delta = _default_delta(delta, self.delta)
        return release_epsilon(self, delta, self.lam, (self.delta, self.dp_eps))


def _default_delta(delta, target) -> float:
    from .accounting.accountant import _check_delta

    if delta is None:
        if target is None:
            raise ValueError(
                "pass delta: this release was calibrated to an RDP target (lam, eps), which "
                "fixes no delta"
            )
        return target
    return _check_delta(delta)


GDP_BACKENDS = ("auto", "exact", "langevin")  # GLM back-ends whose releases carry a GDP bound


def ranks_above(cal, other) -> bool:
    """True when ``cal`` spends more than ``other``: a larger knob, or the same knob and a
    larger zCDP rho (a longer run at knob 1)."""
    a, b = knob_of(cal), knob_of(other)
    if a != b:
        return a > b
    return cal.eps / cal.lam > other.eps / other.lam


@public_entry  # KnobCappedWarning when the knob is capped far below the target (capping.py)
def calibrate(
    model,
    n,
    lam=None,
    eps=None,
    method: str = "diffused",
    *,
    delta: float | None = None,
    d: int | None = None,
) -> Calibration:
    """Calibrate ``method`` for ``model`` to (lam, eps)-RDP, or to (eps, delta)-DP, on data
    sets of size ``n``.

    Uses only public inputs: the model (its prior), n, lam, eps and the method.

    Parameters
    ----------
    model : a privbayes model (BetaBernoulli, DirichletCategorical, ...).
    n : int >= 0, the public number of records. n = 0 releases the prior (eps = 0).
    lam : float > 1 or inf, the Rényi order of an RDP target; omit it (None) with ``delta``.
    eps : float > 0, the target eps at ``lam`` (nats), or of (eps, delta)-DP with ``delta``.
    method : "direct", "diffused" (tunes r) or "concentrated" (tunes m); GLMs also "ops".
    delta : an (eps, delta)-DP target instead of an RDP one (``lam`` omitted), delta in
        [0, 1) (0: pure DP, order inf only). The order is chosen from public inputs and the
        knob is the largest that the improved conversion certifies at some order of a fine
        grid (docs/dp_target.md); the Calibration's ``lam`` and ``eps`` are that order and
        the RDP eps there, ``dp_eps`` <= ``eps`` the certified eps at ``delta``.
    d : GLMs only: the public number of features (with an intercept, counted). With
        backend="auto" the back-end is chosen from it (with n and the prior) as
        :func:`privbayes.sample` would, and the Calibration's ``model`` carries the chosen
        back-end; with any back-end the release's public checks run as in sample (the exact
        back-end's proposal budget for one draw: ExactInfeasibleError where sample would
        refuse). Without it the choice is
        undetermined (it depends on d): the Calibration's ``model`` keeps backend "auto",
        its ``guarantee`` is "undetermined (pass d)", and its knob and curve are those of
        exact posterior draws — the exact back-end's, and safe for Langevin too (that
        certificate also bounds Langevin's at the same knobs), though Langevin's own
        calibration may allow a slightly larger knob. With beta="auto" d is required
        (ValueError without it): the prior itself depends on d, so no certificate exists
        until d is known; beta is resolved from n and d as :func:`privbayes.sample`
        resolves it (``model.resolve_beta(n, d)``), and the Calibration's ``model``
        carries the number.

    Returns
    -------
    Calibration, with ``eps <= target`` guaranteed: ``eps`` is a proven upper bound on the
    exact sup over neighbouring data sets for the parameters the sampler uses, recomputed
    at the returned knob (docs/numerics.md).

    Raises
    ------
    InfeasiblePrivacyError (a ValueError) when the target cannot be met, saying what can.
    ValueError / TypeError for malformed arguments (and beta="auto" without d).

    Warns
    -----
    :class:`privbayes.KnobCappedWarning` when the knob is capped (r, m or t at 1, or at
    the largest value lam certifies) and the certified eps is below half the target,
    saying what to change (privbayes.capping).

    Source: paper §3 (boundary pairs, binary search); the reduction proof and the search are
    ours (docs/boundary.md).
    """
    if isinstance(model, type) or not hasattr(model, "_calibrate"):
        raise TypeError(f"model must be a privbayes model instance; got {model!r}")
    check_target(lam, eps, delta)
    if delta is not None:
        from .dp_target import check_delta_target, search

        n, eps, delta = check_n(n), check_eps(eps), check_delta_target(delta)
        score = lambda res: (knob_of(res[0]), res[0].eps)  # noqa: E731
        coarse = None  # GLMs with d: rank the orders without the release's plan (the exact
        # back-end's envelope costs ~0.5 s per order), then calibrate fully at the best
        if isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 1 and n > 0:
            base = model.resolve_beta(n, int(d)) if getattr(model, "beta_is_auto", False) else model

            def coarse(lam_: float, eps_: float):
                return _calibrate_rdp(base, n, lam_, eps_, method, None)

        found = search(
            lambda lam_, eps_: _calibrate_rdp(model, n, lam_, eps_, method, d),
            score,
            eps,
            delta,
            tv_of=lambda res: res[1],
            name=f"{type(model).__name__}/{method}",
            coarse_at=coarse,
        )
        (best, tv), dp_eps = found.result, found.dp_eps
        glm = isinstance(d, int | np.integer) and not isinstance(d, bool)
        if glm and getattr(model, "backend", None) in GDP_BACKENDS:  # docs/gdp.md §7
            from .dp_target import gdp_alternative
            from .gdp_release import release_gdp_bound

            alt = gdp_alternative(
                lambda lam_, eps_: _calibrate_rdp(model, n, lam_, eps_, method, d),
                lambda res: release_gdp_bound(res[0], None, res[1]),
                eps,
                delta,
            )
            if alt is not None and ranks_above(alt[0][0], best):
                (best, tv), dp_eps = alt
        return dataclasses.replace(
            best, delta=delta, dp_eps=dp_eps, dp_target=eps, dp_tv=float(tv or 0.0)
        )
    return _calibrate_rdp(model, n, lam, eps, method, d)[0]


def check_target(lam, eps, delta) -> None:
    """An RDP target (lam, eps) or an (eps, delta) target (lam omitted), not both."""
    if eps is None:
        raise TypeError("eps is required: (lam, eps) for an RDP target or (eps, delta) for DP")
    if delta is not None and lam is not None:
        raise TypeError(
            f"pass lam (an RDP target: eps at order lam) or delta (an (eps, delta)-DP target, "
            f"the order then chosen for you), not both; got lam={lam!r}, delta={delta!r}"
        )
    if delta is None and lam is None:
        raise TypeError("pass lam (an RDP target (lam, eps)) or delta (an (eps, delta) target)")


def knob_of(cal: Calibration) -> float:
    """The knob an (eps, delta) search maximises: r (diffused, OPS's t), m (concentrated),
    1 / sigma^2 (noise-aware), 1 (direct); larger is less noise."""
    sigma2 = getattr(cal.model, "sigma2", None) if cal.method == "noise-aware" else None
    return 1.0 / sigma2 if sigma2 else cal.r * cal.m


def coarse_calibration(model, n: int, lam: float, eps: float, method: str) -> Calibration:
    """A GLM's knob at (lam, eps) without the release's own plan (the exact back-end's
    rounding allowance and proposal budget): what :func:`calibrate` gives without d. Only
    for ranking orders in an (eps, delta) search; never what is released."""
    return _calibrate_rdp(model, n, lam, eps, method, None)[0]


def _calibrate_rdp(model, n, lam, eps, method, d) -> tuple[Calibration, float]:
    """:func:`calibrate` at an RDP target: (Calibration, the release's failure allowance)."""
    n, lam, eps = check_n(n), check_lam(lam), check_eps(eps)
    if d is not None:
        if not hasattr(model, "_resolve"):
            raise TypeError(f"d applies to GLM models only, not {type(model).__name__}")
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be an integer >= 1 (the number of features); got {d!r}")
        d = int(d)
        if n == 0:  # as sample(): a GLM's prior N(0, (n beta)^-1 I) is improper at n = 0
            raise ValueError(
                "n = 0: a GLM's prior N(0, (n beta)^-1 I) is improper at n = 0 (sample refuses "
                "empty data); calibrate for the n you will release"
            )
    if getattr(model, "beta_is_auto", False):  # the prior depends on d: none without it
        if d is None:
            raise ValueError(
                getattr(model, "needs_d_message", None)
                or "beta='auto' is resolved from the public n and d (beta = c^2 d / (n M^2), "
                "docs/glm.md): pass d, the number of weights with the intercept's column "
                "counted (sample() takes it from X's shape)"
            )
        model = model.resolve_beta(n, d)
    if getattr(model, "backend", None) == "auto":
        # without d: the certificate of exact posterior draws, which also bounds Langevin's
        # at the same knobs (docs/langevin.md, Theorem 1)
        # the Calibration keeps the "auto" model: its guarantee is undetermined until d is
        # known, and model.rdp of an "auto" model is the exact posterior's curve
        if d is None and not getattr(model, "resolves_without_d", False):
            exact_model = model.with_backend("exact")
            cal = guarded(
                lambda: exact_model._calibrate(n, lam, eps, method), model, n, lam, eps, method
            )
            # (OPS too: its one certified back-end, exact, may be infeasible for some d)
            return dataclasses.replace(cal, model=model), 0.0
        model = guarded(lambda: model._resolve(n, d, lam, eps, method), model, n, lam, eps, method)
    if d is not None:  # GLMs: as sample() calibrates the release (the exact back-end's
        # rounding allowance, docs/exact.md §7)
        cal = guarded(
            lambda: model._calibrate_release(n, d, lam, eps, method), model, n, lam, eps, method
        )
    else:
        cal = guarded(lambda: model._calibrate(n, lam, eps, method), model, n, lam, eps, method)
    tv = 0.0
    if d is not None and getattr(model, "backend", None) != "auto":
        # the checks sample() runs before any charge (e.g. the exact proposal budget)
        tv = guarded(lambda: model._check_release(n, d, cal, None), model, n, lam, eps, method)
    return cal, float(tv or 0.0)


# Messages of the arithmetic failures that Python, math and scipy report as ValueError or
# RuntimeError (the others are ArithmeticError: OverflowError, ZeroDivisionError, ...).
_ARITHMETIC_MESSAGES = (
    "math domain error",
    "math range error",
    "cannot convert float nan",
    "f(a) and f(b) must have different signs",
    "failed to converge",
)


def _arithmetic_failure(err: BaseException) -> bool:
    if isinstance(err, InfeasiblePrivacyError):
        return False
    if isinstance(err, ArithmeticError):
        return True
    if isinstance(err, ValueError | RuntimeError) and not isinstance(err, PrivBayesError):
        text = str(err).lower()
        return any(m in text for m in _ARITHMETIC_MESSAGES)
    return False


def guarded(step: Callable[[], Any], model, n: int, lam: float, eps: float, method: str):
    """``step()`` (a call of a model's ``_calibrate`` or ``_resolve`` at these inputs), with
    arithmetic failures inside the certificate or the search (overflow, division by zero,
    a math domain error, a root finder without a sign change) turned into
    InfeasiblePrivacyError naming the model and the inputs.

    The last line of defence: such a failure never yields a certified value (no
    Calibration is returned), and the caller gets the typed error the API promises. The
    models' certificates handle their own extremes; this catches what they miss.
    """
    try:
        return step()
    except Exception as err:
        if not _arithmetic_failure(err):
            raise
        raise InfeasiblePrivacyError(
            f"{model!r} cannot certify method={method!r} at n={n}, lam={lam:g}, eps={eps:g}: "
            f"its certificate is not computable in floating point at these public inputs "
            f"({type(err).__name__}: {err}). Use less extreme prior parameters, a "
            "different eps or lam, or another method",
            reachable={"inputs": "less extreme", "model": type(model).__name__},
        ) from err


def certify_down(
    knob: float,
    certify: Callable[[float], tuple],
    eps: float,
    name: str,
    slope: float = 1.0,
    floor: float = 0.0,
) -> tuple[float, tuple, int]:
    """Shrink ``knob`` until its certificate ``certify(knob)[0]`` is <= ``eps``.

    The final guard of every calibration: whatever found the knob (closed form, Brent on
    floats), the certificate is the proven upper bound that the Calibration reports.
    ``slope`` ~ d log eps / d log knob sizes the first step from the measured excess; steps
    then double. ``floor``: the smallest admissible knob. Returns (knob, certify(knob),
    evaluations); InfeasiblePrivacyError when even the floor does not certify.
    """
    delta, value = 0.0, math.inf
    for k in range(_MAX_SAFETY_STEPS):
        res = certify(knob)
        value = float(res[0])
        if value <= eps and knob > 0:
            return float(knob), res, k + 1
        if knob <= floor or knob <= 0:
            raise InfeasiblePrivacyError(
                f"eps={eps:g} is below the smallest eps this mechanism certifies, "
                f"{value:.6g} (at {name}={knob:.3g}, the smallest usable); ask for eps >= "
                f"{value:.6g}",
                reachable={"min_eps": value},
            )
        excess = value / eps - 1.0 if math.isfinite(value) else 1.0
        delta = min(0.5, max(2.0 * delta, 1.5 * excess / slope + 2.0**-50))
        knob = max(knob * (1.0 - delta), floor)
    if not math.isfinite(value):
        # no finite certificate anywhere on the way down: more eps would not help
        raise InfeasiblePrivacyError(
            f"no {name} down to {knob:.3g} gives a finite certified eps for these public "
            "inputs (the prior is too extreme for this mechanism's certificate); try another "
            "method or less extreme prior parameters",
            reachable={"min_eps": value, "method": "another"},
        )
    raise InfeasiblePrivacyError(
        f"eps={eps:g} needs a {name} below what floating point can certify; ask for more eps",
        reachable={"eps": "larger", "min_eps": value},
    )


def step_down(
    knob: float, certify: Callable[[float], float], eps: float, name: str
) -> tuple[float, float]:
    """:func:`certify_down` for a certificate that returns a single float: (knob, eps)."""
    knob, res, _ = certify_down(knob, lambda v: (float(certify(v)),), eps, name)
    return knob, float(res[0])


def solve_knob(
    eps_of: Callable[[float], float],
    eps: float,
    cap: float,
    slope: float,
    knob_name: str,
    rel_step: Callable[[float], float] | None = None,
) -> tuple[float, float, int]:
    """Largest knob in (0, 1] with ``eps_of(knob) <= eps``; returns (knob, eps_of(knob), evals).

    ``eps_of`` must be finite on (0, cap), where it grows from 0 (checked numerically for
    the conjugate models, docs/background.md §3) and, when cap <= 1, blows up like
    -log(cap - knob) at the cap. ``slope`` is d log eps / d log knob for small knobs.

    We search in w with knob = e^w (cap > 1) or knob = cap * expit(w) (cap <= 1): log eps is
    close to linear in w at both ends, so secant steps bracket the root in two or three
    evaluations and Brent's method finishes in a few more. The returned knob is within
    1e-12 relative of the root (or, when the root lies within 2^-20 of the cap, the knob
    cap * (1 - 2^-20): closer in, the parameters' own rounding would dominate the
    certificate) and its recomputed eps is <= ``eps``. ``rel_step(knob)``: the relative
    resolution of the knob (the conjugate models' exact-parameter grid, docs/numerics.md):
    ``eps_of`` is a staircase on that scale, so the search stops there (within one step).
    """
    memo: dict[float, float] = {}  # Brent re-evaluates its bracket ends

    def ev(knob: float) -> float:
        if knob not in memo:
            value = float(eps_of(knob))
            memo[knob] = math.inf if math.isnan(value) else value  # never certify from NaN
        return memo[knob]

    if cap > 1.0:
        to_knob, w_hi = math.exp, 0.0
    else:

        def to_knob(w: float) -> float:
            return float(cap * special.expit(w))

        # knob = cap * (1 - 2^-20): closer to the pole the parameters' own rounding
        # dominates the certificate, and the knob would gain less than 1e-6
        w_hi = 20.0 * math.log(2.0)
    hi = to_knob(w_hi)
    e_hi = ev(hi)
    if e_hi <= eps:
        return hi, e_hi, len(memo)

    log_eps = math.log(eps)

    lowest = [math.inf]  # the smallest w seen with a finite eps

    def f(w: float) -> float:
        e = ev(to_knob(w))
        if e < math.inf:
            lowest[0] = min(lowest[0], w)
        # e = 0 certifies any eps > 0: a finite value below 0, whatever eps
        return (math.log(e) - log_eps) if e > 0 else -1e3

    def floor_or_raise():
        """(w, f(w)) at the smallest knob with a finite eps, if it certifies; else raise.

        Below some knob the sampler's parameters may overflow (or the knob underflow to 0),
        where nothing is certified: the floor is where the eps becomes finite (bisection)."""
        w_fin = lowest[0]
        if w_fin < math.inf and ev(to_knob(_T_MIN)) == math.inf:
            w_inf = _T_MIN
            for _ in range(60):
                mid = 0.5 * (w_inf + w_fin)
                if ev(to_knob(mid)) < math.inf:
                    w_fin = mid
                else:
                    w_inf = mid
        else:
            w_fin = _T_MIN
        floor = ev(to_knob(w_fin))
        if floor <= eps and to_knob(w_fin) > 0:
            return w_fin, f(w_fin)
        if floor == math.inf:
            raise InfeasiblePrivacyError(
                f"no {knob_name} gives a finite certified eps for these public inputs (the "
                "sampler's parameters overflow first); try another method or less extreme "
                "prior parameters",
                reachable={"min_eps": floor, "method": "another"},
            )
        raise InfeasiblePrivacyError(
            f"eps={eps:g} is below what any {knob_name} certifies ({floor:.6g}, at "
            f"{knob_name}={to_knob(w_fin):.3g}, the smallest usable); ask for eps >= "
            f"{floor:.6g}",
            reachable={"min_eps": floor},
        )

    # Probe the middle of the range first (far from the cap's singularity), then take
    # power-law and secant steps in w; those after the second overshoot by half, so
    # consecutive points fall on either side of the root and the bracket is tight.
    w_prev, f_prev = w_hi, math.log(e_hi) - log_eps
    lo, up = None, (w_prev, f_prev)  # best points with f <= 0 and f > 0
    w, steps, stall = (0.0 if cap <= 1.0 else -math.log(2.0)), 0, 0
    while steps < _MAX_BRACKET_STEPS:
        steps += 1
        w = min(max(w, _T_MIN), w_hi)
        f_w = f(w)
        if f_w <= 0:
            lo = (w, f_w) if lo is None or w > lo[0] else lo
        else:
            up = (w, f_w) if w < up[0] and f_w < math.inf else up
            if w <= _T_MIN:
                break
        if f_w == 0 or (steps > 1 and (f_w <= 0) != (f_prev <= 0)):
            break
        s = slope
        if steps > 1 and w != w_prev and math.isfinite(f_w) and math.isfinite(f_prev):
            s = min(max((f_w - f_prev) / (w - w_prev), slope * 1e-3), 10 * slope)
        move = (1.5 if steps > 1 else 1.0) * f_w / s
        if not math.isfinite(move):  # an infinite eps: halve the knob's log-distance
            move = max(1.0, 0.5 * (w - _T_MIN))
        # a root within rounding of w (f_w a few ulps above 0) would give a step that
        # leaves w unchanged: move at least a growing minimum, in the step's direction
        least = 2.0**-40 * max(1.0, abs(w)) * 2.0**stall
        if abs(move) < least:
            move, stall = math.copysign(least, f_w), stall + 1
        w_prev, f_prev, w = w, f_w, w - move
    if lo is None:
        # no certified point met on the way: the smallest usable knob is the last resort
        lo = floor_or_raise()
    w = lo[0]
    step = 0.0 if rel_step is None else rel_step(to_knob(lo[0]))
    if lo[1] != 0:
        # half a grid step of the knob, in w: d log(knob) / dw = 1 (cap > 1) or 1 - knob/cap
        k_lo = to_knob(lo[0])
        dlog = 1.0 if cap > 1.0 else max(1.0 - k_lo / cap, 2.0**-40)
        w = optimize.brentq(
            lambda v: min(max(f(v), -1e3), 1e3),  # finite, same sign (up may be a pole)
            lo[0],
            up[0],
            xtol=max(1e-13, 0.5 * step / dlog),
            rtol=4 * np.finfo(float).eps,
            maxiter=_MAX_BRENT_ITER,
        )
    knob = min(to_knob(w), hi)
    achieved = ev(knob)
    # Brent returns the better end of its bracket, which may sit above the root.
    for k in range(_MAX_SAFETY_STEPS):
        if achieved <= eps:
            return knob, achieved, len(memo)
        knob *= 1.0 - max(2.0 ** (k - 52), step * 2.0**k)
        achieved = ev(knob)
    knob = to_knob(lo[0])  # the bracket's safe end; always certified
    return knob, ev(knob), len(memo)
