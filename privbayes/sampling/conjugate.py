"""Exact Dirichlet (and so Beta) draws, in log space.

numpy's Beta/Dirichlet samplers return 0, 1 or NaN when every concentration is tiny
(e.g. 1e-4 with no data). We draw log-gamma variates instead: for a < 1,
log G_a = log G_{a+1} + log(U)/a (Marsaglia & Tsang's boost), which never underflows,
and normalise with log-sum-exp.
"""

from __future__ import annotations

import numpy as np


def log_gamma_variates(shape_params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    a = np.asarray(shape_params, dtype=float)
    small = a < 1.0
    boost = np.where(small, a + 1.0, a)
    log_g = np.log(rng.standard_gamma(boost))
    if small.any():
        u = 1.0 - rng.random(a.shape)  # in (0, 1]
        log_g = log_g + np.where(small, np.log(u) / a, 0.0)
    return log_g


def sample_dirichlet_log(params, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
    """Log of Dirichlet(params) draws.

    Parameters
    ----------
    params : array, shape (K,), finite and > 0.
    rng : numpy Generator.
    size : None for one draw (shape (K,)), or an int k (shape (k, K)).

    Returns log-probabilities; ``exp`` of a row sums to 1 up to rounding, never NaN.
    """
    params = np.asarray(params, dtype=float)
    shape = params.shape if size is None else (int(size),) + params.shape
    log_g = log_gamma_variates(np.broadcast_to(params, shape), rng)
    # Normalise about the largest variate: its log-probability is -log1p(sum of the
    # others' ratios), which keeps values like -1e-22 that a plain log-sum-exp rounds to 0.
    top = log_g.argmax(axis=-1)[..., None]
    rel = log_g - np.take_along_axis(log_g, top, axis=-1)
    ratios = np.exp(rel)
    np.put_along_axis(ratios, top, 0.0, axis=-1)  # leave the top's own 1 out of the sum
    return rel - np.log1p(ratios.sum(axis=-1, keepdims=True))


def simplex_from_log(log_p: np.ndarray) -> np.ndarray:
    """Probabilities from log-probabilities, renormalised so each row sums to 1."""
    p = np.exp(log_p)
    return p / p.sum(axis=-1, keepdims=True)
