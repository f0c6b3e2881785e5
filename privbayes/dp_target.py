"""Calibration to an (eps, delta)-DP target: the order and the knob chosen from public inputs.

A mechanism with knob k (r, m, OPS's t, or the noise-aware release's 1 / sigma^2) and RDP
curve eps_k(lam) is (eps, delta)-DP by the improved conversion at order lam exactly when
eps_k(lam) <= E(lam), the inverse conversion of the target at lam (docs/dp_target.md §1).
So the largest knob that the conversion certifies is the maximum over lam of the largest
knob certified at (lam, E(lam)) — an RDP calibration the project already proves — and the
search here is over the order only: a coarse scan of a public grid of orders, then a golden
section search around the best. Every quantity depends on (eps, delta), the order grid and
what the RDP calibration reads (model, n, method, public bounds): never on the data.

The chosen order is one of the ledger's orders (by default its wide grid, which holds the
default accountant's orders), so the ledger and the accountants, which convert on their
grids, charge at most the value certified here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .accounting.accountant import WIDE_ORDERS, eps_with_tv, failure_eps, rdp_to_dp
from .errors import InfeasiblePrivacyError

__all__ = ["DpSearch", "ORDERS", "check_delta_target", "inverse_conversion", "search"]

#: The orders the search may choose by default: the finite orders > 1 of the ledger's wide
#: grid (lam - 1 from 1e-3 to ~1e6; it holds the default accountant's orders, so both
#: convert a release at its chosen order); order inf is tried besides.
ORDERS = np.array(WIDE_ORDERS[np.isfinite(WIDE_ORDERS) & (WIDE_ORDERS > 1)])
ORDERS.setflags(write=False)

_SCAN = 12  # scan points over the admissible orders, when the bracket finds nothing
_STEP = 6  # the bracket's first half-width, in grid indices
_GOLDEN_ITER = 24  # at most; the search stops when the bracket holds no unseen index
_INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0


def check_delta_target(delta) -> float:
    """delta of an (eps, delta) target: a number in [0, 1). 0 asks for pure DP (order inf
    only); 1 would certify anything and is refused."""
    if isinstance(delta, str | bool) or not isinstance(delta, int | float | np.number):
        raise TypeError(f"delta must be a number in [0, 1); got {delta!r}")
    d = float(delta)
    if not 0.0 <= d < 1.0:  # NaN fails too
        raise ValueError(
            f"delta must lie in [0, 1) (0: pure DP; every mechanism is (0, 1)-DP, so 1 says "
            f"nothing); got {delta!r}"
        )
    return d


def inverse_conversion(orders, eps: float, delta: float) -> np.ndarray:
    """E(lam): the largest float RDP eps at each finite order > 1 whose improved conversion
    (:func:`privbayes.accounting.rdp_to_dp`, rounded up as the accountant rounds it) is at
    most ``eps`` at ``delta``; -inf where none is positive. Closed form
    eps - log(1 - 1/lam) + (log delta + log lam) / (lam - 1), then checked by rdp_to_dp
    itself and lowered ulp-wise until it passes (so the judge is the conversion the
    accountant uses, not this formula)."""
    lam = np.asarray(orders, float)
    if delta <= 0:
        return np.full(lam.shape, -np.inf)
    t = lam - 1.0
    val = eps - np.log1p(-1.0 / lam) + (math.log(delta) + np.log(lam)) / t
    # pre-shrink by the conversion's own error allowance (16u of its terms, twice)
    val = val - 64 * 2.0**-53 * (np.abs(val) + eps + (abs(math.log(delta)) + np.log(lam)) / t)
    out = np.where(val > 0, val, -np.inf)
    ok = out > 0
    if ok.any():  # the judge: the accountant's own conversion, vectorised, then ulp fixes
        bad = np.zeros(lam.shape, bool)
        bad[ok] = rdp_to_dp(lam[ok], out[ok], delta) > eps
        for i in np.flatnonzero(bad):
            v = float(out[i])
            for _ in range(64):
                v = math.nextafter(v * (1 - 2.0**-40), 0.0)
                if v > 0 and float(rdp_to_dp(lam[i], v, delta)) <= eps:
                    break
            else:
                v = -math.inf
            out[i] = v if v > 0 else -np.inf
    return out


@dataclass(frozen=True)
class DpSearch:
    """The outcome of :func:`search`: ``result`` (what ``calibrate_at`` returned at the
    chosen order), ``lam`` the order, ``rdp_target`` E(lam) the RDP target it was calibrated
    to, ``eps_at_lam`` the certified RDP eps of the whole release at lam, ``dp_eps`` the
    certified eps at ``delta`` (<= the requested eps), ``tv`` the release's failure
    allowance, ``evaluations`` the RDP calibrations run."""

    result: Any
    lam: float
    rdp_target: float
    eps_at_lam: float
    eps: float
    delta: float
    dp_eps: float
    tv: float
    evaluations: int


def _dp_at(lam: float, eps_lam: float, delta: float, tv: float) -> float:
    """eps at ``delta`` certified by the single point (lam, eps_lam) of the release's curve,
    with its failure allowance ``tv`` (docs/accounting.md §8), rounded up."""

    def conv(d: float) -> tuple[float]:
        if math.isinf(lam):
            return (float(eps_lam),)
        return (float(rdp_to_dp(lam, eps_lam, d)),)

    if tv == 0:
        return conv(delta)[0]
    return eps_with_tv(conv, delta, Fraction(tv))[0]


def _search_once(
    calibrate_at, score, eps: float, delta: float, name: str, orders, with_inf: bool = True
):
    """The best order for target (eps, delta) (no failure allowance): (lam, E, result,
    eps_at_lam, evaluations); InfeasiblePrivacyError when no order certifies. Order inf is
    tried only ``with_inf`` (a ledger whose orders lack it would not convert there)."""
    targets = inverse_conversion(orders, eps, delta)
    admissible = np.flatnonzero(targets > 0)
    memo: dict[int, tuple] = {}  # index (-1: order inf) -> (key, result, eps_at_lam)
    reach: list[tuple[float, float]] = []  # (eps at delta reachable, order) from refusals
    refusals: dict[float, str] = {}  # order -> a refusal naming no reachable eps (structural)

    def evaluate(i: int) -> tuple:
        if i in memo:
            return memo[i][0]
        if i < 0 and not with_inf:  # not an order of the grid (a ledger's own orders)
            memo[i] = ((-math.inf, -math.inf), None, math.inf)
            return memo[i][0]
        lam = math.inf if i < 0 else float(orders[i])
        target = eps if i < 0 else float(targets[i])
        try:
            result = calibrate_at(lam, target)
        except InfeasiblePrivacyError as err:
            low = (getattr(err, "reachable", None) or {}).get("min_eps")
            if isinstance(low, int | float) and math.isfinite(low) and low >= 0:
                reach.append((_dp_at(lam, float(low), delta, 0.0), lam))
            else:
                refusals.setdefault(lam, str(err))
            memo[i] = ((-math.inf, -math.inf), None, math.inf)
            return memo[i][0]
        knob, at_lam = score(result)
        # the larger knob wins; among equal knobs (e.g. method "direct"), the smaller eps
        key = (float(knob), -_dp_at(lam, float(at_lam), delta, 0.0))
        memo[i] = (key, result, float(at_lam))
        return key

    if delta == 0 or not admissible.size:
        evaluate(-1)  # pure DP (order inf) is all that is left
    else:
        lo_i, hi_i = int(admissible[0]), int(admissible[-1])
        # start where a Gaussian-shaped curve (eps proportional to lam) would peak: the
        # order maximising E(lam) / lam; then bracket the best order by doubling steps
        i0 = int(admissible[np.argmax(targets[admissible] / orders[admissible])])
        step = _STEP
        a, b = max(lo_i, i0 - step), min(hi_i, i0 + step)
        f0, fa, fb = evaluate(i0), evaluate(a), evaluate(b)
        while True:
            if fa > f0 and fa >= fb and a > lo_i:
                b, i0, f0, step = i0, a, fa, 2 * step
                a = max(lo_i, i0 - step)
                fa = evaluate(a)
            elif fb > f0 and b < hi_i:
                a, i0, f0, step = i0, b, fb, 2 * step
                b = min(hi_i, i0 + step)
                fb = evaluate(b)
            else:
                break
        if f0[0] == -math.inf and fa[0] == -math.inf and fb[0] == -math.inf:
            # nothing certified near the guess (e.g. method "direct" at small orders only):
            # scan the whole admissible range, then refine around the best scan point
            scan = sorted({int(round(x)) for x in np.linspace(lo_i, hi_i, _SCAN)})
            best = max(scan, key=evaluate)
            k = scan.index(best)
            a = scan[k - 1] if k > 0 else best
            b = scan[k + 1] if k + 1 < len(scan) else best
        # golden section on the index, unimodal in the bracket (the memo makes the re-used
        # interior point free)
        for _ in range(_GOLDEN_ITER):
            if b - a <= 3:
                break
            c = b - int(round(_INV_PHI * (b - a)))
            d = a + int(round(_INV_PHI * (b - a)))
            if evaluate(c) >= evaluate(d):
                b = d
            else:
                a = c
        for i in range(a, b + 1):  # the last few indices of the bracket
            evaluate(i)
        evaluate(-1)  # order inf, when the mechanism is pure DP there
    found = [(v[0], i) for i, v in memo.items() if v[1] is not None]
    if not found:
        if reach:
            low, lam = min(reach)
            raise InfeasiblePrivacyError(
                f"(eps={eps:g}, delta={delta:g}) cannot be certified by {name}: the smallest "
                f"eps at delta={delta:g} that any order reaches is about {low:.6g} (at "
                f"lam={lam:g}); ask for eps >= {low:.6g} or a larger delta",
                reachable={"min_eps": low, "delta": delta, "lam": lam},
            )
        given = "" if orders is ORDERS else ", the orders given (a ledger's own)"
        if delta == 0:
            why = (
                "(delta = 0 asks for pure DP, order inf, which this mechanism does not reach)"
                if with_inf
                else f"(delta = 0 asks for pure DP, order inf, which is not among{given}: "
                "create the ledger with inf among its orders, or ask for delta > 0)"
            )
        else:
            span = f"lam in [{orders[0]:g}, {orders[-1]:g}]" if len(orders) else "no finite lam"
            why = (
                f"(none of {span}{given}{' nor inf' if with_inf else ''} certifies it); ask "
                "for a larger eps or delta"
                + (", or use a ledger with a wider grid of orders (the default)" if given else "")
            )
        if refusals and not reach:  # the mechanism's own reason, at order inf if tried
            at = math.inf if math.inf in refusals else min(refusals)
            why += f"; at lam={at:g} the mechanism refused: {refusals[at]}"
        raise InfeasiblePrivacyError(
            f"(eps={eps:g}, delta={delta:g}) cannot be certified by {name} at any order " + why,
            reachable={"eps": "larger", "delta": delta},
        )
    ranked = []  # (lam, E(lam), result, eps_at_lam), best first
    for _, i in sorted(found, reverse=True):
        lam = math.inf if i < 0 else float(orders[i])
        ranked.append((lam, eps if i < 0 else float(targets[i]), memo[i][1], memo[i][2]))
    return ranked, len(memo)


def _refined(ranked, calibrate_at, score, tries: int = 4):
    """The full calibration at the best orders of a coarse search, best first: (lam, E,
    result, eps_at_lam, evaluations); the first that certifies wins. None when none of the
    first ``tries`` does (the caller then searches with the full calibration)."""
    for k, (lam, target, _, _) in enumerate(ranked[:tries]):
        try:
            result = calibrate_at(lam, target)
        except InfeasiblePrivacyError:
            continue
        return lam, target, result, float(score(result)[1]), k + 1
    return None


def search(
    calibrate_at: Callable[[float, float], Any],
    score: Callable[[Any], tuple[float, float]],
    eps: float,
    delta: float,
    *,
    tv_of: Callable[[Any], float] | None = None,
    name: str = "this mechanism",
    orders=None,
    coarse_at: Callable[[float, float], Any] | None = None,
    coarse_score: Callable[[Any], tuple[float, float]] | None = None,
) -> DpSearch:
    """The largest knob certified (eps, delta)-DP, over orders chosen from public inputs.

    ``calibrate_at(lam, eps_lam)``: the RDP calibration of the release at (lam, eps_lam),
    raising InfeasiblePrivacyError where it cannot (its ``reachable["min_eps"]`` is used
    to say what the (eps, delta) target could reach). ``score(result)``: (knob, the
    release's certified RDP eps at lam); the knob is maximised. ``tv_of(result)``: the
    release's failure allowance (the exact GLM back-end's delta_f), a public number:
    the search is rerun for the target (eps - log(1/(1 - tv)), delta - tv) when it is
    positive (docs/accounting.md §8). ``orders``: the orders to choose from (default
    :data:`ORDERS` and order inf; a ledger's own orders when the release is charged to one,
    so that it converts the release at the chosen order: order inf is then tried only when
    it is one of them). ``coarse_at`` / ``coarse_score``: a cheaper
    calibration (e.g. a GLM's knob without the exact back-end's plan, whose rounding
    allowance moves eps by ~1e-8) that ranks the orders; ``calibrate_at`` then runs at the
    best few only. What is released is always ``calibrate_at``'s, at the target there.

    Returns :class:`DpSearch` with ``dp_eps <= eps`` (checked); raises
    InfeasiblePrivacyError (a ValueError) saying what is reachable.
    Source: our derivation, docs/dp_target.md.
    """
    with_inf = True
    if orders is None:
        orders = ORDERS
    else:  # a ledger's own orders: order inf only if it is one of them
        orders = np.asarray(orders, float)
        with_inf = bool(np.isposinf(orders).any())
        orders = orders[np.isfinite(orders) & (orders > 1)]
    tv, e_in, d_in = 0.0, eps, delta
    evaluations = 0
    for _ in range(4):
        picked = None
        if coarse_at is not None:  # rank the orders cheaply, calibrate fully at the best
            ranked, used = _search_once(
                coarse_at, coarse_score or score, e_in, d_in, name, orders, with_inf
            )
            picked = _refined(ranked, calibrate_at, score)
            evaluations += used + (picked[4] if picked is not None else 0)
        if picked is None:
            ranked, used = _search_once(calibrate_at, score, e_in, d_in, name, orders, with_inf)
            evaluations += used
            picked = (*ranked[0], 0)
        lam, target, result, at_lam, _ = picked
        new_tv = float(tv_of(result)) if tv_of is not None else 0.0
        if new_tv <= tv:
            break
        tv = new_tv
        if not Fraction(delta) > Fraction(tv):
            raise InfeasiblePrivacyError(
                f"delta={delta:g} does not exceed the release's failure allowance "
                f"tv={tv:g} (the exact back-end's delta_f): ask for delta > {tv:g}, or a "
                "smaller delta_f",
                reachable={"delta": f"> {tv:g}"},
            )
        e_in = math.nextafter(eps - failure_eps(Fraction(tv)), -math.inf)
        d_in = float(Fraction(delta) - Fraction(tv))
        if Fraction(d_in) > Fraction(delta) - Fraction(tv):
            d_in = math.nextafter(d_in, 0.0)
        if not e_in > 0:
            raise InfeasiblePrivacyError(
                f"eps={eps:g} does not exceed what the failure allowance tv={tv:g} costs "
                f"alone ({failure_eps(Fraction(tv)):.3g}); ask for a larger eps",
                reachable={"min_eps": failure_eps(Fraction(tv))},
            )
    else:  # pragma: no cover - tv_of is a public constant in practice
        raise InfeasiblePrivacyError(
            f"{name}: the failure allowance changes with the order; no stable target",
            reachable={"delta": "larger"},
        )
    dp_eps = _dp_at(lam, at_lam, delta, tv)
    if not dp_eps <= eps:  # the inverse conversion was checked by rdp_to_dp itself
        raise InfeasiblePrivacyError(
            f"(eps={eps:g}, delta={delta:g}) is not certified at the chosen order "
            f"lam={lam:g} ({dp_eps:.6g}); ask for a slightly larger eps",
            reachable={"min_eps": dp_eps},
        )
    return DpSearch(result, lam, target, at_lam, eps, delta, dp_eps, tv, evaluations)


def release_epsilon(release, delta: float, lam: float, stored: tuple | None = None) -> float:
    """eps of (eps, delta)-DP of ``release`` (anything an RdpAccountant composes): its whole
    curve converted by the accountant on its wide grid plus ``lam``, tv included, refined
    over continuous orders; ``stored``: (delta, eps) certified at calibration, used when it
    is smaller at that delta; the release's proven GDP bound (``gdp_bound``), converted
    exactly, when it is smaller (docs/gdp.md §5). Raises ValueError for a delta outside
    [0, 1]."""
    import warnings

    from .accounting.accountant import WIDE_ORDERS, OrdersWarning, RdpAccountant

    orders = WIDE_ORDERS if not math.isfinite(lam) else np.union1d(WIDE_ORDERS, [lam])
    acc = RdpAccountant(orders=orders)
    acc.compose(release)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)  # a wider grid only tightens it
        value = acc.get_epsilon(delta)
    if stored is not None and stored[0] == delta and stored[1] is not None:
        value = min(value, float(stored[1]))
    bound = getattr(release, "gdp_bound", None)  # docs/gdp.md: also a valid upper bound
    if bound is not None:
        value = min(value, float(bound.epsilon(delta)))
    return value


# -- the Gaussian-DP route (docs/gdp.md §7) --------------------------------------------------
GDP_ORDER = 2.0  # the order at which a GDP-shaped release is calibrated (any order would do)


def gdp_mu(eps: float, delta: float) -> float:
    """The largest mu (a float, rounded down to 1e-12 relative) whose mu-GDP mechanism is
    (eps, delta)-DP, checked with the rounded-up delta_mu (docs/gdp.md §3); 0.0 when none
    is (delta = 0). Public inputs only."""
    from .accounting.gdp import gdp_delta

    if not (eps > 0 and delta > 0):
        return 0.0
    lo, hi = 0.0, 1.0
    while gdp_delta(eps, hi) <= delta:  # delta_mu(eps) increases in mu
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return lo
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gdp_delta(eps, mid) <= delta else (lo, mid)
    return lo


def gdp_alternative(
    calibrate_at: Callable[[float, float], Any],
    gdp_of: Callable[[Any], Any],
    eps: float,
    delta: float,
) -> tuple[Any, float] | None:
    """(result, certified eps) of a release calibrated through its proven GDP bound, or None.

    For releases whose GDP bound is mu^2 = 2 rho of a rho-zCDP RDP curve (Langevin's no-pull
    runs, the exact GLM back-end: docs/gdp.md §6), the exact GDP conversion certifies more
    rho at (eps, delta) than any RDP conversion (12-22% at delta = 1e-5, eps in 0.1..10).
    ``calibrate_at(lam, eps_lam)`` is called at (GDP_ORDER, GDP_ORDER mu*^2 / 2), mu* =
    :func:`gdp_mu`; ``gdp_of(result)`` returns the release's GdpBound (or None), and the
    result is kept only when that bound certifies (eps, delta): a release whose GDP bound is
    looser than its RDP curve (a pull's contraction, allowances) fails the check and the
    caller keeps its RDP calibration. Public inputs only."""
    mu = gdp_mu(eps, delta)
    if not mu > 0:
        return None
    try:
        result = calibrate_at(GDP_ORDER, GDP_ORDER * mu * mu / 2.0)
    except InfeasiblePrivacyError:
        return None
    bound = gdp_of(result)
    if bound is None:
        return None
    got = float(bound.epsilon(delta))
    return (result, got) if got <= eps else None
