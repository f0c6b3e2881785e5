"""The release flow: data -> validation -> statistics -> one posterior draw -> PrivateSample.

The sufficient statistics and the exact posterior stay inside these functions; the
returned object holds the draw and the certificate only.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from .accounting.default import default_accountant
from .calibration import Calibration, guarded
from .certified import round_up
from .data import statistics
from .mechanisms import CONJUGATE_METHODS, check_method
from .models import MeanQuery
from .validation import check_bool, check_eps, check_lam, resolve_rng

__all__ = ["PrivateSample", "sample", "release_query"]


@dataclass(frozen=True, slots=True)
class PrivateSample:
    """One private release and its certificate.

    Attributes
    ----------
    value : the released draw — a float theta for Beta-Bernoulli and queries, a
        probability vector of shape (K,) for Dirichlet-Categorical, a weight vector of
        shape (d,) for logistic regression; with ``size=k`` an array with a leading axis k.
    log_value : logs of the released probabilities, exact even where a probability rounds
        to 0 or 1: for Dirichlet-Categorical log p, shape (K,); for Beta-Bernoulli and
        queries (log theta, log(1 - theta)), shape (2,) (``value`` is theta = exp of the
        first); with ``size=k`` a leading axis k; None for logistic regression.
    method, r, m, lam, n : the mechanism, its knobs, the order and the public size. For
        method "ops", ``r`` holds the tempering t (also readable as ``t``, which is None
        for the other methods).
    eps : the certified eps at ``lam`` (nats), <= the requested eps (composed over the
        draws when ``size`` is set): a proven upper bound on the exact sup over neighbouring
        data sets (docs/numerics.md).
    calibration : the full :class:`Calibration` (public inputs only), per draw.
    diagnostics : the GLM sampler's diagnostics (a dict), else None. Except where listed
        as public they are computed on the private data and are *not* covered by the
        certificate: use them to decide whether to trust the draw, do not publish them
        (the command line leaves them all out). Per back-end: "imh" / "pymc" — all but
        ``backend`` (R-hat, ESS, acceptance, weights, attempts, ...) are data-dependent;
        "exact" — only ``backend`` and the ``public`` sub-dict (the plan: delta_f,
        proposals, the acceptance bound, ...) are public, the other keys (``accepted``,
        ``acceptance``, ``max_log_ratio``, ``gradient_bound``, ``log_density_error_max``,
        ``inside_ball``, the ``seconds_*`` timings) are data-dependent; "langevin" — all
        public (``guarantee``, ``step``, ``steps``, ``steps_capped``, ``chains``:
        functions of n, the prior and the settings).

    size : None for one draw; k when ``sample(..., size=k)`` released k draws at once.
    guarantee : what the certificate covers (README, "Which guarantee a release carries"):
        "exact" — the release is an exact draw of the distribution the certificate is
        proven for (conjugate models; GLMs with backend="exact"); "algorithm" — the
        certificate bounds the released algorithm's own output law (backend="langevin");
        "approximate" — an MCMC draw, whose law is only close to the posterior the
        certificate is about (backend="imh" or "pymc").
    tv : a failure allowance: the public probability that the call releases nothing, a
        failure independent of the draw it would have made (0 except for the exact GLM
        back-end, where it is delta_f). A conversion to (eps, delta)-DP pays for it: with
        failures of total probability tau, (eps + log(1/(1 - tau)), delta + tau)-DP
        whenever the never-failing mechanism is (eps, delta)-DP; the accountant and the
        ledger do this for you (docs/accounting.md §8).

    No data statistic and no exact posterior is stored.
    """

    value: Any
    log_value: Any = field(repr=False)
    method: str
    r: float
    m: float
    lam: float
    eps: float
    n: int
    calibration: Calibration = field(repr=False)
    diagnostics: dict | None = field(default=None, repr=False)
    size: int | None = None
    guarantee: str = "exact"
    tv: float = 0.0
    # rdp() is size x calibration.rdp(), exact and rounded up (the accountant relies on it)
    _rdp_is_size_times_calibration: ClassVar[bool] = True

    @property
    def t(self) -> float | None:
        """OPS's tempering t (stored in ``r``, which the samplers read); None otherwise."""
        return self.r if self.method == "ops" else None

    def rdp(self, orders) -> np.ndarray:
        """Certified eps of this release's mechanism at other ``orders`` (>= 1 or inf).

        Returns an array shaped like ``orders``; ``inf`` where no finite bound exists.
        With ``size=k`` it is the composed curve, k times one draw's curve. Compose releases
        by adding curves at equal orders.
        """
        return _composed_rdp(self.calibration, self.size, orders)


def _composed_rdp(cal: Calibration, size: int | None, orders) -> np.ndarray:
    """k draws: k times one draw's curve, each product exact and rounded up."""
    curve = cal.rdp(orders)
    if size is None:
        return curve
    flat = np.asarray(curve, float).ravel()
    out = np.array(
        [round_up(Fraction(size) * Fraction(v)) if math.isfinite(v) else v for v in flat]
    )
    return out.reshape(np.shape(curve))


def _composed_eps(cal: Calibration, size: int) -> float:
    """size * cal.eps rounded up: <= the requested eps by :func:`_per_draw_eps`."""
    return round_up(Fraction(size) * Fraction(cal.eps))


@dataclass(frozen=True)
class _Charge:
    """What a ledger and the default accountant are charged for one call: ``size`` draws
    (None: one) of one calibrated mechanism, and the call's total-variation allowance."""

    calibration: Calibration
    size: int | None
    tv: float = 0.0
    _rdp_is_size_times_calibration: ClassVar[bool] = True

    @property
    def guarantee(self) -> str:
        return self.calibration.guarantee

    def rdp(self, orders) -> np.ndarray:
        return _composed_rdp(self.calibration, self.size, orders)


MAX_SIZE = 10**7  # draws per call (conjugate models; a model may set a lower max_size)


def _check_size(size, model) -> int | None:
    """Checked before any charge: a call that cannot run must not spend budget."""
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise ValueError(f"size must be None or an integer >= 1; got {size!r}")
    limit = getattr(model, "max_size", MAX_SIZE)
    if size > limit:
        raise ValueError(f"size must be at most {limit} for {type(model).__name__}; got {size}")
    return int(size)


def _per_draw_eps(eps: float, size: int) -> float:
    """The largest float t with size * t <= eps exactly (RDP adds at one order)."""
    t = eps / size
    while Fraction(size) * Fraction(t) > Fraction(eps):
        t = math.nextafter(t, 0.0)
    return t


def _check_model(model) -> None:
    if isinstance(model, type):
        raise TypeError(
            f"model must be a model instance, e.g. {model.__name__}(...); got the class"
        )
    if not hasattr(model, "_statistics"):
        raise TypeError(f"model must be a privbayes model; got {type(model).__name__}")


def _check_ledger(ledger, dataset) -> None:
    if ledger is None:
        if dataset is not None:
            raise ValueError("dataset is only used with a ledger; pass ledger=Ledger(path)")
        return
    if not hasattr(ledger, "charge") and not isinstance(ledger, str | os.PathLike):
        raise TypeError(
            "ledger must be a privbayes Ledger or the path (str or os.PathLike) of one; "
            f"got {type(ledger).__name__}"
        )
    if not isinstance(dataset, str) or not dataset.strip():
        raise ValueError("a ledger needs dataset='name' (the budget to charge)")


def _open_ledger(ledger):
    """(Ledger or None, whether to close it after the call) from a ``ledger`` argument:
    None, a path (str or os.PathLike) of an existing ledger — opened with
    ``Ledger(path, create=False)``, so a missing file is a LedgerError naming the path —
    or a :class:`privbayes.Ledger` (used as is)."""
    if ledger is None:
        return None, False
    if isinstance(ledger, str | os.PathLike):
        from .accounting.ledger import Ledger

        return Ledger(ledger, create=False), True
    if hasattr(ledger, "charge"):
        return ledger, False
    raise TypeError(f"ledger must be None, a path or a privbayes Ledger; got {ledger!r}")


def _release(
    model,
    stats,
    n: int,
    lam: float,
    eps: float,
    method: str,
    rng,
    *,
    ledger=None,
    dataset=None,
    note="",
    size=None,
    **options,
):
    generator = resolve_rng(rng)  # a bad rng is refused before anything is charged
    target = eps if size is None else _per_draw_eps(eps, size)
    d = int(np.shape(stats[0])[1]) if hasattr(model, "_resolve") else None
    if d is not None:  # GLMs: "auto" picks a certified back-end from public inputs
        model = guarded(
            lambda: model._resolve(n, d, lam, target, method, size), model, n, lam, target, method
        )
    if d is not None:  # GLMs: the release's own calibration (the exact back-end's rounding)
        cal = guarded(
            lambda: model._calibrate_release(n, d, lam, target, method, size),
            model, n, lam, target, method,
        )  # fmt: skip
    else:
        cal = guarded(
            lambda: model._calibrate(n, lam, target, method), model, n, lam, target, method
        )
    total = cal.eps if size is None else _composed_eps(cal, size)
    # checks that need only public inputs (e.g. the exact back-end's proposal budget) run
    # before any charge: a call that cannot run must not spend budget
    tv = 0.0
    if d is not None:
        tv = guarded(lambda: model._check_release(n, d, cal, size), model, n, lam, target, method)
    charge = _Charge(cal, size, tv)
    if ledger is not None:  # charge first: a release that cannot be charged is not made
        ledger.charge(dataset, charge, note=note)
    # every release of this process is composed into the default accountant, before the
    # draw: a call that then fails has still read the data (docs/accounting.md §6)
    default_accountant().compose(charge)
    value, log_value, diag = model._draw(stats, cal, generator, size=size, **options)
    finish = getattr(model, "_released", None)  # e.g. an intercept weight -> the bias
    if finish is not None:
        value = finish(value)
    return PrivateSample(
        value,
        log_value,
        cal.method,
        cal.r,
        cal.m,
        cal.lam,
        total,
        n,
        cal,
        diag,
        size,
        cal.guarantee,
        tv,
    )


def sample(
    model,
    data,
    lam,
    eps,
    method: str = "diffused",
    *,
    size: int | None = None,
    rng=None,
    progressbar: bool = False,
    on_bad_diagnostics: str = "raise",
    ledger=None,
    dataset: str | None = None,
    note: str = "",
    column=None,
) -> PrivateSample:
    """Release one posterior sample with a certified (lam, eps)-RDP guarantee.

    Parameters
    ----------
    model : BetaBernoulli, DirichletCategorical, GammaPoisson, NormalKnownVariance or
        BayesianLogisticRegression (its prior and bounds are public).
    data : the records. BetaBernoulli: 0/1 values, shape (n,). DirichletCategorical:
        codes in 0..K-1, shape (n,), or one-hot rows, shape (n, K). GammaPoisson: counts
        in 0..max_count; NormalKnownVariance: values in [low, high], shape (n,). For these
        conjugate models ``data`` may be a NumPy array or list, a pandas/polars Series or
        DataFrame, a pyarrow Array/ChunkedArray/Table, or a Dask array/Series/DataFrame
        (reduced inside the Dask engine: docs/data.md).
        BayesianLogisticRegression: a tuple (X, y), X of shape (n, d) with rows of norm
        <= c (sqrt(c^2 - s^2) with an intercept), y of shape (n,) in {0, 1} or {-1, +1};
        X and y may both be Dask collections (the back-end's passes over X then run in
        the engine: docs/data.md §7). n is public.
    lam : float > 1 or inf, the Rényi order.
    eps : float > 0, the privacy level at ``lam`` (nats). With n = 0 the prior is
        released and the certified eps is 0.
    method : "diffused" (default; tempers the likelihood by r), "concentrated" (prior
        counts 1/m times) or "direct" (the plain posterior; conjugate models: only for
        lam < 1 + min(alpha)). Logistic regression also takes "ops" (One Posterior Sample).
    size : None (one draw) or k >= 1: k independent draws, each calibrated to (lam, eps/k)
        so that their composition is (lam, eps)-RDP (RDP adds at a fixed order). ``value``
        then has a leading axis of length k, ``eps`` and ``rdp()`` are the composed ones,
        and ``calibration`` is the per-draw certificate.
    rng : None (fresh OS entropy), an int seed, or a numpy Generator.
    progressbar : GLM with backend="pymc" only: show NUTS's progress bar (the IMH back-end
        has none).
    on_bad_diagnostics : GLM only: "raise" (default) raises ConvergenceError when the
        diagnostics fail (R-hat > 1.01 or undefined, a divergence, ...); "warn" warns and
        releases a run that narrowly failed — never one whose chains did not move.
    column : conjugate models only: the column of a table ``data`` to use (a name), or a
        list of names (one-hot columns of DirichletCategorical); a one-column table needs
        none. Error messages name it.
    ledger, dataset, note : a :class:`privbayes.Ledger` (or the path, str or os.PathLike,
        of an existing one, opened for this call; a missing file is a LedgerError) and the
        budget name to charge. The mechanism's whole RDP curve is charged *before*
        sampling; BudgetExceededError means nothing was released. A GLM run that then
        fails its diagnostics keeps its charge (the chains did read the data:
        docs/privacy.md §6); settings that can never pass are refused when the model is
        built, before any charge.

    Returns
    -------
    PrivateSample

    Raises
    ------
    ValueError / TypeError naming the argument for bad data or arguments (DataError, a
    ValueError, for records outside the domain or NaN: column, count, first row);
    InfeasiblePrivacyError (a ValueError) when (lam, eps) cannot be certified. Errors of a
    Dask engine (e.g. ``distributed.KilledWorker``) propagate; all of them are raised
    before anything is charged or released.

    Privacy model: replace-one neighbours, n and the prior public (docs/privacy.md §1).
    Source: paper Algorithms 1-3; calibration docs/boundary.md.
    """
    _check_model(model)
    lam, eps = check_lam(lam), check_eps(eps)
    check_method(method, getattr(model, "methods", CONJUGATE_METHODS))
    if on_bad_diagnostics not in ("raise", "warn"):
        raise ValueError(
            f"on_bad_diagnostics must be 'raise' or 'warn'; got {on_bad_diagnostics!r}"
        )
    _check_ledger(ledger, dataset)
    size = _check_size(size, model)
    if column is not None and not hasattr(model, "_data_chunk"):
        raise TypeError(
            f"column= applies to the conjugate models; {type(model).__name__} takes "
            "its data as a tuple (X, y) (docs/data.md)"
        )
    ledger, close = _open_ledger(ledger)  # a path: opened (and checked) before the data
    try:
        if column is not None:
            stats, n = statistics(model, data, column=column)
        else:
            stats, n = model._statistics(data)  # conjugate models: privbayes.data.statistics
        return _release(
            model,
            stats,
            n,
            lam,
            eps,
            method,
            rng,
            ledger=ledger,
            dataset=dataset,
            note=note,
            size=size,
            progressbar=progressbar,
            on_bad_diagnostics=on_bad_diagnostics,
        )
    finally:
        if close:
            ledger.close()


def release_query(
    values,
    lam,
    eps,
    *,
    method: str = "diffused",
    alpha: float = 1.0,
    beta: float = 1.0,
    clip: bool = False,
    rng=None,
    ledger=None,
    dataset: str | None = None,
    note: str = "",
    column=None,
) -> PrivateSample:
    """Private estimate of the mean of per-record values in [0, 1] (a statistical query).

    Releases rho ~ Beta(alpha/m + r*S, beta/m + r*(n - S)) with S = sum(values), computed
    exactly and floored to a multiple of 2^-8 (a neighbour still moves it by at most 1;
    the parameters stay exact floats: docs/numerics.md §7), calibrated over every pair of
    neighbouring data sets, fractional sums included (the boundary reduction holds for S
    in [0, n]: docs/boundary.md). The model is :class:`privbayes.models.MeanQuery`.

    Parameters
    ----------
    values : array_like, shape (n,), each in [0, 1]: phi(x_i) for a query phi that the
        analyst fixed in advance. Rescale by a *public* range first. Any input of
        :func:`sample` (pandas, polars, pyarrow, Dask: docs/data.md).
    column : the column of a table ``values`` to use (a name).
    lam, eps, method, rng, ledger, dataset, note : as in :func:`sample`.
    alpha, beta : the Beta prior (public).
    clip : False (default) refuses values outside [0, 1]; True clips them to [0, 1]
        explicitly (the guarantee then holds for the clipped query).

    Returns PrivateSample whose ``value`` estimates the mean of ``values`` (``log_value``:
    (log rho, log(1 - rho))).
    Raises ValueError naming the first offending index, InfeasiblePrivacyError.
    Source: paper §3 (statistical queries), docs/background.md §3.
    """
    lam, eps, method = check_lam(lam), check_eps(eps), check_method(method)
    clip = check_bool(clip, "clip")
    _check_ledger(ledger, dataset)
    model = MeanQuery(alpha, beta, clip=clip)
    ledger, close = _open_ledger(ledger)  # a path: opened (and checked) before the data
    try:
        counts, n = statistics(model, values, column=column, name="values")
        return _release(
            model,
            counts,
            n,
            lam,
            eps,
            method,
            rng,
            ledger=ledger,
            dataset=dataset,
            note=note,
        )
    finally:
        if close:
            ledger.close()
