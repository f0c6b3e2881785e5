"""MCMC diagnostics without ArviZ: rank-normalised split R-hat, bulk/tail ESS, PSIS k-hat.

ArviZ takes 2-3 s to import (it loads matplotlib and numba); a release needs only these
three numbers, so we compute them here with numpy and scipy.special, vectorised over the
coordinates. The definitions are those of Vehtari, Gelman, Simpson, Carpenter & Bürkner
(2021), "Rank-normalization, folding, and localization: an improved R-hat" (split chains,
rank normalisation with Blom's offset 3/8, folding about the median for the tails; ESS by
Geyer's initial positive and monotone sequences) and of Vehtari, Simpson, Gelman, Yao &
Gabry (2024), "Pareto smoothed importance sampling" (the shape k of a generalised Pareto
fit to the largest weights, by Zhang & Stephens' 2009 empirical-Bayes estimate with a weak
prior). tests/test_diagnostics.py checks every function against ArviZ to 1e-10.

Every function propagates NaN: a coordinate whose draws contain NaN, or a chain set whose
R-hat is undefined (constant chains: 0/0), gives NaN, and the callers count NaN as a
failed diagnostic. Maxima and minima over coordinates use ``np.max``/``np.min``, which
propagate NaN (xarray's and pandas' skip it, which would let a constant coordinate pass).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["ess_bulk", "ess_tail", "pareto_k", "split_rhat", "convergence_message"]

_BLOM = 3.0 / 8.0


def _as_chains(x) -> np.ndarray:
    """(chains, draws) or (chains, draws, K) -> float (chains, draws, K)."""
    a = np.asarray(x, dtype=float)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"draws must have shape (chains, draws[, K]); got {a.shape}")
    return a


def _split(a: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as separate chains (the middle draw of an odd
    count is dropped): (chains, draws, K) -> (2 chains, draws // 2, K)."""
    half = a.shape[1] // 2
    return np.concatenate([a[:, :half], a[:, a.shape[1] - half :]], axis=0)


def _average_ranks(flat: np.ndarray) -> np.ndarray:
    """Ranks 1..N along axis 0, ties given their average rank (IMH chains repeat states)."""
    n = flat.shape[0]
    order = np.argsort(flat, axis=0, kind="stable")
    s = np.take_along_axis(flat, order, axis=0)
    idx = np.arange(n)[:, None]
    starts = np.ones(s.shape, dtype=bool)
    starts[1:] = s[1:] != s[:-1]
    ends = np.ones(s.shape, dtype=bool)
    ends[:-1] = starts[1:]
    first = np.maximum.accumulate(np.where(starts, idx, 0), axis=0)
    last = np.minimum.accumulate(np.where(ends, idx, n - 1)[::-1], axis=0)[::-1]
    ranks = np.empty(s.shape)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=0)
    return ranks


def _z_scale(a: np.ndarray) -> np.ndarray:
    """Rank-normalise each coordinate over all chains and draws: Phi^-1 of Blom's
    (rank - 3/8) / (N + 1/4)."""
    c, n, k = a.shape
    flat = a.reshape(c * n, k)
    ranks = _average_ranks(flat)
    z = special.ndtri((ranks - _BLOM) / (c * n - 2 * _BLOM + 1))
    return z.reshape(c, n, k)


def _rhat(a: np.ndarray) -> np.ndarray:
    """Classic R-hat of each coordinate of (chains, draws, K); NaN when W = 0."""
    n = a.shape[1]
    between = n * np.var(a.mean(axis=1), axis=0, ddof=1)
    within = np.mean(np.var(a, axis=1, ddof=1), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def split_rhat(x) -> np.ndarray:
    """Rank-normalised split R-hat per coordinate, the larger of bulk and folded (tail).

    x : (chains, draws) or (chains, draws, K). Returns shape (K,) (or (1,)). NaN for a
    coordinate with a NaN draw, fewer than 2 chains or 4 draws, or constant chains.
    """
    a = _as_chains(x)
    out = np.full(a.shape[2], np.nan)
    if a.shape[0] < 2 or a.shape[1] < 4:
        return out
    ok = ~np.isnan(a).any(axis=(0, 1))
    s = _split(a[:, :, ok])
    bulk = _rhat(_z_scale(s))
    folded = np.abs(s - np.median(s, axis=(0, 1)))
    tail = _rhat(_z_scale(folded))
    out[ok] = np.maximum(bulk, tail)  # np.maximum propagates NaN
    return out


def _autocov(a: np.ndarray) -> np.ndarray:
    """Autocovariance at every lag along axis 1 (biased, divided by draws), by FFT."""
    n = a.shape[1]
    m = 1 << (2 * n - 1).bit_length()
    centred = a - a.mean(axis=1, keepdims=True)
    f = np.fft.rfft(centred, n=m, axis=1)
    return np.fft.irfft(f * np.conjugate(f), n=m, axis=1)[:, :n] / n


def _ess(a: np.ndarray) -> np.ndarray:
    """ESS per coordinate of (chains, draws, K) by Geyer's initial positive and monotone
    sequences, as in Vehtari et al. (2021, Appendix A); NaN where a draw is NaN."""
    c, n, k = a.shape
    total = c * n
    out = np.full(k, np.nan)
    valid = ~np.isnan(a).any(axis=(0, 1))
    const = valid & (np.ptp(np.where(valid, a, 0.0), axis=(0, 1)) < np.finfo(float).resolution)
    out[const] = total
    cols = valid & ~const
    if not cols.any():
        return out
    a = a[:, :, cols]
    kc = a.shape[2]
    acov = _autocov(a)
    mean_var = acov[:, 0].mean(axis=0) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if c > 1:
        var_plus = var_plus + np.var(a.mean(axis=1), axis=0, ddof=1)
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # (n, kc)
    rho_t = np.zeros((n, kc))
    rho_t[0] = 1.0
    rho_t[1] = rho[1]
    even, odd = np.ones(kc), rho[1].copy()
    active = np.ones(kc, dtype=bool)
    t_exit = np.ones(kc, dtype=int)
    t = 1
    while t < n - 3:  # initial positive sequence: pairs while their sum stays > 0
        active &= (even + odd) > 0
        if not active.any():
            break
        e, o = rho[t + 1], rho[t + 2]
        even, odd = np.where(active, e, even), np.where(active, o, odd)
        keep = active & (e + o >= 0)
        rho_t[t + 1] = np.where(keep, e, rho_t[t + 1])
        rho_t[t + 2] = np.where(keep, o, rho_t[t + 2])
        t_exit = np.where(active, t + 2, t_exit)
        t += 2
    max_t = t_exit - 2
    cols_idx = np.arange(kc)
    last = np.minimum(max_t + 1, n - 1)
    boost = (even > 0) & (max_t + 1 <= n - 1)
    rho_t[last[boost], cols_idx[boost]] = even[boost]
    t = 1
    while t <= int(max_t.max()) - 2:  # initial monotone sequence
        on = t <= max_t - 2
        prev = rho_t[t - 1] + rho_t[t]
        fix = on & (rho_t[t + 1] + rho_t[t + 2] > prev)
        rho_t[t + 1] = np.where(fix, prev / 2.0, rho_t[t + 1])
        rho_t[t + 2] = np.where(fix, prev / 2.0, rho_t[t + 2])
        t += 2
    csum = np.cumsum(rho_t, axis=0)
    head = np.where(max_t >= 0, csum[np.clip(max_t, 0, n - 1), cols_idx], 0.0)
    tail = np.where(max_t + 1 <= n - 1, rho_t[np.minimum(max_t + 1, n - 1), cols_idx], 0.0)
    tau = np.maximum(-1.0 + 2.0 * head + tail, 1.0 / math.log10(total))
    ess = total / tau
    ess[np.isnan(rho_t).any(axis=0)] = np.nan
    out[cols] = ess
    return out


def ess_bulk(x) -> np.ndarray:
    """Bulk ESS per coordinate: ESS of the rank-normalised split chains. Shape (K,)."""
    a = _as_chains(x)
    out = np.full(a.shape[2], np.nan)
    if a.shape[1] < 4:
        return out
    ok = ~np.isnan(a).any(axis=(0, 1))
    out[ok] = _ess(_z_scale(_split(a[:, :, ok])))
    return out


def ess_tail(x) -> np.ndarray:
    """Tail ESS per coordinate: the smaller ESS of the indicators x <= q5% and x <= q95%
    (split chains). Shape (K,)."""
    a = _as_chains(x)
    out = np.full(a.shape[2], np.nan)
    if a.shape[1] < 4:
        return out
    ok = ~np.isnan(a).any(axis=(0, 1))
    b = a[:, :, ok]
    q = np.quantile(b, [0.05, 0.95], axis=(0, 1))  # type 7, as R and ArviZ
    low = _ess(_split((b <= q[0]).astype(float)))
    high = _ess(_split((b <= q[1]).astype(float)))
    out[ok] = np.minimum(low, high)
    return out


def _gpd_shape(tail: np.ndarray) -> float:
    """Zhang & Stephens (2009) empirical-Bayes estimate of a generalised Pareto shape k
    from sorted exceedances, with the weak prior of Vehtari et al. (2024)."""
    n = tail.size
    m = 30 + int(n**0.5)
    b = 1.0 - np.sqrt(m / (np.arange(1, m + 1, dtype=float) - 0.5))
    b /= 3.0 * tail[int(n / 4 + 0.5) - 1]
    b += 1.0 / tail[-1]
    k = np.log1p(-b[:, None] * tail).mean(axis=1)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        profile = n * (np.log(-(b / k)) - k - 1.0)
        # exp overflows to inf for hopeless candidates: their weight is then 0, as it should
        weights = 1.0 / np.exp(profile - profile[:, None]).sum(axis=1)
    keep = weights >= 10 * np.finfo(float).eps
    b, weights = b[keep], weights[keep] / weights[keep].sum()
    b_post = float(np.sum(b * weights))
    k_post = float(np.log1p(-b_post * tail).mean())
    return (n * k_post + 10 * 0.5) / (n + 10)


def pareto_k(log_w) -> float:
    """Pareto k-hat of importance weights given as logs, shape (S,): the shape of a
    generalised Pareto fit to the largest ceil(min(S / 5, 3 sqrt(S))) weights. Above 0.7
    the weights' mean is unreliable. inf when the tail has at most 4 weights; NaN for NaN
    weights."""
    x = np.asarray(log_w, dtype=float).ravel()
    if x.size == 0 or np.isnan(x).any():
        return math.nan
    x = x - x.max()
    s = np.sort(x)
    cut = -math.ceil(min(x.size / 5.0, 3.0 * math.sqrt(x.size))) - 1
    if -cut > x.size:
        return math.inf
    x_cut = max(s[cut], math.log(np.finfo(float).tiny))
    tail = s[s > x_cut]
    if tail.size <= 4:
        return math.inf
    return _gpd_shape(np.exp(tail) - math.exp(x_cut))


def convergence_message(
    problems: list[str],
    attempts: int,
    *,
    can_warn: bool,
    hint: str = "",
    released: bool = False,
) -> str:
    """The ConvergenceError (or, when released, RuntimeWarning) text shared by the MCMC
    back-ends (one line).

    Says what failed, whether the draw was released, that a ledger charge for the attempt
    stays spent (the chains read the data), what helps, and whether
    ``on_bad_diagnostics='warn'`` would release such a run (never for chains that did not
    move: ``can_warn`` False). ``hint`` names a back-end specific remedy first.
    ``released`` True: the text of the warning for a run released anyway under
    ``on_bad_diagnostics='warn'``, saying the guarantee is weakened (approximate)."""
    tries = f"{attempts} attempt" + ("s" if attempts != 1 else "")
    helps = (
        f"{hint + ', ' if hint else ''}a stronger prior (larger beta), more "
        "tune/draws, or another back-end."
    )
    if released:
        return (
            f"MCMC did not converge after {tries} (" + "; ".join(problems) + "): the draw "
            "was released anyway under on_bad_diagnostics='warn', but it may not come from "
            "the posterior the certificate is about, so the privacy guarantee is weakened "
            "(approximate) by the sampler's error (docs/glm.md). What helps: " + helps
        )
    text = (
        f"MCMC did not converge after {tries} (" + "; ".join(problems) + "): the draw would "
        "not come from the posterior the certificate is about, so nothing was released. "
        "A ledger charge made for this call stays spent: the chains read the data. What "
        "helps: " + helps
    )
    if can_warn:
        text += (
            " on_bad_diagnostics='warn' would release a run like this one, with the "
            "guarantee weakened by the sampler's error (docs/glm.md)."
        )
    else:
        text += (
            " on_bad_diagnostics='warn' would not release it either: the chains barely "
            "moved from their starting law."
        )
    return text
