"""Exact Bernoulli(exp(L)) decisions for the rejection samplers (docs/exact.md §7).

A rejection sampler accepts a proposal with probability alpha = exp(L). Comparing a
53-bit uniform with alpha accepts with probability floor(alpha 2^53) / 2^53 instead: a
relative error of up to 2^-53 / alpha, so proposals with alpha < 2^-53 are never accepted
and the accepted law is cut off where alpha is small — a data-dependent truncation. Here
the uniform is refined with fresh 53-bit words until the comparison is decided, so the
acceptance probability is exactly the computed a = fl(exp(L)); L below -700 is split into
2^j exact halves (L / 2^j is exact in binary floating point) and the proposal is
accepted when every one of the 2^j independent decisions accepts, so tiny alphas keep
their relative accuracy. What remains is the rounding of exp: each factor is shrunk by
1 - 9U after exp, so the acceptance probability lies in [exp(L - error(L)), exp(L)] — never
above exp(L) (subtracting error(L) from L instead would be lost in rounding for large |L|).
"""

from __future__ import annotations

import numpy as np

U = 2.0**-53
WORD = 2.0**53
SPLIT = -700.0  # exp(L / 2^j) stays a normal float with L / 2^j >= SPLIT
FLOOR = -1e6  # L below: rejected (probability < e^-1e6: docs/exact.md §7's edge event)

__all__ = ["FLOOR", "accept_exp", "error"]


def _halvings(log_alpha: np.ndarray) -> np.ndarray:
    """j >= 0 with log_alpha / 2^j >= SPLIT (0 where log_alpha >= SPLIT)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(log_alpha < SPLIT, log_alpha / SPLIT, 1.0)
        return np.maximum(0, np.ceil(np.log2(np.maximum(ratio, 1.0)))).astype(np.int64)


SHRINK = 1.0 - 9.0 * U  # exp(L / 2^j) computed, times this: below the exact value


def error(log_alpha) -> np.ndarray:
    """Bound on log_alpha - log P(accept) >= 0 for FLOOR <= L <= 0: 2^j factors, each
    fl(fl(exp(L / 2^j)) * SHRINK), which lies in [exp(L / 2^j) (1 - 18 U), exp(L / 2^j)]
    when exp is within 4 ulp (8 U relative)."""
    log_alpha = np.asarray(log_alpha, dtype=float)
    return 18.1 * U * np.exp2(_halvings(log_alpha))


def _decide(rng: np.random.Generator, first: np.ndarray, a: np.ndarray) -> np.ndarray:
    """U < a for uniforms U = (first + U') / 2^53 refined lazily; first in [0, 2^53)."""
    big = a * WORD  # exact: a power-of-two scaling of a normal float
    k = first.copy()
    out = np.zeros(a.shape, dtype=bool)
    todo = np.arange(a.size)
    while todo.size:
        kk, bb = k[todo], big[todo]
        yes = kk + 1.0 <= bb  # U < (k + 1) / 2^53 <= a
        undecided = (kk < bb) & ~yes  # k <= A < k + 1: look at the next word
        out[todo[yes]] = True
        todo = todo[undecided]
        if todo.size:
            # A - k in (0, 1) is exact (Sterbenz for A >= 2, trivially below), then scaled
            big[todo] = (big[todo] - k[todo]) * WORD
            k[todo] = rng.random(todo.size) * WORD
    return out


def accept_exp(rng: np.random.Generator, first: np.ndarray, log_alpha: np.ndarray):
    """Accept each proposal with probability in [exp(log_alpha - error), exp(log_alpha)].

    ``first`` (count,): the uniform words drawn for the proposals (rng.random() values,
    multiples of 2^-53); ``log_alpha`` <= 0 (count,), -inf allowed (a rejection). Entries
    below FLOOR are rejected. Extra words are drawn from ``rng`` only to refine a
    comparison within 2^-53 of its threshold, or for the extra factors of log_alpha below
    SPLIT: rare, and never affecting the law of what is accepted.
    """
    log_alpha = np.asarray(log_alpha, dtype=float)
    first = np.asarray(first, dtype=float) * WORD
    ok = np.isfinite(log_alpha) & (log_alpha >= FLOOR)
    out = np.zeros(log_alpha.shape, dtype=bool)
    idx = np.flatnonzero(ok)
    if not idx.size:
        return out
    j = _halvings(log_alpha[idx])
    piece = log_alpha[idx] / np.exp2(j)  # exact
    acc = _decide(rng, first[idx], np.exp(piece) * SHRINK)
    factors = np.exp2(j)
    rep = 1
    while True:  # the other 2^j - 1 factors of the same piece, while still accepted
        more = np.flatnonzero(acc & (factors > rep))
        if not more.size:
            break
        acc[more] = _decide(rng, rng.random(more.size) * WORD, np.exp(piece[more]) * SHRINK)
        rep += 1
    out[idx] = acc
    return out
