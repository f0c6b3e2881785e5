"""The release flow: data -> validation -> statistics -> one posterior draw -> PrivateSample.

The sufficient statistics and the exact posterior stay inside these functions; the
returned object holds the draw and the certificate only.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from .accounting.default import default_accountant
from .accounting.relations import REPLACE_ONE
from .calibration import Calibration, check_target, coarse_calibration, guarded, knob_of
from .capping import public_entry
from .certified import round_up
from .data import statistics
from .errors import ReleaseInterrupted, SharedRandomnessWarning
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
        ``acceptance``, ``max_log_ratio``, ``gradient_bound``, ``newton_steps`` (the
        certified fit's steps on all rows), ``log_density_error_max``, ``inside_ball``,
        the ``seconds_*`` timings) are data-dependent; "langevin" — all
        public (``guarantee``, ``step``, ``steps``, ``steps_capped``, ``schedule`` (the
        step rule that ran: "utility" or "stationary"), ``chains``: functions of n, the
        prior and the settings).

    size : None for one draw; k when ``sample(..., size=k)`` released k draws at once
        (method "noise-aware": k posterior draws of *one* release, charged once).
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
    posterior : method "noise-aware" only: the :class:`privbayes.PrivatePosterior` the
        draws come from (public: a function of the released noisy statistic); else None.
    delta, dp_eps : for an (eps, delta) target (``sample(..., eps=, delta=)`` without
        ``lam``): the delta asked for and the certified eps of (eps, delta)-DP at it (the
        whole release, ``size`` draws and ``tv`` included; <= the eps asked for); ``lam``
        and ``eps`` are then the order the search chose and the RDP eps there. None for an
        RDP target. :meth:`epsilon` converts at any delta.
    relation : the neighbour relation of the certificate, "replace-one" (n public) for
        every privbayes release (a class constant; docs/accounting.md §9).

    No data statistic and no exact posterior is stored (the noise-aware posterior is
    computed from the noisy statistic alone).
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
    posterior: Any = field(default=None, repr=False)
    delta: float | None = None
    dp_eps: float | None = None
    relation: ClassVar[str] = REPLACE_ONE

    def epsilon(self, delta: float | None = None) -> float:
        """eps of (eps, delta)-DP certified for this release (``size`` draws and the failure
        allowance ``tv`` included): its whole RDP curve converted by an accountant (improved
        conversion refined over the order, rounded up; docs/accounting.md §5, §8), or the
        GDP conversion of :attr:`gdp_bound` where proven and smaller (docs/gdp.md). ``delta``
        defaults to the target's (ValueError for an RDP target); at the target's delta the
        result is <= ``dp_eps``."""
        from .calibration import _default_delta
        from .dp_target import release_epsilon

        delta = _default_delta(delta, self.delta)
        return release_epsilon(self, delta, self.lam, (self.delta, self.dp_eps))

    @property
    def gdp_bound(self):
        """The proven GDP bound of the whole release (``size`` draws, ``tv`` included):
        :class:`privbayes.accounting.GdpBound` (mu, density allowance, tv), None where no
        GDP guarantee is proven (docs/gdp.md §6). :meth:`epsilon` uses it when smaller."""
        from .gdp_release import release_gdp_bound

        return release_gdp_bound(self.calibration, self.size, self.tv)

    @property
    def gdp(self) -> float | None:
        """mu when the release is proven mu-GDP outright, None otherwise — also for exact
        GLM draws, whose rounding and failure allowances make them mu-GDP only up to
        :attr:`gdp_bound`'s allowances (docs/gdp.md §6)."""
        bound = self.gdp_bound
        return bound.mu if bound is not None and bound.exact else None

    @property
    def _rdp_is_size_times_calibration(self) -> bool:
        """rdp() is size x calibration.rdp(), exact and rounded up (the accountant relies on
        it); not for method "noise-aware", whose k draws are one release."""
        return self.method != "noise-aware"

    @property
    def t(self) -> float | None:
        """OPS's tempering t (stored in ``r``, which the samplers read); None otherwise."""
        return self.r if self.method == "ops" else None

    def rdp(self, orders) -> np.ndarray:
        """Certified eps of this release's mechanism at other ``orders`` (>= 1 or inf).

        Returns an array shaped like ``orders``; ``inf`` where no finite bound exists.
        With ``size=k`` it is the composed curve, k times one draw's curve (method
        "noise-aware": the one release's curve, whatever k). Compose releases by adding
        curves at equal orders.
        """
        if self.method == "noise-aware":
            return self.calibration.rdp(orders)
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
    target: str | None = None  # an (eps, delta) target, as the ledger's label shows it
    _rdp_is_size_times_calibration: ClassVar[bool] = True
    relation: ClassVar[str] = REPLACE_ONE

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


def _check_target(lam, eps, delta) -> tuple:
    """(lam, eps, delta) checked: an RDP target (lam, eps, None) or an (eps, delta) target
    (None, eps, delta)."""
    from .dp_target import check_delta_target

    check_target(lam, eps, delta)
    if delta is None:
        return check_lam(lam), check_eps(eps), None
    return None, check_eps(eps), check_delta_target(delta)


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


def _check_dataset(ledger, dataset) -> None:
    """The ledger has a budget for ``dataset`` (LedgerError otherwise), checked before the
    data are read; the charge checks it again under the write lock."""
    if ledger is not None and hasattr(ledger, "budget"):
        ledger.budget(dataset)


def _check_call_options(model, method: str, progressbar, on_bad_diagnostics) -> None:
    """sample()'s options that do not apply to ``model`` are refused before anything is
    read or charged: progressbar (GLM backend="pymc" only), on_bad_diagnostics="warn" (the
    MCMC back-ends only), and the model's own (a GLM's radius with a method other than
    OPS)."""
    check_bool(progressbar, "progressbar")
    if on_bad_diagnostics not in ("raise", "warn"):
        raise ValueError(
            f"on_bad_diagnostics must be 'raise' or 'warn'; got {on_bad_diagnostics!r}"
        )
    check = getattr(model, "_check_call", None)
    if check is not None:
        check(method, progressbar=bool(progressbar), on_bad_diagnostics=on_bad_diagnostics)
        return
    name = type(model).__name__
    if progressbar:
        raise ValueError(
            f"progressbar=True does not apply to {name}: it is an option of the GLMs' "
            "backend='pymc' only (no other release has a progress bar)"
        )
    if on_bad_diagnostics == "warn":
        raise ValueError(
            f"on_bad_diagnostics='warn' does not apply to {name}: its release is an exact "
            "draw, with no MCMC diagnostics (the option belongs to the GLMs' backend='imh' "
            "and 'pymc')"
        )


def _interrupted(model, ledger, dataset, charge_id, detail: str) -> str:
    """The one-line message of a release interrupted while it sampled."""
    backend = getattr(model, "backend", None)
    where = f" (backend={backend!r})" if backend else ""
    if ledger is not None:
        charge = f" #{charge_id}" if isinstance(charge_id, int) else ""
        kept = f"its ledger charge{charge} to {dataset!r} stays"
    else:
        kept = "the default accountant keeps its record of the call"
    return (
        f"the release was interrupted while sampling{where}: nothing was released{detail}; "
        f"{kept}, as the sampler had read the data"
    )


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


# Seed material used by this process's releases: a digest of each seeded generator's state
# at the moment of its draw. Same seed -> same release is kept (reproducibility, and
# scikit-learn's idempotence checks); a second release from the same state is never
# silent (SharedRandomnessWarning). Fresh OS entropy (rng=None) is not recorded. The record
# is per process: a child process (a joblib worker of cross_val_score(..., n_jobs=2)) cannot
# see its siblings' releases, so there every seeded release warns.
_USED_STATES: set[bytes] = set()
_USED_LOCK = threading.Lock()

_REPEATED = (
    "this release draws its noise from the same random state as an earlier release "
    "in this process (the same int seed, or a copy of one Generator or RandomState, "
    "e.g. made by sklearn's clone): the two releases share their noise, and their "
    "composition is NOT covered by the certificates charged for them (each was "
    "charged as an independent release). For independent releases pass rng=None / "
    "random_state=None (fresh OS entropy), or a different seed per release; "
    "re-running one release on the same data and settings only reproduces it "
    "(docs/privacy.md §7)"
)
_IN_CHILD = (
    "this release draws its noise from a fixed seed (an int, a RandomState or a "
    "Generator) in a child process (e.g. a joblib worker of cross_val_score or "
    "GridSearchCV with n_jobs > 1): privbayes' record of seeds is per process and cannot "
    "see the releases of other workers or of the parent. Parallel fits given one fixed "
    "random_state share their noise, and their composition is NOT covered by the "
    "certificates charged for them (each was charged as an independent release); the "
    "parent's default_accountant() does not see this release either (a ledger does). "
    "For independent releases pass rng=None / random_state=None (fresh OS entropy) "
    "(docs/privacy.md §7)"
)


def _in_child_process() -> bool:
    """Whether this process was started by another one through multiprocessing (loky,
    joblib's default process back-end, included): its record of seeds and its default
    accountant see its own releases only."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


def _digest(obj, h) -> None:
    """Feed a bit generator's state (dicts, ints, strings, arrays) to the hash ``h``."""
    if isinstance(obj, dict):
        h.update(b"{")
        for key in sorted(obj, key=str):
            _digest(key, h)
            _digest(obj[key], h)
        h.update(b"}")
    elif isinstance(obj, np.ndarray):
        h.update(f"a{obj.dtype.str}{obj.shape}:".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, list | tuple):
        h.update(b"[")
        for item in obj:
            _digest(item, h)
        h.update(b"]")
    else:
        h.update(f"{type(obj).__name__}:{obj!r};".encode())


def _state_digest(generator: np.random.Generator) -> bytes | None:
    """16-byte digest of the generator's bit-generator state (None if it has none)."""
    try:
        state = generator.bit_generator.state
    except (AttributeError, TypeError, ValueError):
        return None
    h = hashlib.blake2b(digest_size=16)
    _digest(state, h)
    return h.digest()


def _note_seed(rng, generator: np.random.Generator) -> None:
    """Record the seed material of a release about to draw; warn if an earlier release of
    this process drew from the same state (it would replay the same noise), and warn for
    every seeded release of a child process, whose record misses its siblings' releases."""
    if rng is None:  # fresh OS entropy: never shared
        return
    key = _state_digest(generator)
    with _USED_LOCK:
        seen = key is not None and key in _USED_STATES
        if key is not None:
            _USED_STATES.add(key)
    if seen or _in_child_process():
        warnings.warn(_REPEATED if seen else _IN_CHILD, SharedRandomnessWarning, stacklevel=4)


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
        target = eps_ if size is None else _per_draw_eps(eps_, size)
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
        total_ = cal_.eps if size is None else _composed_eps(cal_, size)
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
        target = eps_ if size is None else _per_draw_eps(eps_, size)
        cal_ = coarse_calibration(model, n, lam_, target, method)
        return model, cal_, cal_.eps if size is None else _composed_eps(cal_, size), 0.0

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
    charge = _Charge(cal, size, tv, label)
    charge_id = None
    if ledger is not None:  # charge first: a release that cannot be charged is not made
        charge_id = ledger.charge(dataset, charge, note=note)
    # every release of this process is composed into the default accountant, before the
    # draw: a call that then fails has still read the data (docs/accounting.md §6)
    default_accountant().compose(charge)
    _note_seed(rng, generator)  # right before the draw: a refused call used no noise
    try:
        value, log_value, diag = model._draw(stats, cal, generator, size=size, **options)
    except KeyboardInterrupt as exc:
        # Ctrl-C while sampling (e.g. PyMC's partial trace, caught by its back-end): no
        # value leaves the call; the charge stays, the data have been read
        detail = f" ({exc})" if str(exc) else ""
        message = _interrupted(model, ledger, dataset, charge_id, detail)
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
    _check_model(model)
    lam, eps, delta = _check_target(lam, eps, delta)
    check_method(method, getattr(model, "methods", CONJUGATE_METHODS))
    _check_call_options(model, method, progressbar, on_bad_diagnostics)
    _check_ledger(ledger, dataset)
    size = _check_size(size, model)
    if column is not None and not hasattr(model, "_data_chunk"):
        raise TypeError(
            f"column= applies to the conjugate models; {type(model).__name__} takes "
            "its data as a tuple (X, y) (docs/data.md)"
        )
    ledger, close = _open_ledger(ledger)  # a path: opened (and checked) before the data
    try:
        _check_dataset(ledger, dataset)
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
    lam, eps, delta = _check_target(lam, eps, delta)
    method = check_method(method)
    clip = check_bool(clip, "clip")
    _check_ledger(ledger, dataset)
    model = MeanQuery(alpha, beta, clip=clip)
    ledger, close = _open_ledger(ledger)  # a path: opened (and checked) before the data
    try:
        _check_dataset(ledger, dataset)
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
