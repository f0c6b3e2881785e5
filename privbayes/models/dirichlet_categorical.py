"""Dirichlet-Categorical: p ~ Dir(alpha), x_i ~ Categorical(p) over K categories."""

from __future__ import annotations

import numpy as np

from ..data import statistics
from ..sampling.conjugate import simplex_from_log
from ..validation import check_positive_vector
from ._dirichlet import DirichletFamily


class DirichletCategorical(DirichletFamily):
    """Dirichlet(alpha) prior on the category probabilities of K >= 2 categories.

    Parameters
    ----------
    alpha : array_like, shape (K,), K >= 2, finite entries > 0 (public pseudo-counts).

    Data for :func:`privbayes.sample`: integer category codes in 0..K-1, shape (n,), or
    one-hot rows, shape (n, K). The released value is a probability vector, shape (K,),
    summing to 1.

    Source: paper §3. Boundary pairs: our reduction to O(K^2) vertex pairs
    (docs/boundary.md), tested against brute force.
    """

    def __init__(self, alpha) -> None:
        self._alpha = check_positive_vector(alpha, "alpha", 2)
        self.alpha = self._alpha  # read-only array
        self._freeze()

    def __repr__(self) -> str:
        return f"DirichletCategorical(alpha={self._alpha.tolist()!r})"

    # -- data: the chunk kernel of privbayes.data (one pass, exact integer counts) ----------
    _data_ndims = (1, 2)
    _data_rules = 1

    def _statistics(self, data) -> tuple[np.ndarray, int]:
        """(category counts, shape (K,), n) from codes (n,) or one-hot rows (n, K)."""
        return statistics(self, data)

    def _data_shape(self, shape: tuple, name: str) -> None:
        k = self.K
        if len(shape) == 2 and shape[1] != k:
            raise ValueError(
                f"one-hot {name} must have K={k} columns (len(alpha)); got shape {shape}"
            )
        if len(shape) not in (1, 2):
            raise ValueError(f"{name} must be codes (n,) or one-hot rows (n, K); got shape {shape}")

    def _data_chunk(self, arr: np.ndarray):
        k = self.K
        if arr.ndim == 1:
            bad = (arr != np.round(arr)) | (arr < 0) | (arr > k - 1)
            codes = np.where(bad, 0, arr).astype(np.int64)
            return np.bincount(codes, minlength=k)[:k].astype(np.int64), [bad]
        bad = ((arr != 0) & (arr != 1)).any(axis=1) | (arr.sum(axis=1) != 1)
        return np.count_nonzero(arr, axis=0).astype(np.int64), [bad]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        k = self.K
        name = where.rsplit("[", 1)[0]
        if isinstance(value, list):
            row = where.rsplit("[", 1)[1].rstrip("]")
            return (
                f"one-hot {name} must have exactly one 1 per row; row {row} is {value} "
                f"({count} row(s) not one-hot)"
            )
        return (
            f"{name} must hold integer category codes in 0..{k - 1} (K={k} from alpha); "
            f"{where} = {value!r} ({count} value(s) outside)"
        )

    def _data_finish(self, counts, n: int) -> tuple[np.ndarray, int]:
        return np.asarray(counts).astype(float), n  # exact integers below 2^53

    def _records(self, codes: np.ndarray) -> np.ndarray:
        """Category codes as records (floats, as data arrive)."""
        return codes.astype(float)

    def _value(self, log_p: np.ndarray):
        p = simplex_from_log(log_p)
        p.setflags(write=False)
        lp = np.array(log_p)
        lp.setflags(write=False)
        return p, lp
