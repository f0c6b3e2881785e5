"""RDP accountant: compose curves, convert to (eps, delta)-DP (docs/background.md §1,
docs/accounting.md §3-§5).

Events and accountant kept apart, as in Google's dp_accounting: a *curve* is anything
that gives eps at an array of orders — a function ``orders -> eps``, a privbayes release
(``PrivateSample``/``Calibration``: their ``rdp`` method), or a fixed array on the
accountant's own orders. The accountant adds curves (RDP composition) and converts.

Rounding always errs towards more privacy spent: composed curves are summed exactly and
read back rounded up, and the conversions add a bound on their own rounding error. When
every composed curve can be evaluated at any order, the conversion is refined by a
continuous minimisation over the order, also beyond the ends of the grid.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
from scipy import optimize

from .curves import _orders
from .exact import ExactSum, sum_up

__all__ = [
    "DEFAULT_ORDERS",
    "WIDE_ORDERS",
    "RdpAccountant",
    "rdp_to_dp",
    "OrdersWarning",
    "eps_with_tv",
    "failure_eps",
]

DEFAULT_ORDERS = np.unique(
    np.concatenate(
        [
            1.0 + np.geomspace(1e-3, 1023.0, 160),  # dense on a log scale over (1, 1024]
            np.arange(2.0, 65.0),  # integers, exact and cheap for subsampled Gaussians
            [128.0, 256.0, 512.0, 1024.0, np.inf],
        ]
    )
)

#: The ledger's default grid: DEFAULT_ORDERS plus 40 orders from 1024 up to about 1.08e6
#: (ratio 1.19), so that the optimal order of a Gaussian-like curve sits inside the grid for
#: every delta >= 5e-324 unless the whole charge is below about 1e-3 (docs/accounting.md §5).
WIDE_ORDERS = np.unique(np.concatenate([DEFAULT_ORDERS, 1024.0 * 1.19 ** np.arange(1, 41)]))

_U = 2.0**-53
_TINY = 2.0**-1060  # absolute floor of the conversion margins (subnormal slop)
_REFINE_MAX_ORDER = 1e12  # the continuous search above the grid stops here


class OrdersWarning(UserWarning):
    """The best order sits at an end of the ``orders`` grid: extend ``orders``."""


def _check_delta(delta) -> float:
    if isinstance(delta, str | bool):
        raise TypeError(f"delta must be a number in [0, 1]; got {delta!r}")
    d = float(delta)
    if not 0 <= d <= 1 or math.isnan(d):
        raise ValueError(f"delta must lie in [0, 1]; got {delta!r}")
    return d


def _check_eps(eps) -> float:
    if isinstance(eps, str | bool):
        raise TypeError(f"eps must be a number >= 0; got {eps!r}")
    e = float(eps)
    if not e >= 0:  # NaN fails too
        raise ValueError(f"eps must be >= 0 (inf allowed); got {eps!r}")
    return e


def _check_method(method) -> None:
    if method not in ("improved", "mironov"):
        raise ValueError(f"method must be 'improved' or 'mironov'; got {method!r}")


def sorted_orders(orders) -> np.ndarray:
    """Orders >= 1 (inf allowed) as a sorted array without repeats; ValueError if empty."""
    lam = np.unique(_orders(orders).ravel())
    if lam.size == 0:
        raise ValueError("orders must not be empty")
    return lam


def rdp_to_dp(orders, eps, delta: float, method: str = "improved") -> np.ndarray:
    """eps of (eps, delta)-DP implied by RDP eps at each order (docs/background.md §1).

    ``improved`` (default; Canonne-Kamath-Steinke 2020 Prop. 12 / Balle et al. 2020 Thm 21):
    eps + log((lam-1)/lam) - (log delta + log lam)/(lam-1), clamped at 0.
    ``mironov`` (Mironov 2017 Prop. 3): eps + log(1/delta)/(lam-1).
    Each value is rounded up by a bound on its floating-point error (docs/accounting.md §4).

    Limits (docs/accounting.md §4): RDP eps = 0 at any order means the two output laws are
    equal, so 0 for every delta (also delta = 0 and order 1); delta = 1 gives 0 (every
    mechanism is (0, 1)-DP); order inf converts to eps(inf) (pure DP) for any delta;
    otherwise order 1 (KL) gives inf, delta = 0 gives inf at finite orders, and an
    unbounded RDP eps gives inf.
    """
    lam = _orders(orders)
    eps = np.broadcast_to(np.asarray(eps, float), lam.shape)
    delta = _check_delta(delta)
    _check_method(method)
    if np.isnan(eps).any() or (eps < 0).any():
        raise ValueError("eps must be >= 0 at every order (no NaN)")
    out = np.full(lam.shape, np.inf)
    inf = np.isinf(lam)
    out[inf] = eps[inf]
    mid = ~inf & (lam > 1) & np.isfinite(eps)
    if delta > 0 and mid.any():
        lm, em = lam[mid], eps[mid]
        log_d = math.log(delta)
        t = lm - 1
        if method == "improved":
            a, b = np.log1p(-1.0 / lm), (log_d + np.log(lm)) / t
            val = em + a - b
            err = 16 * _U * (em + np.abs(a) + (abs(log_d) + np.log(lm)) / t + np.abs(val))
        else:
            b = -log_d / t  # not log(1/delta): 1/delta overflows for subnormal delta
            val = em + b
            err = 16 * _U * (em + b)
        out[mid] = np.maximum(np.nextafter(val + err + _TINY, np.inf), 0.0)
    out[eps == 0] = 0.0
    if delta == 1:
        out[:] = 0.0
    return out


def _log_delta(lam: np.ndarray, eps_rdp: np.ndarray, eps: float) -> np.ndarray:
    """log delta at each finite order > 1 for a target eps (the improved conversion solved
    for delta), rounded up; inf where eps_rdp is inf, -inf where eps is inf."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        t = lam - 1
        a = np.log1p(-1.0 / lam)
        val = t * (eps_rdp - eps + a) - np.log(lam)
        err = 16 * _U * (t * (eps_rdp + eps + np.abs(a)) + np.log(lam) + np.abs(val)) + _TINY
        out = val + err
    out = np.where(np.isinf(eps_rdp), np.inf, out)
    return np.where(math.isinf(eps) & np.isfinite(eps_rdp), -np.inf, out)


def _grid_conversion(orders: np.ndarray, eps: np.ndarray, delta: float, method: str):
    """(eps, order, index, at_edge) of the best grid order; eps and curve arrays >= 0.

    ``at_edge``: the best order is the smallest or largest finite order > 1 of the grid
    (and eps > 0), so a wider grid might do better. Order nan when no order is needed
    (delta = 1) or none gives a finite value.
    """
    dp = rdp_to_dp(orders, eps, delta, method)
    if delta == 1:
        return 0.0, math.nan, -1, False
    best = int(np.argmin(dp))
    val = float(dp[best])
    if not math.isfinite(val):
        return math.inf, math.nan, -1, False
    finite = np.flatnonzero(np.isfinite(orders) & (orders > 1))
    at_edge = bool(val > 0 and finite.size and best in (finite[0], finite[-1]))
    return val, float(orders[best]), best, at_edge


def _frac_up(q: Fraction) -> float:
    """The smallest float >= q (q >= 0)."""
    f = float(q)
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def _frac_down(q: Fraction) -> float:
    """The largest float <= q."""
    f = float(q)
    return math.nextafter(f, -math.inf) if Fraction(f) > q else f


def failure_eps(tau: Fraction) -> float:
    """log(1 / (1 - tau)), rounded up: what a failure allowance ``tau`` < 1 adds to eps
    (docs/accounting.md §8); inf for tau >= 1."""
    if tau >= 1:
        return math.inf
    t = _frac_up(tau)
    if t >= 1:
        return math.inf
    # -log1p(-t) is increasing in t and correctly rounded to within an ulp or so: pad it
    return math.nextafter(-math.log1p(-t) * (1 + 8 * _U), math.inf) if t > 0 else 0.0


def eps_with_tv(conv, delta: float, tau: Fraction) -> tuple:
    """The (eps, ...) of (eps, delta)-DP for releases that fail (release nothing) with
    probability at most ``tau`` in total, independently of what they would have released,
    and are otherwise the mechanism whose RDP curve converts by ``conv(delta') ->
    (eps', ...)``: eps = eps'(delta - tau) + log(1 / (1 - tau)) (docs/accounting.md §8),
    rounded up. Returns ``conv``'s tuple with eps replaced; eps = inf when delta <= tau.
    """
    if not Fraction(delta) > tau or tau >= 1:
        return (math.inf, math.nan)
    got = conv(_frac_down(Fraction(delta) - tau))
    eps = got[0]
    if math.isfinite(eps):
        eps = math.nextafter(eps + failure_eps(tau), math.inf)
    return (eps, *got[1:])


def _check_tv(curve) -> float:
    """A curve's total-variation allowance (0 when it has none), checked."""
    tv = getattr(curve, "tv", 0.0)
    if isinstance(tv, bool) or not isinstance(tv, int | float) or not 0 <= tv <= 1:
        raise ValueError(f"a curve's tv must be a number in [0, 1]; got {tv!r}")
    return float(tv)


def _is_release(curve) -> bool:
    cal = getattr(curve, "calibration", None)
    return cal is not None and hasattr(cal, "rdp") and hasattr(curve, "size")


class RdpAccountant:
    """Accumulates RDP curves over a grid of orders and converts them to (eps, delta)-DP.

    Parameters
    ----------
    orders : array of orders >= 1 (inf allowed); default :data:`DEFAULT_ORDERS`, a dense
        grid over (1, 1024] plus inf. Stored sorted and without repeats as ``self.orders``:
        array curves must be given on ``self.orders``.

    All composed curves must share one neighbour relation: privbayes releases are
    replace-one; :func:`subsampled_gaussian_rdp` is add/remove (as in DP-SGD accountants).
    Composition is exact (docs/accounting.md §3): ``rdp`` is the exact sum rounded up.
    A privbayes release is kept for refinement as its (public) calibration and size only,
    never with its drawn values.
    """

    def __init__(self, orders=None) -> None:
        self.orders = DEFAULT_ORDERS if orders is None else sorted_orders(orders)
        self._sum = ExactSum(self.orders.size)
        self._upper: np.ndarray | None = None
        # evaluable parts for refinement, by identity: id -> [curve, count]; None once a
        # fixed array was composed (no longer evaluable between grid points)
        self._parts: dict[int, list] | None = {}
        self.releases = 0  # how many curves were composed (with their counts)
        self._tv = Fraction(0)  # exact sum of the composed total-variation allowances

    # -- composition ------------------------------------------------------------------
    @staticmethod
    def _evaluate(curve, orders: np.ndarray) -> np.ndarray:
        if hasattr(curve, "rdp"):
            return np.asarray(curve.rdp(orders), float)
        if callable(curve):
            return np.asarray(curve(orders), float)
        raise TypeError("curve must be a release (with .rdp), a function of orders or an array")

    def _prepare(self, curve, count) -> tuple[np.ndarray, object, int, float]:
        """Evaluate ``curve`` on the orders and check it: (eps, evaluable part or None,
        multiplicity of that part per copy, its total-variation allowance ``tv``). Runs no
        state change (no lock needed)."""
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        fixed = isinstance(curve, np.ndarray | list | tuple)
        if getattr(curve, "_rdp_is_size_times_calibration", False):
            # a privbayes release or charge: its curve is size x one draw's (exact, rounded
            # up) by construction, so one evaluation of the calibration's curve suffices
            cal_eps = np.asarray(curve.calibration.rdp(self.orders), float)
            if np.isnan(cal_eps).any() or (cal_eps < 0).any():
                raise ValueError("a curve must be >= 0 at every order (no NaN)")
            return cal_eps, curve.calibration, curve.size or 1, _check_tv(curve)
        eps = np.asarray(curve, float) if fixed else self._evaluate(curve, self.orders)
        if eps.shape != self.orders.shape:
            raise ValueError(
                f"a curve must give eps at each of the {self.orders.size} orders "
                f"(accountant.orders); got shape {eps.shape}"
            )
        if np.isnan(eps).any() or (eps < 0).any():
            raise ValueError("a curve must be >= 0 at every order (no NaN)")
        part, mult = (None, 0) if fixed else (curve, 1)
        if _is_release(curve):  # keep the calibration, not the draws
            size = curve.size or 1
            cal_eps = np.asarray(curve.calibration.rdp(self.orders), float)
            # k draws: the release reports k times one draw's curve, exact and rounded up
            times = np.array([_frac_up(size * Fraction(v)) if v < math.inf else v for v in cal_eps])
            if np.array_equal(eps, times) or np.array_equal(eps, cal_eps):
                part, mult = curve.calibration, (1 if np.array_equal(eps, cal_eps) else size)
                eps = cal_eps
            else:
                part, mult = None, 0
        return eps, part, mult, (0.0 if fixed else _check_tv(curve))

    def _add(self, eps: np.ndarray, part, mult: int, tv: float, count: int) -> None:
        if count == 0:
            return  # nothing composed (and no 0 * inf)
        self._tv += int(count) * Fraction(tv)
        self._sum.add(eps, int(count) * max(mult, 1))
        self._upper = None
        self.releases += int(count)
        if part is None:
            self._parts = None
        elif self._parts is not None:
            entry = self._parts.setdefault(id(part), [part, 0])
            entry[1] += int(count) * mult

    def compose(self, curve, count: int = 1) -> RdpAccountant:
        """Add ``count`` copies of ``curve`` (RDP composition, exact). Returns self.

        ``curve``: a PrivateSample/Calibration, a function ``orders -> eps``, or an array of
        eps on ``self.orders``. Raises ValueError for a curve with NaN or negative values,
        the wrong shape, or a count that is not an integer >= 0.
        """
        self._add(*self._prepare(curve, count), count)
        return self

    @property
    def tv(self) -> float:
        """The composed total-variation allowance (the exact sum of the composed curves'
        ``tv``, rounded up): everything composed is within ``tv`` of a mechanism with the
        composed RDP curve, and the conversions account for it (docs/accounting.md §8)."""
        return _frac_up(self._tv)

    @property
    def rdp(self) -> np.ndarray:
        """The composed eps at each of ``orders``: the exact sum rounded up (a copy)."""
        return self._total_grid().copy()

    def _total_grid(self) -> np.ndarray:
        if self._upper is None:
            self._upper = self._sum.upper()
        return self._upper

    def _total(self, lam: float) -> float:
        """The composed eps at any order (exact sum of the parts, rounded up)."""
        parts = list(self._parts.values())
        vals = [float(self._evaluate(f, np.array([lam])).ravel()[0]) for f, _ in parts]
        if any(math.isnan(v) or v < 0 for v in vals):
            return math.inf
        return sum_up(vals, [c for _, c in parts])

    # -- conversion -------------------------------------------------------------------
    def get_epsilon_and_order(
        self, delta: float, method: str = "improved", refine: bool = True
    ) -> tuple[float, float]:
        """(eps, the order achieving it) of (eps, delta)-DP for everything composed so far.

        ``refine``: minimise over continuous orders around the best grid order — and beyond
        the largest one when that is best — when every composed curve can be evaluated
        anywhere (never worse than the grid). An OrdersWarning says when the optimum sits
        at an end of the grid and could not be refined past it.

        Special cases (docs/accounting.md §4): nothing composed, or a composed curve that
        is 0 at some order, gives (0.0, that order) for every delta; delta = 1 gives
        (0.0, nan); delta = 0 gives the order-inf value (pure DP; inf without order inf);
        no finite value gives (inf, nan).
        """
        delta = _check_delta(delta)
        _check_method(method)
        if self._tv > 0:
            return self._with_tv(delta, method, refine)
        total = self._total_grid()
        eps, lam, best, at_edge = _grid_conversion(self.orders, total, delta, method)
        if eps == 0 or not math.isfinite(eps) or delta == 0:
            return eps, lam
        finite = np.flatnonzero(np.isfinite(self.orders) & (self.orders > 1))
        if refine and self._parts and best in finite:
            refined = self._refine(best, delta, method)
            if refined is not None:
                r_eps, r_lam, r_edge = refined
                at_edge = r_edge
                if r_eps < eps:
                    eps, lam = r_eps, r_lam
        if at_edge:
            warnings.warn(
                f"the best order {lam:g} is at an end of `orders` "
                f"[{self.orders[finite[0]]:g}, {self.orders[finite[-1]]:g}]; "
                "pass a wider `orders` grid to RdpAccountant",
                OrdersWarning,
                stacklevel=2,
            )
        return eps, lam

    def _rdp_only(self) -> RdpAccountant:
        """A view of this accountant without the total-variation allowance."""
        twin = RdpAccountant.__new__(RdpAccountant)
        twin.__dict__.update(self.__dict__)
        twin._tv = Fraction(0)
        return twin

    def _with_tv(self, delta: float, method: str, refine: bool) -> tuple[float, float]:
        """(eps, order) under the composed total-variation allowance (docs/accounting.md §8)."""
        plain = self._rdp_only()
        return eps_with_tv(
            lambda d: plain.get_epsilon_and_order(d, method, refine), delta, self._tv
        )

    def _bracket(self, best: int, objective) -> tuple[float, float, bool]:
        """An interval around the best grid order for the continuous search, extended by
        doubling above the largest finite order while the objective keeps falling."""
        fin = self.orders[np.isfinite(self.orders) & (self.orders > 1)]
        i = int(np.searchsorted(fin, self.orders[best]))
        lo = float(fin[i - 1]) if i > 0 else 1.0 + 1e-12
        if i + 1 < fin.size:
            return lo, float(fin[i + 1]), False
        x, fx = float(fin[i]), objective(float(fin[i]))
        while True:
            if 2 * x > _REFINE_MAX_ORDER:
                return max(lo, x / 2), x, True  # still falling at the cap
            f2 = objective(2 * x)
            if not f2 < fx:
                return max(lo, x / 2), 2 * x, False
            lo, x, fx = x, 2 * x, f2

    def _refine(self, best: int, delta: float, method: str):
        """(eps, order, at_edge) of the continuous minimisation, or None."""

        def f(lam: float) -> float:
            return float(rdp_to_dp(lam, self._total(lam), delta, method))

        lo, hi, capped = self._bracket(best, f)
        if not hi > lo:
            return None
        res = optimize.minimize_scalar(
            f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * hi}
        )
        if not res.success:
            return None
        return float(res.fun), float(res.x), capped

    def get_epsilon(self, delta: float, method: str = "improved", refine: bool = True) -> float:
        """eps of (eps, delta)-DP; inf when no order gives a finite value (see
        :meth:`get_epsilon_and_order` for the special cases)."""
        return self.get_epsilon_and_order(delta, method, refine)[0]

    def get_delta(self, eps: float, refine: bool = True) -> float:
        """Smallest delta such that everything composed is (eps, delta)-DP (improved
        conversion, rounded up; continuous refinement over the order as for eps).

        Special cases (docs/accounting.md §4): a composed curve that is 0 at some order
        (or nothing composed) gives 0; a finite order-inf value <= eps gives 0 (pure DP);
        eps = inf gives 0 when some order has a finite value (the output laws are then
        absolutely continuous) and 1 otherwise (e.g. sigma = 0: the mechanism reveals its
        input, and only delta = 1 covers that); otherwise clamped to [0, 1].
        """
        eps = _check_eps(eps)
        if self._tv > 0:
            # delta'(eps - log(1 / (1 - tau))) + tau (docs/accounting.md §8)
            shift = failure_eps(self._tv)
            inner = eps if math.isinf(eps) else math.nextafter(eps - shift, -math.inf)
            if not inner >= 0:  # also tau >= 1: only delta = 1 is certain
                return 1.0
            base = self._rdp_only().get_delta(inner, refine)
            return min(1.0, math.nextafter(base + _frac_up(self._tv), math.inf))
        total = self._total_grid()
        if (total == 0).any():
            return 0.0
        finite_val = np.isfinite(total)
        if math.isinf(eps):
            return 0.0 if finite_val.any() else 1.0
        inf = np.isinf(self.orders)
        if inf.any() and total[inf][0] <= eps:
            return 0.0
        fin = ~inf & (self.orders > 1)
        if not fin.any():
            return 1.0
        lams = self.orders[fin]
        log_d = _log_delta(lams, total[fin], eps)
        best = int(np.argmin(log_d))
        val = float(log_d[best])
        if refine and self._parts and math.isfinite(val):

            def f(a: float) -> float:
                return float(_log_delta(np.array([a]), np.array([self._total(a)]), eps)[0])

            lo, hi, _ = self._bracket(int(np.flatnonzero(fin)[best]), f)
            res = optimize.minimize_scalar(
                f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * hi}
            )
            if res.success:
                val = min(val, float(res.fun))
        if val >= 0:
            return 1.0
        return min(1.0, float(np.nextafter(math.exp(val) * (1 + 4 * _U), np.inf)))
