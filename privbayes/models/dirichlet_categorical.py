"""Dirichlet-Categorical: p ~ Dir(alpha), x_i ~ Categorical(p) over K categories."""

from __future__ import annotations

import numpy as np

from ..sampling.conjugate import simplex_from_log
from ..validation import as_numeric_array, check_positive_vector
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

    def _statistics(self, data) -> tuple[np.ndarray, int]:
        arr = as_numeric_array(data, "data")
        k = self.K
        if arr.ndim == 1:
            bad = np.flatnonzero((arr != np.round(arr)) | (arr < 0) | (arr > k - 1))
            if bad.size:
                i = int(bad[0])
                raise ValueError(
                    f"data must hold integer category codes in 0..{k - 1} (K={k} from alpha); "
                    f"data[{i}] = {float(arr[i])!r}"
                )
            return np.bincount(arr.astype(np.int64), minlength=k).astype(float), int(arr.size)
        if arr.ndim == 2:
            if arr.shape[1] != k:
                raise ValueError(
                    f"one-hot data must have K={k} columns (len(alpha)); got shape {arr.shape}"
                )
            bad = np.flatnonzero(((arr != 0) & (arr != 1)).any(axis=1) | (arr.sum(axis=1) != 1))
            if bad.size:
                i = int(bad[0])
                raise ValueError(
                    f"one-hot data must have exactly one 1 per row; row {i} is {arr[i]}"
                )
            # exact integer counts (a float column sum is exact too, below 2^53)
            return np.count_nonzero(arr, axis=0).astype(float), int(arr.shape[0])
        raise ValueError(f"data must be codes (n,) or one-hot rows (n, K); got shape {arr.shape}")

    def _records(self, codes: np.ndarray) -> np.ndarray:
        """Category codes as records (floats, as data arrive)."""
        return codes.astype(float)

    def _value(self, log_p: np.ndarray):
        p = simplex_from_log(log_p)
        p.setflags(write=False)
        lp = np.array(log_p)
        lp.setflags(write=False)
        return p, lp
