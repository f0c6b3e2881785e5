"""The knob-cap warning: a calibration that cannot spend the eps it was asked for.

Every knob of privbayes is capped: diffusion's likelihood weight r, concentration's prior
divisor m and OPS's tempering t all live in (0, 1], and some conjugate curves have a pole
below 1 (the largest knob a given order certifies). When the target is large enough, the
calibration stops at the cap and certifies less than was asked: correct, but the release
then spends only part of the budget, and asking for more eps buys nothing. A new user on
Adult with beta = 1e-3 asked for eps = 1 at lam = 2 and got a certified 0.13 (r = 1).

:func:`warn_if_capped` issues :class:`privbayes.KnobCappedWarning` when the knob is capped
and the certified eps is below :data:`FAR_BELOW` (one half) of the target, with the
certified value, the request and what to change, in the units the target was given in
(an (eps, delta) target is compared and quoted as (eps, delta), not as the RDP target it
was converted to). It reads only the Calibration (public
inputs). It is issued at the public entry points only — :func:`privbayes.calibrate`,
:func:`privbayes.sample`, :func:`privbayes.release_query` and
``PrivateLogisticRegression.fit`` are wrapped by :func:`public_entry` — once per call,
with the warning pointing at the user's line. Calls nested inside a public entry (an
(eps, delta) search that calibrates many times, the estimator's call of sample) and code
inside :func:`quiet` stay silent, so an internal search never warns; a new public entry
point wraps itself with :func:`public_entry`, or calls :func:`warn_if_capped` on its
final Calibration. Method "direct" has no knob and never warns.
"""

from __future__ import annotations

import contextlib
import contextvars
import decimal
import functools
import math
import warnings

import numpy as np

from .errors import KnobCappedWarning
from .kinds import is_calibration

__all__ = ["FAR_BELOW", "capped", "public_entry", "quiet", "warn_if_capped"]

FAR_BELOW = 0.5  # "far below": certified eps < FAR_BELOW * requested eps
KNOBS = {"diffused": "r", "concentrated": "m", "ops": "t"}
_QUIET = contextvars.ContextVar("privbayes_knob_cap_quiet", default=False)


def _knob(cal) -> tuple[str, float] | None:
    name = KNOBS.get(getattr(cal, "method", None))
    if name is None:
        return None
    return name, float(cal.m if name == "m" else cal.r)  # OPS's t is stored in r


def capped(cal, release=None) -> bool:
    """True when ``cal`` (a :class:`privbayes.Calibration`) stopped at its knob's cap with
    a certified eps below FAR_BELOW times the target: a knob method, n > 0, and
    ``cal.eps < FAR_BELOW * cal.target_eps``; for an (eps, delta) target, the eps certified
    at delta (:func:`_dp_judgement`: of ``release``, the whole call, when given) below
    ``FAR_BELOW`` times the eps asked for. (A knob that is not capped meets the target to
    within its search's resolution, so the ratio identifies the cap.)"""
    if _knob(cal) is None or not getattr(cal, "n", 0):
        return False
    target, eps = _in_user_units(cal, release)
    # eps = 0 with data: a certificate that underflows (extreme priors), not a cap
    return target > 0 and 0 < eps < FAR_BELOW * target


def _dp_judgement(cal, release=None) -> tuple[float, float, float] | None:
    """(eps asked for, eps certified, delta) for an (eps, delta) target; None for an RDP
    target. The certified eps is the smaller of the chosen order's conversion (``dp_eps``)
    and the whole curve converted at delta (:func:`_converted_on_grid`) with the failure
    allowance and every draw included — of ``release`` when one (a fitted estimator's
    included) is at hand, else of one draw of ``cal`` with its ``dp_tv``. The whole
    curve can be far below ``dp_eps`` where the order search settled for a reason other
    than privacy (e.g. the exact back-end's proposal budget)."""
    src = release if getattr(release, "dp_target", None) is not None else cal
    target, delta, dp_eps = (getattr(src, k, None) for k in ("dp_target", "delta", "dp_eps"))
    if target is None or delta is None or dp_eps is None:
        return None
    try:
        curve = release if src is release else cal
        tv = float(getattr(release, "tv", 0.0) if src is release else getattr(cal, "dp_tv", 0.0))
        whole = _converted_on_grid(curve, float(delta), tv or 0.0)
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - not a curve
        whole = math.inf
    return float(target), min(float(dp_eps), whole), float(delta)


# orders at which the cap check converts a release's curve: a valid (eps, delta) bound at
# each, so their minimum never understates (steps of at most 1.5x up to 2048, where
# it is within a few % of the refined optimum); ~0.5 ms where the accountant's refined
# conversion over its wide grid costs ~4 ms on every (eps, delta) call
_GRID = (1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0,
         40.0, 48.0, 64.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0, 1536.0,
         2048.0, 4096.0, 8192.0, 16384.0, 65536.0)  # fmt: skip


def _converted_on_grid(curve, delta: float, tv: float) -> float:
    """min over :data:`_GRID` of the (eps, delta)-DP eps that ``curve.rdp`` certifies,
    with the failure allowance ``tv``: (e0 + log(1/(1 - tv)), delta)-DP when the
    never-failing mechanism is (e0, delta - tv)-DP (docs/accounting.md §8). Rounded up."""
    from fractions import Fraction

    from .accounting.accountant import failure_eps, rdp_to_dp

    below = delta
    if tv > 0:  # the largest double <= the exact delta - tv
        below = float(Fraction(delta) - Fraction(tv))
        if Fraction(below) > Fraction(delta) - Fraction(tv):
            below = math.nextafter(below, 0.0)
        if not below > 0:
            return math.inf
    e0 = float(np.min(rdp_to_dp(_GRID, curve.rdp(_GRID), below)))
    if tv == 0:
        return e0
    return math.nextafter(e0 + failure_eps(Fraction(tv)), math.inf)


def _in_user_units(cal, release=None) -> tuple[float, float]:
    """(requested, certified) eps in the units the target was given in: (eps, delta) by
    :func:`_dp_judgement`, else the RDP eps at lam (``target_eps``, ``eps``)."""
    judged = _dp_judgement(cal, release)
    if judged is not None:
        return judged[0], judged[1]
    return float(getattr(cal, "target_eps", 0.0)), float(cal.eps)


def _up4(x: float) -> str:
    """x with 4 significant digits, rounded up (a certified value is never understated)."""
    text = f"{x:.4g}"
    if not math.isfinite(x) or float(text) >= x:
        return text
    exact = decimal.Decimal(x)  # the double's exact value (subnormals included)
    step = decimal.Decimal(1).scaleb(exact.adjusted() - 3)  # a unit in the 4th digit
    return f"{float(exact.quantize(step, rounding=decimal.ROUND_CEILING)):.4g}"


def _message(cal, size: int | None, release=None) -> str:
    name, value = _knob(cal)
    model = cal.model
    glm = hasattr(model, "_resolve")
    ratio = float(cal.eps) / float(cal.target_eps)  # RDP: the certificate is linear in 1/beta
    per = f" per draw ({size} draws)" if size and size > 1 else ""
    target, certified = _in_user_units(cal, release)
    judged = _dp_judgement(cal, release)
    if judged is not None:  # an (eps, delta) target: judged and quoted in (eps, delta)
        unit = f" at delta={judged[2]:g}"
        asked = f"eps={target:g}{unit}"
        whole = f" for its {size} draws" if size and size > 1 else ""
        head = (
            f"calibration capped the knob at {name}={value:.6g}: the release certifies "
            f"eps={_up4(certified)}{unit}{whole}, {certified / target:.2g} of the requested "
            f"{asked}, so it spends less than asked and more eps buys nothing."
        )
    else:
        unit, asked = f" at lam={cal.lam:g}", f"eps={target:g}"
        head = (
            f"calibration capped the knob at {name}={value:.6g}: the certified eps is "
            f"{_up4(certified)}{unit}{per}, {ratio:.2g} of the requested "
            f"{target:g}, so the release spends less than asked and more eps buys nothing."
        )
    spend = f"or ask for eps={_up4(certified)}{unit} (what this release certifies)"
    if value < 1.0 and judged is not None:
        exact = getattr(model, "backend", None) == "exact"
        return head + (
            f" {name}={value:.6g} is the largest knob the (eps, delta) search found both "
            "certified and within the back-end's limits at some order"
            + (
                " (backend='exact' refuses larger knobs at the orders that would spend the "
                "target: one draw would exceed its proposal budget)"
                if exact
                else " (beyond it each order either certifies less than asked or is refused)"
            )
            + "; to use the budget: "
            + (
                "backend='langevin' or backend='auto' (no proposal budget), "
                if exact
                else "a stronger prior, "
            )
            + spend
        )
    if value < 1.0:
        return head + (
            f" {name}={value:.6g} is the largest knob lam={cal.lam:g} certifies (the "
            f"divergence is infinite beyond it); to reach {asked}: a smaller "
            f"lam (the cap grows as lam falls), a stronger prior, {spend}"
        )
    what = {
        "r": "The release is the untempered posterior (likelihood weight r = 1)",
        "m": "The release is the posterior under the prior itself (m = 1)",
        "t": "OPS already uses the whole likelihood (t = 1)",
    }[name]
    if (cal.sampler or {}).get("schedule") == "utility" and name != "t":
        what = {
            "r": "The release weighs the whole likelihood (r = 1)",
            "m": "The release weighs the whole likelihood (m = 1)",
        }[name] + (
            ", run by Langevin's utility schedule (noisy gradient descent from 0, not a "
            "posterior draw) for as many steps as the target allows, up to the stationary "
            "schedule's number (docs/langevin.md §6)"
        )
    if glm and name == "t":
        fix = (
            f"a larger radius R (OPS's eps0 = 2 t c R; R={model.radius:.4g} here, its default "
            f"c / beta grows as beta falls), another method, {spend}"
        )
    elif glm:
        beta = float(model.beta)
        rule = getattr(model, "auto_margin_scale", None)
        smaller = f"beta={beta * ratio:.3g} instead of {beta:.3g} would about meet {asked}"
        if rule is None:
            smaller += "; beta='auto' is the documented public rule, docs/glm.md"
        else:  # beta = c^2 d / (n M^2): a larger M gives a smaller beta
            smaller = (
                f"beta='auto' chose {beta:.3g} from margin_scale={rule:g}; margin_scale="
                f"{rule / ratio**0.5:.3g} (beta={beta * ratio:.3g}) would about meet "
                f"{asked}"
            )
        fix = (
            f"a smaller beta (the certified eps at {name} = 1 is inversely proportional to "
            f"beta: {smaller}), method='direct' (the same posterior, without calibration), "
            f"{spend}"
        )
    else:
        fix = (
            "a weaker prior (smaller prior parameters make the posterior more sensitive to "
            f"a record, so {name} = 1 certifies more), method='direct' (the same posterior, "
            f"where it is RDP at this lam), {spend}"
        )
    return head + f" {what}; to use the budget: {fix}"


def warn_if_capped(cal, *, stacklevel: int = 2, size: int | None = None, release=None) -> bool:
    """Issue :class:`privbayes.KnobCappedWarning` if :func:`capped` (cal, release); return
    whether it did. ``stacklevel`` as for :func:`warnings.warn`, counted from the caller of
    this function (2: the caller's caller). ``size``: the release's number of draws, for the
    message (``cal`` is per draw). ``release``: the release ``cal`` belongs to, whose
    whole call an (eps, delta) target is judged by.
    Silent inside :func:`quiet` and nested public entries."""
    if _QUIET.get() or not capped(cal, release):
        return False
    name, value = _knob(cal)
    target, certified = _in_user_units(cal, release)
    judged = _dp_judgement(cal, release)
    warning = KnobCappedWarning(
        _message(cal, size, release),
        certified_eps=certified,
        target_eps=target,
        delta=None if judged is None else judged[2],
        method=cal.method,
        knob=name,
        value=value,
    )
    warnings.warn(warning, stacklevel=stacklevel + 1)
    return True


@contextlib.contextmanager
def quiet():
    """Within this block :func:`warn_if_capped` is silent (for internal searches that
    calibrate many times; the public entry warns once on its final Calibration)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _calibration_of(result):
    """(Calibration, number of draws, the release it belongs to) of a public entry's
    result: a Calibration, a release (its ``calibration``) or a fitted estimator (its
    ``calibration_``)."""
    if is_calibration(result):
        return result, None, None
    cal = getattr(result, "calibration", None)
    if is_calibration(cal):
        return cal, getattr(result, "size", None), result
    cal = getattr(result, "calibration_", None)
    if is_calibration(cal):  # a fitted estimator: the release its fit made, if it kept it
        release = getattr(result, "_release", None)
        return cal, getattr(result, "n_samples", None), release
    return None, None, None


def public_entry(func):
    """Decorator for a public entry point returning a Calibration, a release (its
    ``calibration``) or a fitted estimator (its ``calibration_``): runs ``func`` with the
    warning quiet, then warns once on the result, pointing at the caller's line. Nested
    public entries (and calls inside :func:`quiet`) do not warn."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _QUIET.get():
            return func(*args, **kwargs)
        token = _QUIET.set(True)
        try:
            result = func(*args, **kwargs)
        finally:
            _QUIET.reset(token)
        cal, size, release = _calibration_of(result)
        if cal is not None:
            warn_if_capped(cal, stacklevel=2, size=size, release=release)
        return result

    return wrapper
