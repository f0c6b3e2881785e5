"""Beta-Bernoulli: theta ~ Beta(alpha, beta), x_i ~ Bernoulli(theta), x_i in {0, 1}."""

from __future__ import annotations

import numpy as np

from ..sampling.conjugate import simplex_from_log
from ..validation import as_numeric_array, check_positive_vector, check_prior
from ._dirichlet import DirichletFamily


class BetaBernoulli(DirichletFamily):
    """Beta(alpha, beta) prior on the probability of a 1; data are 0/1 records.

    Parameters
    ----------
    alpha, beta : float > 0, the prior's pseudo-counts of ones and zeros (public).

    Data for :func:`privbayes.sample`: a 1-D array of 0/1 values (bools accepted), shape (n,).
    The released value is theta in [0, 1] (a float; in (0, 1) up to float64 underflow, see
    ``PrivateSample.log_value``).

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

    def _statistics(self, data) -> tuple[np.ndarray, int]:
        arr = as_numeric_array(data, "data")
        if arr.ndim != 1:
            raise ValueError(f"data must be a 1-D array of 0/1 values; got shape {arr.shape}")
        bad = np.flatnonzero((arr != 0) & (arr != 1))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"data must hold only 0 or 1; data[{i}] = {float(arr[i])!r} "
                f"({bad.size} value(s) outside {{0, 1}})"
            )
        k = float(arr.sum())
        return np.array([k, arr.size - k]), int(arr.size)

    def _records(self, codes: np.ndarray) -> np.ndarray:
        """0/1 records from category codes (category 0 counts the ones)."""
        return (codes == 0).astype(float)

    def _value(self, log_p: np.ndarray):
        if log_p.ndim == 1:
            return float(simplex_from_log(log_p)[0]), float(log_p[0])
        p, lp = simplex_from_log(log_p)[:, 0], np.array(log_p[:, 0])
        p.setflags(write=False)
        lp.setflags(write=False)
        return p, lp
