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


def _check_certified(certified) -> float | None:
    """None, or a certified eps: a real number >= 0 (inf allowed: no finite certificate)."""
    if certified is None:
        return None
    if isinstance(certified, np.ndarray) and certified.ndim == 0:
        certified = certified[()]
    if isinstance(certified, bool | np.bool_) or not isinstance(
        certified, int | float | np.integer | np.floating
    ):
        shape = np.shape(certified) if isinstance(certified, np.ndarray | list | tuple) else None
        extra = f" of shape {shape}" if shape is not None else ""
        raise TypeError(
            f"certified must be one real number (the certified eps at delta) or None; got "
            f"{type(certified).__name__}{extra}"
        )
    c = float(certified)
    if math.isnan(c) or c < 0:
        raise ValueError(f"certified must be >= 0 (inf allowed, NaN not); got {certified!r}")
    return c


# -- running the mechanism ----------------------------------------------------------------
def _has_param(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _equal(x, y) -> bool:
    """Arrays equal, NaN equal to NaN (for numeric arrays)."""
    x, y = np.asarray(x), np.asarray(y)
    try:
        return bool(np.array_equal(x, y, equal_nan=True))
    except TypeError:  # non-numeric: NaN cannot occur
        return bool(np.array_equal(x, y))


def _identical(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, tuple | list) and isinstance(b, tuple | list) and len(a) == len(b):
        try:
            return all(_equal(x, y) for x, y in zip(a, b, strict=True))
        except (ValueError, TypeError):
            pass
    try:
        return _equal(a, b)
    except (ValueError, TypeError):
        return False


def _records_changed(a, b) -> int | None:
    """How many records (rows) differ, for same-shape numeric data; None when unknown.

    NaN equals NaN (a missing value left in place is not a change).
    """
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
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        diff |= (~same).reshape(n, -1).any(axis=1)
    return int(diff.sum())


def _describe(v) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    if v is None:
        return "None"
    if isinstance(v, str | bytes):
        return f"a string ({v!r})" if len(v) <= 20 else "a string"
    if isinstance(v, complex):
        return f"a complex number ({v!r})"
    return f"a {type(v).__name__}"


def _where(index: int, start: int, batched: bool) -> str:
    return f"trial {start + index}" if batched else f"trial {start}"


def _as_outputs(out, count: int, label: str, start: int, batched: bool) -> np.ndarray:
    """One call's outputs as a float array: (count,) or (count, d) when ``batched`` (trials
    start .. start + count - 1), else () or (d,) (trial ``start``). None, strings, complex
    numbers, ragged sequences and NaN are refused, naming the trial."""
    call = (
        f"trials {start}..{start + count - 1} (one batched call)" if batched else f"trial {start}"
    )
    expected = f"({count},) or ({count}, d)" if batched else "() or (d,)"
    if out is None:
        raise TypeError(
            f"the mechanism returned None on {call} on {label}; it must return real numbers "
            f"of shape {expected}"
        )
    try:
        arr = np.asarray(out)
    except ValueError:
        raise ValueError(
            f"the mechanism returned a ragged sequence on {call} on {label} (rows of "
            f"different lengths); expected real numbers of shape {expected}"
        ) from None
    bad = None
    if arr.dtype.kind == "O":
        flat = arr.reshape(-1)
        nones = [i for i, v in enumerate(flat) if v is None or isinstance(v, str | complex)]
        if nones:
            bad = nones[0]
        else:
            try:
                arr = arr.astype(float)
            except (TypeError, ValueError):
                bad = next(
                    i for i, v in enumerate(flat) if not isinstance(v, int | float | np.number)
                )
    elif arr.dtype.kind not in "biuf":
        bad = 0
    if bad is not None:
        v = arr.reshape(-1)[bad]
        row = int(np.unravel_index(bad, arr.shape)[0]) if arr.ndim and batched else 0
        raise TypeError(
            f"the mechanism must return real numbers (shape {expected}); got {_describe(v)} "
            f"on {_where(row, start, batched)} on {label}"
        )
    arr = arr.astype(float)
    ok = (arr.ndim in (1, 2) and arr.shape[0] == count) if batched else arr.ndim <= 1
    if not ok:
        raise ValueError(
            f"the mechanism returned shape {arr.shape} on {call} on {label}; expected {expected}"
        )
    nan = np.flatnonzero(np.isnan(arr.reshape(count, -1)).any(axis=1))
    if nan.size:
        more = f" ({nan.size} trial(s) with NaN)" if batched else ""
        raise ValueError(
            f"the mechanism returned NaN on {_where(int(nan[0]), start, batched)} on {label}{more}"
        )
    return arr


def _call(mechanism, data, label: str, start: int, count: int, batched: bool, kwargs):
    try:
        if batched:
            return mechanism(data, size=count, **kwargs)
        return mechanism(data, **kwargs)
    except Exception as exc:
        call = (
            f"trials {start}..{start + count - 1} (one batched call)"
            if batched
            else f"trial {start}"
        )
        raise AuditError(
            f"the mechanism raised on {call} on {label}: {type(exc).__name__}: {exc}"
        ) from exc


_LABELS = ("data (D)", "neighbour (D')")


def _run_pair(mechanism, data, neighbour, trials: int, rng, batch: bool, pass_rng: bool):
    """Outputs on D and on D', (trials,) or (trials, d) each, the two interleaved in time.

    Batched: four calls in the order D, D', D', D (first halves, then second halves), so a
    mechanism whose output law drifts from call to call shifts D and D' alike, and a
    monotone drift the first halves learn reverses on the second halves (it cannot pass for
    leakage). Per call: D and D' alternate, trial by trial.
    """
    kwargs = {"rng": rng} if pass_rng else {}
    sets = (data, neighbour)
    if batch:
        half = trials // 2
        parts: list[list[np.ndarray]] = [[], []]
        for which, start, count in (
            (0, 0, half),
            (1, 0, half),
            (1, half, trials - half),
            (0, half, trials - half),
        ):
            out = _call(mechanism, sets[which], _LABELS[which], start, count, True, kwargs)
            parts[which].append(_as_outputs(out, count, _LABELS[which], start, True))
        shapes = {a.shape[1:] for pair in parts for a in pair}
        if len(shapes) > 1:
            raise ValueError(
                "the mechanism returned outputs of different shapes per trial across calls: "
                + ", ".join(str(s) for s in sorted(shapes))
            )
        return tuple(np.concatenate(p) for p in parts)
    rows: list[list[np.ndarray]] = [[], []]
    shape = None
    for i in range(trials):
        for which in (0, 1):
            out = _call(mechanism, sets[which], _LABELS[which], i, 1, False, kwargs)
            arr = _as_outputs(out, 1, _LABELS[which], i, False)
            if shape is None:
                shape = arr.shape
            elif arr.shape != shape:
                raise ValueError(
                    f"the mechanism returned shape {arr.shape} on trial {i} on "
                    f"{_LABELS[which]} but {shape} on trial 0 on data (D)"
                )
            rows[which].append(arr)
    return np.stack(rows[0]), np.stack(rows[1])


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
    mechanism : callable ``data -> output``, the output a real number or a 1-D vector of
        them (d,). If it takes a ``size`` keyword it is called with ``size=k`` and must
        return shape (k,) or (k, d) (``batch=False`` turns this off): four calls, on D, D',
        D' and D (first halves, then second halves). Otherwise it is called once per trial,
        alternating D and D'. If it takes an ``rng`` keyword it is passed a numpy Generator
        derived from ``rng``, so seeded audits are reproducible.
    data, neighbour : the neighbouring data sets D and D' (one record replaced), in the
        form the mechanism takes. They must differ (NaN counts as equal to NaN).
    trials : int >= 100, runs per data set (2 * trials runs in all). Bounds near the
        certified eps need ~1e4-1e5.
    delta : in [0, 1); confidence : in [0.5, 1), default 0.95.
    rng : None, an int seed or a numpy Generator (for the mechanism, when it takes one).
    batch : None (auto: when the mechanism takes ``size``), True or False.
    certified : the certified eps at ``delta`` to report beside the bound (optional): one
        real number >= 0, inf allowed.

    Assumptions: every output is an independent draw from the mechanism's output law on
    its data set, the same law at every call (fresh randomness, no state carried between
    calls). The interleaving above keeps a slow drift from posing as leakage, but it is no
    licence for state. The rows of one batched call must be i.i.d. too; for an MCMC back-end
    they share one pilot / burn-in / rerun decision and are only conditionally i.i.d.
    (docs/audit.md).

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError : trials < 100, identical data sets, delta outside [0, 1), confidence outside
        [0.5, 1), certified NaN or < 0, NaN outputs (naming the trial), outputs of
        inconsistent shape or ragged outputs.
    TypeError : outputs that are not real numbers (None, strings, complex; naming the
        trial), arguments of the wrong type (e.g. ``batch`` not a bool, ``certified`` not
        one number).
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
    certified = _check_certified(certified)
    if batch is not None and not isinstance(batch, bool | np.bool_):
        raise TypeError(f"batch must be None, True or False; got {batch!r}")
    gen = resolve_rng(rng)
    if batch is None:
        batch = _has_param(mechanism, "size")
    pass_rng = _has_param(mechanism, "rng")
    x0, x1 = _run_pair(mechanism, data, neighbour, trials, gen, bool(batch), pass_rng)
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
