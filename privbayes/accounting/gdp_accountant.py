"""GDP events and a GDP accountant: exact composition of mu-GDP mechanisms (mu^2 adds) and
exact conversion to (eps, delta), with pure RDP composition as the fallback that always
holds (docs/gdp.md §5).

* :class:`GdpEvent` — the Gaussian mechanism as an event: a ``functools.partial`` of
  :func:`privbayes.accounting.gaussian_rdp` (so an :class:`RdpAccountant`, the default
  accountant and the ledger compose it exactly, as its RDP curve lam mu^2 / 2) that also
  carries ``gdp`` (mu) and ``gdp_bound``.
* :class:`GdpAccountant` — composes anything with a proven GDP bound (``gdp_bound``: a GDP
  event, a privbayes release whose ``gdp_bound`` is not None, a :class:`GdpBound`) exactly,
  and (unless ``strict``) anything else as an RDP curve. ``get_epsilon`` reports the
  method used: "gdp" (every part has a GDP bound; the smaller of the GDP and the RDP
  conversion, both valid) or "rdp" (a mixed composition: every part as its RDP curve,
  GDP parts as lam mu^2 / 2 — exact for them).
"""

from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction

import numpy as np

from ..errors import PrivBayesError
from .accountant import WIDE_ORDERS, OrdersWarning, RdpAccountant, _check_delta
from .curves import gaussian_rdp
from .gdp import GdpBound, gaussian_gdp, gdp_rdp

__all__ = [
    "GdpAccountant",
    "GdpEvent",
    "NotGdpError",
    "gaussian_event",
    "gdp_bound_of",
    "gdp_event",
]


class NotGdpError(PrivBayesError, TypeError):
    """A strict :class:`GdpAccountant` was given something without a proven GDP bound."""


class GdpEvent(functools.partial):
    """The Gaussian mechanism with noise std ``sigma`` and L2 sensitivity ``sensitivity``
    as an accounting event: ``partial(gaussian_rdp, sigma=sigma, sensitivity=sensitivity)``
    (its RDP curve lam Delta^2 / (2 sigma^2), which every accountant composes exactly),
    with ``gdp`` = Delta / sigma rounded up (mu-GDP: Dong, Roth & Su 2022, Theorem 2.7).
    Build it with :func:`gaussian_event` or :func:`gdp_event`."""

    def __new__(cls, sigma: float, sensitivity: float = 1.0):
        gaussian_gdp(sigma, sensitivity)  # checks both
        return super().__new__(
            cls, gaussian_rdp, sigma=float(sigma), sensitivity=float(sensitivity)
        )

    def __reduce__(self):
        return (GdpEvent, (self.keywords["sigma"], self.keywords["sensitivity"]))

    @property
    def gdp(self) -> float:
        """mu (rounded up) of this Gaussian mechanism."""
        return gaussian_gdp(self.keywords["sigma"], self.keywords["sensitivity"])

    @property
    def gdp_bound(self) -> GdpBound:
        """Plain mu-GDP: :class:`GdpBound` (mu, 0, 0)."""
        return GdpBound(self.gdp)

    @property
    def tv(self) -> float:
        return 0.0

    def rdp(self, orders) -> np.ndarray:
        """The RDP curve lam Delta^2 / (2 sigma^2), rounded up (gaussian_rdp)."""
        return self(orders)

    def epsilon(self, delta) -> float:
        """eps of (eps, delta)-DP: the exact GDP conversion, rounded up."""
        return self.gdp_bound.epsilon(delta)

    def __repr__(self) -> str:
        kw = self.keywords
        return f"GdpEvent(sigma={kw['sigma']!r}, sensitivity={kw['sensitivity']!r})"


def gaussian_event(sigma: float, sensitivity: float = 1.0) -> GdpEvent:
    """The Gaussian mechanism N(f(D), sigma^2 I), f of L2 sensitivity ``sensitivity``, as
    an event for the accountants: see :class:`GdpEvent`. Raises TypeError / ValueError for
    a negative, NaN or infinite argument."""
    return GdpEvent(sigma, sensitivity)


def gdp_event(mu: float) -> GdpEvent:
    """A mu-GDP event (the Gaussian mechanism with sensitivity mu and sigma = 1): its RDP
    curve is lam mu^2 / 2 rounded up, ``gdp`` is mu. ``mu``: finite, >= 0."""
    return GdpEvent(1.0, mu)


def gdp_bound_of(obj) -> GdpBound | None:
    """The proven GDP bound of ``obj`` (a :class:`GdpBound`, a :class:`GdpEvent`, a
    privbayes release or calibration), None when it has none."""
    if isinstance(obj, GdpBound):
        return obj
    bound = getattr(obj, "gdp_bound", None)
    return bound if isinstance(bound, GdpBound) else None


class _BoundCurve:
    """A GdpBound as an RDP curve: lam mu^2 / 2 plus the density allowance a (2 lam - 1) /
    (lam - 1) (docs/gdp.md §4, Lemma 4), with its tv; composed by RdpAccountant through
    its fine grid."""

    def __init__(self, bound: GdpBound) -> None:
        self.bound = bound
        self.tv = bound.tv

    def rdp(self, orders) -> np.ndarray:
        from ..certified import round_up

        lam = np.asarray(orders, float)
        base = gdp_rdp(lam, self.bound.mu)
        a = Fraction(self.bound.log_ratio)
        if a == 0:
            return base
        out = np.empty(lam.shape)
        for idx, (v, b) in enumerate(zip(lam.ravel(), base.ravel(), strict=True)):
            if math.isinf(v):
                extra = 2 * a
            elif v == 1:
                out.flat[idx] = math.inf
                continue
            else:
                extra = a * (2 * Fraction(v) - 1) / (Fraction(v) - 1)
            out.flat[idx] = math.inf if math.isinf(b) else round_up(Fraction(b) + extra)
        return out


class GdpAccountant:
    """Composes mechanisms with proven GDP bounds exactly; everything as RDP besides.

    Parameters
    ----------
    strict : True refuses (:class:`NotGdpError`, before anything is recorded) whatever has
        no proven GDP bound; False (default) accepts it and converts the mixed composition
        by RDP.
    orders : the RDP grid of the fallback (default the ledger's wide grid).

    ``compose(obj, count)`` accepts a :class:`GdpEvent`, a :class:`GdpBound`, a privbayes
    release / calibration (its ``gdp_bound`` when not None) and, unless strict, anything
    an :class:`RdpAccountant` composes. All composed parts must share one neighbour
    relation (replace-one for privbayes releases and, with the replace-one sensitivity,
    for Gaussian events).
    Source: docs/gdp.md §5.
    """

    def __init__(self, strict: bool = False, orders=None) -> None:
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be True or False; got {strict!r}")
        self.strict = strict
        self._rdp = RdpAccountant(WIDE_ORDERS if orders is None else orders)
        self._bound = GdpBound(0.0)
        self._others = 0  # how many parts without a GDP bound
        self.releases = 0

    @property
    def gdp_bound(self) -> GdpBound | None:
        """The composed GDP bound (mu^2, log_ratio and tv added), None once a part without
        one was composed."""
        return self._bound if self._others == 0 else None

    @property
    def gdp(self) -> float | None:
        """mu of the composition when it is plain mu-GDP (no allowances), else None."""
        b = self.gdp_bound
        return b.mu if b is not None and b.exact else None

    @property
    def mixed(self) -> bool:
        """True once a part without a GDP bound was composed."""
        return self._others > 0

    def compose(self, obj, count: int = 1) -> GdpAccountant:
        """Add ``count`` copies of ``obj`` (adaptive composition). Returns self. Raises
        NotGdpError (strict, no GDP bound) or what RdpAccountant.compose raises, in both
        cases before anything is recorded."""
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        bound = gdp_bound_of(obj)
        if bound is None and self.strict:
            raise NotGdpError(
                f"{type(obj).__name__} has no proven GDP bound (its gdp_bound is None): a "
                "strict GdpAccountant composes GDP mechanisms only; use strict=False for an "
                "RDP fallback"
            )
        curve = _BoundCurve(obj) if isinstance(obj, GdpBound) else obj
        self._rdp.compose(curve, int(count))  # checks the curve; raises before recording
        if count:
            if bound is None:
                self._others += int(count)
            else:
                self._bound = self._bound.compose(bound, int(count))
            self.releases += int(count)
        return self

    def get_epsilon_and_method(self, delta) -> tuple[float, str]:
        """(eps of (eps, delta)-DP, the method): "gdp" when every part has a GDP bound (the
        smaller of its exact GDP conversion and the RDP conversion), "rdp" for a mixed
        composition (every part's RDP curve composed and converted; docs/gdp.md §5).
        Rounded up. Raises ValueError for delta outside [0, 1]."""
        delta = _check_delta(delta)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OrdersWarning)  # a wider grid only tightens it
            via_rdp = float(self._rdp.get_epsilon(delta))
        bound = self.gdp_bound
        if bound is None:
            return via_rdp, "rdp"
        via_gdp = bound.epsilon(delta)
        if via_gdp <= via_rdp:
            return via_gdp, "gdp"
        return via_rdp, "rdp"

    def get_epsilon(self, delta) -> float:
        """eps of (eps, delta)-DP (see :meth:`get_epsilon_and_method`)."""
        return self.get_epsilon_and_method(delta)[0]

    def get_delta(self, eps) -> float:
        """delta of (eps, delta)-DP at ``eps`` >= 0: the smaller of the GDP bound's (when
        every part has one) and the RDP accountant's, rounded up."""
        via_rdp = float(self._rdp.get_delta(eps))
        bound = self.gdp_bound
        return via_rdp if bound is None else min(via_rdp, bound.delta(eps))

    @property
    def rdp_accountant(self) -> RdpAccountant:
        """The fallback RDP accountant holding every part (read it, do not compose)."""
        return self._rdp
