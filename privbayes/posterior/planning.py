"""Accuracy-first planning: the eps a target interval width needs, before any data are read
(docs/noise_aware.md §7).

The criterion is public and stated on the result (``Plan.criterion``): the width of the
noise-aware central interval predicted from the posterior's variance,

    width(eps) = 2 z sqrt(V(eps)),   z = the standard normal quantile at (1 + prob) / 2,

with V the variance of the statistic's likelihood, the prior left out (a prior only
narrows the interval), at the parameter's worst case or at a public guess ``at``:

* BetaBernoulli: V = theta (1 - theta) / n + sigma^2 / n^2, worst case theta = 1/2;
* DirichletCategorical: the same per coordinate (worst case p_k = 1/2);
* GammaPoisson: V = theta / n + sigma^2 / n^2, at theta = ``at`` (default max_count, the
  largest rate the bound suggests);
* NormalKnownVariance: the closed-form posterior's width, which depends on no data
  (exact given the model);
* MeanQuery: the exact confidence interval's width (2 z_dg + 1) / (2^8 n), z_dg the
  discrete Gaussian's quantile (exact, no guess).

sigma^2 is then solved in closed form (a quantile search for the query) and eps is the
smallest one whose calibrated sigma^2 is at most it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from scipy import special

from ..certified import round_up
from ..errors import InfeasiblePrivacyError
from ..noise.discrete_gaussian import calibrate_sigma2, discrete_gaussian_quantile
from ..validation import _real, check_lam, check_n
from ._statistics import GRID, spec_of
from .release import _check_prob

__all__ = ["Plan", "plan"]

PAPER_DRAWS = (10, 100)  # k draws at eps/k each: the paper's mechanisms' intervals


@dataclass(frozen=True)
class Plan:
    """The smallest eps at ``lam`` whose noise-aware interval meets ``width``.

    Attributes
    ----------
    eps : the planned eps at ``lam`` (nats). lam, n, prob, width : the inputs.
    sigma2 : the discrete Gaussian's sigma^2 that eps calibrates to.
    predicted_width : the criterion's width at ``eps`` (<= ``width``).
    nonprivate_width : the criterion's width without noise (the floor no eps can beat).
    at : the parameter value the criterion is evaluated at. criterion : its statement.
    paper : for the paper's "diffused" mechanism (k draws at eps/k each, k in (10, 100)),
        {"k": ..., "width": the width of the tempered posterior the draws come from at
        this eps, "eps_needed": the smallest total eps at which it meets ``width``
        (inf if none)}, and for "concentrated" its width at this eps (narrow but centred
        on a prior-weighted value: not a calibrated interval). Public inputs only.
    """

    eps: float
    lam: float
    n: int
    prob: float
    width: float
    sigma2: float
    predicted_width: float
    nonprivate_width: float
    at: float | None
    criterion: str
    paper: dict = field(default_factory=dict)


def _z(prob: float) -> float:
    return float(special.ndtri(0.5 + prob / 2.0))


def _eps_for_sigma2(lam: float, d2: int, sigma2: float) -> float:
    """The smallest float eps whose calibrated sigma^2 is <= sigma2."""
    eps = round_up(Fraction(lam) * Fraction(d2) / (2 * Fraction(sigma2)))
    while calibrate_sigma2(lam, eps, d2) > sigma2:  # never more than a step or two
        eps = math.nextafter(eps, math.inf)
    return eps


def _infeasible(width: float, floor: float, what: str):
    return InfeasiblePrivacyError(
        f"no eps reaches width={width:g}: {what} is {floor:.6g} without any noise; ask for a "
        f"width above {floor:.6g} (or more records)",
        reachable={"min_width": floor},
    )


def _check_width(width) -> float:
    if isinstance(width, bool) or not isinstance(width, int | float):
        raise TypeError(f"width must be a number > 0; got {width!r}")
    w = float(width)
    if not (math.isfinite(w) and w > 0):
        raise ValueError(f"width must be finite and > 0; got {width!r}")
    return w


def plan(model, n, lam, *, width, prob: float = 0.9, at=None) -> Plan:
    """The smallest eps at ``lam`` whose noise-aware central ``prob`` interval has width at
    most ``width`` by the public criterion of this module (docs/noise_aware.md §7).

    Parameters
    ----------
    model : BetaBernoulli, DirichletCategorical, GammaPoisson, NormalKnownVariance or
        MeanQuery. n : int >= 1, the public size. lam : float > 1 (finite).
    width : float > 0, the target width (units of the parameter; the query: of the mean).
    prob : the interval's mass in (0, 1) (default 0.9).
    at : a public guess of the parameter: theta in (0, 1) for BetaBernoulli (default 1/2,
        the worst case), p_k for DirichletCategorical (a float; default 1/2), the rate for
        GammaPoisson (default max_count); not used by NormalKnownVariance and MeanQuery.

    Returns a :class:`Plan`. Reads no data and charges nothing.
    Raises InfeasiblePrivacyError (``reachable["min_width"]``) when even the non-private
    width exceeds ``width``; ValueError/TypeError for bad arguments.
    """
    spec = spec_of(model)
    if spec.kind == "linear":
        raise TypeError(
            "plan() has no width criterion for linear regression (its posterior is sampled by "
            "importance sampling, docs/linear_regression.md §N4); use privbayes.posterior"
        )
    n = check_n(n)
    if n < 1:
        raise ValueError("n must be >= 1 to plan a release")
    lam = check_lam(lam)
    if math.isinf(lam):
        raise InfeasiblePrivacyError(
            "the discrete Gaussian has no finite eps at lam=inf; choose a finite lam",
            reachable={"lam": "finite"},
        )
    w = _check_width(width)
    prob = _check_prob(prob)  # a number (not the string "0.9"), as PrivatePosterior.interval
    if at is not None:
        at = _real(at, "at", "a number (the public guess of the parameter)")
    z = _z(prob)
    d2 = spec.sensitivity_sq
    kind = spec.kind
    if kind in ("beta-bernoulli", "dirichlet", "gamma-poisson"):
        if kind == "gamma-poisson":
            theta = float(model.max_count if at is None else at)
            if not (math.isfinite(theta) and theta > 0):
                raise ValueError(f"at must be a rate > 0; got {at!r}")
            base = theta / n
            what = f"2 z sqrt(theta/n) at theta={theta:g}"
        else:
            theta = 0.5 if at is None else float(at)
            if not 0 < theta < 1:
                raise ValueError(f"at must lie strictly between 0 and 1; got {at!r}")
            base = theta * (1 - theta) / n
            what = f"2 z sqrt(theta (1 - theta) / n) at theta={theta:g}"
        floor = 2 * z * math.sqrt(base)
        room = (w / (2 * z)) ** 2 - base
        if not room > 0:
            raise _infeasible(w, floor, what)
        sigma2 = n * n * room
        eps = _eps_for_sigma2(lam, d2, sigma2)
        s2 = calibrate_sigma2(lam, eps, d2)
        predicted = 2 * z * math.sqrt(base + s2 / (n * n))
        criterion = (
            f"2 z sqrt(V), V = {'theta' if kind == 'gamma-poisson' else 'theta (1 - theta)'}"
        )
        criterion += f" / n + sigma^2 / n^2 at theta = {theta:g} (prior left out), z = {z:.6g}"
        paper = _paper(model, kind, n, lam, eps, w, prob, theta)
        return Plan(eps, lam, n, prob, w, s2, predicted, floor, theta, criterion, paper)
    if kind == "normal":
        return _plan_normal(model, n, lam, w, prob, z, d2)
    return _plan_query(model, n, lam, w, prob, d2)


def _plan_normal(model, n, lam, w, prob, z, d2) -> Plan:
    """Exact for the closed form: width = 2 z / sqrt(tau), tau = 1/sigma0^2 +
    n^2 / (n s^2 + v_e), v_e = R^2 (Var Z + 1/12) / 2^16 (Var Z <= sigma^2: conservative)."""
    s2x = model.noise_sigma**2
    prior_prec = 1.0 / model.sigma**2
    k2 = (GRID / (model.high - model.low)) ** 2
    sd = w / (2 * z)

    def width_at(v_e: float) -> float:
        return 2 * z / math.sqrt(prior_prec + n * (n / (n * s2x + v_e)))

    floor = width_at(1.0 / (12.0 * k2))
    need = 1.0 / (sd * sd) - prior_prec
    if not need > 0:  # the prior alone is already narrow enough: any eps will do
        v_e = math.inf
    else:
        v_e = n * n / need - n * s2x
    if not v_e > 1.0 / (12.0 * k2):
        raise _infeasible(w, floor, "the Normal posterior's width")
    sigma2 = v_e * k2 - 1.0 / 12.0 if math.isfinite(v_e) else 1e300
    eps = _eps_for_sigma2(lam, d2, sigma2)
    s2 = calibrate_sigma2(lam, eps, d2)
    predicted = width_at((s2 + 1.0 / 12.0) / k2)
    criterion = (
        "the closed-form posterior's width 2 z / sqrt(tau), tau = 1/sigma^2 + n^2 / (n s^2 + "
        f"R^2 (sigma_dg^2 + 1/12) / 2^16) (no data needed), z = {z:.6g}"
    )
    paper = _paper(model, "normal", n, lam, eps, w, prob, None)
    return Plan(eps, lam, n, prob, w, s2, predicted, floor, None, criterion, paper)


def _plan_query(model, n, lam, w, prob, d2) -> Plan:
    """The exact confidence interval's width (2 z + 1) / N, N = 2^8 n, with z the discrete
    Gaussian's quantile: the largest sigma^2 whose quantile fits, by bisection in log
    sigma^2 (the quantile is nondecreasing in sigma^2)."""
    big = GRID * n
    zmax = math.floor((w * big - 1) / 2)
    floor = 1.0 / big
    if zmax < 0:
        raise _infeasible(w, floor, "the exact interval (one grid cell)")

    def fits(s2: float) -> bool:
        return discrete_gaussian_quantile(prob, s2) <= zmax

    lo, hi = 1e-6, max(1.0, float(zmax) ** 2)
    if not fits(lo):
        raise _infeasible(w, (2 * discrete_gaussian_quantile(prob, lo) + 1) / big, "the interval")
    while fits(hi):
        lo, hi = hi, hi * 4
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if fits(mid):
            lo = mid
        else:
            hi = mid
    eps = _eps_for_sigma2(lam, d2, lo)
    s2 = calibrate_sigma2(lam, eps, d2)
    predicted = (2 * discrete_gaussian_quantile(prob, s2) + 1) / big
    criterion = (
        "the exact confidence interval's width (2 z_dg + 1) / (2^8 n), z_dg the smallest "
        "integer with P[|Z| <= z_dg] >= prob (no guess needed)"
    )
    paper = _paper(model, "query", n, lam, eps, w, prob, None)
    return Plan(eps, lam, n, prob, w, s2, predicted, floor, None, criterion, paper)


def _tempered_width(model, kind, n, lam, eps_draw, method, z, theta) -> float:
    """The width 2 z sd of the law one draw of ``method`` comes from at eps_draw (its
    calibrated knobs), at the public guess theta."""
    from ..calibration import calibrate
    from ..capping import quiet

    with quiet():  # an internal comparison, not the user's release: no KnobCappedWarning
        cal = calibrate(model, n, lam, eps_draw, method)
    r, m = cal.r, cal.m
    if kind in ("beta-bernoulli", "dirichlet", "query"):
        if kind == "dirichlet":
            a, b = float(model.alpha[0]), float(sum(model.alpha) - model.alpha[0])
        else:
            a, b = model.alpha, model.beta
        th = 0.5 if theta is None else theta
        A, B = a / m + r * n * th, b / m + r * n * (1 - th)
        return 2 * z * math.sqrt(A * B / ((A + B) ** 2 * (A + B + 1)))
    if kind == "gamma-poisson":
        shape = model.alpha / m + r * n * theta
        rate = model.beta / m + r * n
        return 2 * z * math.sqrt(shape) / rate
    tau = 1.0 / (m * model.sigma**2) + r * n / model.noise_sigma**2
    return 2 * z / math.sqrt(tau)


def _paper(model, kind, n, lam, eps, w, prob, theta) -> dict:
    """The paper's mechanisms at the same (lam, eps): k draws at eps/k each."""
    from ..errors import InfeasiblePrivacyError as Infeasible

    z = _z(prob)
    out: dict = {}
    for method in ("diffused", "concentrated"):
        best = None
        for k in PAPER_DRAWS:
            try:
                width = _tempered_width(model, kind, n, lam, eps / k, method, z, theta)
            except (Infeasible, ValueError, ArithmeticError):
                continue
            if best is None or width < best["width"]:
                best = {"k": k, "width": width}
        out[method] = best or {"k": None, "width": math.inf}
    out["diffused"]["eps_needed"] = _paper_eps_needed(model, kind, n, lam, eps, w, z, theta)
    return out


def _paper_eps_needed(model, kind, n, lam, eps, w, z, theta) -> float:
    """The smallest total eps (a bisection in log eps, to 1%) at which diffused's k-draw
    width meets w, minimised over k in PAPER_DRAWS; inf when even r = 1 does not."""
    from ..errors import InfeasiblePrivacyError as Infeasible

    best = math.inf
    for k in PAPER_DRAWS:

        def ok(total: float, k: int = k) -> bool:
            try:
                return _tempered_width(model, kind, n, lam, total / k, "diffused", z, theta) <= w
            except (Infeasible, ValueError, ArithmeticError):
                return False

        hi = max(eps, 1e-6)
        for _ in range(40):
            if ok(hi):
                break
            hi *= 4
        else:
            continue
        lo = hi / 4
        while ok(lo) and lo > 1e-12:
            hi, lo = lo, lo / 4
        for _ in range(12):
            mid = math.sqrt(lo * hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
        best = min(best, hi)
    return best
