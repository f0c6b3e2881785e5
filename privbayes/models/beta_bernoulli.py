"""Beta-Bernoulli: theta ~ Beta(alpha, beta), x_i ~ Bernoulli(theta), x_i in {0, 1}.

Also :class:`MeanQuery`, the statistical query's Beta release of a mean of values in [0, 1].
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..data import EXACT_SUM_BITS, exact_sum, statistics
from ..sampling.conjugate import simplex_from_log
from ..validation import check_bool, check_positive_vector, check_prior
from ._dirichlet import DirichletFamily


class BetaBernoulli(DirichletFamily):
    """Beta(alpha, beta) prior on the probability of a 1; data are 0/1 records.

    Parameters
    ----------
    alpha, beta : float > 0, the prior's pseudo-counts of ones and zeros (public).

    Data for :func:`privbayes.sample`: a 1-D array of 0/1 values (bools accepted), shape (n,).
    The released value is theta in [0, 1] (a float; in (0, 1) up to float64 rounding).
    ``PrivateSample.log_value`` holds both logs, (log theta, log(1 - theta)), shape (2,)
    (or (k, 2) with ``size=k``): each exact where theta rounds to 0 or to 1.

    Source: paper §3, Corollary 2 (boundary pairs (0,1), (1,0), (n,n-1), (n-1,n)).
    """

    def __init__(self, alpha: float = 1.0, beta: float = 1.0) -> None:
        self.alpha = check_prior(alpha, "alpha")
        self.beta = check_prior(beta, "beta")
        # category 0 counts the ones, category 1 the zeros
        self._alpha = check_positive_vector([self.alpha, self.beta], "alpha, beta", 2)
        self._freeze()

    def __repr__(self) -> str:
        return f"BetaBernoulli(alpha={self.alpha!r}, beta={self.beta!r})"

    # -- data: the chunk kernel of privbayes.data (one pass, exact integer counts) ----------
    _data_ndims = (1,)
    _data_rules = 1

    def _statistics(self, data) -> tuple[np.ndarray, int]:
        """(counts of ones and zeros, n) of 0/1 records, shape (n,): privbayes.data."""
        return statistics(self, data)

    def _data_shape(self, shape: tuple, name: str) -> None:
        if len(shape) != 1:
            raise ValueError(f"{name} must be a 1-D array of 0/1 values; got shape {shape}")

    def _data_chunk(self, arr: np.ndarray):
        return int(np.count_nonzero(arr)), [(arr != 0) & (arr != 1)]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        name = where.rsplit("[", 1)[0]
        return (
            f"{name} must hold only 0 or 1; {where} = {value!r} ({count} value(s) outside {{0, 1}})"
        )

    def _data_finish(self, k: int, n: int) -> tuple[np.ndarray, int]:
        return np.array([k, n - k], dtype=float), n

    def _records(self, codes: np.ndarray) -> np.ndarray:
        """0/1 records from category codes (category 0 counts the ones)."""
        return (codes == 0).astype(float)

    def _value(self, log_p: np.ndarray):
        """(theta, (log theta, log(1 - theta))): shapes () and (2,), or (k,) and (k, 2)."""
        lp = np.array(log_p)
        lp.setflags(write=False)
        if log_p.ndim == 1:
            return float(simplex_from_log(log_p)[0]), lp
        p = simplex_from_log(log_p)[:, 0]
        p.setflags(write=False)
        return p, lp


QUERY_SUM_BITS = 8  # a query's sum is floored to a multiple of 2^-8 (docs/numerics.md §7)


class MeanQuery(BetaBernoulli):
    """The statistical query's release: Beta(alpha/m + r S, beta/m + r (n - S)).

    S is the sum of n values in [0, 1], floored *exactly* to a multiple of 2^-8: a
    neighbour moves the exact sum by at most 1, and flooring to a grid that contains the
    integers keeps that bound (floor(s + 1) = floor(s) + 1 and floor is monotone), so the
    boundary reduction for fractional sums (docs/boundary.md, Lemma 3) applies unchanged,
    while alpha/m + r S stays an exact float (docs/numerics.md §7). The floor moves the
    mean by less than 2^-8 / n. Used by :func:`privbayes.release_query`.
    """

    _count_bits = QUERY_SUM_BITS

    def __init__(self, alpha: float = 1.0, beta: float = 1.0, *, clip: bool = False) -> None:
        self.clip = check_bool(clip, "clip")
        super().__init__(alpha, beta)

    def __repr__(self) -> str:
        extra = ", clip=True" if self.clip else ""
        return f"MeanQuery(alpha={self.alpha!r}, beta={self.beta!r}{extra})"

    _data_rules = 1

    def _statistics(self, data) -> tuple[np.ndarray, int]:
        """(the floored sum S and n - S, n) of per-record values in [0, 1], shape (n,).

        Values outside [0, 1] are refused (naming the first) unless ``clip=True`` clips
        them explicitly; NaN/inf are refused. One pass of privbayes.data: the exact sum is
        an integer multiple of 2^-1127, floored to the 2^-8 grid at the end."""
        return statistics(self, data)

    def _data_shape(self, shape: tuple, name: str) -> None:
        if len(shape) != 1:
            raise ValueError(f"{name} must be 1-D, shape (n,); got shape {shape}")

    def _data_chunk(self, arr: np.ndarray):
        if self.clip:
            arr = np.clip(arr, 0.0, 1.0)
        return exact_sum(arr), [(arr < 0) | (arr > 1)]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        return (
            f"query values must lie in [0, 1]; {where} = {value!r} ({count} outside). "
            "Rescale by a public range, or pass clip=True to clip explicitly"
        )

    def _data_finish(self, total: int, n: int) -> tuple[np.ndarray, int]:
        bits = QUERY_SUM_BITS
        if n > 2 ** (53 - bits):
            raise ValueError(f"at most 2**{53 - bits} values can be summed exactly on the grid")
        s = (total >> (EXACT_SUM_BITS - bits)) / 2.0**bits  # floor to the grid: exact
        return np.array([s, n - s]), n


def floor_sum(values: np.ndarray, bits: int) -> float:
    """floor(2^bits * sum(values)) / 2^bits, exactly, for values in [0, 1] (n <= 2^(53-bits)).

    Values already on the grid add exactly in any order. Otherwise ``math.fsum`` gives the
    correctly rounded sum s; no multiple of 2^-bits lies strictly between s and the exact
    sum (it would be a float nearer to the sum than s), so floor(s) is right unless s is
    itself on the grid, where the sign of the exact residual (sum - s, again by fsum)
    decides.
    """
    scale = 2.0**bits
    values = np.asarray(values, dtype=float)
    if values.size > 2 ** (53 - bits):
        raise ValueError(f"at most 2**{53 - bits} values can be summed exactly on the grid")
    scaled = values * scale  # exact: a power of two
    if (scaled == np.floor(scaled)).all():
        return float(np.sum(values))  # every partial sum is a float: exact
    s = math.fsum(values)
    k = math.floor(s * scale)
    if k == s * scale and math.fsum(itertools.chain(values, (-s,))) < 0:
        k -= 1
    return k / scale
