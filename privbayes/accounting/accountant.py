"""RDP accountant: compose curves, convert to (eps, delta)-DP (BACKGROUND.md §1).

Events and accountant kept apart, as in Google's dp_accounting: a *curve* is anything
that gives eps at an array of orders — a function ``orders -> eps``, a privbayes release
(``PrivateSample``/``Calibration``: their ``rdp`` method), or a fixed array on the
accountant's own orders. The accountant adds curves (RDP composition) and converts.
When every composed curve can be evaluated at any order, the conversion is refined by a
continuous one-dimensional minimisation over the order around the best grid point.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from scipy import optimize

from .curves import _orders

__all__ = ["DEFAULT_ORDERS", "RdpAccountant", "rdp_to_dp", "OrdersWarning"]

DEFAULT_ORDERS = np.unique(
    np.concatenate(
        [
            1.0 + np.geomspace(1e-3, 1023.0, 160),  # dense on a log scale over (1, 1024]
            np.arange(2.0, 65.0),  # integers, exact and cheap for subsampled Gaussians
            [128.0, 256.0, 512.0, 1024.0, np.inf],
        ]
    )
)


class OrdersWarning(UserWarning):
    """The best order sits at an end of the ``orders`` grid: extend ``orders``."""


def _check_delta(delta) -> float:
    if isinstance(delta, str | bool):
        raise TypeError(f"delta must be a number in [0, 1]; got {delta!r}")
    d = float(delta)
    if not 0 <= d <= 1 or math.isnan(d):
        raise ValueError(f"delta must lie in [0, 1]; got {delta!r}")
    return d


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
    """eps of (eps, delta)-DP implied by RDP eps at each order (BACKGROUND.md §1).

    ``improved`` (default; Canonne-Kamath-Steinke 2020 Prop. 12 / Balle et al. 2020 Thm 21):
    eps + log((lam-1)/lam) - (log delta + log lam)/(lam-1), clamped at 0.
    ``mironov`` (Mironov 2017 Prop. 3): eps + log(1/delta)/(lam-1).
    Order inf converts to eps(inf) (pure DP) for any delta; order 1 gives inf.
    delta = 0 leaves only order inf.
    """
    lam = _orders(orders)
    eps = np.broadcast_to(np.asarray(eps, float), lam.shape)
    delta = _check_delta(delta)
    _check_method(method)
    if np.isnan(eps).any():
        raise ValueError("eps must not be NaN")
    out = np.full(lam.shape, np.inf)
    inf = np.isinf(lam)
    out[inf] = eps[inf]
    mid = ~inf & (lam > 1)
    if delta > 0 and mid.any():
        lm, em = lam[mid], eps[mid]
        with np.errstate(invalid="ignore"):
            if method == "improved":
                val = em + np.log1p(-1.0 / lm) - (math.log(delta) + np.log(lm)) / (lm - 1)
            else:
                val = em + math.log(1.0 / delta) / (lm - 1)
        val = np.where(np.isinf(em), np.inf, val)
        out[mid] = np.maximum(val, 0.0)
    return out


def _log_delta(lam: np.ndarray, eps_rdp: np.ndarray, eps: float) -> np.ndarray:
    """log delta at each order for a target eps (the improved conversion solved for delta)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        val = (lam - 1) * (eps_rdp - eps + np.log1p(-1.0 / lam)) - np.log(lam)
    return np.where(np.isinf(eps_rdp), np.inf, val)


class RdpAccountant:
    """Accumulates RDP curves over a grid of orders and converts them to (eps, delta)-DP.

    Parameters
    ----------
    orders : array of orders >= 1 (inf allowed); default :data:`DEFAULT_ORDERS`, a dense
        grid over (1, 1024] plus inf. Stored sorted and without repeats as ``self.orders``:
        array curves must be given on ``self.orders``.

    All composed curves must share one neighbour relation: privbayes releases are
    replace-one; :func:`subsampled_gaussian_rdp` is add/remove (as in DP-SGD accountants).
    """

    def __init__(self, orders=None) -> None:
        self.orders = DEFAULT_ORDERS if orders is None else sorted_orders(orders)
        self._eps = np.zeros(self.orders.shape)
        self._parts: list[tuple[Callable, int]] | None = []  # None once a fixed array came
        self._warn = True

    # -- composition ------------------------------------------------------------------
    def _evaluate(self, curve, orders: np.ndarray) -> np.ndarray:
        if hasattr(curve, "rdp"):
            return np.asarray(curve.rdp(orders), float)
        if callable(curve):
            return np.asarray(curve(orders), float)
        raise TypeError("curve must be a release (with .rdp), a function of orders or an array")

    def compose(self, curve, count: int = 1) -> RdpAccountant:
        """Add ``count`` copies of ``curve`` (RDP composition). Returns self.

        ``curve``: a PrivateSample/Calibration, a function ``orders -> eps``, or an array of
        eps on ``self.orders``.
        """
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        fixed = isinstance(curve, np.ndarray | list | tuple)
        eps = np.asarray(curve, float) if fixed else self._evaluate(curve, self.orders)
        if eps.shape != self.orders.shape:
            raise ValueError(
                f"a curve must give eps at each of the {self.orders.size} orders "
                f"(accountant.orders); got shape {eps.shape}"
            )
        if np.isnan(eps).any() or (eps < 0).any():
            raise ValueError("a curve must be >= 0 at every order (no NaN)")
        if count == 0:
            return self  # nothing composed (and no 0 * inf)
        if fixed:
            self._parts = None  # no longer evaluable between grid points
        elif self._parts is not None:
            self._parts.append((curve, int(count)))
        self._eps = self._eps + int(count) * eps
        return self

    @property
    def rdp(self) -> np.ndarray:
        """The composed eps at each of ``orders`` (a copy)."""
        return self._eps.copy()

    def _total(self, lam: float) -> float:
        return float(sum(c * self._evaluate(f, np.array([lam]))[0] for f, c in self._parts))

    # -- conversion -------------------------------------------------------------------
    def get_epsilon_and_order(
        self, delta: float, method: str = "improved", refine: bool = True
    ) -> tuple[float, float]:
        """(eps, the order achieving it) of (eps, delta)-DP for everything composed so far.

        ``refine``: minimise over continuous orders next to the best grid order when every
        composed curve can be evaluated anywhere (never worse than the grid).
        """
        delta = _check_delta(delta)
        _check_method(method)
        inf = np.flatnonzero(np.isinf(self.orders))
        pure = (float(self._eps[inf[0]]), math.inf) if inf.size else (math.inf, math.inf)
        finite = np.flatnonzero(np.isfinite(self.orders) & (self.orders > 1))
        if delta == 0 or finite.size == 0:  # only pure DP (order inf) is left
            return pure
        dp = rdp_to_dp(self.orders, self._eps, delta, method)
        best = int(np.argmin(dp))
        eps, lam = float(dp[best]), float(self.orders[best])
        if not math.isfinite(eps):
            return eps, lam
        refined = self._refine(best, delta, method) if refine else None
        if refined is not None and refined[0] < eps:
            eps, lam = refined
        if eps > 0 and best in (finite[0], finite[-1]) and self._warn:
            warnings.warn(
                f"the best grid order {self.orders[best]:g} is at an end of `orders` "
                f"[{self.orders[finite[0]]:g}, {self.orders[finite[-1]]:g}]; "
                "pass a wider `orders` grid to RdpAccountant",
                OrdersWarning,
                stacklevel=2,
            )
        return eps, lam

    def _refine(self, best: int, delta: float, method: str):
        """Continuous minimisation between the grid neighbours of the best order."""
        if not self._parts or math.isinf(self.orders[best]):
            return None
        lo = self.orders[best - 1] if best > 0 else 1.0 + 1e-9
        hi = self.orders[best + 1] if best + 1 < self.orders.size else self.orders[best]
        if not (math.isfinite(hi) and hi > lo):
            return None

        def f(lam):
            return float(rdp_to_dp(lam, self._total(lam), delta, method))

        res = optimize.minimize_scalar(
            f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * hi}
        )
        return (float(res.fun), float(res.x)) if res.success else None

    def get_epsilon(self, delta: float, method: str = "improved", refine: bool = True) -> float:
        """eps of (eps, delta)-DP; inf when no order gives a finite value."""
        return self.get_epsilon_and_order(delta, method, refine)[0]

    def get_delta(self, eps: float) -> float:
        """Smallest delta such that everything composed is (eps, delta)-DP (improved conversion).

        Clamped to [0, 1]; continuous refinement over the order as for eps.
        """
        eps = float(eps)
        if not eps >= 0 or math.isnan(eps):
            raise ValueError(f"eps must be >= 0; got {eps!r}")
        inf = np.isinf(self.orders)
        if inf.any() and self._eps[inf][0] <= eps:
            return 0.0
        fin = ~inf & (self.orders > 1)
        if not fin.any():
            return 1.0
        log_d = _log_delta(self.orders[fin], self._eps[fin], eps)
        best = int(np.argmin(log_d))
        val = float(log_d[best])
        if self._parts:
            lams = self.orders[fin]
            lo = lams[best - 1] if best > 0 else 1.0 + 1e-9
            hi = lams[best + 1] if best + 1 < lams.size else lams[best]
            if hi > lo:
                res = optimize.minimize_scalar(
                    lambda a: float(_log_delta(np.array(a), np.array(self._total(a)), eps)),
                    bounds=(lo, hi),
                    method="bounded",
                    options={"xatol": 1e-10 * hi},
                )
                val = min(val, float(res.fun))
        return float(min(1.0, math.exp(val))) if val < 0 else 1.0
