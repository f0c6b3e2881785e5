"""Noise mechanisms on a count (0/1 column) or a histogram (categorical column).

Replace-one neighbours with n public: replacing one record moves a count by at most 1
(L1 = L2 sensitivity 1) and moves one unit of a histogram from one bin to another (L1
sensitivity 2, L2 sensitivity sqrt(2)). The released proportions are post-processing of
the noisy counts:

* one count k of n: theta = clip(k~, 0, n) / n;
* a histogram: counts clipped at 0 and normalised (uniform if every count clips to 0).

The noisy-sufficient-statistics posterior draws from the conjugate posterior at the
clipped noisy counts (post-processing as well).
"""

from __future__ import annotations

import math

import numpy as np

from privbayes.sampling.conjugate import sample_dirichlet_log, simplex_from_log

COUNT_SENSITIVITY = {"l1": 1.0, "l2": 1.0}
HISTOGRAM_SENSITIVITY = {"l1": 2.0, "l2": math.sqrt(2.0)}


def laplace_scale(eps: float, l1_sensitivity: float) -> float:
    """Scale b = Delta_1 / eps of the eps-DP Laplace mechanism."""
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be finite and > 0; got {eps!r}")
    return l1_sensitivity / eps


def proportion(noisy: np.ndarray, n: int) -> np.ndarray:
    """Proportions from noisy counts, shape (..., K) (K = 1: one count of n)."""
    noisy = np.asarray(noisy, dtype=float)
    if noisy.shape[-1] == 1:
        return np.clip(noisy, 0.0, n) / n
    pos = np.clip(noisy, 0.0, None)
    total = pos.sum(axis=-1, keepdims=True)
    k = noisy.shape[-1]
    return np.where(total > 0, pos / np.where(total > 0, total, 1.0), 1.0 / k)


def posterior_draw(counts: np.ndarray, n: int, prior: np.ndarray, rng) -> np.ndarray:
    """One draw per row from the conjugate posterior at (clipped) counts, shape (..., K).

    K = 1 reads a count of ones out of n (Beta(prior[0] + k, prior[1] + n - k)) and returns
    theta = P(one), shape (..., 1).
    """
    counts = np.asarray(counts, dtype=float)
    prior = np.asarray(prior, dtype=float)
    if counts.shape[-1] == 1:
        k = np.clip(counts[..., 0], 0.0, n)
        params = np.stack([prior[0] + k, prior[1] + (n - k)], axis=-1)
        return simplex_from_log(sample_dirichlet_log(params, rng))[..., :1]
    params = prior + np.clip(counts, 0.0, None)
    return simplex_from_log(sample_dirichlet_log(params, rng))


def error(theta: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """|theta - truth| for one proportion (K = 1), total variation for K >= 2."""
    diff = np.abs(np.asarray(theta, float) - np.asarray(truth, float))
    return diff[..., 0] if diff.shape[-1] == 1 else 0.5 * diff.sum(axis=-1)
