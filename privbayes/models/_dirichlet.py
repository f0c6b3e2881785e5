"""What Beta-Bernoulli and Dirichlet-Categorical share: a Dirichlet posterior over K
categories, its certified RDP curve over the boundary pairs, calibration, exact sampling.

Certified eps (public inputs only). The mechanism samples Dir(alpha/m + r*c) for the
count vector c (sum n). A neighbour moves one record from category i to j. Only
coordinates i and j change, and the totals agree, so

    D_lam = U_i(c_i) + V_j(c_j),
    U_i(c) = T(alpha_i/m + r(c-1), +r, lam),  V_j(c) = T(alpha_j/m + r(c+1), -r, lam),

with T the second difference of log-gamma in :mod:`privbayes.divergence`. Each of U and V
is convex in its count, so the sup over the polytope {c_i >= 1, c_j >= 0, c_i + c_j <= n}
sits at a vertex: (1, 0), (n, 0), (1, n-1) (for K = 2 the segment c_i + c_j = n:
(1, n-1), (n, 0)). Proof: docs/boundary.md. Tests compare it with brute force.
"""

from __future__ import annotations

import math

import numpy as np

from .. import mechanisms
from ..calibration import Calibration, solve_knob, step_down
from ..divergence import _second_difference, _second_difference_1
from ..errors import InfeasiblePrivacyError
from ..sampling.conjugate import sample_dirichlet_log
from ..validation import check_n, check_unit_knob
from ._frozen import Frozen

_SCALAR_MAX_K = 4  # up to this many categories the scalar path is faster
_SLOPE = {"diffused": 2.0, "concentrated": 1.0}


def _check_orders(orders) -> np.ndarray:
    arr = np.asarray(orders, dtype=float)
    if np.isnan(arr).any() or (arr < 1).any():
        raise ValueError(f"orders must be >= 1 (1 = KL) or inf; got {orders!r}")
    return arr


def _max_offdiag_sum(u: np.ndarray, v: np.ndarray):
    """max over i != j of u[:, i] + v[:, j], with its (i, j): O(K) via the two largest."""
    rows = np.arange(u.shape[0])
    iu, iv = u.argmax(1), v.argmax(1)
    u2, v2 = u.copy(), v.copy()
    u2[rows, iu] = -np.inf
    v2[rows, iv] = -np.inf
    ju, jv = u2.argmax(1), v2.argmax(1)
    a = u[rows, iu] + v2[rows, jv]  # best u with the best v elsewhere
    b = u2[rows, ju] + v[rows, iv]
    best = np.where(iu != iv, u[rows, iu] + v[rows, iv], np.maximum(a, b))
    i = np.where((iu != iv) | (a >= b), iu, ju)
    j = np.where(iu != iv, iv, np.where(a >= b, jv, iv))
    return best, i, j


class DirichletFamily(Frozen):
    """Base of the conjugate models whose posterior is a Dirichlet over K categories."""

    _alpha: np.ndarray  # prior concentrations, shape (K,)
    methods = mechanisms.CONJUGATE_METHODS

    # -- public facts --------------------------------------------------------------
    @property
    def K(self) -> int:
        """Number of categories."""
        return int(self._alpha.size)

    def rdp(
        self, n, orders, r: float = 1.0, m: float = 1.0, method: str | None = None
    ) -> np.ndarray:
        """Certified RDP curve: sup over neighbouring data sets of size n of D_lam.

        Parameters
        ----------
        n : int >= 0 (public). orders : scalar or array, >= 1 or inf.
        r, m : knobs in (0, 1]; ``method`` is accepted for symmetry and ignored.

        Returns an array shaped like ``orders`` (nats); inf where unbounded: at lam = inf
        when n >= 1, and wherever min(alpha) / m <= r (lam - 1) (docs/boundary.md).
        """
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        orders = _check_orders(orders)
        if n == 0:
            return np.zeros(orders.shape)
        flat = orders.ravel()
        out = np.full(flat.shape, np.inf)
        fin = np.isfinite(flat)
        if fin.any():
            out[fin] = self._boundary_sup(n, flat[fin], r, m)[0]
        return out.reshape(orders.shape)

    # -- the boundary sup -----------------------------------------------------------
    def _vertex_terms(self, n: int, lam: np.ndarray, r: float, m: float) -> np.ndarray:
        """U(1), U(n), V(0), V(n-1) for every category: shape (len(lam), 4, K)."""
        a = self._alpha / m
        x = np.concatenate([a, a + r * (n - 1), a + r, a + r * n])
        h = np.concatenate([np.full(2 * a.size, r), np.full(2 * a.size, -r)])
        t = _second_difference(x[None, :], h[None, :], lam[:, None])
        return t.reshape(lam.size, 4, a.size)

    def _boundary_sup(self, n: int, lam: np.ndarray, r: float, m: float):
        """(sup over boundary pairs (L,), index of the worst (vertex, i, j) per order)."""
        t = self._vertex_terms(n, lam, r, m)
        t[np.isnan(t)] = np.inf  # never certify from a NaN
        named = {"1": t[:, 0], "n": t[:, 1], "0": t[:, 2], "n-1": t[:, 3]}
        k = self.K
        values, index = [], []
        for vert, (a, b) in enumerate(self._vertices()):
            val, i, j = _max_offdiag_sum(named[a], named[b])
            values.append(val)
            index.append((vert * k + i) * k + j)
        values, index = np.stack(values, 1), np.stack(index, 1)
        best = values.argmax(axis=1)
        rows = np.arange(lam.size)
        return values[rows, best], index[rows, best]

    def _pair_from_index(self, n: int, index: int) -> dict:
        """The hypothetical count vectors of the boundary pair number ``index``."""
        k = self.K
        vert, rest = divmod(index, k * k)
        i, j = divmod(rest, k)
        ci, cj = self._vertices()[vert]
        ci, cj = (1 if ci == "1" else n), (0 if cj == "0" else n - 1)
        counts = np.zeros(k, dtype=int)
        counts[i], counts[j] = ci, cj
        if n - ci - cj:
            counts[next(c for c in range(k) if c not in (i, j))] = n - ci - cj
        neighbour = counts.copy()
        neighbour[i] -= 1
        neighbour[j] += 1
        return {"counts": counts.tolist(), "neighbour_counts": neighbour.tolist(), "moved": (i, j)}

    def _vertices(self) -> list[tuple[str, str]]:
        """Vertex (c_i, c_j) of the pair polytope, as names of the U and V terms."""
        if self.K == 2:
            return [("1", "n-1"), ("n", "0")]
        return [("1", "0"), ("n", "0"), ("1", "n-1")]

    # -- calibration --------------------------------------------------------------
    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration:
        method = mechanisms.check_method(method)
        if n == 0:
            return Calibration(method, 1.0, 1.0, lam, 0.0, eps, 0, None, 0, self)
        a_min = float(self._alpha.min())
        if math.isinf(lam):
            raise InfeasiblePrivacyError(
                "no finite eps exists at lam=inf for any r, m > 0: moving one record into a "
                "category with no records makes the density ratio unbounded; choose a finite lam",
                reachable={"lam": "finite"},
            )
        if eps == 0:
            raise InfeasiblePrivacyError(
                "eps=0 needs a release that ignores the data (r = 0): sample from the prior "
                "instead, or ask for eps > 0",
                reachable={"eps": "> 0"},
            )
        # sup is finite iff alpha_min / m > r (lam - 1)
        cap = a_min / (lam - 1.0)
        if method == "direct":
            if cap <= 1.0:
                raise InfeasiblePrivacyError(
                    f"direct sampling is RDP at order lam only for lam < 1 + min(alpha) = "
                    f"{1 + a_min:g} (paper Corollary 1); got lam={lam:g}. Use method='diffused' "
                    "or 'concentrated', or a smaller lam",
                    reachable={"max_lam": 1 + a_min},
                )
            achieved, worst = self._eps_at(n, lam, 1.0, 1.0)
            if achieved > eps:
                raise InfeasiblePrivacyError(
                    f"direct sampling certifies eps={achieved:.6g} at lam={lam:g} for n={n}, above "
                    f"the requested eps={eps:g}; ask for eps >= {achieved:.6g} or use "
                    "method='diffused' or 'concentrated'",
                    reachable={"min_eps": achieved},
                )
            knob, evals = 1.0, 1
        else:
            worst_at: dict[float, int] = {}

            def eps_of(value: float) -> float:
                sup, worst_at[value] = self._eps_at(n, lam, *mechanisms.knobs(method, value))
                return sup

            knob, achieved, evals = solve_knob(
                eps_of, eps, cap, _SLOPE[method], mechanisms.KNOB[method]
            )
            worst = worst_at[knob]
        # The certificate is what rdp() reports (the array path); the scalar path that
        # drove the search may differ in the last digits, so step down until the array
        # path agrees that the target holds.
        if method == "direct" and float(self.rdp(n, lam)) > eps:
            achieved = float(self.rdp(n, lam))
            raise InfeasiblePrivacyError(
                f"direct sampling certifies eps={achieved:.6g} at lam={lam:g} for n={n}; "
                f"ask for eps >= {achieved:.6g}",
                reachable={"min_eps": achieved},
            )
        knob, achieved = step_down(
            knob,
            lambda v: self.rdp(n, lam, *mechanisms.knobs(method, v)),
            eps,
            mechanisms.KNOB[method] or "knob",
        )
        r, m = (float(v) for v in mechanisms.knobs(method, knob))
        pair = self._pair_from_index(n, worst)
        return Calibration(method, r, m, lam, achieved, eps, n, pair, evals, self)

    def _eps_at(self, n: int, lam: float, r: float, m: float) -> tuple[float, int]:
        """(certified sup at one order, index of the worst pair): the calibrator's loop."""
        if self.K > _SCALAR_MAX_K:
            sup, best = self._boundary_sup(n, np.array([lam]), r, m)
            return float(sup[0]), int(best[0])
        # Same vertices as _boundary_sup, in plain Python floats (numpy's per-call
        # overhead dominates for a few numbers); tests check the two agree.
        t = _second_difference_1
        if not (r > 0 and m > 0):
            return math.inf, 0  # a knob that underflowed to 0: no certificate
        a = [float(v) / float(m) for v in self._alpha]
        if not all(math.isfinite(ai + r * n) for ai in a):
            return math.inf, 0  # alpha/m overflowed: no certificate this close to m = 0
        named = {
            "1": [t(ai, r, lam) for ai in a],
            "n": [t(ai + r * (n - 1), r, lam) for ai in a],
            "0": [t(ai + r, -r, lam) for ai in a],
            "n-1": [t(ai + r * n, -r, lam) for ai in a],
        }
        k = self.K
        sup, worst = max(
            (named[cu][i] + named[cv][j], (v * k + i) * k + j)
            for v, (cu, cv) in enumerate(self._vertices())
            for i in range(k)
            for j in range(k)
            if i != j
        )
        if any(math.isnan(x) for vals in named.values() for x in vals):
            return math.inf, worst  # never certify from a NaN
        return sup, worst

    def _worst_pair(self, n: int, cal: Calibration, *, d: int = 1):
        """(data, neighbour) of shape (n,) at the calibrator's boundary pair: the count
        vectors of ``cal.pair`` as records (``_records``), differing in one position."""
        counts = np.asarray(cal.pair["counts"])
        i, j = cal.pair["moved"]
        codes = np.repeat(np.arange(counts.size), counts)
        neighbour = codes.copy()
        neighbour[int(np.flatnonzero(codes == i)[0])] = j
        return self._records(codes), self._records(neighbour)

    # -- release ------------------------------------------------------------------
    def _draw(self, counts: np.ndarray, cal: Calibration, rng, size: int | None = None, **_opt):
        """(value, log value, None) from Dir(alpha/m + r*counts); exact, no diagnostics.

        ``size=k`` draws k independent values in one vectorised call (leading axis k).
        """
        params = self._alpha / cal.m + cal.r * counts
        value, log_value = self._value(sample_dirichlet_log(params, rng, size))
        return value, log_value, None
