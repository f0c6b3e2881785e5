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

Certified numerics (docs/numerics.md). The sampler's parameters are exact: alpha/m and r
are rounded to a dyadic grid (:meth:`DirichletFamily._grid`) on which alpha/m + r*c is a
float for every count c <= n, so the distributions sampled are exactly the ones analysed.
The reported sup is a proven upper bound: every vertex term is bounded above rigorously
(float chord bounds, or interval arithmetic where those are not tight) and the sums are
rounded up. The plain float evaluation only drives the search for the knob.
"""

from __future__ import annotations

import math

import numpy as np

from .. import mechanisms
from ..calibration import Calibration, certify_down, solve_knob
from ..certified import second_difference_bounds, second_difference_upper
from ..divergence import _second_difference, _second_difference_1
from ..errors import InfeasiblePrivacyError
from ..frozen import Frozen
from ..sampling.conjugate import sample_dirichlet_log
from ..validation import check_n, check_unit_knob

_SCALAR_MAX_K = 4  # up to this many categories the scalar path is faster
_SLOPE = {"diffused": 2.0, "concentrated": 1.0}
_GRID_DEN = 2.0**53 - 1
_GRID_SAFETY = 1.0 + 2.0**-48  # covers the 5 roundings in the grid's size (< 5 u)
_KL_ORDER = 1.0 + 2.0**-30  # KL <= D at this order (monotone in the order): docs/numerics.md
_TIGHT = 2.0**-43  # a float bound whose gap to its lower twin is below this is final
_PRESHRINK = 2.0**-42  # the float root, moved this far to the safe side before certifying


def _pow2_ceil(t: float) -> float:
    """Smallest power of two >= t (t > 0, finite), and at least 2^-1074."""
    if not t > 2.0**-1074:
        return 2.0**-1074
    f, e = math.frexp(t)  # t = f 2^e, 0.5 <= f < 1
    return math.ldexp(1.0, e - 1 if f == 0.5 else e)


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
    # counts are multiples of 2^-_count_bits (0: integer counts; statistical queries use
    # fractional sums, see MeanQuery)
    _count_bits = 0

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
        r, m : knobs in (0, 1]; ``method`` is accepted for symmetry and ignored. The
            mechanism samples Dir(a + r' c) with (a, r') = ``_grid(n, r, m)``: alpha/m and
            r rounded to the exact-parameter grid (docs/numerics.md §1), as the sampler does.

        Returns an array shaped like ``orders`` (nats): proven upper bounds on the exact sup
        (docs/numerics.md); inf where unbounded: at lam = inf when n >= 1, and wherever
        min(alpha) / m <= r (lam - 1) (docs/boundary.md). Order 1 (KL) is bounded by the
        order 1 + 2^-30.
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
            uniq, inverse = np.unique(flat[fin], return_inverse=True)
            out[fin] = self._certified_sup(n, uniq, r, m)[0][inverse]
        return out.reshape(orders.shape)

    # -- public: what the release samples, and the search's float sup ---------------
    @property
    def count_step(self) -> float:
        """The grid of the counts: every count :func:`privbayes.data.statistics` returns is
        a multiple of it (1.0 for category counts; 2^-8 for :class:`MeanQuery`'s floored
        sums, docs/numerics.md §7)."""
        return math.ldexp(1.0, -self._count_bits)

    def posterior_params(self, n, counts, r: float = 1.0, m: float = 1.0) -> np.ndarray:
        """The Dirichlet parameters a + r' c the release samples from: Dir(a + r' c).

        Parameters
        ----------
        n : int >= 0, the number of records (public; it sets the grid).
        counts : array_like, shape (..., K): count vectors c in the category order of the
            model's statistics (:func:`privbayes.data.statistics`; for Beta-Bernoulli
            (number of ones, number of zeros)). Leading axes are kept: one parameter
            vector per count vector. Finite and >= 0.
        r, m : knobs in (0, 1] (e.g. ``cal.r``, ``cal.m`` of :func:`privbayes.calibrate`).

        Returns the float array a + r' c, shape (..., K), with (a, r') the exact-parameter
        grid at (n, r, m) (docs/numerics.md §1): a ~ alpha/m, r' = r rounded down to the
        grid (a calibration's r is already on it, so r' = cal.r). It is the computation
        of the release (``pb.sample``, ``pb.release_query``), so a Dirichlet draw at these
        parameters with the same generator gives the released value. For counts that are
        multiples of :attr:`count_step` in [0, n] (the statistics of n records) every
        entry is exact; other non-negative reals (a noisy count, for post-processing) get
        the same float arithmetic, rounded.

        Raises ValueError for a wrong shape, negative or non-finite counts, knobs outside
        (0, 1], or when alpha/m overflows float64 (no release exists there); TypeError
        for non-numeric input.
        """
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        raw = np.asarray(counts)
        if raw.dtype.kind not in "biuf":
            raise TypeError(f"counts must hold numbers; got dtype {raw.dtype}")
        c = raw.astype(float)
        if c.ndim == 0 or c.shape[-1] != self.K:
            raise ValueError(f"counts must have shape (..., K={self.K}); got shape {c.shape}")
        if not np.isfinite(c).all() or (c < 0).any():
            raise ValueError("counts must be finite and >= 0")
        a, rt = self._grid(n, r, m)
        if a is None:
            raise ValueError(f"alpha/m overflows float64 at m={m!r}: no release exists there")
        return a + rt * c  # the arithmetic of _params, which the release uses

    def float_sup(self, n, lam, r: float = 1.0, m: float = 1.0) -> float:
        """The plain-float sup of D_lam over the boundary pairs: what the knob search
        evaluates. **Not a certificate** - use :meth:`rdp` for a guarantee.

        Parameters
        ----------
        n : int >= 0. lam : a finite order > 1. r, m : knobs in (0, 1].

        Returns a float (nats): the boundary formulas (docs/boundary.md) evaluated in float
        at the grid's exact parameters (docs/numerics.md §1), as the calibrator's search
        does before it certifies its final knob (docs/numerics.md §10). Float rounding can
        put it below ``rdp(n, lam, r, m)``, the proven upper bound; inf where the sup is
        unbounded (min(a) <= r' (lam - 1)), alpha/m overflows or a term is NaN; 0 when
        r' = 0 or n = 0.
        Raises ValueError for lam outside (1, inf) or knobs outside (0, 1].
        """
        n = check_n(n)
        lam = float(lam)
        if not (1.0 < lam < math.inf):
            raise ValueError(f"lam must be a finite order > 1; got {lam!r}")
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        if n == 0:
            return 0.0
        return float(self._eps_at(n, lam, r, m)[0])

    def knob_resolution(self, n, method: str, knob: float) -> float:
        """Relative step of the knob on the exact-parameter grid (docs/numerics.md §1).

        Parameters
        ----------
        n : int >= 0. method : 'diffused' (the knob is r) or 'concentrated' (the knob is m).
        knob : the knob's value, in (0, 1].

        Returns a float >= 0: knobs closer than ``knob * resolution`` can give the same
        sampler parameters, so the sup as a function of the knob is a staircase on that
        scale (the calibrator's search stops there: ``privbayes.calibration.solve_knob``'s
        ``rel_step``). 0 when negligible (alpha/m overflows). Raises ValueError for another
        method or a knob outside (0, 1].
        """
        n = check_n(n)
        if method not in ("diffused", "concentrated"):
            raise ValueError(f"method must be 'diffused' or 'concentrated'; got {method!r}")
        knob = check_unit_knob(knob, mechanisms.KNOB[method])
        return float(self._rel_step(n, method, knob))

    # -- exact parameters -----------------------------------------------------------
    def _grid(self, n: int, r: float, m: float) -> tuple[np.ndarray | None, float]:
        """(a, r'): the prior a ~ alpha/m and the weight r' <= r the mechanism really uses.

        Every a_k + r' c, for c a multiple of 2^-_count_bits in [0, n], is a float, so the
        sampler's ``a + r' * counts`` is exact (docs/numerics.md §1). a_k is alpha_k/m
        rounded to a multiple of the power of two q_k >= (alpha_k/m + r n) / (2^53 - 1)
        (at least q_k: tiny priors are rounded up), r' is r rounded down to a multiple of
        max(q) 2^_count_bits. r' = 0 when r is below that step: the parameters cannot
        carry the data any more. (None, 0) when alpha/m overflows.
        """
        rn = r * n
        if self.K > _SCALAR_MAX_K:  # the same arithmetic, vectorised
            with np.errstate(over="ignore", invalid="ignore"):
                a_raw = self._alpha / m
                t = (a_raw + rn) * _GRID_SAFETY / _GRID_DEN
            if not np.isfinite(t).all():
                return None, 0.0
            f, e = np.frexp(t)
            q = np.maximum(np.ldexp(1.0, np.where(f == 0.5, e - 1, e)), 2.0**-1074)
            a = np.maximum(np.rint(a_raw / q), 1.0) * q
            unit = math.ldexp(float(q.max()), self._count_bits)
            return a, math.floor(r / unit) * unit
        qs, a = [], []
        for al in self._alpha.tolist():
            # float64 sizes: q_k >= the exact (alpha_k/m + r n) / (2^53 - 1), see _GRID_SAFETY
            a_raw = al / m
            if not math.isfinite(a_raw + rn):
                return None, 0.0
            q = _pow2_ceil((a_raw + rn) * _GRID_SAFETY / _GRID_DEN)
            a.append(max(round(a_raw / q), 1) * q)  # exact: the multiplier is < 2^53
            qs.append(q)
        unit = math.ldexp(max(qs), self._count_bits)
        return np.array(a), math.floor(r / unit) * unit

    def _unit(self, n: int, r: float, m: float) -> float:
        """The grid step of r at (n, r, m): r' is r rounded down to a multiple of it."""
        rn = r * n
        q = max(_pow2_ceil((al / m + rn) * _GRID_SAFETY / _GRID_DEN) for al in self._alpha.tolist())
        return math.ldexp(q, self._count_bits)

    def _rel_step(self, n: int, method: str, knob: float) -> float:
        """Relative resolution of the knob on the exact-parameter grid (0 if negligible)."""
        if not knob > 0:
            return 0.0
        if method == "diffused":
            return self._unit(n, knob, 1.0) / knob
        a, _ = self._grid(n, 1.0, knob)  # concentrated: alpha/m moves on steps q_k
        if a is None:
            return 0.0
        q = [_pow2_ceil((v + n) * _GRID_SAFETY / _GRID_DEN) for v in a.tolist()]
        return max(qk / ak for qk, ak in zip(q, a.tolist(), strict=True))

    def _knob_floor(self, n: int, method: str) -> float:
        """Smallest knob whose grid still carries the data (r' > 0); inf if none does.

        The grid step grows with r n and alpha/m, so the floor is found by a short
        fixed-point iteration (diffused) or a closed form checked on the grid (concentrated).
        """
        if method == "direct":
            return 1.0 if self._grid(n, 1.0, 1.0)[1] == 1.0 else math.inf
        if method == "concentrated":
            # r = 1 must be a multiple of the step: max(alpha)/m + n <~ (2^53 - 1) 2^-bits
            room = _GRID_DEN * 2.0**-self._count_bits / _GRID_SAFETY**2 - n
            if room <= 0:
                return math.inf
            m = min(1.0, float(self._alpha.max()) / room * (1 + 2.0**-40))
            for _ in range(60):
                if self._grid(n, 1.0, m)[1] == 1.0:
                    return m
                if m == 1.0:
                    break
                m = min(1.0, m * (1 + 2.0**-20))
            return math.inf
        r = self._unit(n, 0.0, 1.0)
        for _ in range(64):  # r' > 0 iff r >= the step at r, which grows slowly with r
            if r > 1.0:
                return math.inf
            step = self._unit(n, r, 1.0)
            if r >= step:
                return r
            r = step
        return math.inf

    # -- the boundary sup -----------------------------------------------------------
    def _vertex_params(self, n: int, r: float, m: float):
        """Exact (x, h) of U(1), U(n), V(0), V(n-1) for every category, shape (4K,) each."""
        a, rt = self._grid(n, r, m)
        if a is None:
            return None, None, rt
        x = np.concatenate([a, a + rt * (n - 1), a + rt, a + rt * n])  # exact: the grid
        h = np.concatenate([np.full(2 * a.size, rt), np.full(2 * a.size, -rt)])
        return x, h, rt

    def _vertex_terms(self, n: int, lam: np.ndarray, r: float, m: float) -> np.ndarray:
        """Float values of U(1), U(n), V(0), V(n-1) for every category: (len(lam), 4, K)."""
        x, h, rt = self._vertex_params(n, r, m)
        if x is None:
            return np.full((lam.size, 4, self.K), np.inf)
        if rt == 0:
            return np.zeros((lam.size, 4, self.K))
        t = _second_difference(x[None, :], h[None, :], lam[:, None])
        return t.reshape(lam.size, 4, self.K)

    def _pair_max(self, t: np.ndarray):
        """Per row of t (L, 4, K): (max over vertices and i != j of U_i + V_j, its index)."""
        named = {"1": t[:, 0], "n": t[:, 1], "0": t[:, 2], "n-1": t[:, 3]}
        k = self.K
        values, index = [], []
        for vert, (a, b) in enumerate(self._vertices()):
            val, i, j = _max_offdiag_sum(named[a], named[b])
            values.append(val)
            index.append((vert * k + i) * k + j)
        values, index = np.stack(values, 1), np.stack(index, 1)
        best = values.argmax(axis=1)
        rows = np.arange(t.shape[0])
        return values[rows, best], index[rows, best]

    def _boundary_sup(self, n: int, lam: np.ndarray, r: float, m: float):
        """Float (not certified) sup over boundary pairs (L,) and the worst pair's index."""
        t = self._vertex_terms(n, lam, r, m)
        t[np.isnan(t)] = np.inf  # never certify from a NaN
        return self._pair_max(t)

    def _pair_terms(self, index: int) -> tuple[int, int]:
        """Positions in the flat (4K,) term vector of the two terms of pair ``index``."""
        k = self.K
        vert, rest = divmod(index, k * k)
        i, j = divmod(rest, k)
        slot = {"1": 0, "n": 1, "0": 2, "n-1": 3}
        a, b = self._vertices()[vert]
        return slot[a] * k + i, slot[b] * k + j

    def _certified_sup(self, n: int, lam: np.ndarray, r: float, m: float):
        """Proven upper bounds on the sup at finite orders ``lam`` (L,), and worst indices.

        Every vertex term T(a_k + r c, +-r) decreases in the prior a_k (docs/boundary.md,
        Lemma 4), so the worst pair moves a record between the two categories with the
        smallest a: 8 terms, whatever K. Each gets the float chord bound of
        :func:`second_difference_bounds`; where the worst pair's terms are not provably
        within 2^-43 of their true values, they are replaced by high-precision bounds
        (:func:`second_difference_upper`) and the pair maximum is taken again, until the
        worst pair is made of final terms. Sums are rounded up. Order 1 uses order
        1 + 2^-30 (KL <= D_lam). docs/numerics.md §5.
        """
        lam = np.asarray(lam, float)
        a, rt = self._grid(n, r, m)
        if a is None:
            return np.full(lam.shape, np.inf), np.zeros(lam.shape, int)
        if rt == 0:  # the parameters ignore the data: the release is the prior
            return np.zeros(lam.shape), np.zeros(lam.shape, int)
        two = np.argsort(a, kind="stable")[:2]  # the two smallest priors
        a2 = a[two]
        x = np.concatenate([a2, a2 + rt * (n - 1), a2 + rt, a2 + rt * n])  # exact: the grid
        h = np.array([rt] * 4 + [-rt] * 4)
        lam_c = np.where(lam == 1.0, _KL_ORDER, lam)
        lo, up = second_difference_bounds(x[None, :], h[None, :], lam_c[:, None])
        final = np.isfinite(up) & (up - lo <= _TIGHT * up)
        slot = {"1": 0, "n": 2, "0": 4, "n-1": 6}  # offsets of the 2-category blocks
        pairs = [
            (v, i, slot[ua] + i, slot[vb] + 1 - i)
            for v, (ua, vb) in enumerate(self._vertices())
            for i in (0, 1)
        ]
        k = self.K
        out, worst = np.empty(lam.shape), np.zeros(lam.shape, int)
        for row in range(lam.size):
            urow, frow = up[row].tolist(), final[row].tolist()
            while True:
                value, v, i, tu, tv = max(
                    (urow[tu] + urow[tv], v, i, tu, tv) for v, i, tu, tv in pairs
                )
                todo = [t for t in (tu, tv) if not frow[t]]
                if not todo:
                    break
                for t in todo:
                    bound = second_difference_upper(x[t], h[t], lam_c[row], estimate=lo[row, t])
                    for s2 in range(8):  # equal priors share the bound
                        if x[s2] == x[t] and h[s2] == h[t]:
                            urow[s2], frow[s2] = min(urow[s2], bound), True
            out[row] = math.nextafter(value, math.inf) if math.isfinite(value) else math.inf
            worst[row] = (v * k + int(two[i])) * k + int(two[1 - i])
        return out, worst

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
        floor = self._knob_floor(n, method)
        if math.isinf(floor):
            lo, hi = 0, n  # the largest n with a usable knob (bisection on the grid)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if math.isfinite(self._knob_floor(mid, method)) else (lo, mid)
            limit = lo
            raise InfeasiblePrivacyError(
                f"method={method!r} cannot run on n={n} records: no knob keeps the posterior "
                "parameters alpha/m + r*c exact in float64 for every count up to n "
                f"(docs/numerics.md); use at most {limit} records"
                + ("" if method == "diffused" else " or method='diffused'"),
                reachable={"max_n": limit}
                | ({} if method == "diffused" else {"method": "diffused"}),
            )
        # sup is finite iff alpha_min / m > r (lam - 1)
        cap = a_min / (lam - 1.0)
        knob_name = mechanisms.KNOB[method] or "knob"

        def certify(value: float):
            # certify the grid's fixed point: the weight r' the sampler will use
            r, m = mechanisms.knobs(method, value)
            r = self._grid(n, r, m)[1]
            if r == 0:
                return math.inf, 0
            sup, worst = self._certified_sup(n, np.array([lam]), r, m)
            return float(sup[0]), int(worst[0])

        if method == "direct":
            if cap <= 1.0:
                raise InfeasiblePrivacyError(
                    f"direct sampling is RDP at order lam only for lam < 1 + min(alpha) = "
                    f"{1 + a_min:g} (paper Corollary 1); got lam={float(lam)!r}. Use "
                    "method='diffused' or 'concentrated', or a smaller lam",
                    reachable={"max_lam": 1 + a_min},
                )
            achieved, worst = certify(1.0)
            if achieved > eps:
                raise InfeasiblePrivacyError(
                    f"direct sampling certifies eps={achieved:.6g} at lam={float(lam)!r} "
                    f"for n={n}, above the requested eps={eps:g}; ask for eps >= "
                    f"{achieved:.6g} or use method='diffused' or 'concentrated'",
                    reachable={"min_eps": achieved},
                )
            return Calibration(
                method, 1.0, 1.0, lam, achieved, eps, n, self._pair_from_index(n, worst), 1, self
            )
        if self._eps_at(n, lam, *mechanisms.knobs(method, floor))[0] > eps * (1 - 1e-6):
            self._raise_below_floor(n, lam, eps, method, floor, certify(floor)[0])

        def eps_of(value: float) -> float:
            return self._eps_at(n, lam, *mechanisms.knobs(method, max(value, floor)))[0]

        knob, _, evals = solve_knob(
            eps_of, eps, cap, _SLOPE[method], knob_name, lambda v: self._rel_step(n, method, v)
        )
        if knob < min(1.0, cap) * (1 - 2.0**-21):  # an interior root: the float value is
            knob = max(knob * (1.0 - _PRESHRINK), floor)  # at the target; aim just below
        try:
            knob, (achieved, worst), steps = certify_down(
                knob, certify, eps, knob_name, _SLOPE[method], floor
            )
        except InfeasiblePrivacyError:
            self._raise_below_floor(n, lam, eps, method, floor, certify(floor)[0])
            raise
        r, m = (float(v) for v in mechanisms.knobs(method, knob))
        r = self._grid(n, r, m)[1]  # the weight the sampler uses (a fixed point of the grid)
        pair = self._pair_from_index(n, worst)
        return Calibration(method, r, m, lam, achieved, eps, n, pair, evals + steps, self)

    def _raise_below_floor(self, n, lam, eps, method, floor: float, lowest: float) -> None:
        """The target lies below what the smallest exact-grid knob certifies: say so."""
        knob_name = mechanisms.KNOB[method]
        if math.isinf(lowest):
            r_min, m_min = mechanisms.knobs(method, floor)
            a_min = float(self._grid(n, r_min, m_min)[0].min())
            max_lam = 1.0 + a_min / r_min
            raise InfeasiblePrivacyError(
                f"method={method!r} cannot certify any finite eps at lam={float(lam)!r} for n={n}: "
                f"the sup is finite only while r (lam - 1) < min(alpha) / m, and even the "
                f"smallest {knob_name} whose posterior parameters alpha/m + r*c are exact in "
                f"float64 ({floor:.3g}) breaks that (docs/numerics.md). Reachable: "
                f"lam < {max_lam:.6g} with this prior and n, or a larger min(alpha) (now "
                f"{float(self._alpha.min()):.3g}; a tiny one beside large ones forces this)",
                reachable={"max_lam": max_lam, "min_alpha": "larger"},
            )
        if lowest > eps:
            raise InfeasiblePrivacyError(
                f"eps={eps:g} is below the smallest eps this mechanism can certify at "
                f"lam={float(lam)!r} for n={n} ({lowest:.6g}): the {knob_name} would fall below "
                f"{floor:.3g}, where the posterior parameters alpha/m + r*c can no longer "
                f"be exact in float64 (docs/numerics.md); ask for eps >= {lowest:.6g}",
                reachable={"min_eps": lowest},
            )

    def _eps_at(self, n: int, lam: float, r: float, m: float) -> tuple[float, int]:
        """(float sup at one order, index of the worst pair): the search's fast loop.

        Not a certificate (the calibrator certifies its final knob): the same boundary
        formulas at the grid's exact parameters, in float.
        """
        if not (r > 0 and m > 0):
            return math.inf, 0  # a knob that underflowed to 0: no certificate
        if self.K > _SCALAR_MAX_K:
            sup, best = self._boundary_sup(n, np.array([lam]), r, m)
            return float(sup[0]), int(best[0])
        # Same vertices as _boundary_sup, in plain Python floats (numpy's per-call
        # overhead dominates for a few numbers); tests check the two agree.
        t = _second_difference_1
        a_arr, rt = self._grid(n, r, m)
        if a_arr is None:
            return math.inf, 0  # alpha/m overflowed: no certificate this close to m = 0
        if rt == 0:
            return 0.0, 0
        a = a_arr.tolist()
        named = {
            "1": [t(ai, rt, lam) for ai in a],
            "n": [t(ai + rt * (n - 1), rt, lam) for ai in a],
            "0": [t(ai + rt, -rt, lam) for ai in a],
            "n-1": [t(ai + rt * n, -rt, lam) for ai in a],
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
    def _params(self, counts: np.ndarray, cal: Calibration) -> np.ndarray:
        """The exact parameters a + r' counts of the release (docs/numerics.md §1)."""
        a, rt = self._grid(cal.n, cal.r, cal.m)
        if a is None:
            raise RuntimeError("calibration and grid disagree; please report this as a bug")
        return a + rt * np.asarray(counts, float)

    def _draw(self, counts: np.ndarray, cal: Calibration, rng, size: int | None = None, **_opt):
        """(value, log value, None) from Dir(a + r' counts); exact, no diagnostics.

        ``size=k`` draws k independent values in one vectorised call (leading axis k).
        """
        value, log_value = self._value(sample_dirichlet_log(self._params(counts, cal), rng, size))
        return value, log_value, None
