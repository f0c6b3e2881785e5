"""The release flow: data -> validation -> statistics -> one posterior draw -> PrivateSample.

The sufficient statistics and the exact posterior stay inside these functions; the
returned object holds the draw and the certificate only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .accounting.default import default_accountant
from .calibration import GDP_BACKENDS, coarse_calibration, guarded, knob_of, ranks_above
from .capping import public_entry
from .charges import (
    Charge,
    check_call_options,
    check_dataset,
    check_ledger,
    check_model,
    check_release_target,
    check_size,
    composed_eps,
    interrupted_message,
    open_ledger,
    per_draw_eps,
)
from .data import statistics
from .errors import ReleaseInterrupted
from .mechanisms import CONJUGATE_METHODS, check_method
from .models import MeanQuery
from .private_sample import PrivateSample
from .seeds import note_seed
from .validation import check_bool, resolve_rng

__all__ = ["PrivateSample", "sample", "release_query"]


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
    delta=None,
    **options,
):
    generator = resolve_rng(rng)  # a bad rng is refused before anything is charged
    d = int(np.shape(stats[0])[1]) if hasattr(model, "_resolve") else None
    if d is not None:  # GLMs: beta="auto" from the public n and d, as calibrate() resolves it
        model = model.resolve_beta(n, d)

    def calibrate_at(lam_: float, eps_: float) -> tuple:
        """(model, per-draw Calibration, composed eps at lam_, tv) for (lam_, eps_)-RDP of
        the whole call: public inputs only."""
        target = eps_ if size is None else per_draw_eps(eps_, size)
        mdl = model
        if d is not None:  # GLMs: "auto" picks a certified back-end from public inputs
            mdl = guarded(
                lambda: model._resolve(n, d, lam_, target, method, size),
                model, n, lam_, target, method,
            )  # fmt: skip
            # the release's own calibration (the exact back-end's rounding allowance)
            cal_ = guarded(
                lambda: mdl._calibrate_release(n, d, lam_, target, method, size),
                mdl, n, lam_, target, method,
            )  # fmt: skip
        else:
            cal_ = guarded(
                lambda: mdl._calibrate(n, lam_, target, method), mdl, n, lam_, target, method
            )
        total_ = cal_.eps if size is None else composed_eps(cal_, size)
        # checks that need only public inputs (e.g. the exact back-end's proposal budget)
        # run before any charge: a call that cannot run must not spend budget
        tv_ = 0.0
        if d is not None:
            tv_ = guarded(
                lambda: mdl._check_release(n, d, cal_, size), mdl, n, lam_, target, method
            )
        return mdl, cal_, total_, float(tv_ or 0.0)

    def coarse_at(lam_: float, eps_: float) -> tuple:
        """GLMs: the knob without the release's plan, to rank orders (docs/dp_target.md)."""
        target = eps_ if size is None else per_draw_eps(eps_, size)
        cal_ = coarse_calibration(model, n, lam_, target, method)
        return model, cal_, cal_.eps if size is None else composed_eps(cal_, size), 0.0

    dp_eps, label = None, None
    if delta is None:
        model, cal, total, tv = calibrate_at(lam, eps)
    else:  # an (eps, delta) target: the order is searched, from public inputs only
        from .dp_target import search

        found = search(
            calibrate_at,
            lambda res: (knob_of(res[1]), res[2]),
            eps,
            delta,
            tv_of=lambda res: res[3],
            name=f"{type(model).__name__}/{method}",
            orders=None if ledger is None else ledger.orders,
            coarse_at=None if d is None else coarse_at,
        )
        model, cal, total, tv = found.result
        dp_eps, label = found.dp_eps, f"(eps={eps:g}, delta={delta:g})"
        # GLMs whose releases carry a GDP bound (docs/gdp.md §6): it may certify more
        if ledger is None and d is not None and _has_gdp_backend(model):
            alt = _gdp_route(calibrate_at, size, eps, delta)
            if alt is not None and ranks_above(alt[0][1], cal):
                (model, cal, total, tv), dp_eps = alt
        if size is None:  # one draw: its calibration states the target as calibrate() does
            cal = dataclasses.replace(
                cal, delta=delta, dp_eps=dp_eps, dp_target=eps, dp_tv=float(tv or 0.0)
            )
    charge = Charge(cal, size, tv, label)
    charge_id = None
    if ledger is not None:  # charge first: a release that cannot be charged is not made
        charge_id = ledger.charge(dataset, charge, note=note)
    # every release of this process is composed into the default accountant, before the
    # draw: a call that then fails has still read the data (docs/accounting.md §6)
    default_accountant().compose(charge)
    note_seed(rng, generator)  # right before the draw: a refused call used no noise
    try:
        value, log_value, diag = model._draw(stats, cal, generator, size=size, **options)
    except KeyboardInterrupt as exc:
        # Ctrl-C while sampling (e.g. PyMC's partial trace, caught by its back-end): no
        # value leaves the call; the charge stays, the data have been read
        detail = f" ({exc})" if str(exc) else ""
        message = interrupted_message(model, ledger, dataset, charge_id, detail)
        raise ReleaseInterrupted(message) from None
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
        delta=delta,
        dp_eps=dp_eps,
        dp_target=None if delta is None else eps,
    )


def _has_gdp_backend(model) -> bool:
    """True for back-ends whose releases can carry a GDP bound (the MCMC ones cannot)."""
    return getattr(model, "backend", None) in GDP_BACKENDS


def _gdp_route(calibrate_at, size, eps: float, delta: float):
    """((model, cal, total, tv), eps certified) through the release's GDP bound, or None
    (docs/gdp.md §7): tried only without a ledger, whose budget is kept in RDP."""
    from .dp_target import gdp_alternative
    from .gdp_release import release_gdp_bound

    return gdp_alternative(
        calibrate_at, lambda res: release_gdp_bound(res[1], size, res[3]), eps, delta
    )


@public_entry  # KnobCappedWarning, once per call (privbayes.capping)
def sample(
    model,
    data,
    lam=None,
    eps=None,
    method: str = "diffused",
    *,
    delta: float | None = None,
    size: int | None = None,
    rng=None,
    progressbar: bool = False,
    on_bad_diagnostics: str = "raise",
    ledger=None,
    dataset: str | None = None,
    note: str = "",
    column=None,
) -> PrivateSample:
    """Release one posterior sample with a certified (lam, eps)-RDP or (eps, delta)-DP
    guarantee.

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
    lam : float > 1 or inf, the Rényi order of an RDP target; omit it with ``delta``.
    eps : float > 0, the privacy level at ``lam`` (nats), or of (eps, delta)-DP with
        ``delta``. With n = 0 the prior is released and the certified eps is 0.
    delta : an (eps, delta)-DP target instead (``lam`` omitted), delta in [0, 1): the order
        is chosen from public inputs and the knob is the largest the improved conversion
        certifies (docs/dp_target.md); the whole call (``size`` draws, the exact back-end's
        failure allowance) meets it. ``rel.delta``, ``rel.dp_eps`` and ``rel.epsilon()``
        report it; ``rel.lam`` / ``rel.eps`` are the chosen order and the RDP eps there.
    method : "diffused" (default; tempers the likelihood by r), "concentrated" (prior
        counts 1/m times) or "direct" (the plain posterior; conjugate models: only for
        lam < 1 + min(alpha)). Logistic regression also takes "ops" (One Posterior Sample).
        "noise-aware" (conjugate models and MeanQuery): the sufficient statistic is
        released once with discrete Gaussian noise and ``size`` draws come from the
        posterior given it (:func:`privbayes.posterior`), charged once; ``posterior`` holds
        that posterior, ``r`` and ``m`` are 1.
    size : None (one draw) or k >= 1: k independent draws, each calibrated to (lam, eps/k)
        so that their composition is (lam, eps)-RDP (RDP adds at a fixed order). ``value``
        then has a leading axis of length k, ``eps`` and ``rdp()`` are the composed ones,
        and ``calibration`` is the per-draw certificate.
    rng : None (fresh OS entropy, the default), an int seed, or a numpy Generator. A seed
        makes the release reproducible: the same call on the same data gives the same draw.
        A second release of this process from the same seed (or from a Generator in the
        same state, e.g. a copy) replays the same noise, which the certificates do not
        cover: it warns :class:`privbayes.SharedRandomnessWarning`, and so does every
        seeded release in a child process (a joblib worker), whose record of seeds cannot
        see the other processes' releases (docs/privacy.md §7).
    progressbar : GLM with backend="pymc" only: show NUTS's progress bar; True with any
        other model or back-end (auto included) raises ValueError.
    on_bad_diagnostics : GLM with backend="imh" or "pymc" only: "raise" (default) raises
        ConvergenceError when the diagnostics fail (R-hat > 1.01 or undefined, a
        divergence, ...); "warn" warns and releases a run that narrowly failed — never one
        whose chains did not move. "warn" with a release that has no diagnostics (the
        conjugate models, backend "exact", "langevin", "auto") raises ValueError.
    column : conjugate models only: the column of a table ``data`` to use (a name), or a
        list of names (one-hot columns of DirichletCategorical); a one-column table needs
        none. Error messages name it.
    ledger, dataset, note : a :class:`privbayes.Ledger` (or the path, str or os.PathLike,
        of an existing one, opened for this call; a missing file is a LedgerError) and the
        budget name to charge (a name without a budget is a LedgerError, raised before
        the data are read). The mechanism's whole RDP curve is charged *before* sampling;
        BudgetExceededError means nothing was released (also when the exact back-end's
        delta_f, added to delta, is not below the budget's delta). A GLM run that then
        fails its diagnostics keeps its charge (the chains did read the data:
        docs/privacy.md §6); settings that can never pass are refused when the model is
        built, before any charge.

    Returns
    -------
    PrivateSample

    Raises
    ------
    ValueError / TypeError naming the argument for bad arguments, wrong shapes and options
    that do not apply to the model, its back-end or the method (e.g. ``radius`` without
    method="ops", ``progressbar`` without backend="pymc"); DataError, a ValueError, for
    records outside the domain or NaN/inf, for every model and input type, in memory or
    Dask (column, rule, count, first row: the same attributes either way);
    InfeasiblePrivacyError (a ValueError) when (lam, eps) cannot be certified; LedgerError
    for a ledger that cannot be used or has no budget for ``dataset``. Errors of a Dask
    engine (e.g. ``distributed.KilledWorker``) propagate; all of them are raised before
    anything is charged or released. :class:`privbayes.errors.ReleaseInterrupted` (a
    KeyboardInterrupt) when the call is interrupted (Ctrl-C) while it samples: nothing is
    released, and the charge made before sampling stays (the sampler had read the data).

    Warns :class:`privbayes.KnobCappedWarning` when the calibration caps the knob and the
    certified eps is below half the request (privbayes.capping), saying what to change.
    A GLM with beta="auto" is resolved from the public n and d = X's columns (plus the
    intercept's): ``rel.calibration.model.beta`` is the number used.

    Privacy model: replace-one neighbours, n and the prior public (docs/privacy.md §1).
    Source: paper Algorithms 1-3; calibration docs/boundary.md.
    """
    if method == "noise-aware":  # one noisy statistic, then draws from the posterior
        from .posterior.release import noise_aware_sample

        check_bool(progressbar, "progressbar")
        if progressbar:
            raise ValueError("progressbar=True does not apply to method='noise-aware'")
        return noise_aware_sample(
            model, data, lam, eps, size=size, rng=rng, on_bad_diagnostics=on_bad_diagnostics,
            ledger=ledger, dataset=dataset, note=note, column=column, delta=delta,
        )  # fmt: skip
    check_model(model)
    lam, eps, delta = check_release_target(lam, eps, delta)
    check_method(method, getattr(model, "methods", CONJUGATE_METHODS))
    check_call_options(model, method, progressbar, on_bad_diagnostics)
    check_ledger(ledger, dataset)
    size = check_size(size, model)
    if column is not None and not hasattr(model, "_data_chunk"):
        raise TypeError(
            f"column= applies to the conjugate models; {type(model).__name__} takes "
            "its data as a tuple (X, y) (docs/data.md)"
        )
    ledger, close = open_ledger(ledger)  # a path: opened (and checked) before the data
    try:
        check_dataset(ledger, dataset)
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
            delta=delta,
            progressbar=progressbar,
            on_bad_diagnostics=on_bad_diagnostics,
        )
    finally:
        if close:
            ledger.close()


@public_entry  # KnobCappedWarning, once per call (privbayes.capping)
def release_query(
    values,
    lam=None,
    eps=None,
    *,
    delta: float | None = None,
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
    lam, eps, delta, method, rng, ledger, dataset, note : as in :func:`sample` (``delta``
        without ``lam``: an (eps, delta)-DP target).
    alpha, beta : the Beta prior (public).
    clip : False (default) refuses values outside [0, 1]; True clips them to [0, 1]
        explicitly (the guarantee then holds for the clipped query).

    Returns PrivateSample whose ``value`` estimates the mean of ``values`` (``log_value``:
    (log rho, log(1 - rho))).
    Raises DataError (a ValueError) naming the first offending index, ValueError/TypeError
    for bad arguments, InfeasiblePrivacyError, LedgerError (e.g. ``dataset`` has no
    budget, before the data are read), BudgetExceededError.
    Source: paper §3 (statistical queries), docs/background.md §3.
    """
    lam, eps, delta = check_release_target(lam, eps, delta)
    method = check_method(method)
    clip = check_bool(clip, "clip")
    check_ledger(ledger, dataset)
    model = MeanQuery(alpha, beta, clip=clip)
    ledger, close = open_ledger(ledger)  # a path: opened (and checked) before the data
    try:
        check_dataset(ledger, dataset)
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
            delta=delta,
        )
    finally:
        if close:
            ledger.close()
