"""RDP accountant: compose curves, convert to (eps, delta)-DP (docs/background.md §1,
docs/accounting.md §3-§5).

Events and accountant kept apart, as in Google's dp_accounting: a *curve* is anything
that gives eps at an array of orders — a function ``orders -> eps``, a privbayes release
(``PrivateSample``/``Calibration``: their ``rdp`` method), or a fixed array on the
accountant's own orders. The accountant adds curves (RDP composition) and converts.

Rounding always errs towards more privacy spent: composed curves are summed exactly and
read back rounded up, and the conversions add a bound on their own rounding error. The
conversion is refined by a continuous minimisation over the order, also beyond the ends
of the grid, from what was fixed at composition (docs/accounting.md §5): a composed curve
is never called after ``compose`` returns. Privbayes releases and ``functools.partial``
curves of this package are kept as their (immutable) parameters and are exact at every
order; any other function is evaluated once, at composition, on a fine grid of orders,
and bounded in between by a proven interpolation.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import warnings
import weakref
from fractions import Fraction

import numpy as np
from scipy import optimize

from ..kinds import is_calibration
from . import curves as _curves
from . import relations as _relations
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


def _frozen(values, dtype=float) -> np.ndarray:
    """A read-only array that cannot be made writeable again (a view of a read-only base):
    shared order grids must not be edited in place."""
    base = np.array(values, dtype=dtype)
    base.setflags(write=False)
    view = base.view()
    view.setflags(write=False)
    return view


DEFAULT_ORDERS = _frozen(
    np.unique(
        np.concatenate(
            [
                1.0 + np.geomspace(1e-3, 1023.0, 160),  # dense on a log scale over (1, 1024]
                np.arange(2.0, 65.0),  # integers, exact and cheap for subsampled Gaussians
                [128.0, 256.0, 512.0, 1024.0, np.inf],
            ]
        )
    )
)

#: The ledger's default grid: DEFAULT_ORDERS plus 40 orders from 1024 up to about 1.08e6
#: (ratio 1.19), so that the optimal order of a Gaussian-like curve sits inside the grid for
#: every delta >= 5e-324 unless the whole charge is below about 1e-3 (docs/accounting.md §5).
WIDE_ORDERS = _frozen(
    np.unique(np.concatenate([DEFAULT_ORDERS, 1024.0 * 1.19 ** np.arange(1, 41)]))
)

#: Where a composed function is evaluated, besides the accountant's own orders, so that the
#: conversion can be refined between orders and beyond the grid (docs/accounting.md §5):
#: 1 + 2^(k/16), 16 orders per octave of lam - 1 from 1 + 2^-10 to 1 + 2^20 (~1.05e6).
_FINE_ORDERS = _frozen(1.0 + 2.0 ** (np.arange(-160, 321) / 16.0))


@functools.lru_cache(maxsize=16)
def _fine_grid(orders_bytes: bytes) -> tuple[np.ndarray, int, np.ndarray]:
    """(the orders and _FINE_ORDERS, sorted; how many are finite; which are not among the
    orders), read-only, for sorted ``orders`` given as bytes (shared by accountants)."""
    orders = np.frombuffer(orders_bytes, dtype=float)
    fine = _frozen(np.union1d(orders, _FINE_ORDERS))
    extra = _frozen(np.isin(fine, orders, invert=True), dtype=bool)
    return fine, int(np.isfinite(fine).sum()), extra  # inf sorts last


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


#: The largest eps at which a failure allowance is claimed: the exact back-end's tv also
#: covers its edge event, a total-variation term t (1 + e^eps) that its delta_f absorbs for
#: eps <= 700 (docs/exact.md §7, docs/accounting.md §8). Beyond, get_epsilon returns inf.
TV_EPS_MAX = 700.0


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
    if tau > 0 and eps > TV_EPS_MAX:
        eps = math.inf
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


# -- what a composed curve is kept as (docs/accounting.md §5) -----------------------------


class _Same:
    """A dict key comparing its object by identity. It holds the object, so the identity
    is never reused while the key exists, and a copied or unpickled accountant's keys hold
    (and hash) the copied objects."""

    __slots__ = ("obj",)

    def __init__(self, obj) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __reduce__(self):
        return (_Same, (self.obj,))


def _content(x):
    """A hashable stand-in for a parameter value: equal for equal numbers, strings, arrays
    and containers of them; any other object is compared by identity."""
    t = type(x)
    if t is float:  # equal floats are equal values; 0.0 and -0.0 kept apart
        return x if x != 0 else ("float", x.hex())
    if x is None or t is int or t is str or t is bool:
        return x
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        return _content(float(x))
    if isinstance(x, bool | int | str):
        return x
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        return ("array", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, tuple | list):
        return (type(x).__name__, *map(_content, x))
    if isinstance(x, dict):
        return ("dict", *((_content(k), _content(v)) for k, v in x.items()))
    return _Same(x)


_MODEL_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _model_content(model):
    """A privbayes model by content: its class and attributes (a model's curve depends on
    nothing else: models are immutable, docs/models.md), so equal models built apart
    share a key; any other object by identity. Cached per model (it cannot change)."""
    try:
        return _MODEL_KEYS[model]
    except (KeyError, TypeError):
        pass
    from ..frozen import Frozen

    if isinstance(model, Frozen) and hasattr(model, "__dict__"):
        key = ("model", _Same(type(model)), _content(vars(model)))
        try:
            _MODEL_KEYS[model] = key
        except TypeError:  # not weakly referable or not hashable
            pass
        return key
    return _Same(model)


def _release_part(cal):
    """(key, calibration as kept) for a privbayes Calibration, None for anything else.

    A Calibration is a frozen dataclass of numbers and strings with an immutable model
    (privbayes models refuse assignment and hold read-only arrays); only its ``sampler``
    dict, which its curve reads, could be edited in place, so that is copied. Its curve is
    then a fixed function of what was composed. Releases of equal models with equal knobs
    share a key (and one evaluation of the curve)."""
    if not is_calibration(cal):
        return None
    if cal.sampler is not None:
        cal = dataclasses.replace(cal, sampler=copy.deepcopy(cal.sampler))
    sampler = None if cal.sampler is None else _content(cal.sampler)
    key = (
        "release",
        _model_content(cal.model),
        cal.method,
        _content(cal.n),
        _content(cal.r),
        _content(cal.m),
        _content(cal.lam),
        _content(cal.eps),
        sampler,
    )
    return key, cal


_CURVES = {
    f.__name__: f
    for f in (
        _curves.discrete_gaussian_rdp,
        _curves.gaussian_rdp,
        _curves.laplace_rdp,
        _curves.pure_dp_rdp,
        _curves.randomized_response_rdp,
        _curves.subsampled_gaussian_rdp,
        _curves.zcdp_rdp,
    )
}


class _Event:
    """A curve with its parameters, taken from a ``functools.partial`` at composition
    (editing the partial later changes nothing): ``func(*args, orders, **params)``."""

    __slots__ = ("func", "args", "params")

    def __init__(self, func, args: tuple, params: tuple) -> None:
        self.func, self.args, self.params = func, args, params

    def rdp(self, orders) -> np.ndarray:
        return self.func(*self.args, orders, **dict(self.params))

    def __reduce__(self):
        return (_Event, (self.func, self.args, self.params))


def _plain(v) -> bool:
    """A number (not a bool) or, for a model's ``method``, a string or None."""
    if isinstance(v, bool | np.bool_):
        return False
    return isinstance(v, int | float | np.integer | np.floating | str) or v is None


def _as_event(curve):
    """(key, _Event) for ``functools.partial`` of a curve of this package with numbers as
    keywords (``partial(gaussian_rdp, sigma=2.0)``), or of a privbayes model's ``rdp`` with
    n as its one positional argument and numbers or strings as keywords
    (``partial(model.rdp, n, r=0.5, method="diffused")``); None for anything else."""
    if not isinstance(curve, functools.partial):
        return None
    func, args, kw = curve.func, curve.args, curve.keywords
    if _CURVES.get(getattr(func, "__name__", None)) is func and not args:
        what = func.__name__
    else:
        from ..frozen import Frozen

        model = getattr(func, "__self__", None)
        if not (
            isinstance(model, Frozen)
            and getattr(func, "__func__", None) is getattr(type(model), "rdp", None)
            and len(args) == 1
            and _plain(args[0])
            and not isinstance(args[0], str)
        ):
            return None
        what = ("rdp", _model_content(model))
    if "orders" in kw or not all(_plain(v) for v in kw.values()):
        return None
    args = tuple(v.item() if isinstance(v, np.generic) else v for v in args)
    params = sorted((k, v.item() if isinstance(v, np.generic) else v) for k, v in kw.items())
    key = ("event", what, tuple(map(_content, args)), tuple((k, _content(v)) for k, v in params))
    return key, _Event(func, args, tuple(params))


_NORMAL = 2.2250738585072014e-308  # the smallest normal double


def _fine_bound(lam_grid: np.ndarray, n_fin: int, eps_grid: np.ndarray, lam: float) -> float:
    """An upper bound on the composed eps at order ``lam`` from upper bounds ``eps_grid`` on
    it at the sorted orders ``lam_grid`` (``n_fin`` finite ones, then maybe inf).

    Uses only what holds for every Rényi divergence (docs/accounting.md §5): eps is
    nondecreasing in the order (so eps(inf), when known, bounds every order) and
    (lam - 1) eps(lam) is convex in lam, so its chord between two grid orders bounds it in
    between. Rounded up; inf above the last finite order unless eps(inf) is finite.
    """
    cap = float(eps_grid[-1]) if n_fin < lam_grid.size else math.inf
    i = int(np.searchsorted(lam_grid[:n_fin], lam))  # lam_grid[i - 1] < lam <= lam_grid[i]
    if i == n_fin:
        return cap
    hi_l, hi_e = float(lam_grid[i]), float(eps_grid[i])
    best = min(hi_e, cap)  # nondecreasing in the order (also below the first order)
    if i == 0 or hi_l == lam or not math.isfinite(hi_e):
        return best
    lo_l, lo_e = float(lam_grid[i - 1]), float(eps_grid[i - 1])
    if not math.isfinite(lo_e):
        return best
    # chord of g = (lam - 1) eps between lo_l < lam < hi_l, over (lam - 1): every term >= 0,
    # each of the few operations within u relative while no result is subnormal
    a, b = (lo_l - 1.0) * lo_e, (hi_l - 1.0) * hi_e
    t1, t2 = a * (hi_l - lam), b * (lam - lo_l)
    den = (hi_l - lo_l) * (lam - 1.0)
    if any(0 < v < _NORMAL for v in (a, b, t1, t2)) or not den >= _NORMAL:
        return best
    chord = (t1 + t2) / den
    if math.isfinite(chord):
        best = min(best, math.nextafter(chord * (1 + 16 * _U), math.inf))
    return best


def _add_up(total: np.ndarray | None, values: np.ndarray, count: int) -> np.ndarray:
    """total + count * values, each operation rounded up (a new array; exact zeros stay 0)."""
    c = float(count)
    if c < count:
        c = math.nextafter(c, math.inf)
    with np.errstate(over="ignore"):
        scaled = values if count == 1 else np.nextafter(values * c, np.inf)
        scaled = np.where(values == 0, 0.0, scaled)
        if total is None:
            return scaled
        s = total + scaled
        return np.where(s == 0, 0.0, np.nextafter(s, np.inf))


class RdpAccountant:
    """Accumulates RDP curves over a grid of orders and converts them to (eps, delta)-DP.

    Parameters
    ----------
    orders : array of orders >= 1 (inf allowed); default :data:`DEFAULT_ORDERS`, a dense
        grid over (1, 1024] plus inf. Stored sorted and without repeats as ``self.orders``
        (the accountant's own read-only copy): array curves must be given on
        ``self.orders``.

    relation : the neighbour relation of everything composed, "replace-one" (every
        privbayes release) or "add/remove" (:func:`subsampled_gaussian_rdp`); default None:
        fixed by the first composed curve that carries one. A curve of another relation is
        refused with NeighbourRelationError, before anything is recorded; curves without
        one (plain curves, functions, arrays) are taken to hold for the accountant's
        relation (docs/accounting.md §9). Read back as ``self.relation``.

    Composition is exact (docs/accounting.md §3): ``rdp`` is the exact sum rounded up.

    What a composed curve is kept as, for the refinement over continuous orders
    (docs/accounting.md §5); nothing composed is ever called after ``compose`` returns:

    * a privbayes release: its (public, immutable) calibration and size, never its drawn
      values; exact at every order.
    * ``functools.partial(f, name=number, ...)`` of a curve of this package (e.g.
      ``partial(gaussian_rdp, sigma=2.0)``), or ``partial(model.rdp, n, r=..., m=...,
      method=...)`` of a privbayes model: the function and a copy of its parameters; exact
      at every order.
    * any other function of orders (or object with ``rdp``): its values on ``orders`` and
      on a fine grid (16 orders per octave of lam - 1 up to order 1 + 2^20), computed at
      composition; between and beyond those orders, a proven upper bound.
    * an array: ``orders`` only; refinement then stops (grid values only).

    Copies (``copy.deepcopy``, pickle) convert exactly as the original does.
    """

    def __init__(self, orders=None, relation: str | None = None) -> None:
        self._relation = _relations.check_relation(relation)
        self._orders = _frozen(DEFAULT_ORDERS if orders is None else sorted_orders(orders))
        self._sum = ExactSum(self._orders.size)
        self._upper: np.ndarray | None = None
        # the fine grid for composed functions (the orders and _FINE_ORDERS; read-only)
        self._fine, self._fine_nfin, self._fine_extra = _fine_grid(self._orders.tobytes())
        # exact parts for refinement: content key -> [part, count]; None once an array (or
        # a function that could not be evaluated on the fine grid) was composed
        self._parts: dict[tuple, list] | None = {}
        self._fine_sum: np.ndarray | None = None  # the frozen functions' sum on _fine
        self.releases = 0  # how many curves were composed (with their counts)
        self._tv = Fraction(0)  # exact sum of the composed total-variation allowances

    @property
    def orders(self) -> np.ndarray:
        """The accountant's orders: sorted, without repeats, read-only."""
        return self._orders

    @property
    def relation(self) -> str | None:
        """The neighbour relation of what is composed ("replace-one" or "add/remove"); None
        while nothing composed carries one and none was given."""
        return self._relation

    def __setstate__(self, state: dict) -> None:
        self.__dict__.setdefault("_relation", None)  # pickled before relations existed
        self.__dict__.update(state)
        self._orders = _frozen(self._orders)
        self._fine, self._fine_nfin, self._fine_extra = _fine_grid(self._orders.tobytes())

    def _copy(self) -> RdpAccountant:
        """An independent RdpAccountant with this one's state (arrays are never edited in
        place, so they are shared)."""
        new = RdpAccountant.__new__(RdpAccountant)
        for name in (
            "_orders",
            "_upper",
            "_fine",
            "_fine_nfin",
            "_fine_extra",
            "_fine_sum",
            "releases",
            "_tv",
            "_relation",
        ):
            setattr(new, name, getattr(self, name))
        new._sum = self._sum.copy()
        parts = self._parts
        new._parts = None if parts is None else {k: list(v) for k, v in parts.items()}
        return new

    # -- composition ------------------------------------------------------------------
    @staticmethod
    def _evaluate(curve, orders: np.ndarray) -> np.ndarray:
        if hasattr(curve, "rdp"):
            return np.asarray(curve.rdp(orders), float)
        if callable(curve):
            return np.asarray(curve(orders), float)
        raise TypeError("curve must be a release (with .rdp), a function of orders or an array")

    def _checked(self, eps) -> np.ndarray:
        eps = np.asarray(eps, float)
        if eps.shape != self._orders.shape:
            raise ValueError(
                f"a curve must give eps at each of the {self._orders.size} orders "
                f"(accountant.orders); got shape {eps.shape}"
            )
        if np.isnan(eps).any() or (eps < 0).any():
            raise ValueError("a curve must be >= 0 at every order (no NaN)")
        return eps

    def _on_fine(self, curve, eps: np.ndarray) -> np.ndarray | None:
        """``curve`` on the fine grid, evaluated now (``eps``: its checked values on the
        orders); None when it cannot be evaluated there (an error, the wrong shape), and
        then it counts as an array. NaN or negative values at orders the caller did not
        ask for count as unknown: inf."""
        fine, extra = self._fine, self._fine_extra
        out = np.empty(fine.shape)
        out[~extra] = eps
        lam = fine[extra]
        try:
            with np.errstate(all="ignore"):
                vals = np.asarray(self._evaluate(curve, lam), float)
        except Exception:  # a function of the accountant's orders only
            return None
        if vals.shape != lam.shape:
            return None
        out[extra] = np.where(np.isnan(vals) | (vals < 0), np.inf, vals)
        return out

    def _prepare(self, curve, count) -> tuple:
        """Evaluate ``curve`` on the orders, check it, and fix what refinement keeps of it:
        (eps, plan, multiplicity per copy, total-variation allowance ``tv``). ``plan`` is
        ("exact", key, part), ("fine", values on the fine grid) or None (an array). Runs
        no state change (no lock needed)."""
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        if isinstance(curve, np.ndarray | list | tuple):
            return self._checked(curve), None, 0, 0.0
        tv = _check_tv(curve)
        kept = _release_part(curve)
        if kept is not None:  # a Calibration itself: one draw of its mechanism
            key, cal = kept
            return self._checked(cal.rdp(self._orders)), ("exact", key, cal), 1, tv
        if getattr(curve, "_rdp_is_size_times_calibration", False):
            # a privbayes release or charge: its curve is size x one draw's (exact, rounded
            # up) by construction, so one evaluation of the calibration's curve suffices
            kept = _release_part(curve.calibration)
            if kept is not None:
                key, cal = kept
                eps = self._checked(cal.rdp(self._orders))
                return eps, ("exact", key, cal), curve.size or 1, tv
        event = _as_event(curve)
        if event is not None:
            key, part = event
            return self._checked(part.rdp(self._orders)), ("exact", key, part), 1, tv
        eps = self._checked(self._evaluate(curve, self._orders))
        if _is_release(curve):  # keep the calibration, not the draws
            kept = _release_part(curve.calibration)
            if kept is not None:
                key, cal = kept
                size = curve.size or 1
                cal_eps = np.asarray(cal.rdp(self._orders), float)
                # k draws: the release reports k times one draw's curve, exact and rounded up
                times = [_frac_up(size * Fraction(v)) if v < math.inf else v for v in cal_eps]
                if np.array_equal(eps, cal_eps):
                    return cal_eps, ("exact", key, cal), 1, tv
                if np.array_equal(eps, np.array(times)):
                    return cal_eps, ("exact", key, cal), size, tv
        fine = self._on_fine(curve, eps)
        return eps, (None if fine is None else ("fine", fine)), 1, tv

    def _add(self, eps: np.ndarray, plan, mult: int, tv: float, count: int) -> None:
        if count == 0:
            return  # nothing composed (and no 0 * inf)
        count = int(count)
        self._tv += count * Fraction(tv)
        self._sum.add(eps, count * max(mult, 1))
        self._upper = None
        self.releases += count
        if plan is None:
            self._parts, self._fine_sum = None, None  # grid values only from now on
        elif self._parts is not None:
            if plan[0] == "exact":
                entry = self._parts.setdefault(plan[1], [plan[2], 0])
                entry[1] += count * mult
            else:
                self._fine_sum = _add_up(self._fine_sum, plan[1], count)

    def compose(self, curve, count: int = 1, relation: str | None = None) -> RdpAccountant:
        """Add ``count`` copies of ``curve`` (RDP composition, exact). Returns self.

        ``curve``: a PrivateSample/Calibration, a function ``orders -> eps`` (e.g.
        ``functools.partial(gaussian_rdp, sigma=2.0)``), or an array of eps on
        ``self.orders``. It is evaluated here, once, and never called again: what the
        refinement needs is fixed now (see the class docstring). ``relation``: the curve's
        neighbour relation when it carries none (a bare function or array); default: the
        accountant's. Raises NeighbourRelationError (a ValueError; nothing composed) when
        the curve's relation is not the accountant's or contradicts ``relation``;
        ValueError for a curve with NaN or negative values on ``self.orders``, the wrong
        shape, or a count that is not an integer >= 0.
        """
        rel = _relations.merge(self._relation, curve, relation, where=self._where())
        prepared = self._prepare(curve, count)
        self._relation = rel
        self._add(*prepared, count)
        return self

    def _where(self) -> str:
        return "this accountant"

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

    def _can_refine(self) -> bool:
        return self._parts is not None and (bool(self._parts) or self._fine_sum is not None)

    def _total(self, lam: float) -> float:
        """An upper bound on the composed eps at any order: the exact parts evaluated there
        and the bound from the frozen functions' fine grid, summed exactly, rounded up."""
        parts = list(self._parts.values())
        vals = [float(self._evaluate(p, np.array([lam])).ravel()[0]) for p, _ in parts]
        counts = [c for _, c in parts]
        if self._fine_sum is not None:
            vals.append(_fine_bound(self._fine, self._fine_nfin, self._fine_sum, lam))
            counts.append(1)
        if any(math.isnan(v) or v < 0 for v in vals):
            return math.inf
        return sum_up(vals, counts)

    def _reach(self) -> float:
        """The largest order the continuous search may try: the frozen functions are known
        up to the last finite order of the fine grid (everywhere if their eps(inf) is)."""
        top = _REFINE_MAX_ORDER
        if self._fine_sum is not None and not (
            self._fine_nfin < self._fine.size and math.isfinite(self._fine_sum[-1])
        ):
            top = min(top, float(self._fine[self._fine_nfin - 1]))
        return top

    # -- conversion -------------------------------------------------------------------
    def get_epsilon_and_order(
        self, delta: float, method: str = "improved", refine: bool = True
    ) -> tuple[float, float]:
        """(eps, the order achieving it) of (eps, delta)-DP for everything composed so far.

        ``refine``: minimise over continuous orders around the best grid order — and beyond
        the largest one when that is best — unless an array was composed (never worse than
        the grid; docs/accounting.md §5). An OrdersWarning says when the optimum sits at an
        end of the grid and could not be refined past it.

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
        eps, lam, best, at_edge = _grid_conversion(self._orders, total, delta, method)
        if eps == 0 or not math.isfinite(eps) or delta == 0:
            return eps, lam
        finite = np.flatnonzero(np.isfinite(self._orders) & (self._orders > 1))
        if refine and self._can_refine() and best in finite:
            refined = self._refine(best, delta, method)
            if refined is not None:
                r_eps, r_lam, r_edge = refined
                at_edge = r_edge
                if r_eps < eps:
                    eps, lam = r_eps, r_lam
        if at_edge:
            where = (
                f"the largest order the refinement reaches ({self._reach():g})"
                if lam > self._orders[finite[-1]]
                else f"an end of `orders` [{self._orders[finite[0]]:g}, "
                f"{self._orders[finite[-1]]:g}]"
            )
            warnings.warn(
                f"the best order {lam:g} is at {where}; pass a wider `orders` grid to "
                "RdpAccountant",
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
        doubling above the largest finite order while the objective keeps falling (up to
        :meth:`_reach`; True when it still falls there)."""
        fin = self._orders[np.isfinite(self._orders) & (self._orders > 1)]
        i = int(np.searchsorted(fin, self._orders[best]))
        lo = float(fin[i - 1]) if i > 0 else 1.0 + 1e-12
        if i + 1 < fin.size:
            return lo, float(fin[i + 1]), False
        reach = self._reach()
        x, fx = float(fin[i]), objective(float(fin[i]))
        while True:
            nxt = min(2 * x, reach)
            if not nxt > x:
                return max(lo, x / 2), x, True  # still falling at the reach
            fn = objective(nxt)
            if not fn < fx:
                return max(lo, x / 2), nxt, False
            lo, x, fx = x, nxt, fn

    def _refine(self, best: int, delta: float, method: str):
        """(eps, order, at_edge) of the continuous minimisation, or None."""

        def f(lam: float) -> float:
            return float(rdp_to_dp(lam, self._total(lam), delta, method))

        lo, hi, capped = self._bracket(best, f)
        if not hi > lo:
            return None
        val, lam = self._search(f, lo, hi)
        if not math.isfinite(val):
            return None
        return val, lam, capped

    def _search(self, objective, lo: float, hi: float) -> tuple[float, float]:
        """(min, argmin) of ``objective`` over [lo, hi] by Brent's method; (inf, nan) if it
        finds no finite value. The frozen functions' bound has kinks at the fine grid's
        orders, where a minimum often sits (and Brent's method stops up to ~1e-8 relative
        away from a kink, a first-order loss there): those orders are tried too, and the
        search runs between the best one's neighbours."""
        best = (math.inf, math.nan)
        if self._fine_sum is not None:
            fine = self._fine[: self._fine_nfin]
            pts = [lo, *fine[(fine > lo) & (fine < hi)].tolist(), hi]
            vals = [objective(x) for x in pts]
            k = int(np.argmin(vals))
            best = (vals[k], pts[k])
            lo, hi = pts[max(k - 1, 0)], pts[min(k + 1, len(pts) - 1)]
        res = optimize.minimize_scalar(
            objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * hi}
        )
        if res.success and float(res.fun) < best[0]:
            best = (float(res.fun), float(res.x))
        return best

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
            # delta'(eps - log(1 / (1 - tau))) + tau (docs/accounting.md §8); delta(eps) is
            # non-increasing, so beyond TV_EPS_MAX its value there is an upper bound
            eps = min(eps, TV_EPS_MAX)
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
        inf = np.isinf(self._orders)
        if inf.any() and total[inf][0] <= eps:
            return 0.0
        fin = ~inf & (self._orders > 1)
        if not fin.any():
            return 1.0
        lams = self._orders[fin]
        log_d = _log_delta(lams, total[fin], eps)
        best = int(np.argmin(log_d))
        val = float(log_d[best])
        if refine and self._can_refine() and math.isfinite(val):

            def f(a: float) -> float:
                return float(_log_delta(np.array([a]), np.array([self._total(a)]), eps)[0])

            lo, hi, _ = self._bracket(int(np.flatnonzero(fin)[best]), f)
            if hi > lo:
                val = min(val, self._search(f, lo, hi)[0])
        if val >= 0:
            return 1.0
        return min(1.0, float(np.nextafter(math.exp(val) * (1 + 4 * _U), np.inf)))
