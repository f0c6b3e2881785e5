"""Gamma-Poisson: rate theta ~ Gamma(alpha, beta), counts x_i ~ Poisson(theta) in {0..max_count}.

The mechanisms sample Gamma(alpha/m + r S, beta/m + r n) with S = sum(x) (direct: r = m = 1;
diffused tunes r; concentrated tunes m). The rate does not depend on the data, so two
neighbouring releases differ in the shape alone and (docs/gamma_poisson.md)

    D_lam = T(q, p - q, lam),     p, q = the two shapes,

T the log-gamma second difference of :mod:`privbayes.divergence`. A neighbour moves S by
at most max_count = M. The sup over all data sets of size n sits at one of four boundary
pairs (the Beta-Bernoulli pairs with step r M): S = M vs 0, n M vs (n-1) M, and their
mirrors. The certificate covers the shapes the sampler actually uses, fl(alpha/m + fl(r S)):
they lie in [L, U] (the shapes at S = 0 and S = n M; rounding is monotone) and two
neighbours' shapes differ by at most r M plus a few ulps (H below), and the sup over that
trapezoid of shape pairs is again at its four vertices. Proof: docs/gamma_poisson.md.
"""

from __future__ import annotations

import math

import numpy as np

from ..certified import second_difference_bounds, second_difference_upper
from ..data import statistics
from ..divergence import _second_difference_1
from ..sampling.conjugate import log_gamma_variates
from ..validation import (
    MAX_N,
    check_bool,
    check_n,
    check_prior,
    check_unit_knob,
)
from ._dirichlet import _KL_ORDER, _TIGHT
from .base import OneKnobConjugate, U, add_down, add_up, check_orders


def _check_max_count(value) -> int:
    # below 2**53: every integer count above it is a float >= 2**53 once converted, so
    # the domain check can never see one rounded down into the domain
    text = f"max_count must be an integer in [1, 2**53 - 1]; got {value!r}"  # one message
    if isinstance(value, bool | np.bool_):
        raise TypeError(text)
    try:
        count = check_n(value, "max_count")
    except TypeError:
        raise TypeError(text) from None
    except ValueError:
        raise ValueError(text) from None
    if not 1 <= count < 2**53:
        raise ValueError(text)
    return count


class GammaPoisson(OneKnobConjugate):
    """Gamma(alpha, beta) prior (shape, rate) on a Poisson rate; data are bounded counts.

    Parameters
    ----------
    alpha, beta : float in [1e-300, 1e300], the prior's shape and rate (public).
    max_count : int >= 1, the public bound M on every count: x_i in {0, 1, ..., M}. Choose
        it before seeing the data (it sets the sensitivity); never read it off the data.
    clip : False (default) refuses counts above ``max_count``; True clips them to it
        explicitly (the guarantee then covers the clipped counts). Negative and
        non-integer values are always refused.

    Data for :func:`privbayes.sample`: a 1-D array of counts, shape (n,), with
    n * max_count <= 2**53 (the sum is exact). The released value is the rate theta > 0
    (a float; ``log_value`` is exact where theta underflows).

    Mechanisms: direct samples Gamma(alpha + S, beta + n) and is RDP at order lam only for
    lam < 1 + alpha / max_count; diffused samples Gamma(alpha + r S, beta + r n) and
    concentrated Gamma(alpha/m + S, beta/m + n) (the prior's natural parameters divided by
    m, paper Alg. 3). Source: docs/gamma_poisson.md (our derivation, tested against brute
    force over every data set).
    """

    _lam_inf_message = (
        "no finite eps exists at lam=inf for any r, m > 0: two Gamma laws with different "
        "shapes and one rate have an unbounded density ratio (near 0 or at infinity); "
        "choose a finite lam"
    )

    def __init__(self, alpha, beta, max_count, *, clip: bool = False) -> None:
        self.alpha = check_prior(alpha, "alpha")
        self.beta = check_prior(beta, "beta")
        self.max_count = _check_max_count(max_count)
        self.clip = check_bool(clip, "clip")
        self._freeze()

    def __repr__(self) -> str:
        extra = ", clip=True" if self.clip else ""
        return (
            f"GammaPoisson(alpha={self.alpha!r}, beta={self.beta!r}, "
            f"max_count={self.max_count!r}{extra})"
        )

    # -- data -----------------------------------------------------------------------
    def _check_size_n(self, n: int) -> None:
        if n * self.max_count > MAX_N:
            raise ValueError(
                f"n * max_count must be at most 2**53 so that sums stay exact; got n={n}, "
                f"max_count={self.max_count}"
            )

    def _statistics(self, data) -> tuple[int, int]:
        """(S, n): the exact integer sum of the counts and their number (privbayes.data)."""
        return statistics(self, data)

    _data_ndims = (1,)
    _data_rules = 2

    def _data_shape(self, shape: tuple, name: str) -> None:
        if len(shape) != 1:
            raise ValueError(f"{name} must be a 1-D array of counts, shape (n,); got shape {shape}")

    def _data_chunk(self, arr: np.ndarray):
        bad = (arr < 0) | (arr != np.floor(arr))
        big = self.max_count
        over = np.zeros(arr.shape, bool) if self.clip else arr > big
        # exact: every count is an integer in [0, M] once checked, and n M <= 2**53
        counts = np.where(bad, 0.0, np.minimum(arr, big)).astype(np.int64)
        return int(counts.sum()), [bad, over]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        name = where.rsplit("[", 1)[0]
        if rule == 0:
            extra = (
                "; clip=True only lowers counts above max_count, it does not fix negative or "
                "fractional values"
                if self.clip
                else ""
            )
            return (
                f"{name} must hold non-negative integer counts; {where} = {value!r} "
                f"({count} value(s) outside {{0, 1, 2, ...}}){extra}"
            )
        return (
            f"{name} must hold counts <= max_count = {self.max_count}; {where} = {value!r} "
            f"({count} above). Choose max_count as a public bound, or build the model with "
            "clip=True to clip counts explicitly"
        )

    def _data_finish(self, s: int, n: int) -> tuple[int, int]:
        self._check_size_n(n)
        return int(s), n

    # -- the parameters the sampler uses (the certificate is about these floats) ------
    def _shape(self, s: int, r: float, m: float) -> float:
        """fl(alpha/m + fl(r S)): the shape of the released Gamma law."""
        return self.alpha / m + r * float(s)

    def _log_rate(self, n: int, r: float, m: float) -> float:
        rate = self.beta / m + r * float(n)
        if math.isfinite(rate):
            return math.log(rate)
        # beta/m overflowed: the rate is data-independent, any faithful value will do
        return float(np.logaddexp(math.log(self.beta) - math.log(m), math.log(r * n or 1e-300)))

    def posterior_params(self, n, s, r: float = 1.0, m: float = 1.0):
        """(shape, log_rate) of the Gamma law the release samples: Gamma(shape, e^log_rate).

        Parameters
        ----------
        n : int >= 0, the number of records (public). s : the sum S of the counts
            (:func:`privbayes.data.statistics`), a scalar or an array of any shape; finite
            and >= 0. r, m : knobs in (0, 1] (e.g. ``cal.r``, ``cal.m`` of
            :func:`privbayes.calibrate`).

        Returns shape = fl(alpha/m + fl(r S)) (a float, or an array shaped like ``s``) and
        log_rate = log(beta/m + r n) (a float, finite even where beta/m overflows: the rate
        does not depend on the data). These are the release's own floats (docs/
        gamma_poisson.md, "Rounding"): the release is exp(log G - log_rate) with
        log G ~ log Gamma(shape, 1) (``privbayes.sampling.conjugate.log_gamma_variates``),
        so the same generator gives the released value. A real S that is not an integer
        (a noisy sum, for post-processing) gets the same arithmetic.

        Raises ValueError for a negative or non-finite S, knobs outside (0, 1], or a shape
        that overflows float64 (no release exists there); TypeError for non-numeric input.
        """
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        raw = np.asarray(s)
        if raw.dtype.kind not in "biuf":
            raise TypeError(f"s must hold numbers; got dtype {raw.dtype}")
        sums = raw.astype(float)
        if not np.isfinite(sums).all() or (sums < 0).any():
            raise ValueError("s must be finite and >= 0")
        # the arithmetic of _shape (what _draw uses), elementwise
        shape = self.alpha / m + r * sums
        if not np.isfinite(shape).all():
            raise ValueError(f"alpha/m + r S overflows float64 at m={m!r}: no release exists there")
        return (float(shape) if shape.ndim == 0 else shape), self._log_rate(n, r, m)

    # -- certificate ------------------------------------------------------------------
    def _pairs(self, n: int, r: float, m: float) -> list[tuple[float, float]] | None:
        """(x, h) of the four vertex pairs: Q's shape x and the shift h = p - q.

        Every released pair of neighbouring shapes (p, q) satisfies L <= p, q <= U and
        |p - q| <= W; the sup of D over that set is at the vertices (docs/gamma_poisson.md),
        and each (x, h) below is rounded outwards so that its pair is at least as far
        apart as its vertex (D grows when either shape moves away from the other).
        """
        big = self.max_count
        lo = self.alpha / m  # L: the shape at S = 0, exactly what the sampler uses
        up = self._shape(n * big, r, m)  # U: the shape at S = n M (rounding is monotone)
        if not (math.isfinite(lo) and math.isfinite(up)):
            return None
        # |shape(S) - shape(S')| <= r M + 4.001 u U for |S - S'| <= M (two roundings each;
        # 4.5 and 1 + 4u leave room for the rounding of this line)
        shift = (r * big) * (1.0 + 4 * U) + 4.5 * U * up
        w = min(shift, add_up(up, -lo))
        x2 = max(add_down(up, -w), lo)
        x3 = add_up(lo, w)
        return [
            (lo, w),  # q = L, p = L + W: data (M, 0, ..., 0) vs all zeros
            (x2, add_up(up, -x2)),  # p = U, q = U - W: all M vs (0, M, ..., M)
            (x3, -add_up(x3, -lo)),  # p = L, q = L + W: all zeros vs (M, 0, ..., 0)
            (up, -w),  # q = U, p = U - W: (0, M, ..., M) vs all M
        ]

    def _sup_float(self, n: int, lam: float, r: float, m: float) -> tuple[float, int]:
        """(float estimate of the sup of D_lam at one finite order, worst pair index): what
        the search uses. Not a certificate (the float T can be ~1e-10 relative low)."""
        if not (r > 0 and m > 0):
            return math.inf, 0
        pairs = self._pairs(n, r, m)
        if pairs is None:
            return math.inf, 0  # alpha/m overflowed: no certificate this close to m = 0
        vals = [_second_difference_1(x, h, float(lam)) for x, h in pairs]
        vals = [math.inf if math.isnan(v) else v for v in vals]  # never certify from NaN
        best = max(range(4), key=vals.__getitem__)
        return vals[best], best

    def _sup_at(self, n: int, lam: float, r: float, m: float) -> tuple[float, int]:
        """(proven upper bound on the sup of D_lam at one finite order >= 1, worst index).

        The certificate itself: ``rdp`` reports exactly this value. Each vertex term gets
        the float chord bounds of :func:`privbayes.certified.second_difference_bounds`;
        while the largest upper bound is not provably tight it is replaced by the
        high-precision bound (docs/numerics.md §4-§5). Order 1 uses order 1 + 2^-30
        (KL <= D_lam, as for the Dirichlet models).
        """
        if not (r > 0 and m > 0):
            return math.inf, 0
        pairs = self._pairs(n, r, m)
        if pairs is None:
            return math.inf, 0
        lam_c = _KL_ORDER if lam == 1.0 else float(lam)
        x = np.array([p[0] for p in pairs])
        h = np.array([p[1] for p in pairs])
        lo, up = second_difference_bounds(x, h, np.full(4, lam_c))
        up = [math.inf if math.isnan(v) else float(v) for v in up]
        # an infinite float bound is not final either: at tiny shapes (alpha/m ~ 1e-300)
        # the trigamma bounds overflow while T itself is finite, and the high-precision
        # bound (no overflow; inf only where x + lam h <= 0 exactly) certifies it
        final = [math.isfinite(u) and u - lo[i] <= _TIGHT * u for i, u in enumerate(up)]
        while True:
            best = max(range(4), key=up.__getitem__)
            if final[best]:
                return up[best], best
            up[best] = min(up[best], second_difference_upper(x[best], h[best], lam_c, lo[best]))
            final[best] = True

    def _cap(self, n: int, lam: float) -> float:
        """Knob (r or m) below which the sup is finite: the pole of the pair (0 vs M).

        alpha / m > (lam - 1) W with W = r M (1 + 4u) + 4.5u (alpha/m + r n M); a 1e-12
        margin covers the rounding of this formula and of the vertices.
        """
        shrink = 1.0 - 4.5 * U * (lam - 1.0)
        if shrink <= 0:
            return 0.0
        grow = (lam - 1.0) * self.max_count * (1.0 + 4 * U + 4.5 * U * n)
        return self.alpha * shrink / grow * (1.0 - 1e-12)

    def _direct_limit(self, lam: float):
        edge = 1.0 + self.alpha / self.max_count
        if lam < edge:
            return None
        return (
            f"direct sampling is RDP at order lam only for lam < 1 + alpha/max_count = "
            f"{edge:g} (at the pair S = 0 vs S = max_count, lam*shape + (1-lam)*shape' "
            f"leaves the parameter space); got lam={float(lam)!r}. Use method='diffused' or "
            "'concentrated', or a smaller lam",
            {"max_lam": edge},
        )

    def rdp(self, n, orders, r: float = 1.0, m: float = 1.0, method: str | None = None):
        """Certified RDP curve: sup over neighbouring data sets of size n of D_lam.

        Parameters
        ----------
        n : int >= 0 (public), n * max_count <= 2**53. orders : scalar or array, >= 1 or inf.
        r, m : knobs in (0, 1]; ``method`` is accepted for symmetry and ignored.

        Returns an array shaped like ``orders`` (nats); inf at lam = inf (n >= 1) and
        wherever alpha/m <= r max_count (lam - 1) (docs/gamma_poisson.md).
        """
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        orders = check_orders(orders)
        if n == 0:
            return np.zeros(orders.shape)
        self._check_size_n(n)
        flat = orders.ravel()
        out = np.full(flat.shape, np.inf)
        memo: dict[float, float] = {}
        for i in np.flatnonzero(np.isfinite(flat)):
            lam = float(flat[i])
            if lam not in memo:
                memo[lam] = self._sup_at(n, lam, r, m)[0]
            out[i] = memo[lam]
        return out.reshape(orders.shape)

    def _pair(self, n: int, index: int) -> dict:
        big = self.max_count
        sums = [(big, 0), (n * big, (n - 1) * big), (0, big), ((n - 1) * big, n * big)]
        records = [(big, 0), (big, 0), (0, big), (0, big)]
        s, s2 = sums[index]
        x, x2 = records[index]
        return {"sum": s, "neighbour_sum": s2, "record": x, "neighbour_record": x2}

    def _worst_pair(self, n: int, cal, *, d: int = 1):
        """(data, neighbour): count arrays of shape (n,) differing in record 0."""
        pair = cal.pair
        big = self.max_count
        data = np.full(n, 0.0 if pair["sum"] - pair["record"] == 0 else float(big))
        neighbour = data.copy()
        data[0], neighbour[0] = pair["record"], pair["neighbour_record"]
        return data, neighbour

    # -- release ----------------------------------------------------------------------
    def _draw(self, s: int, cal, rng, size: int | None = None, **_opt):
        """(theta, log theta, None) from Gamma(alpha/m + r S, beta/m + r n), in log space.

        ``size=k`` gives k independent draws (arrays of shape (k,), read-only).
        """
        shape = self._shape(s, cal.r, cal.m)
        log_rate = self._log_rate(cal.n, cal.r, cal.m)
        k = 1 if size is None else int(size)
        log_theta = log_gamma_variates(np.full(k, shape), rng) - log_rate
        theta = np.exp(log_theta)
        if size is None:
            return float(theta[0]), float(log_theta[0]), None
        theta.setflags(write=False)
        log_theta.setflags(write=False)
        return theta, log_theta, None
