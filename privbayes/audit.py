"""Privacy auditing: measure a mechanism's privacy loss from the outside (docs/audit.md).

A certificate is only as good as the code behind it. An audit runs a mechanism many times
on two neighbouring data sets D and D', tries to tell the outputs apart, and turns how
well it succeeds into a statistically valid **lower bound** on the eps of (eps, delta)-DP:
if the mechanism really were (eps, delta)-DP, no test could have false-positive rate
alpha and false-negative rate beta with

    alpha + e^eps * beta < 1 - delta    or    beta + e^eps * alpha < 1 - delta

(Kairouz, Oh, Viswanath 2015; used for audits by Jagielski, Ullman, Oprea 2020 and Nasr,
Song, Thakurta, Papernot, Carlini 2021). The rates are bounded with Clopper-Pearson
intervals (Clopper & Pearson 1934), and the test (a threshold on a scalar score) is
chosen on one half of the trials and evaluated on the other half, so the bound holds with
the stated confidence whatever the selection did. An empirical lower bound above the
certified eps is evidence of a bug (or of an unsound certificate).

Also here: a histogram estimator of the Rényi divergence between the two output
distributions (scalar outputs, bootstrap interval), the worst-case neighbouring pair of
every privbayes mechanism (from the calibrator's boundary pair), and a privbayes release
with a fixed calibration wrapped as a black-box mechanism.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from .accounting.accountant import OrdersWarning, RdpAccountant
from .calibration import Calibration, calibrate
from .errors import InfeasiblePrivacyError, PrivBayesError
from .models import BayesianLogisticRegression, DirichletCategorical
from .models._dirichlet import DirichletFamily
from .validation import as_numeric_array, check_n, resolve_rng

__all__ = [
    "MIN_TRIALS",
    "AuditError",
    "AuditResult",
    "CalibratedMechanism",
    "RenyiEstimate",
    "audit",
    "audit_curve",
    "audit_model",
    "certified_dp",
    "clopper_pearson",
    "eps_from_rates",
    "plot_audits",
    "renyi_estimate",
    "worst_case_pair",
]

MIN_TRIALS = 100  # per data set; with fewer, every bound is 0 at any useful confidence
_N_THRESHOLDS = 2000  # candidate thresholds tried on the training half
_TAIL = 64  # extreme order statistics always among the candidates


class AuditError(PrivBayesError, RuntimeError):
    """The audited mechanism failed (it raised, or returned something unusable)."""


# -- statistics ---------------------------------------------------------------------------
def clopper_pearson(k, n, confidence: float = 0.95, side: str = "two-sided"):
    """Clopper-Pearson (exact binomial) confidence bounds on a proportion.

    Parameters
    ----------
    k, n : int or int arrays (broadcast), 0 <= k <= n, n >= 1: successes out of trials.
    confidence : in (0, 1).
    side : "two-sided" -> (lower, upper) each with tail (1 - confidence) / 2;
        "upper" / "lower" -> the one-sided bound with tail 1 - confidence.

    Returns float arrays (or a tuple of two for "two-sided"), shaped like ``k``.
    Source: Clopper & Pearson (1934), Biometrika 26(4); equal to
    ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``.
    """
    confidence = _check_confidence(confidence)
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if (k < 0).any() or (k > n).any() or (n < 1).any():
        raise ValueError("need 0 <= k <= n and n >= 1")
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

    Arrays broadcast. Decreasing in both rates: plug in upper confidence bounds on the rates
    to get a lower confidence bound on eps. ``delta`` in [0, 1). Sources: Kairouz, Oh,
    Viswanath (ICML 2015), Thm 2.1; Jagielski et al. (NeurIPS 2020).
    """
    delta = _check_delta(delta)
    fpr, fnr = np.asarray(fpr, float), np.asarray(fnr, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fnr, 0.0)) - np.log(fpr)
        b = np.log(np.maximum(1.0 - delta - fpr, 0.0)) - np.log(fnr)
    out = np.fmax(np.fmax(a, b), 0.0)  # fmax: NaN (0/0) never wins
    return out[()] if out.ndim == 0 else out


def _check_confidence(confidence) -> float:
    if isinstance(confidence, bool | str) or not isinstance(confidence, int | float | np.floating):
        raise TypeError(f"confidence must be a number in (0, 1); got {confidence!r}")
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence!r}")
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


# -- running the mechanism ----------------------------------------------------------------
def _has_param(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _identical(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, tuple | list) and isinstance(b, tuple | list) and len(a) == len(b):
        try:
            return all(
                np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b, strict=True)
            )
        except (ValueError, TypeError):
            pass
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (ValueError, TypeError):
        return False


def _records_changed(a, b) -> int | None:
    """How many records (rows) differ, for same-shape numeric data; None when unknown."""
    parts_a = a if isinstance(a, tuple | list) and len(a) and np.ndim(a[0]) >= 1 else (a,)
    parts_b = b if isinstance(b, tuple | list) and len(b) and np.ndim(b[0]) >= 1 else (b,)
    try:
        pa = [np.asarray(x, dtype=float) for x in parts_a]
        pb_ = [np.asarray(x, dtype=float) for x in parts_b]
    except (TypeError, ValueError):
        return None
    if len(pa) != len(pb_) or any(
        x.shape != y.shape or x.ndim == 0 for x, y in zip(pa, pb_, strict=True)
    ):
        return None
    n = pa[0].shape[0]
    if any(x.shape[0] != n for x in pa):
        return None
    diff = np.zeros(n, dtype=bool)
    for x, y in zip(pa, pb_, strict=True):
        diff |= (x != y).reshape(n, -1).any(axis=1)
    return int(diff.sum())


def _as_outputs(out, count: int, label: str, first: int) -> np.ndarray:
    """Outputs of ``count`` trials as a float array (count,) or (count, d); NaN refused."""
    try:
        arr = np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"the mechanism must return numbers (a scalar or a 1-D vector per trial); "
            f"got {type(out).__name__} on {label}"
        ) from None
    if arr.ndim == 0 or arr.shape[0] != count or arr.ndim > 2:
        raise ValueError(
            f"the mechanism returned shape {arr.shape} for {count} trial(s) on {label}; "
            f"expected ({count},) or ({count}, d)"
        )
    nan = np.flatnonzero(np.isnan(arr.reshape(count, -1)).any(axis=1))
    if nan.size:
        raise ValueError(
            f"the mechanism returned NaN on trial {first + int(nan[0])} on {label} "
            f"({nan.size} trial(s) with NaN)"
        )
    return arr


def _run(mechanism, data, trials: int, rng, label: str, batch: bool, pass_rng: bool):
    kwargs = {}
    if batch:
        if pass_rng:
            kwargs["rng"] = rng
        try:
            out = mechanism(data, size=trials, **kwargs)
        except Exception as exc:
            raise AuditError(
                f"the mechanism raised on trials 0..{trials - 1} (one batched call) on "
                f"{label}: {type(exc).__name__}: {exc}"
            ) from exc
        return _as_outputs(out, trials, label, 0)
    rows = []
    for i in range(trials):
        if pass_rng:
            kwargs["rng"] = rng
        try:
            rows.append(mechanism(data, **kwargs))
        except Exception as exc:
            raise AuditError(
                f"the mechanism raised on trial {i} on {label}: {type(exc).__name__}: {exc}"
            ) from exc
        if i == 0:
            shape = np.shape(rows[0])
        elif np.shape(rows[-1]) != shape:
            raise ValueError(
                f"the mechanism returned shape {np.shape(rows[-1])} on trial {i} on {label} "
                f"but {shape} on trial 0"
            )
    return _as_outputs(rows, trials, label, 0)


# -- the distinguisher ----------------------------------------------------------------------
def _projection(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """A direction separating vector outputs: a logistic-regression score on the training half.

    For exponential-family outputs (e.g. log p of a Dirichlet) the log-likelihood ratio is
    linear in the sufficient statistic, so a linear score is the Neyman-Pearson test.
    Falls back to the difference of means when the fit fails.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    x = np.concatenate([x0, x1])
    if not np.isfinite(x).all():
        raise ValueError(
            "vector outputs must be finite (an output of +-inf cannot be projected); "
            "map them to finite features first"
        )
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1.0
    z = (x - mu) / sd
    y = np.r_[np.zeros(len(x0)), np.ones(len(x1))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            coef = LogisticRegression(C=1.0, max_iter=500).fit(z, y).coef_[0] / sd
    except ValueError:
        coef = x1.mean(axis=0) - x0.mean(axis=0)
    if not np.isfinite(coef).all() or not coef.any():
        coef = x1.mean(axis=0) - x0.mean(axis=0)
    return coef


def _candidates(pooled: np.ndarray) -> np.ndarray:
    """Thresholds: order statistics of the pooled training scores, dense in both tails."""
    u = np.sort(pooled)
    n = u.size
    lo, hi = special.logit(0.5 / n), special.logit(1 - 0.5 / n)
    p = special.expit(np.linspace(lo, hi, _N_THRESHOLDS))
    idx = np.concatenate(
        [np.floor(p * n).astype(int), np.arange(min(_TAIL, n)), n - 1 - np.arange(min(_TAIL, n))]
    )
    return np.unique(u[np.clip(idx, 0, n - 1)])


def _counts(s0: np.ndarray, s1: np.ndarray, t: np.ndarray):
    """For the rule "score > t means D'": (# of D-scores > t, # of D'-scores <= t)."""
    s0, s1 = np.sort(s0), np.sort(s1)
    fp = s0.size - np.searchsorted(s0, t, side="right")
    fn = np.searchsorted(s1, t, side="right")
    return fp, fn


def _bound(fp, n0, fn, n1, delta: float, level: float):
    """Lower bound on eps from counts, each rate bounded one-sidedly at ``level``."""
    a = clopper_pearson(fp, n0, level, "upper")
    b = clopper_pearson(fn, n1, level, "upper")
    return eps_from_rates(a, b, delta)


# -- results --------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditResult:
    """What an audit measured. eps values in nats.

    Attributes
    ----------
    eps_lower : a lower bound on the eps of (eps, delta)-DP that holds with probability
        >= ``confidence`` over the audit's randomness (0 when nothing could be shown).
    eps_point : the eps the chosen test shows on the evaluation half, rates plugged in
        (no confidence statement; inf when a rate is 0).
    interval : two-sided ``confidence`` interval for the eps the chosen test would show with
        unlimited trials (its upper end is inf when an observed rate is 0).
    delta, confidence, trials : as requested (``trials`` per data set).
    fpr, fnr : the chosen test's error rates on the evaluation half.
    threshold, direction : the test says D' when score > threshold ("greater") or
        score <= threshold ("less_equal").
    projection : for vector outputs, the direction the score was projected on (else None).
    eps_certified : the certified eps at ``delta`` when known (else None).
    eps_ceiling : the largest lower bound this many trials can give (a test that never
        errs on the evaluation half): no audit of this size can show more, ~log(trials).
    seconds : wall time of the audit.
    scores : the scores on D and on D' (every trial, both halves), for further analysis.
    """

    eps_lower: float
    eps_point: float
    interval: tuple[float, float]
    delta: float
    confidence: float
    trials: int
    fpr: float
    fnr: float
    threshold: float
    direction: str
    projection: np.ndarray | None = field(default=None, repr=False)
    eps_certified: float | None = None
    eps_ceiling: float = math.inf
    seconds: float = 0.0
    scores: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def fraction(self) -> float | None:
        """eps_lower / eps_certified (None without a certificate; nan if it is 0 or inf)."""
        if self.eps_certified is None:
            return None
        c = self.eps_certified
        return self.eps_lower / c if 0 < c < math.inf else math.nan

    @property
    def violation(self) -> bool:
        """True when the empirical lower bound exceeds the certified eps (a privacy bug)."""
        return self.eps_certified is not None and self.eps_lower > self.eps_certified


@dataclass(frozen=True)
class RenyiEstimate:
    """Histogram estimate of D_lam(P || Q) at each order, with a bootstrap interval (nats).

    Attributes: orders, estimate, lower, upper (arrays shaped like orders), confidence, bins
    (the number of bins after merging), certified (the certified eps at each order, or None).
    """

    orders: np.ndarray
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    confidence: float
    bins: int
    certified: np.ndarray | None = None


# -- the black-box audit -------------------------------------------------------------------
def audit(
    mechanism: Callable[..., Any],
    data: Any,
    neighbour: Any,
    trials: int,
    *,
    delta: float = 1e-5,
    confidence: float = 0.95,
    rng=None,
    batch: bool | None = None,
    certified: float | None = None,
) -> AuditResult:
    """Empirical lower bound on the eps of (eps, delta)-DP of ``mechanism``.

    Runs the mechanism ``trials`` times on ``data`` (D) and on ``neighbour`` (D'). The
    first half of each set of outputs chooses a distinguisher, the second half evaluates it:

    * scalar outputs: a threshold test, score = output, in both directions;
    * vector outputs (shape (d,)): score = a linear projection fitted on the first half
      (logistic regression), then a threshold test.

    Among ~2000 thresholds (dense in the tails) and both directions, the one whose
    Clopper-Pearson lower bound on the first half is largest (at a level corrected for the
    number of candidates, which discounts lucky sparse tails) is evaluated on the second
    half. There each error rate gets a one-sided Clopper-Pearson bound at level
    sqrt(confidence) (the D and D' samples are independent, so both hold together with
    probability ``confidence``) and :func:`eps_from_rates` turns them into the bound. Only
    one test meets the evaluation half, so no correction for the selection is needed.

    Parameters
    ----------
    mechanism : callable ``data -> output``, the output a float or a 1-D float vector
        (d,). If it takes a ``size`` keyword it is called once per data set with
        ``size=trials`` and must return shape (trials,) or (trials, d) (``batch=False``
        turns this off); if it takes an ``rng`` keyword it is passed a numpy Generator
        derived from ``rng``, so seeded audits are reproducible. Each call must use fresh
        randomness.
    data, neighbour : the neighbouring data sets D and D' (one record replaced), in the
        form the mechanism takes. They must differ.
    trials : int >= 100, runs per data set (2 * trials runs in all). Bounds near the
        certified eps need ~1e4-1e5.
    delta : in [0, 1); confidence : in (0, 1), default 0.95.
    rng : None, an int seed or a numpy Generator (for the mechanism, when it takes one).
    batch : None (auto: when the mechanism takes ``size``), True or False.
    certified : the certified eps at ``delta`` to report beside the bound (optional).

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError : trials < 100, identical data sets, delta outside [0, 1), confidence outside
        (0, 1), NaN outputs (naming the trial), outputs of inconsistent shape.
    TypeError : non-numeric outputs or arguments of the wrong type.
    AuditError : the mechanism raised (naming the trial and the data set).

    Sources: Jagielski, Ullman, Oprea (NeurIPS 2020), "Auditing differentially private
    machine learning"; Nasr et al. (IEEE S&P 2021), "Adversary instantiation"; Clopper &
    Pearson (1934).
    """
    start = time.perf_counter()
    trials = _check_trials(trials)
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    if not callable(mechanism):
        raise TypeError(f"mechanism must be callable (data -> output); got {mechanism!r}")
    if _identical(data, neighbour):
        raise ValueError(
            "data and neighbour are identical: an audit needs two neighbouring data sets "
            "that differ in one record (see worst_case_pair)"
        )
    changed = _records_changed(data, neighbour)
    if changed is not None and changed > 1:
        warnings.warn(
            f"data and neighbour differ in {changed} records; privbayes certificates are "
            "about neighbours that differ in one replaced record",
            UserWarning,
            stacklevel=2,
        )
    if certified is not None:
        certified = float(certified)
    gen = resolve_rng(rng)
    if batch is None:
        batch = _has_param(mechanism, "size")
    pass_rng = _has_param(mechanism, "rng")
    x0 = _run(mechanism, data, trials, gen, "data (D)", batch, pass_rng)
    x1 = _run(mechanism, neighbour, trials, gen, "neighbour (D')", batch, pass_rng)
    if x0.shape[1:] != x1.shape[1:]:
        raise ValueError(f"outputs on D have shape {x0.shape[1:]} but on D' {x1.shape[1:]}")
    half = trials // 2
    projection = None
    if x0.ndim == 2 and x0.shape[1] == 1:
        x0, x1 = x0[:, 0], x1[:, 0]
    if x0.ndim == 2:
        projection = _projection(x0[:half], x1[:half])
        s0, s1 = x0 @ projection, x1 @ projection
    else:
        s0, s1 = x0, x1
    level = math.sqrt(confidence)  # per error rate; the two are independent
    # choose the test on the training half
    tr0, tr1, te0, te1 = s0[:half], s1[:half], s0[half:], s1[half:]
    t = _candidates(np.concatenate([tr0, tr1]))
    fp, fn = _counts(tr0, tr1, t)
    # rank thresholds by a bound that holds simultaneously for all of them (Bonferroni):
    # it discounts thresholds in sparse tails whose training counts are mostly luck
    tl = 1.0 - (1.0 - level) / (2 * t.size)
    greater = _bound(fp, half, fn, half, delta, tl)
    less = _bound(half - fp, half, half - fn, half, delta, tl)
    k_g, k_l = int(np.argmax(greater)), int(np.argmax(less))
    if greater[k_g] >= less[k_l]:
        threshold, direction = float(t[k_g]), "greater"
    else:
        threshold, direction = float(t[k_l]), "less_equal"
    # evaluate it on the other half
    n0, n1 = te0.size, te1.size
    fp, fn = (int(v[0]) for v in _counts(te0, te1, np.array([threshold])))
    if direction == "less_equal":
        fp, fn = n0 - fp, n1 - fn
    eps_lower = float(_bound(fp, n0, fn, n1, delta, level))
    lo_a, hi_a = clopper_pearson(fp, n0, level)
    lo_b, hi_b = clopper_pearson(fn, n1, level)
    interval = (float(eps_from_rates(hi_a, hi_b, delta)), float(eps_from_rates(lo_a, lo_b, delta)))
    return AuditResult(
        eps_lower=eps_lower,
        eps_point=float(eps_from_rates(fp / n0, fn / n1, delta)),
        interval=interval,
        delta=delta,
        confidence=confidence,
        trials=trials,
        fpr=fp / n0,
        fnr=fn / n1,
        threshold=threshold,
        direction=direction,
        projection=projection,
        eps_certified=certified,
        eps_ceiling=float(_bound(0, n0, 0, n1, delta, level)),
        seconds=time.perf_counter() - start,
        scores=(s0, s1),
    )


# -- Rényi divergence -----------------------------------------------------------------------
def _merge_bins(c0: np.ndarray, c1: np.ndarray, min_count: int) -> np.ndarray:
    """Group ids of adjacent bins merged until each group holds >= min_count of each sample."""
    group = np.empty(c0.size, dtype=int)
    g, a, b = 0, 0, 0
    for i in range(c0.size):
        group[i] = g
        a += c0[i]
        b += c1[i]
        if a >= min_count and b >= min_count:
            g, a, b = g + 1, 0, 0
    if a or b:  # a short last group joins the previous one
        group[group == g] = max(g - 1, 0)
    return group


def _renyi_from_probs(p: np.ndarray, q: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """D_lam for discrete p, q (last axis = bins); orders (L,) -> (..., L)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lp, lq = np.log(p)[..., None, :], np.log(q)[..., None, :]
        lam = orders[:, None]
        terms = np.where(p[..., None, :] > 0, lam * lp + (1 - lam) * lq, -np.inf)
        out = special.logsumexp(terms, axis=-1) / (orders - 1)
    return np.where(np.isnan(out), np.inf, out)


def renyi_estimate(
    p_samples,
    q_samples,
    orders,
    *,
    bins: int | None = None,
    min_count: int = 20,
    n_boot: int = 200,
    confidence: float = 0.95,
    rng=None,
    certified=None,
) -> RenyiEstimate:
    """Histogram estimate of the Rényi divergence D_lam(P || Q) of two scalar output laws.

    The pooled samples are cut into ``bins`` equal-mass bins; adjacent bins are merged until
    each holds at least ``min_count`` samples of each law (this keeps q^(1-lam) from being
    driven by a handful of tail points), and D_lam of the two binned laws is computed.
    The plug-in is biased up by roughly bins / samples (Jensen); a multinomial bootstrap of
    the bin counts (``n_boot`` replicates) measures that bias, which is subtracted, and
    gives a basic bootstrap interval. Binning is post-processing, so the binned divergence
    never exceeds the true one: near the pole of an RDP curve, where D_lam lives in far
    tails, the estimate is low and the interval's upper end is not an upper bound.
    Measured accuracy: docs/audit.md.

    Parameters
    ----------
    p_samples, q_samples : 1-D arrays of draws from P and Q (>= 100 each; +-inf allowed).
    orders : scalar or 1-D array of finite orders > 1.
    bins : bins before merging (default sqrt of the smaller sample size, within [10, 1000]).
    min_count, n_boot : ints >= 1. confidence : in (0, 1). rng : seed or Generator.
    certified : the certified eps at each order, to store beside the estimate (optional).

    Returns RenyiEstimate (arrays shaped like ``orders``). Raises ValueError / TypeError for
    bad arguments, NaN samples or fewer than 100 samples.
    """
    xs = []
    for name, s in (("p_samples", p_samples), ("q_samples", q_samples)):
        arr = np.asarray(s)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"{name} must hold numbers; got dtype {arr.dtype}")
        arr = arr.astype(float)
        if arr.ndim != 1 or arr.size < MIN_TRIALS:
            raise ValueError(f"{name} must be 1-D with >= {MIN_TRIALS} draws; got {arr.shape}")
        if np.isnan(arr).any():
            raise ValueError(f"{name} holds NaN (at index {int(np.flatnonzero(np.isnan(arr))[0])})")
        xs.append(arr)
    x0, x1 = xs
    lam = np.atleast_1d(np.asarray(orders, dtype=float))
    if lam.ndim != 1 or not (np.isfinite(lam).all() and (lam > 1).all()):
        raise ValueError(f"orders must be finite and > 1; got {orders!r}")
    confidence = _check_confidence(confidence)
    for name, v in (("min_count", min_count), ("n_boot", n_boot)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {v!r}")
    if bins is None:
        bins = int(np.clip(np.sqrt(min(x0.size, x1.size)), 10, 1000))
    elif isinstance(bins, bool) or not isinstance(bins, int | np.integer) or bins < 2:
        raise ValueError(f"bins must be an integer >= 2; got {bins!r}")
    pooled = np.concatenate([x0, x1])
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, int(bins) + 1)[1:-1]))
    c0 = np.bincount(np.searchsorted(edges, x0, side="right"), minlength=edges.size + 1)
    c1 = np.bincount(np.searchsorted(edges, x1, side="right"), minlength=edges.size + 1)
    group = _merge_bins(c0, c1, int(min_count))
    c0 = np.bincount(group, weights=c0).astype(int)
    c1 = np.bincount(group, weights=c1).astype(int)
    p_hat, q_hat = c0 / x0.size, c1 / x1.size
    est = _renyi_from_probs(p_hat, q_hat, lam)
    gen = resolve_rng(rng)
    bp = gen.multinomial(x0.size, p_hat, size=int(n_boot)) / x0.size
    bq = gen.multinomial(x1.size, q_hat, size=int(n_boot)) / x1.size
    boot = _renyi_from_probs(bp, bq, lam)
    tail = 50.0 * (1.0 - confidence)
    q_lo, q_mid, q_hi = np.percentile(boot, [tail, 50.0, 100.0 - tail], axis=0)
    # the plug-in is biased up by ~ bins / samples (Jensen); the bootstrap measures that
    # bias: subtract it, and reflect the percentiles about the plug-in (basic bootstrap)
    with np.errstate(invalid="ignore"):
        est, lower, upper = (
            np.maximum(2 * est - q_mid, 0.0),
            np.maximum(2 * est - q_hi, 0.0),
            np.maximum(2 * est - q_lo, 0.0),
        )
    est, lower, upper = (np.where(np.isnan(v), np.inf, v) for v in (est, lower, upper))
    cert = None if certified is None else np.broadcast_to(np.asarray(certified, float), lam.shape)
    return RenyiEstimate(lam, est, lower, upper, confidence, int(c0.size), cert)


# -- privbayes mechanisms -------------------------------------------------------------------
def certified_dp(curve, delta: float) -> float:
    """The certified eps of (eps, delta)-DP of a mechanism with RDP curve ``curve``.

    ``curve``: a Calibration, a PrivateSample or a function orders -> eps. The curve is
    converted at every order of the accountant's dense grid (refined between grid points,
    improved conversion of BACKGROUND.md §1) and minimised. delta = 0 gives the order-inf
    (pure DP) value.
    """
    delta = _check_delta(delta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        return float(RdpAccountant().compose(curve).get_epsilon(delta))


def _calibration(model, n, lam, eps, method) -> Calibration:
    if isinstance(model, type) or not hasattr(model, "_calibrate"):
        raise TypeError(f"model must be a privbayes model instance; got {model!r}")
    return calibrate(model, n, lam, eps, method)


def worst_case_pair(model, n, lam, eps, method: str = "diffused", *, d: int = 1):
    """The worst-case neighbouring pair (D, D') of a privbayes mechanism, as data sets.

    Conjugate models: the calibrator's boundary pair at ``lam`` (``Calibration.pair``), the
    pair of count vectors where the certified sup is attained (docs/boundary.md), turned
    into records that differ in exactly one position. BetaBernoulli: 0/1 arrays, shape (n,)
    (also the worst pair of a statistical query, whose boundary pairs are the same).
    DirichletCategorical: category codes, shape (n,).

    BayesianLogisticRegression: no calibrator pair exists (the bound is analytic). We use
    n - 1 records x = 0 (they add no curvature, so the posterior is as wide as the prior
    allows) and one record x = c e_1 whose label is +1 in D and -1 in D': the log-density
    changes by the linear function c w_1, the largest change one record can make. Returns
    ((X, y), (X, y')) with X of shape (n, d).

    The pair is a fact about the mechanism (public inputs only), never about any data set.
    Raises ValueError / TypeError for bad arguments (n >= 1 needed), InfeasiblePrivacyError
    when (lam, eps) cannot be certified.
    """
    n = check_n(n)
    if n < 1:
        raise ValueError("n must be >= 1: with no records there is no neighbouring pair")
    cal = _calibration(model, n, lam, eps, method)
    if isinstance(model, BayesianLogisticRegression):
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be an integer >= 1; got {d!r}")
        x = np.zeros((n, int(d)))
        x[0, 0] = model.c
        y = np.ones(n)
        y1 = y.copy()
        y1[0] = -1.0
        return (x, y), (x.copy(), y1)
    if not isinstance(model, DirichletFamily):
        raise TypeError(f"no worst-case pair is known for {type(model).__name__}")
    pair = cal.pair
    counts = np.asarray(pair["counts"])
    i, j = pair["moved"]
    codes = np.repeat(np.arange(counts.size), counts)
    neighbour = codes.copy()
    neighbour[int(np.flatnonzero(codes == i)[0])] = j
    if isinstance(model, DirichletCategorical):
        return codes.astype(float), neighbour.astype(float)
    # BetaBernoulli: category 0 counts the ones
    return (codes == 0).astype(float), (neighbour == 0).astype(float)


class CalibratedMechanism:
    """A privbayes release with a fixed calibration, as a black-box mechanism for :func:`audit`.

    ``mech(data, size=None, rng=None)`` runs the library's own draw (``model._draw``) with
    the calibration made once for (n, lam, eps, method): each call or batch row is one
    (lam, eps)-RDP release (unlike ``sample(size=k)``, which splits eps over k draws).

    Outputs (a bijection of the release, which changes no divergence): BetaBernoulli and
    queries: log theta, shape () or (size,) (exact where theta underflows);
    DirichletCategorical: log p, shape (K,) or (size, K); BayesianLogisticRegression: w,
    shape (d,) or (size, d).

    ``query=True`` (BetaBernoulli only) releases a statistical query: data are values in
    [0, 1] and the statistic is their sum, as in :func:`privbayes.release_query`.
    ``options`` go to the GLM back-end (e.g. ``on_bad_diagnostics``).
    """

    def __init__(
        self, model, n, lam, eps, method: str = "diffused", *, query: bool = False, **options
    ) -> None:
        self.calibration = _calibration(model, n, lam, eps, method)
        self.model = model
        self.query = bool(query)
        if self.query and not (isinstance(model, DirichletFamily) and model.K == 2):
            raise TypeError("query=True needs a BetaBernoulli model (the query's Beta prior)")
        self.options = options

    def __repr__(self) -> str:
        c = self.calibration
        return (
            f"CalibratedMechanism({self.model!r}, n={c.n}, lam={c.lam:g}, eps={c.eps:.6g}, "
            f"method={c.method!r}{', query=True' if self.query else ''})"
        )

    def _statistics(self, data):
        if not self.query:
            return self.model._statistics(data)
        arr = as_numeric_array(data, "values")
        if arr.ndim != 1 or ((arr < 0) | (arr > 1)).any():
            raise ValueError("query values must be a 1-D array in [0, 1]")
        s = float(arr.sum())
        return np.array([s, max(arr.size - s, 0.0)]), int(arr.size)

    def __call__(self, data, size: int | None = None, rng=None):
        stats_, n = self._statistics(data)
        if n != self.calibration.n:
            raise ValueError(
                f"data have n = {n} records; this mechanism is calibrated for n = "
                f"{self.calibration.n}"
            )
        value, log_value, _ = self.model._draw(
            stats_, self.calibration, resolve_rng(rng), size=size, **self.options
        )
        return value if log_value is None else log_value

    def rdp(self, orders) -> np.ndarray:
        """Certified RDP curve of one release (array shaped like ``orders``)."""
        return self.calibration.rdp(orders)

    def certified_dp(self, delta: float) -> float:
        """Certified eps of (eps, delta)-DP of one release."""
        return certified_dp(self.calibration, delta)


def audit_model(
    model,
    n,
    lam,
    eps,
    method: str = "diffused",
    trials: int = 10**4,
    *,
    delta: float = 1e-5,
    confidence: float = 0.95,
    rng=None,
    query: bool = False,
    d: int = 1,
    **options,
) -> AuditResult:
    """Audit a privbayes mechanism at its worst-case pair, beside its certified (eps, delta).

    Calibrates ``method`` for (n, lam, eps), builds :func:`worst_case_pair` and
    :class:`CalibratedMechanism`, runs :func:`audit` and fills ``eps_certified`` with the
    certified eps at ``delta``. Arguments as in those functions.
    """
    mech = CalibratedMechanism(model, n, lam, eps, method, query=query, **options)
    data, neighbour = worst_case_pair(model, n, lam, eps, method, d=d)
    return audit(
        mech,
        data,
        neighbour,
        trials,
        delta=delta,
        confidence=confidence,
        rng=rng,
        certified=mech.certified_dp(delta),
    )


def audit_curve(
    model,
    n,
    lam,
    eps_values: Sequence[float],
    method: str = "diffused",
    trials: int = 10**4,
    **kwargs,
) -> tuple[list[float], list[AuditResult]]:
    """:func:`audit_model` at each target eps in ``eps_values`` (same seed for each).

    Targets the mechanism cannot certify (InfeasiblePrivacyError) are skipped. Returns the
    targets audited and their results, for :func:`plot_audits`.
    """
    done, results = [], []
    for e in eps_values:
        try:
            results.append(audit_model(model, n, lam, float(e), method, trials, **kwargs))
        except InfeasiblePrivacyError:
            continue
        done.append(float(e))
    return done, results


def plot_audits(
    eps_grid: Sequence[float],
    results: Sequence[AuditResult],
    path,
    *,
    lam: float,
    title: str = "",
) -> None:
    """Write a PNG: empirical lower bound (with interval) and certified eps at delta, vs eps.

    ``eps_grid``: the RDP targets at ``lam`` the audits were run at (x, log axis);
    ``results``: one AuditResult each (with ``eps_certified``). Uses matplotlib (Agg).
    """
    if not results:
        raise ValueError("nothing to plot: no audit results")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.asarray(eps_grid, float)
    lower = np.array([r.eps_lower for r in results])
    point = np.array([r.eps_point for r in results])
    cert = np.array([np.nan if r.eps_certified is None else r.eps_certified for r in results])
    delta, conf = results[0].delta, results[0].confidence
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.plot(x, cert, "-o", color="C0", label=f"certified ε at δ={delta:g}")
    ax.plot(x, lower, "-s", color="C3", label=f"empirical lower bound ({conf:.0%})")
    finite = np.isfinite(point)
    ax.plot(x[finite], point[finite], "x", color="C3", alpha=0.6, label="empirical point estimate")
    ax.set_xscale("log")
    ax.set_xlabel(f"target RDP ε at λ={lam:g} (nats)")
    ax.set_ylabel(f"ε of (ε, δ={delta:g})-DP (nats)")
    ax.set_title(title or f"privacy audit, {results[0].trials} trials per data set")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
