"""The black-box audit: run a mechanism on D and D', choose a test, bound eps from below.

See :func:`audit` and docs/audit.md.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from ..errors import PrivBayesError
from ..validation import resolve_rng
from .stats import (
    _bound,
    _check_confidence,
    _check_delta,
    _check_trials,
    clopper_pearson,
    eps_from_rates,
)

_N_THRESHOLDS = 2000  # candidate thresholds tried on the training half
_TAIL = 64  # extreme order statistics always among the candidates


class AuditError(PrivBayesError, RuntimeError):
    """The audited mechanism failed (it raised, or returned something unusable)."""


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
