"""Statistics of an audit: Clopper-Pearson bounds on error rates, and the eps they prove."""

from __future__ import annotations

import numpy as np
from scipy import special

MIN_TRIALS = 100  # per data set; with fewer, every bound is 0 at any useful confidence


def clopper_pearson(k, n, confidence: float = 0.95, side: str = "two-sided"):
    """Clopper-Pearson (exact binomial) confidence bounds on a proportion.

    Parameters
    ----------
    k, n : whole numbers or arrays of them (broadcast), 0 <= k <= n, n >= 1: successes out
        of trials (integer-valued floats are accepted; NaN, fractions and booleans are not).
    confidence : in [0.5, 1) (a lower level would put the "upper" bound below the
        observed rate).
    side : "two-sided" -> (lower, upper) each with tail (1 - confidence) / 2;
        "upper" / "lower" -> the one-sided bound with tail 1 - confidence.

    Returns float arrays (or a tuple of two for "two-sided"), shaped like ``k``.
    Source: Clopper & Pearson (1934), Biometrika 26(4); equal to
    ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``.
    """
    confidence = _check_confidence(confidence)
    k, n = _whole(k, "k"), _whole(n, "n")
    k, n = np.broadcast_arrays(k, n)
    bad = np.flatnonzero(((k < 0) | (k > n) | (n < 1)).ravel())
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"need 0 <= k <= n and n >= 1; got k = {k.flat[i]:g}, n = {n.flat[i]:g}")
    tail = 1.0 - confidence
    if side == "two-sided":
        tail /= 2.0
    elif side not in ("upper", "lower"):
        raise ValueError(f"side must be 'two-sided', 'upper' or 'lower'; got {side!r}")
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k == 0, 0.0, special.betaincinv(k, n - k + 1, tail))
        upper = np.where(k == n, 1.0, special.betaincinv(k + 1, n - k, 1.0 - tail))
    lower, upper = lower[()], upper[()]  # floats for scalar input
    if side == "upper":
        return upper
    if side == "lower":
        return lower
    return lower, upper


def eps_from_rates(fpr, fnr, delta: float):
    """The eps that a test with these error rates proves, at ``delta`` (>= 0, may be inf).

    ``fpr`` = P[test says D' | D], ``fnr`` = P[test says D | D']. Every (eps, delta)-DP
    mechanism has fpr + e^eps fnr >= 1 - delta and fnr + e^eps fpr >= 1 - delta, so

        eps >= max(log((1 - delta - fnr) / fpr), log((1 - delta - fpr) / fnr), 0).

    Arrays broadcast; rates must lie in [0, 1] (NaN refused). Decreasing in both rates:
    plug in upper confidence bounds on the rates to get a lower confidence bound on eps.
    ``delta`` in [0, 1). Sources: Kairouz, Oh, Viswanath (ICML 2015), Thm 2.1; Jagielski
    et al. (NeurIPS 2020).
    """
    delta = _check_delta(delta)
    fpr, fnr = _rate(fpr, "fpr"), _rate(fnr, "fnr")
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fnr, 0.0)) - np.log(fpr)
        b = np.log(np.maximum(1.0 - delta - fpr, 0.0)) - np.log(fnr)
    out = np.fmax(np.fmax(a, b), 0.0)  # fmax: NaN (0/0) never wins
    return out[()] if out.ndim == 0 else out


def _numbers(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers; got {x!r}")
    return arr.astype(float)


def _whole(x, name: str) -> np.ndarray:
    arr = _numbers(x, name)
    bad = np.flatnonzero((~np.isfinite(arr) | (arr != np.floor(arr))).ravel())
    if bad.size:
        v = float(arr.flat[bad[0]])
        raise ValueError(f"{name} must be whole numbers (counts); got {v!r}")
    return arr


def _rate(x, name: str) -> np.ndarray:
    arr = _numbers(x, name)
    bad = np.flatnonzero((np.isnan(arr) | (arr < 0) | (arr > 1)).ravel())
    if bad.size:
        v = float(arr.flat[bad[0]])
        raise ValueError(f"{name} must be rates in [0, 1] (NaN refused); got {v!r}")
    return arr


def _check_confidence(confidence) -> float:
    """confidence in [0.5, 1): below 1/2 a one-sided "upper" bound falls below the estimate
    (and the audit's per-rate level sqrt(confidence) below 1/2 when confidence < 1/4)."""
    if isinstance(confidence, bool | str) or not isinstance(confidence, int | float | np.floating):
        raise TypeError(f"confidence must be a number in [0.5, 1); got {confidence!r}")
    c = float(confidence)
    if not 0.5 <= c < 1.0:
        raise ValueError(f"confidence must lie in [0.5, 1); got {confidence!r}")
    return c


def _check_delta(delta) -> float:
    if isinstance(delta, bool | str) or not isinstance(delta, int | float | np.floating):
        raise TypeError(f"delta must be a number in [0, 1); got {delta!r}")
    d = float(delta)
    if not 0.0 <= d < 1.0:
        raise ValueError(f"delta must lie in [0, 1); got {delta!r}")
    return d


def _check_trials(trials) -> int:
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer):
        raise TypeError(f"trials must be an integer >= {MIN_TRIALS}; got {trials!r}")
    if trials < MIN_TRIALS:
        raise ValueError(
            f"trials must be >= {MIN_TRIALS} per data set (got {trials}): with fewer, "
            "the confidence bounds leave no room for a lower bound above 0"
        )
    return int(trials)


def _bound(fp, n0, fn, n1, delta: float, level: float):
    """Lower bound on eps from counts, each rate bounded one-sidedly at ``level``."""
    a = clopper_pearson(fp, n0, level, "upper")
    b = clopper_pearson(fn, n1, level, "upper")
    return eps_from_rates(a, b, delta)
