"""Bayesian logistic regression with a Gaussian prior (docs/glm.md, docs/background.md §4).

Prior w ~ N(0, (n beta)^-1 I) in R^d, loss log(1 + exp(-y w.x)), labels y in {-1, +1}
(0/1 accepted), features ||x||_2 <= c. The posterior is n beta-strongly log-concave and a
replaced record changes the log-density by a 2c-Lipschitz function, which gives (our
derivation, docs/glm.md) the zCDP-type curves

    direct        eps(lam) = 2 lam c^2 / (n beta)
    diffused      eps(lam) = 2 lam c^2 r^2 / (n beta)     (likelihood ** r)
    concentrated  eps(lam) = 2 lam c^2 m / (n beta)       (prior precision n beta / m)

and, for OPS (Wang, Fienberg, Smola 2015: prior truncated to ||w|| <= R, likelihood ** t),
pure eps0-DP with eps0 = 2 t c R, converted to RDP by the tight formula.

Certificates are proven upper bounds for the floats the samplers use (docs/numerics.md §8):
the closed forms are evaluated in exact rationals at the float prior precision n*beta/m and
weight r, then rounded up; c and R are enlarged to cover the rounding of the float norms
that decide ||x|| <= c (here) and ||w|| <= R (the OPS samplers); OPS's pure-DP curve is
evaluated in interval arithmetic.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
from scipy import optimize

from .. import mechanisms
from ..accounting.curves import pure_dp_rdp
from ..calibration import Calibration, certify_down
from ..certified import pure_dp_rdp_upper, round_down, round_up
from ..errors import InfeasiblePrivacyError
from ..frozen import Frozen
from ..glm.family import BINARY_LOGISTIC
from ..glm.passes import MAX_FEATURES
from ..validation import check_n, check_positive, check_unit_knob

GLM_METHODS = ("direct", "diffused", "concentrated", "ops")
# What each back-end's certificate covers (README, "Which guarantee a release carries"):
# "exact": every release is an exact draw of the (tempered) posterior, the law the
# certificate is proven for; "algorithm": the certificate bounds the released algorithm's
# own output law; "approximate": an MCMC draw, whose law is only near the posterior.
GUARANTEE = {"exact": "exact", "langevin": "algorithm", "imh": "approximate", "pymc": "approximate"}
BACKENDS = ("auto", *GUARANTEE)
# MCMC settings per back-end: IMH steps are cheap and its chains forget their start in a
# few steps (docs/glm.md); the burn-in is raised further from the estimated weight bound.
BACKEND_DEFAULTS = {
    "imh": {"tune": 20, "draws": None, "chains": 4},
    "pymc": {"tune": 1000, "draws": 1000, "chains": 4},
}
# Options that apply to some back-ends only; one given with another back-end is refused.
# "auto" resolves to "exact" or "langevin" from public inputs (never an MCMC back-end): the
# exact options configure its exact candidate and the Langevin options its Langevin
# candidate, both enter the choice (e.g. max_proposals decides whether exact can run), and
# the chosen back-end uses its own. The MCMC options are refused with "auto".
OPTION_BACKENDS = {
    "tune": ("imh", "pymc"),
    "draws": ("imh", "pymc"),
    "chains": ("imh", "pymc"),
    "reruns": ("imh", "pymc"),
    "target_accept": ("pymc",),
    "proposal_scale": ("imh",),
    "delta_f": ("exact", "auto"),
    "max_proposals": ("exact", "auto"),
    "step_scale": ("langevin", "auto"),
    "max_steps": ("langevin", "auto"),
    "schedule": ("langevin", "auto"),
}
# sample()'s options that apply to some back-ends only (on_bad_diagnostics: its "warn";
# "raise", the default, is what every other back-end does anyway)
CALL_OPTION_BACKENDS = {"progressbar": ("pymc",), "on_bad_diagnostics": ("imh", "pymc")}
# Langevin's public step-count rules (privbayes.sampling.langevin.SCHEDULES; the first is
# the default): "utility" stops early (a classifier), "stationary" runs to a posterior draw
LANGEVIN_SCHEDULES = ("utility", "stationary")
MAX_DELTA_F = 1e-3  # the exact back-end's failure probability is added to delta: keep it small
IMH_MAX_TUNE = 100_000  # privbayes.sampling.imh.MAX_TUNE (kept here: no import at build)
NORM_SLACK = 1e-12  # relative slack on ||x|| <= c, for rows scaled to the sphere exactly
PREC_MAX = 1e200  # largest prior precision n beta / m the samplers are trusted with
_U = Fraction(1, 2**53)


def _norm_error(d: int) -> Fraction:
    """Relative bound on how far a float 2-norm in d dims can fall below the true norm.

    sqrt(fl(sum fl(x_i^2))) >= ||x|| sqrt((1-u)(1-gamma_{d-1})) (1-u) for any summation
    order (positive terms), so ||x|| <= fl-norm (1 + (d+2) u) for d <= 2^24; the extra
    2^-160 covers squares lost to underflow when the bound is >= 1e-100 (docs/numerics.md §8).
    """
    return (d + 2) * _U + Fraction(1, 2**160)


def _scale(value, name: str) -> float:
    """beta, c, R: finite, > 0, and with squares that neither overflow nor vanish."""
    v = check_positive(value, name)
    if not 1e-100 <= v <= 1e100:
        raise ValueError(f"{name} must lie in [1e-100, 1e100]; got {v!r}")
    return v


MARGIN_SCALE = 10.0  # beta="auto"'s default public scale M of the margins |w.x| (docs/glm.md)
AUTO = "auto"


def auto_beta(n: int, d: int, c: float, margin_scale: float = MARGIN_SCALE) -> float:
    """The public rule for the prior precision: beta = c^2 d / (n M^2).

    ``n``: the public number of records (int >= 1); ``d``: the number of weights per class,
    the intercept's column counted (int >= 1; binary: the length of w, softmax: the rows
    of W); ``c``: the row-norm bound (with an intercept, of the row [x, s]);
    ``margin_scale`` M > 0: the stated public scale of the margins |w.x| (softmax: of each
    class's score x.W_k), default :data:`MARGIN_SCALE` = 10. Public inputs only, never the
    data. Evaluated in float64 as ``c * c * d / (n * M * M)``.

    The prior N(0, (n beta)^-1 I) then has n beta = c^2 d / M^2, whatever n: E||w||^2 =
    (M / c)^2, i.e. margins of order M for rows of norm c. It minimises a bound on the
    excess risk of a diffused release (bias + spread over every spectrum the data's Hessian
    could have), and it does not depend on eps: the target enters through the knob r
    (docs/glm.md, "Choosing beta"; the rule of the peers study, experiments/README.md).

    Raises TypeError / ValueError for a bad argument, and ValueError when beta falls outside
    [1e-100, 1e100] (the range every model accepts).
    """
    from ..validation import check_n

    if check_n(n) < 1:
        raise ValueError("n must be >= 1 for beta='auto' (the prior N(0, (n beta)^-1 I))")
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d must be an integer >= 1 (the number of weights); got {d!r}")
    c = check_positive(c, "c")
    m = check_positive(margin_scale, "margin_scale")
    beta = c * c * int(d) / (n * m * m)
    if not 1e-100 <= beta <= 1e100:
        raise ValueError(
            f"beta='auto' gives beta = c^2 d / (n M^2) = {beta!r} for n={n}, d={d}, c={c!r}, "
            f"M={m!r}, outside [1e-100, 1e100]; choose a less extreme margin_scale or pass beta"
        )
    return beta


def _intercept(fit_intercept, intercept_scaling, c: float) -> tuple[bool, float | None]:
    """(fit_intercept, s): s in (0, c) with an intercept, None without one."""
    if not isinstance(fit_intercept, bool | np.bool_):
        raise TypeError(f"fit_intercept must be True or False; got {fit_intercept!r}")
    if not fit_intercept:
        if intercept_scaling is not None:
            raise ValueError("intercept_scaling applies only with fit_intercept=True")
        return False, None
    s = (
        c / 2
        if intercept_scaling is None
        else check_positive(intercept_scaling, "intercept_scaling")
    )
    if not s < c:
        raise ValueError(
            f"intercept_scaling must be in (0, c={c:g}): the features need the rest of the "
            f"bound c; got {s!r}"
        )
    return True, float(s)


def _with_rounding_allowance(curve: np.ndarray, lam: np.ndarray, sampler) -> np.ndarray:
    """curve + 2 e (2 lam - 1) / (lam - 1) (4 e at lam = inf, inf at lam = 1), rounded up,
    when ``sampler`` carries the exact back-end's public rounding bound e
    ("log_density_error"; docs/exact.md §7); the curve itself otherwise."""
    e = (sampler or {}).get("log_density_error")
    if e is None:
        return curve
    e = Fraction(float(e))
    flat = np.asarray(lam, dtype=float).ravel()
    base = np.asarray(curve, dtype=float).ravel()
    out = np.empty(base.shape)
    for i, (order, value) in enumerate(zip(flat, base, strict=True)):
        if not math.isfinite(value) or order == 1:
            out[i] = math.inf
        elif math.isinf(order):
            out[i] = round_up(Fraction(value) + 4 * e)
        else:
            o = Fraction(order)
            out[i] = round_up(Fraction(value) + 2 * e * (2 * o - 1) / (o - 1))
    return out.reshape(np.shape(curve))


def _leave_room_for_allowance(model, n: int, lam, eps: float, method: str, plan_of, refusal):
    """The exact back-end's calibration at (lam, eps) with room for its plan's rounding
    allowance (docs/exact.md §7): calibrate, build the plan (``plan_of(cal)``), and while
    the curve with the plan's ``log_density_error`` exceeds eps, lower the target by 1.5x
    the overshoot and recalibrate (at most 8 times). Returns the Calibration, its eps the
    certified value with the allowance and ``sampler`` the allowance; raises
    InfeasiblePrivacyError(``refusal``) when no target leaves room."""
    cal = model._calibrate(n, lam, eps, method)
    target = eps
    for _ in range(8):
        sampler = {"log_density_error": plan_of(cal).log_density_error}
        achieved = float(model.rdp(n, lam, cal.r, cal.m, cal.method, sampler))
        if achieved <= eps:
            return dataclasses.replace(cal, eps=achieved, target_eps=eps, sampler=sampler)
        target -= 1.5 * (achieved - cal.eps) + 1e-15 * eps
        if not target > 0:
            break
        cal = model._calibrate(n, lam, target, method)
    raise InfeasiblePrivacyError(refusal, reachable={"backend": "langevin"})


class BayesianLogisticRegression(Frozen):
    """Gaussian-prior logistic regression, released by posterior sampling.

    Parameters
    ----------
    beta : float > 0, prior precision per record: w ~ N(0, (n * beta)^-1 I). Public. Or
        "auto": the public rule beta = c^2 d / (n M^2) (:func:`auto_beta`; d counts the
        intercept's column, M is ``margin_scale``), resolved per release from the public n
        and d — by :func:`privbayes.sample` from X's shape, by :func:`privbayes.calibrate`
        from its ``d`` (required there), or by :meth:`resolve_beta`; the release's
        ``calibration.model`` carries the number. The prior it gives, N(0, M^2 / (c^2 d) I),
        is the same for every n (docs/glm.md, "Choosing beta").
    margin_scale : float > 0 or None, with beta="auto" only (ValueError otherwise): M, the
        stated public scale of the margins |w.x| (default 10: log-odds of 10, more
        confident than most tasks need). Never read it off the data.
    c : float > 0, the public bound on feature norms, ||x||_2 <= c.
    radius : float > 0 or None, OPS truncation radius R (default c / beta, a ball that
        contains the MAP estimate of every data set: docs/glm.md; with beta="auto", c over
        the resolved beta).
    backend : "auto" (default): "exact" or "langevin", chosen per release from public
        inputs only (docs/glm.md, "Three guarantees"); "exact": a rejection sampler whose
        every release is an exact posterior draw, with a public, fixed number of proposals
        (privbayes.sampling.exact, docs/exact.md; guarantee "exact"); "langevin": noisy
        gradient descent whose certificate covers its own K-step output law, not the
        posterior (privbayes.sampling.langevin, docs/langevin.md; no method="ops";
        guarantee "algorithm"); "imh": mode-fitted independence Metropolis–Hastings over
        many chains (privbayes.sampling.imh) or "pymc": PyMC's NUTS, the reference — both
        opt-in, guarantee "approximate" (an MCMC draw; the certificate is for the exact
        posterior).
    tune, draws, chains : MCMC settings; None takes the back-end's default (imh: 20 burn-in
        steps — raised to twice the estimate from the weight bound —, 4 chains and
        max(100, ceil(1000 / sqrt(chains))) draws, enough for R-hat to resolve 1.01; pymc:
        1000, 1000, 4). ``sample(..., size=k)`` runs at least k chains.
    fit_intercept : append a constant column ``intercept_scaling`` = s to X inside the
        release (default False). The bound c then covers the row [x, s], so feature rows
        must have norm <= ``feature_bound`` = sqrt(c^2 - s^2); the released value has d + 1
        entries, the weights and the intercept b = s * w_{d+1}, whose prior is
        N(0, s^2 / (n beta)) (docs/glm.md, "The intercept"). The same default as
        :class:`privbayes.PrivateLogisticRegression`. Turn it on unless the features are
        centred: without it every decision boundary passes through the origin (README:
        on breast cancer's all-positive features the non-private MAP itself falls below
        the majority class).
    intercept_scaling : s in (0, c), only with ``fit_intercept`` (default c / 2). A larger
        s makes the intercept's prior wider and leaves the features less of the bound.
    reruns : when the diagnostics fail, the run is repeated with twice the tuning and
        draws, up to this many times (default 2).
    target_accept : NUTS target acceptance rate (pymc).
    proposal_scale : imh only: the proposal's spread relative to the Laplace fit (default
        1). Far below 1 the proposal misses the posterior, and the diagnostics say so.
    delta_f, max_proposals : exact only: the failure probability (nothing is released with
        probability <= delta_f; default 1e-12, at most 1e-3; the accountant and the ledger
        add it to delta, so it must be below a ledger budget's delta) and the cap on
        proposals per call (default 10^6; above it the back-end refuses the release from
        public inputs).
    step_scale : langevin only: h in (0, 1], step eta = h * 2 / (mu + L) (default 1/2).
    max_steps : langevin only: cap on the number of steps K (default 10,000).
    schedule : langevin only: the public rule for the number of steps K (docs/langevin.md
        §6). "utility" (default): noisy gradient descent on the r-weighted loss from 0
        with no pull towards the prior, stopped at K = ceil(1 / (2 eta n beta / m)), the
        minimiser of a stated excess-risk bound at the prior's scale (DP-GD's iteration,
        its first step charged a quarter; a larger r at the same eps, fewer steps), *not*
        an approximate posterior draw (at r = m = 1 it runs as long as the target allows,
        up to the stationary K); "stationary": the tempered posterior's chain run until
        the chain has forgotten its start (kappa^K <= 1%), a draw near the posterior. The
        certificate covers either law (guarantee "algorithm"); the release's
        ``calibration.sampler["schedule"]`` says which ran.

    Options belong to back-ends: one given with another back-end raises ValueError here,
    before any charge. With backend="auto" the exact options (delta_f, max_proposals)
    configure the exact candidate and the Langevin options (step_scale, max_steps,
    schedule) the
    Langevin candidate: both enter auto's choice, made from public inputs, and the chosen
    back-end runs with its own; the MCMC options (tune, draws, chains, reruns,
    target_accept, proposal_scale) are refused with "auto", which never picks MCMC.
    ``radius`` applies to method="ops" only: a release or calibration of another method
    with an explicit radius raises ValueError, before any charge. So do
    ``sample(..., progressbar=True)`` unless backend="pymc" and
    ``on_bad_diagnostics="warn"`` unless backend="imh" or "pymc".

    Data for :func:`privbayes.sample`: a tuple ``(X, y)``, X of shape (n, d) with every row
    of norm <= ``feature_bound`` (c, or sqrt(c^2 - s^2) with an intercept; refused
    otherwise, see :mod:`privbayes.preprocessing`), y of shape (n,) in {0, 1} or {-1, +1}.
    Records that break these rules (NaN/inf, a label, a row norm) raise
    :class:`privbayes.DataError` (a ValueError) naming X or y, the count and the first row,
    the same for in-memory and Dask inputs; a wrong shape (X not 2-D, d = 0, n = 0, y not
    of length n) is a plain ValueError, and non-numeric data a TypeError.
    The released value is a weight vector, shape (d,), or (d + 1,) ending with the
    intercept. Settings that can never pass the diagnostics (one chain: split R-hat is
    undefined; fewer than 4 draws) are refused here, before any ledger charge.
    """

    methods = GLM_METHODS
    auto_margin_scale = None  # resolve_beta: the M of beta="auto" that chose this beta
    family = BINARY_LOGISTIC  # the GLM family: loss, gradient, Hessian and constants
    max_size = 100_000  # releases per sample(..., size=k) call: one chain each

    def __init__(
        self,
        beta: float = 0.01,
        c: float = 1.0,
        radius: float | None = None,
        *,
        backend: str = "auto",
        tune: int | None = None,
        draws: int | None = None,
        chains: int | None = None,
        target_accept: float | None = None,
        reruns: int | None = None,
        proposal_scale: float | None = None,
        fit_intercept: bool = False,
        intercept_scaling: float | None = None,
        delta_f: float | None = None,
        max_proposals: int | None = None,
        step_scale: float | None = None,
        max_steps: int | None = None,
        margin_scale: float | None = None,
        schedule: str | None = None,
    ) -> None:
        if isinstance(beta, str):
            if beta != AUTO:
                raise ValueError(f"beta must be a number > 0 or 'auto'; got {beta!r}")
            self.beta = AUTO  # resolved per release from the public n and d (resolve_beta)
            self.margin_scale = (
                MARGIN_SCALE if margin_scale is None else _scale(margin_scale, "margin_scale")
            )
        else:
            if margin_scale is not None:
                raise ValueError(
                    "margin_scale applies to beta='auto' only (the rule's public scale M); "
                    f"got margin_scale={margin_scale!r} with beta={beta!r}"
                )
            self.beta = _scale(beta, "beta")
            self.margin_scale = None
        self.c = _scale(c, "c")
        if radius is not None:
            self.radius = _scale(radius, "radius")
        else:  # c / beta: known once beta is (beta="auto": at resolve_beta)
            self.radius = None if self.beta == AUTO else self._default_radius()
        self._radius_arg = radius  # None: the default c / beta (with_backend keeps it so)
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
        self.backend = backend
        given = {
            "tune": tune, "draws": draws, "chains": chains, "reruns": reruns,
            "target_accept": target_accept, "proposal_scale": proposal_scale,
            "delta_f": delta_f, "max_proposals": max_proposals,
            "step_scale": step_scale, "max_steps": max_steps, "schedule": schedule,
        }  # fmt: skip
        for name, value in given.items():
            if value is not None and backend not in OPTION_BACKENDS[name]:
                raise ValueError(
                    f"{name} does not apply to backend={backend!r}: it is an option of "
                    f"backend {' or '.join(map(repr, OPTION_BACKENDS[name]))} only"
                )
        self._options = {k: v for k, v in given.items() if v is not None}  # for with_backend
        mcmc = backend in BACKEND_DEFAULTS
        defaults = BACKEND_DEFAULTS.get(backend, {"tune": 0, "draws": None, "chains": 1})
        tune = defaults["tune"] if tune is None else tune
        draws = defaults["draws"] if draws is None else draws
        chains = defaults["chains"] if chains is None else chains
        reruns = 2 if reruns is None else reruns
        # Every MCMC release checks split R-hat, which needs >= 2 chains of >= 4 draws: a
        # setting below that could never pass, yet each attempt would be charged.
        why = {
            "draws": " (split R-hat, checked on every release, needs 4 draws per chain)",
            "chains": " (split R-hat, checked on every release, needs two chains)",
        }
        for name, v, low in (
            ("tune", tune, 0),
            ("draws", draws, 4),
            ("chains", chains, 2 if mcmc else 1),
            ("reruns", reruns, 0),
        ):
            if name == "draws" and v is None:
                continue  # imh: chosen per run from the number of chains; others: unused
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
                raise ValueError(
                    f"{name} must be an integer >= {low}{why.get(name, '')}; got {v!r}"
                )
        if backend == "imh" and tune > IMH_MAX_TUNE:
            raise ValueError(
                f"tune must be at most {IMH_MAX_TUNE} for the imh back-end (a longer burn-in "
                f"is refused at run time, after the charge); got {tune}"
            )
        self.tune, self.chains = int(tune), int(chains)
        self.draws = None if draws is None else int(draws)
        self.reruns = int(reruns)
        target_accept = 0.9 if target_accept is None else target_accept
        if not 0 < target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1); got {target_accept}")
        self.target_accept = float(target_accept)
        proposal_scale = 1.0 if proposal_scale is None else proposal_scale
        self.proposal_scale = check_positive(proposal_scale, "proposal_scale")
        if not 1e-6 <= self.proposal_scale <= 1e3:
            raise ValueError(f"proposal_scale must lie in [1e-6, 1e3]; got {proposal_scale!r}")
        self.fit_intercept, self.intercept_scaling = _intercept(
            fit_intercept, intercept_scaling, self.c
        )
        s = self.intercept_scaling
        self.feature_bound = self.c if s is None else math.sqrt(self.c**2 - s**2)
        if delta_f is not None and not 1e-300 <= check_positive(delta_f, "delta_f") <= MAX_DELTA_F:
            raise ValueError(
                f"delta_f must lie in [1e-300, {MAX_DELTA_F:g}]: it is the probability that a "
                "release fails (releases nothing), added to delta by the accountant and the "
                f"ledger; got {delta_f!r}"
            )
        self.delta_f = None if delta_f is None else float(delta_f)
        if max_proposals is not None and (
            isinstance(max_proposals, bool)
            or not isinstance(max_proposals, int | np.integer)
            or max_proposals < 1
        ):
            raise ValueError(f"max_proposals must be an integer >= 1; got {max_proposals!r}")
        self.max_proposals = None if max_proposals is None else int(max_proposals)
        step_scale = 0.5 if step_scale is None else step_scale
        max_steps = 10_000 if max_steps is None else max_steps
        self.step_scale = check_positive(step_scale, "step_scale")
        if not 1e-6 <= self.step_scale <= 1.0:  # h <= 1: the contraction condition
            raise ValueError(f"step_scale must lie in [1e-6, 1]; got {step_scale!r}")
        bad = isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer)
        if bad or not 1 <= max_steps <= 10**7:
            raise ValueError(f"max_steps must be an integer in [1, 10**7]; got {max_steps!r}")
        self.max_steps = int(max_steps)
        schedule = LANGEVIN_SCHEDULES[0] if schedule is None else schedule
        if not isinstance(schedule, str) or schedule not in LANGEVIN_SCHEDULES:
            raise ValueError(f"schedule must be one of {LANGEVIN_SCHEDULES}; got {schedule!r}")
        # Langevin's rule ("auto": its Langevin candidate's); None where no Langevin runs
        self.schedule = schedule if backend in OPTION_BACKENDS["schedule"] else None
        self._freeze()

    def __repr__(self) -> str:
        return (
            f"BayesianLogisticRegression(beta={self.beta!r}, c={self.c!r}, "
            f"radius={self.radius!r}, backend={self.backend!r}{self._intercept_repr()}"
            f"{self._auto_repr()})"
        )

    def _intercept_repr(self) -> str:
        if not self.fit_intercept:
            return ""
        return f", fit_intercept=True, intercept_scaling={self.intercept_scaling!r}"

    def _auto_repr(self) -> str:
        """The settings a repr shows only when given: margin_scale (with beta="auto") and
        the back-end options (:meth:`_options_repr`)."""
        out = f", margin_scale={self.margin_scale!r}" if self.beta == AUTO else ""
        return out + self._options_repr()

    def _options_repr(self) -> str:
        """ ", k=v" for every back-end option given that applies to this back-end (Langevin's
        schedule, max_steps and step_scale, the exact back-end's delta_f, ...), so that the
        repr evaluates back to a model that runs the same algorithm."""
        return "".join(
            f", {k}={self._options[k]!r}"
            for k, backends in OPTION_BACKENDS.items()
            if k in self._options and self.backend in backends
        )

    # -- beta="auto" ------------------------------------------------------------------
    @property
    def beta_is_auto(self) -> bool:
        """True for beta="auto" before :meth:`resolve_beta` has fixed it from n and d."""
        return self.beta == AUTO

    def resolve_beta(self, n: int, d: int):
        """The model with beta="auto" resolved for n public records of d weights (the
        intercept's column counted): beta = :func:`auto_beta` (n, d, c, margin_scale),
        every other setting kept (the default OPS radius then c / beta). Itself when beta
        is a number. :func:`privbayes.sample` and :func:`privbayes.calibrate` call it with
        the same public n and d, so both certify the same prior. Raises ValueError as
        :func:`auto_beta` does."""
        if self.beta != AUTO:
            return self
        resolved = self._rebuild(self.backend, auto_beta(n, d, self.c, self.margin_scale))
        # the rule's M, kept for messages (KnobCappedWarning) and the command line's output
        object.__setattr__(resolved, "auto_margin_scale", self.margin_scale)
        return resolved

    def _require_beta(self) -> None:
        """Certificates and draws need a number: beta="auto" must be resolved first."""
        if self.beta == AUTO:
            raise ValueError(
                "beta='auto' is resolved from the public n and d (beta = c^2 d / (n M^2), "
                "docs/glm.md): use model.resolve_beta(n, d), or pass d to privbayes."
                "calibrate (privbayes.sample resolves it from X)"
            )

    # -- back-ends ------------------------------------------------------------------
    @property
    def guarantee(self) -> str:
        """What a release's certificate covers: "exact", "algorithm" or "approximate"
        (see GUARANTEE); "auto" resolves to exact or langevin, both certified."""
        return GUARANTEE.get(self.backend, "exact or algorithm")

    def with_backend(self, backend: str) -> BayesianLogisticRegression:
        """The same prior, bounds and options with another back-end (options that do not
        apply to it are dropped)."""
        return self._rebuild(backend, self.beta)

    def _init_extra(self) -> dict:
        """Constructor arguments of a subclass beyond the binary model's (multinomial: K)."""
        return {}

    def _rebuild(self, backend: str, beta):
        """The same bounds and options with ``backend`` and ``beta`` (a number or "auto")."""
        keep = {k: v for k, v in self._options.items() if backend in OPTION_BACKENDS[k]}
        model = type(self)(
            beta=beta,
            c=self.c,
            radius=self._radius_arg,
            backend=backend,
            fit_intercept=self.fit_intercept,
            intercept_scaling=self.intercept_scaling,
            margin_scale=self.margin_scale if beta == AUTO else None,
            **self._init_extra(),
            **keep,
        )
        if self.auto_margin_scale is not None and beta == self.beta:  # the same resolved prior
            object.__setattr__(model, "auto_margin_scale", self.auto_margin_scale)
        return model

    def _check_radius(self, method: str) -> None:
        """An explicit radius is OPS's truncation radius: refused with another method."""
        if self._radius_arg is not None and method != "ops":
            raise ValueError(
                f"radius applies to method='ops' only (OPS's truncation radius R); got "
                f"radius={self._radius_arg!r} with method={method!r}: drop radius, or use "
                "method='ops'"
            )

    def _check_call(self, method: str, *, progressbar: bool, on_bad_diagnostics: str) -> None:
        """sample()'s options that do not apply to this model's back-end or method are
        refused before anything is read or charged (ValueError); see CALL_OPTION_BACKENDS."""
        self._check_radius(method)
        given = {"progressbar": progressbar, "on_bad_diagnostics": on_bad_diagnostics == "warn"}
        for name, used in given.items():
            allowed = CALL_OPTION_BACKENDS[name]
            if used and self.backend not in allowed:
                value = "True" if name == "progressbar" else "'warn'"
                raise ValueError(
                    f"{name}={value} does not apply to backend={self.backend!r}: it is an "
                    f"option of backend {' or '.join(map(repr, allowed))} only"
                    + (" (auto never picks an MCMC back-end)" if self.backend == "auto" else "")
                )

    def _resolve(self, n: int, d: int, lam: float, eps: float, method: str, size=None):
        """The model with a concrete back-end for a release of ``size`` draws (each at
        (lam, eps)) on n records of d features: itself unless backend="auto".

        "auto" picks between the two certified back-ends from public inputs only (n, d,
        beta, c, the knobs that calibration gives for (lam, eps), size): the exact
        rejection sampler when its public proposal budget fits (docs/exact.md §4) and it
        costs fewer row operations than Langevin's K steps (k chains each), else Langevin;
        OPS needs the exact back-end. Never the data's values or acceptance rate.
        Raises InfeasiblePrivacyError when neither certified back-end can run.
        """
        self._require_beta()
        if self.backend != "auto":
            return self
        from ..sampling import exact

        k = size or 1
        exact_model, exact_cost, why = self.with_backend("exact"), math.inf, ""
        try:
            classes = exact.check_family(self.family)
            cal = exact_model._calibrate(n, lam, eps, method)
            if n > 0:
                proposals, _ = exact.exact_feasibility(
                    n, d, self.beta, self.c_bound, cal.r, cal.m, method=cal.method,
                    radius=self.radius if method == "ops" else None, size=k,
                    delta_f=exact_model.delta_f or exact.DELTA_F,
                    max_proposals=exact_model.max_proposals or exact.MAX_PROPOSALS,
                    classes=classes,
                )  # fmt: skip
                # row operations: proposals (P = d K each) and ~16 Newton steps (P^2 + 2P)
                big_p = d * max(1, classes)
                exact_cost = proposals * big_p + exact.WARM_ITERATIONS * 2 * big_p * (big_p + 2)
            else:
                exact_cost = 0.0
        except exact.ExactInfeasibleError as err:
            why = str(err)
        if method == "ops":
            if math.isfinite(exact_cost):
                return exact_model
            raise InfeasiblePrivacyError(
                "backend='auto': OPS needs the exact back-end, which cannot run for these "
                f"public inputs ({why}); use a larger beta or radius, another method, or "
                "backend='imh' (an approximate MCMC release)",
                reachable={"backend": "imh", "method": "diffused"},
            )
        langevin_model = self.with_backend("langevin")
        try:
            lcal = langevin_model._calibrate(n, lam, eps, method)
            steps = (lcal.sampler or {}).get("steps", 0)
            langevin_cost = steps * k * 2 * d * self.family.outputs
        except InfeasiblePrivacyError:
            langevin_cost = math.inf
        if exact_cost <= langevin_cost and math.isfinite(exact_cost):
            return exact_model
        if math.isfinite(langevin_cost):
            return langevin_model
        raise InfeasiblePrivacyError(
            f"backend='auto': neither certified back-end can run for these public inputs "
            f"(exact: {why or 'infeasible'}; langevin: infeasible at this lam and eps)",
            reachable={"backend": "imh"},
        )

    def _check_release(self, n: int, d: int, cal: Calibration, size=None) -> float:
        """Checks a release can run, from public inputs, before any ledger charge; returns
        the total-variation allowance of its law (the exact back-end's failure
        probability delta_f per call, docs/exact.md §4; 0 for the others)."""
        self._require_beta()
        if self.backend == "auto":
            raise ValueError("resolve backend='auto' first (model._resolve)")
        if self.backend != "exact" or n == 0:
            return 0.0
        from ..sampling import exact

        classes = exact.check_family(self.family)
        delta_f = self.delta_f or exact.DELTA_F
        exact.exact_feasibility(
            n, d, self.beta, self.c_bound, cal.r, cal.m, method=cal.method,
            radius=self.radius if cal.method == "ops" else None, size=size or 1,
            delta_f=delta_f, max_proposals=self.max_proposals or exact.MAX_PROPOSALS,
            classes=classes,
        )  # fmt: skip
        return float(delta_f)

    # -- data ---------------------------------------------------------------------
    def _statistics(self, data) -> tuple[tuple[np.ndarray, np.ndarray], int]:
        """Validated (X, y in {-1, +1}) and n. The data stay inside the release flow."""
        if not isinstance(data, tuple | list) or len(data) != 2:
            raise TypeError(
                "data must be a tuple (X, y) with X of shape (n, d) and y of shape (n,)"
            )
        from ..data import is_dask

        if is_dask(data[0]) or is_dask(data[1]):
            # validated inside the engine, then persisted there for the back-end's passes
            # (privbayes.glm.passes; docs/data.md §7); nothing is gathered
            if self.backend == "pymc":
                raise TypeError(
                    "backend='pymc' needs X in memory; with Dask inputs use backend='exact', "
                    "'langevin' or 'imh' (their passes over X run in the engine: "
                    "docs/data.md §7), or call .compute() if the data fit"
                )
            from ..glm.passes import dask_rows

            rows, n = dask_rows(self, data[0], data[1])
            return (rows, None), n
        from ..data import as_array
        from ..glm.passes import check_arrays

        x = as_array(data[0], "X")
        y = as_array(data[1], "y")
        if x.ndim != 2:
            raise ValueError(f"X must be 2-D, shape (n, d); got shape {x.shape}")
        if x.shape[1] == 0:
            raise ValueError("X has d = 0 features; need at least one")
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(f"y must have shape ({x.shape[0]},) to match X; got {y.shape}")
        if x.shape[0] == 0:
            raise ValueError("X has n = 0 rows: the prior N(0, (n beta)^-1 I) is improper at n = 0")
        d = x.shape[1] + (1 if self.fit_intercept else 0)
        if d > MAX_FEATURES:
            raise ValueError(f"X has d = {d} features; at most 2**24 are supported")
        # NaN/inf, labels and row norms (with the intercept column): the Dask path's
        # rules, and its DataError for a bad record
        x = check_arrays(self, x, y)
        return (x, self._labels(y)), int(x.shape[0])

    def _labels(self, y: np.ndarray) -> np.ndarray:
        """Checked labels as the family's kernels take them: {-1, +1}."""
        return np.where(y > 0, 1.0, -1.0)

    def _released(self, value: np.ndarray) -> np.ndarray:
        """The draw as released: with an intercept, its last entry times s is the bias b."""
        if not self.fit_intercept:
            return value
        out = np.array(value, dtype=float)
        out[..., -1] *= self.intercept_scaling
        out.setflags(write=False)
        return out

    # -- certificates ---------------------------------------------------------------
    def rdp(
        self,
        n,
        orders,
        r: float = 1.0,
        m: float = 1.0,
        method: str = "diffused",
        sampler: dict | None = None,
    ):
        """Certified RDP curve for data sets of size n; array shaped like ``orders``.

        ``method="ops"`` reads ``r`` as the tempering t: pure eps0 = 2 t c R. Every value is
        a proven upper bound for the samplers' float parameters: the prior precision
        n*beta/m as they compute it, c (1 + 2e-12) for the rows that validation accepts and
        R enlarged by the float norm's rounding (docs/numerics.md §8). inf where the prior
        precision overflows. backend="langevin": the certificate of the K-step algorithm
        with the public ``sampler`` parameters (``Calibration.sampler``; None recomputes
        them), docs/langevin.md.
        """
        self._require_beta()
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        lam = np.asarray(orders, dtype=float)
        if np.isnan(lam).any() or (lam < 1).any():
            raise ValueError(f"orders must be >= 1 (1 = KL) or inf; got {orders!r}")
        if n == 0:
            return np.zeros(lam.shape)
        if self.backend == "langevin":
            from ..sampling import langevin

            return langevin.model_rdp(self, n, lam, r, m, method, sampler)
        if method == "ops":
            curve = np.asarray(pure_dp_rdp_upper(lam, self._ops_eps0(r)), dtype=float)
            return _with_rounding_allowance(curve, lam, sampler)
        rho = self._rho_exact(n, r, m)
        out = np.full(lam.shape, np.inf)
        if rho is None:
            return out
        flat, res = lam.ravel(), out.ravel()
        uniq, inverse = np.unique(flat, return_inverse=True)
        vals = [round_up(Fraction(v) * rho) if math.isfinite(v) else math.inf for v in uniq]
        res[:] = np.asarray(vals)[inverse]
        return _with_rounding_allowance(res.reshape(lam.shape), lam, sampler)

    def _calibrate_release(
        self, n: int, d: int, lam: float, eps: float, method: str, size=None
    ) -> Calibration:
        """The calibration of a release on n records of d features, as sample() makes it.

        For the exact back-end the released law is within a factor e^(+-2 e) of the exact
        posterior, e the plan's public bound on the rounding of the computed log-density
        ratios (docs/exact.md §7), which adds 2 e (2 lam - 1) / (lam - 1) to every order.
        The knob is calibrated for eps minus that term (the term shrinks with the knob,
        and the loop checks the final curve), and ``sampler`` carries e so that the
        Calibration's curve includes it. Other back-ends: ``_calibrate``. Public inputs only.
        """
        self._require_beta()
        if self.backend != "exact" or n == 0:
            return self._calibrate(n, lam, eps, method)
        from ..sampling import exact

        classes = exact.check_family(self.family)

        def plan_of(cal_):
            return exact.exact_plan(
                n, d, self.beta, self.c_bound, cal_.r, cal_.m, method=cal_.method,
                radius=self.radius if cal_.method == "ops" else None, size=size or 1,
                delta_f=self.delta_f or exact.DELTA_F,
                max_proposals=self.max_proposals or exact.MAX_PROPOSALS, classes=classes,
            )  # fmt: skip

        return _leave_room_for_allowance(
            self, n, lam, eps, method, plan_of,
            f"the exact back-end's rounding allowance (docs/exact.md §7) leaves no room at "
            f"eps={eps!r}, lam={float(lam)!r} for n={n}, d={d}; ask for a larger eps or use "
            "backend='langevin'",
        )  # fmt: skip

    def _default_radius(self) -> float:
        """OPS's default R = c / beta: the mode's norm bound for every data set (docs/glm.md)."""
        return self.c / self.beta

    @property
    def c_bound(self) -> float:
        """The float just above the certified row-norm bound ``_c_cert()``: the c that the
        samplers' own bounds (e.g. the exact back-end's envelope) must use, since
        validation accepts rows up to c (1 + 2e-12)."""
        return round_up(self._c_cert())

    def _c_cert(self) -> Fraction:
        """The bound on the true norm of every accepted row: c (1 + 2 NORM_SLACK), exact."""
        return Fraction(self.c) * (1 + 2 * Fraction(NORM_SLACK))

    def _norm_threshold(self, d: int) -> float:
        """Largest float norm a row of X (d features) may show: its true norm is then
        <= c (1 + 2 NORM_SLACK) whatever the rounding. Rows scaled onto the sphere of
        radius c pass for d up to ~9000."""
        return round_down(self._c_cert() / (1 + _norm_error(d)))

    def _prior_precision(self, n: int, m: float) -> float:
        """n beta / m, exactly the float expression both GLM samplers evaluate."""
        return n * self.beta / m

    def _rho_exact(self, n: int, r: float = 1.0, m: float = 1.0) -> Fraction | None:
        """G^2 r^2 / (2 prec) exactly, G^2 = family.sensitivity_sq c^2 (binary: 2 c^2 r^2 /
        prec), prec the samplers' float n*beta/m (None: overflow)."""
        prec = self._prior_precision(n, m)
        if not (math.isfinite(prec) and prec > 0):
            return None
        half = self.family.gradient_sensitivity_sq(self._c_cert()) / 2
        return half * Fraction(r) ** 2 / Fraction(prec)

    def _rho(self, n: int, r: float = 1.0, m: float = 1.0) -> float:
        """The zCDP constant 2 c^2 r^2 / (n beta / m), rounded up (inf on overflow)."""
        rho = self._rho_exact(n, r, m)
        return math.inf if rho is None else round_up(rho)

    def _ops_eps0(self, t: float) -> float:
        """eps0 = 2 t c R over the ball that the samplers' float norm test really keeps,
        ||w|| <= R (1 + (2^24 + 2) u + 2^-160): exact, rounded up."""
        r_eff = Fraction(self.radius) * (1 + _norm_error(MAX_FEATURES))
        return round_up(2 * Fraction(t) * self._c_cert() * r_eff)

    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration:
        self._require_beta()
        method = mechanisms.check_method(method, GLM_METHODS)
        self._check_radius(method)
        if self.backend == "langevin":  # its own certificate: the K-step algorithm's law
            from ..sampling import langevin

            return langevin.calibrate(self, n, lam, eps, method)
        if n == 0:
            return Calibration(method, 1.0, 1.0, lam, 0.0, eps, 0, None, 0, self)
        if eps == 0:
            raise InfeasiblePrivacyError(
                "eps=0 needs a release that ignores the data: sample from the prior instead",
                reachable={"eps": "> 0"},
            )
        if method == "ops":
            return self._calibrate_ops(n, lam, eps)
        rho = self._rho(n)
        if math.isinf(lam) or math.isinf(rho * lam):
            raise InfeasiblePrivacyError(
                f"method={method!r} has no finite eps at lam={float(lam)!r} (its bound grows like "
                f"{rho:.3g} * lam); use a smaller lam or method='ops' (pure DP)",
                reachable={"lam": "finite", "method": "ops"},
            )

        def certify(knob: float):
            return (float(self.rdp(n, lam, *mechanisms.knobs(method, knob), method=method)),)

        name = mechanisms.KNOB[method] or "knob"
        # closed-form guesses in logs (no overflow or underflow on the way)
        log_gap = math.log(eps) - math.log(lam) - math.log(rho)
        floor = 2.0**-1074
        if method == "direct":
            direct = certify(1.0)[0]
            if direct > eps:
                raise InfeasiblePrivacyError(
                    f"direct sampling certifies eps={direct:.6g} at lam={float(lam)!r} for n={n}, "
                    f"beta={self.beta:g}, c={self.c:g}; ask for eps >= {direct:.6g} or use "
                    "method='diffused' or 'concentrated'",
                    reachable={"min_eps": direct},
                )
            knob = 1.0
        elif method == "diffused":
            knob = math.exp(min(0.0, log_gap / 2))
        else:
            # the samplers' prior precision n beta / m must stay <= PREC_MAX
            floor = min(1.0, round_up(Fraction(n) * Fraction(self.beta) / Fraction(PREC_MAX)))
            while self._prior_precision(n, floor) > PREC_MAX:
                floor = math.nextafter(floor, 2.0)
            knob = math.exp(min(0.0, log_gap))
            lowest = certify(floor)[0]
            if lowest > eps:
                raise InfeasiblePrivacyError(
                    f"method='concentrated' certifies at least eps={lowest:.6g} at "
                    f"lam={float(lam)!r} for n={n}: a smaller eps needs a prior precision "
                    f"n*beta/m above {PREC_MAX:g}; ask for eps >= {lowest:.6g} or use "
                    "method='diffused'",
                    reachable={"min_eps": lowest, "method": "diffused"},
                )
        knob = min(1.0, max(knob, floor))
        knob, (achieved,), steps = certify_down(knob, certify, eps, name, 2.0, floor)
        r, m = mechanisms.knobs(method, knob)
        return Calibration(method, r, m, lam, achieved, eps, n, None, steps, self)

    def _calibrate_ops(self, n: int, lam: float, eps: float) -> Calibration:
        """Largest eps0 whose tight RDP conversion meets eps at lam; t = eps0 / (2 c R).

        A float search for eps0, then :func:`certify_down` on the certified curve
        (interval arithmetic at the exact, rounded-up eps0 of t)."""

        def certify(t: float):
            return (float(pure_dp_rdp_upper(lam, self._ops_eps0(t))),)

        evals = 1
        log_full = math.log(self._ops_eps0(1.0)) if math.isfinite(self._ops_eps0(1.0)) else 710.0
        if certify(1.0)[0] <= eps:
            t = 1.0
        else:
            if math.isinf(lam):
                log_e = math.log(eps)
            else:
                # eps(lam; e) grows from 0 to e: solve in log(e) (roots can be ~1e-160)
                def gap(log_e: float) -> float:
                    with np.errstate(all="ignore"):  # lam * e may overflow: the curve is e
                        v = float(pure_dp_rdp(lam, math.exp(log_e)))
                    # below the smallest double the curve underflows: any log below -745 is
                    # just as far under the target, and keeps the gap monotone
                    return (math.log(v) if v > 0 else -800.0) - math.log(eps)

                hi = min(log_full, 700.0)
                lo = hi - 1.0
                while gap(lo) > 0 and lo > -740:
                    lo -= 2.0 * (gap(lo) + 1.0)
                if gap(lo) > 0 or gap(hi) <= 0:
                    log_e = lo if gap(lo) <= 0 else -745.0
                else:
                    res = optimize.brentq(
                        gap, lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, full_output=True
                    )
                    log_e, evals = res[0], res[1].function_calls
            t = math.exp(min(0.0, log_e - log_full))
        t = max(t, 2.0**-1074)
        t, (achieved,), steps = certify_down(t, certify, eps, "tempering t", 1.0, 2.0**-1074)
        return Calibration("ops", t, 1.0, lam, achieved, eps, n, None, evals + steps, self)

    def _worst_pair(self, n: int, cal: Calibration, *, d: int = 1):
        """((X, y), (X, y')): n - 1 records x = 0 and one x = c e_1 labelled +1 vs -1.

        No calibrator pair exists (the bound is analytic). Records x = 0 add no curvature,
        so the posterior is as wide as the prior allows, and flipping the label of
        x = c e_1 changes the log-density by the linear function c w_1, the largest change
        one record can make. X has shape (n, d).
        """
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be an integer >= 1; got {d!r}")
        x = np.zeros((n, int(d)))
        x[0, 0] = self.c
        y = np.ones(n)
        y1 = y.copy()
        y1[0] = -1.0
        return (x, y), (x.copy(), y1)

    # -- release ------------------------------------------------------------------
    def _draw(
        self, xy, cal: Calibration, rng, size=None, *, progressbar=False, on_bad_diagnostics="raise"
    ):
        """(value (d,) or (size, d), None, diagnostics): one release per draw, from the
        concrete back-end (``_resolve`` chose it when backend="auto")."""
        self._require_beta()
        if self.backend == "auto":
            raise ValueError("resolve backend='auto' first (model._resolve)")
        if self.backend == "imh":
            from ..sampling.imh import release_draw
        elif self.backend == "exact":
            from ..sampling.exact import release_draw
        elif self.backend == "langevin":
            from ..sampling.langevin import release_draw
        else:
            from ..sampling.pymc_backend import release_draw

        value, diagnostics = release_draw(
            self, xy, cal, rng, progressbar=progressbar, on_bad=on_bad_diagnostics, size=size
        )
        return value, None, diagnostics
