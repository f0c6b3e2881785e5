"""What a privbayes model implements (docs/models.md, "Adding a model"), and the
calibration shared by the one-knob conjugate models (Gamma-Poisson, Normal).

Every model is an immutable object (``Frozen``) with these hooks; :func:`privbayes.sample`,
:func:`privbayes.calibrate`, the ledger and :mod:`privbayes.audit` use nothing else:

* ``methods``: the method names it accepts (``mechanisms.CONJUGATE_METHODS`` for
  conjugate models).
* ``_statistics(data) -> (stats, n)``: validate the data (ValueError/TypeError naming the
  argument and the first bad index; NaN/inf and out-of-domain values refused unless the
  model was built with an explicit clipping option) and return the exact sufficient
  statistics and the number of records n. Nothing is charged before it succeeds. The
  conjugate models implement it as ``privbayes.data.statistics(self, data)`` with a chunk
  kernel (``_data_chunk`` and friends: docs/models.md, docs/data.md), which takes NumPy,
  pandas, polars, pyarrow and Dask inputs.
* ``rdp(n, orders, r=1, m=1, method=None) -> ndarray``: the certified RDP curve, an upper
  bound on sup over neighbouring data sets of size n of D_lam between the *released*
  laws (floating-point rounding of the sampler's parameters included), ``inf`` where no
  finite bound exists; public inputs only.
* ``_calibrate(n, lam, eps, method) -> Calibration``: the mechanism's knobs from public
  inputs only; its certified eps is ``rdp(n, lam, r, m)`` at the returned knobs and never
  above the target (every calibration ends in :func:`privbayes.calibration.step_down`);
  InfeasiblePrivacyError saying what is reachable otherwise.
* ``_draw(stats, cal, rng, size=None, **options) -> (value, log_value, diagnostics)``:
  one draw (``size=None``) or ``size`` independent draws (leading axis) from the law the
  calibration certifies; ``log_value`` is None when the value can be negative.
* ``_worst_pair(n, cal, *, d=1) -> (data, neighbour)``: two neighbouring data sets, in the
  format ``_statistics`` accepts, at which the certified sup is attained (the audit runs
  the mechanism there).
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy import optimize

from .. import mechanisms
from ..calibration import Calibration, solve_knob, step_down
from ..errors import InfeasiblePrivacyError
from ..frozen import Frozen

__all__ = [
    "Model",
    "OneKnobConjugate",
    "add_down",
    "add_up",
    "check_orders",
    "solve_increasing",
]

U = 2.0**-53  # unit roundoff of float64: |fl(x) - x| <= U |x| for normal results


@runtime_checkable
class Model(Protocol):
    """The hooks every privbayes model implements (see the module docstring)."""

    methods: tuple[str, ...]

    def _statistics(self, data) -> tuple[Any, int]: ...

    def rdp(
        self, n, orders, r: float = 1.0, m: float = 1.0, method: str | None = None
    ) -> np.ndarray: ...

    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration: ...

    def _draw(self, stats, cal: Calibration, rng, size: int | None = None, **options): ...

    def _worst_pair(self, n: int, cal: Calibration, *, d: int = 1) -> tuple[Any, Any]: ...


def _two_sum_error(a: float, b: float, s: float) -> float:
    """(a + b) - s exactly, for s = fl(a + b) (Knuth's TwoSum; no overflow assumed)."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


def add_up(a: float, b: float) -> float:
    """The smallest double >= a + b (exact sums are returned as they are)."""
    s = a + b
    return math.nextafter(s, math.inf) if _two_sum_error(a, b, s) > 0 else s


def add_down(a: float, b: float) -> float:
    """The largest double <= a + b."""
    s = a + b
    return math.nextafter(s, -math.inf) if _two_sum_error(a, b, s) < 0 else s


def check_orders(orders) -> np.ndarray:
    """Rényi orders: >= 1 (1 = KL) or inf, as a float array."""
    arr = np.asarray(orders, dtype=float)
    if np.isnan(arr).any() or (arr < 1).any():
        raise ValueError(f"orders must be >= 1 (1 = KL) or inf; got {orders!r}")
    return arr


_SLOPE = {"diffused": 2.0, "concentrated": 1.0}
_T_MIN = -690.0  # knobs down to ~1e-300, as in privbayes.calibration


def solve_increasing(certify, guess: float, eps: float, name: str) -> tuple[float, int]:
    """Largest knob in (0, 1] with ``certify(knob) <= eps``, for ``certify`` increasing in
    the knob (0 at 0), starting from ``guess`` (e.g. a closed form). Returns (knob, evals).

    Brackets the root in t = log(knob) with steps growing from 1e-9 away from the guess
    (one or two evaluations when the guess is good), then Brent's method to 1e-13 in t.
    InfeasiblePrivacyError when even knob = 1e-300 does not certify.
    """
    log_eps, evals = math.log(eps), 0
    finite = [math.inf]  # the smallest t seen with a finite certificate
    above: list[float] = []  # every t seen with f(t) > 0

    def f(t: float) -> float:
        nonlocal evals
        evals += 1
        e = float(certify(math.exp(t)))
        if math.isnan(e):
            e = math.inf  # never certify from NaN
        if e < math.inf:
            finite[0] = min(finite[0], t)
        # finite and sign-preserving (Brent's method needs finite values): e = 0 certifies
        value = min((math.log(e) - log_eps) if e > 0 else -1e3, 1e3)
        if value > 0:
            above.append(t)
        return value

    t = min(max(math.log(guess) if guess > 0 else _T_MIN, _T_MIN), 0.0)
    step = 1e-9
    if f(t) <= 0:
        lo = t
        while True:
            if lo >= 0.0:
                return 1.0, evals
            hi = min(lo + step, 0.0)
            if f(hi) > 0:
                break
            lo, step = hi, step * 8
    else:
        hi = t
        while True:
            if hi <= _T_MIN:
                floor = float(certify(math.exp(_T_MIN)))
                if not floor < math.inf and finite[0] == math.inf:
                    # the geometric steps may jump over a window of finite certificates
                    # (below it the sampler's parameters overflow, above it the divergence):
                    # scan log(knob) in steps of 1/2 (the certificate is cheap here)
                    for k in range(1, int(-2 * _T_MIN)):
                        if float(certify(math.exp(-0.5 * k))) < math.inf:
                            finite[0] = -0.5 * k
                            break
                if not floor < math.inf and finite[0] < math.inf:
                    # the certificate is infinite at the smallest knobs (a parameter of the
                    # sampler overflows there): the floor is where it becomes finite
                    t_inf, t_fin = _T_MIN, finite[0]
                    for _ in range(60):
                        mid = 0.5 * (t_inf + t_fin)
                        if float(certify(math.exp(mid))) < math.inf:
                            t_fin = mid
                        else:
                            t_inf = mid
                    floor = float(certify(math.exp(t_fin)))
                    if floor <= eps:
                        higher = [v for v in above if v > t_fin]
                        if higher:
                            lo, hi = t_fin, min(higher)
                            break
                        if f(0.0) <= 0:
                            return 1.0, evals
                        lo, hi = t_fin, 0.0
                        break
                    raise InfeasiblePrivacyError(
                        f"eps={eps:g} is below what any {name} certifies ({floor:g}, at "
                        f"{name}={math.exp(t_fin):.3g}; smaller values overflow the sampler's "
                        f"parameters); ask for eps >= {floor:.6g}",
                        reachable={"min_eps": floor},
                    )
                if not floor < math.inf:
                    raise InfeasiblePrivacyError(
                        f"no {name} >= 1e-300 gives a finite certified eps for these public "
                        "inputs (the divergence or the sampler's parameters exceed the float "
                        "range); try another method or less extreme prior and data bounds",
                        reachable={"min_eps": math.inf, "method": "another"},
                    )
                raise InfeasiblePrivacyError(
                    f"eps={eps:g} is below what any {name} >= 1e-300 certifies ({floor:g}); "
                    "ask for a larger eps",
                    reachable={"min_eps": floor},
                )
            lo = max(hi - step, _T_MIN)
            if f(lo) <= 0:
                break
            hi, step = lo, step * 8
    t = optimize.brentq(f, lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps)
    return math.exp(t), evals


class OneKnobConjugate(Frozen):
    """Calibration of a conjugate model whose certificate is ``_sup_at(n, lam, r, m)``.

    A subclass supplies ``_sup_at`` (a scalar upper bound at one finite order, with the
    index of the worst boundary pair; inf where unbounded — this is the function a final
    interval-arithmetic check re-evaluates), ``_cap(n, lam)`` (the knob beyond which the
    sup is infinite, or inf) or its own ``_search``, ``_pair(n, index)`` (the worst pair as
    a public dict), ``_lam_inf_message`` and ``_direct_limit(lam)`` (None when direct
    sampling is RDP at ``lam``, else (message, reachable)). ``rdp`` must report exactly
    ``_sup_at``.
    """

    methods = mechanisms.CONJUGATE_METHODS
    _lam_inf_message = "no finite eps exists at lam=inf; choose a finite lam"

    def _sup_at(self, n: int, lam: float, r: float, m: float) -> tuple[float, int]:
        raise NotImplementedError

    def _cap(self, n: int, lam: float) -> float:
        return math.inf

    def _direct_limit(self, lam: float):
        return None

    def _pair(self, n: int, index: int) -> dict:
        raise NotImplementedError

    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration:
        method = mechanisms.check_method(method, self.methods)
        if n == 0:
            return Calibration(method, 1.0, 1.0, lam, 0.0, eps, 0, None, 0, self)
        self._check_size_n(n)
        if math.isinf(lam):
            raise InfeasiblePrivacyError(self._lam_inf_message, reachable={"lam": "finite"})
        if eps == 0:
            raise InfeasiblePrivacyError(
                "eps=0 needs a release that ignores the data (r = 0): sample from the prior "
                "instead, or ask for eps > 0",
                reachable={"eps": "> 0"},
            )
        name = mechanisms.KNOB[method] or "knob"
        if method == "direct":
            limit = self._direct_limit(lam)
            if limit is not None:
                message, reachable = limit
                raise InfeasiblePrivacyError(message, reachable=reachable)
            achieved = float(self.rdp(n, lam))
            if achieved > eps:
                raise InfeasiblePrivacyError(
                    f"direct sampling certifies eps={achieved:.6g} at lam={float(lam)!r} "
                    f"for n={n}, above the requested eps={eps:g}; ask for eps >= "
                    f"{achieved:.6g} or use method='diffused' or 'concentrated'",
                    reachable={"min_eps": achieved},
                )
            knob, evals = 1.0, 1
        else:
            knob, evals = self._search(n, lam, eps, method)
        # The certificate is what rdp() reports; step down until it meets the target.
        knob, achieved = step_down(
            knob, lambda v: self.rdp(n, lam, *mechanisms.knobs(method, v)), eps, name
        )
        r, m = (float(v) for v in mechanisms.knobs(method, knob))
        pair = self._pair(n, self._sup_at(n, lam, r, m)[1])
        return Calibration(method, r, m, lam, achieved, eps, n, pair, evals, self)

    def _search(self, n: int, lam: float, eps: float, method: str) -> tuple[float, int]:
        """(knob, evaluations): the largest knob meeting eps, before the final step_down.

        Default: :func:`privbayes.calibration.solve_knob` below ``_cap``.
        """
        name = mechanisms.KNOB[method]
        cap = self._cap(n, lam)
        if not cap > 0:
            raise InfeasiblePrivacyError(
                f"no {name} > 0 gives a finite eps at lam={float(lam)!r}; choose a smaller lam",
                reachable={"lam": "smaller"},
            )

        search = getattr(self, "_sup_float", self._sup_at)  # a fast estimate, if any

        def eps_of(value: float) -> float:
            return search(n, lam, *mechanisms.knobs(method, value))[0]

        knob, _, evals = solve_knob(eps_of, eps, cap, _SLOPE[method], name)
        return knob, evals

    def _check_size_n(self, n: int) -> None:
        """Hook: refuse sizes the model cannot represent exactly (default: none)."""
