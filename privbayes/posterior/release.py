"""The noise-aware release: one noisy statistic, then the whole posterior given it.

data -> validation -> exact integer statistic -> public calibration of sigma^2 -> ledger
charge (the whole curve) -> default accountant -> one discrete Gaussian draw per
coordinate -> :class:`PrivatePosterior` (post-processing of the noisy statistic alone).
The flow, its checks and its errors are those of :func:`privbayes.sample`
(privbayes/release.py); docs/noise_aware.md has the derivations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..accounting.relations import REPLACE_ONE
from ..calibration import Calibration
from ..certified import round_up
from ..charges import (
    Charge,
    check_dataset,
    check_ledger,
    check_model,
    check_release_target,
    check_size,
    interrupted_message,
    open_ledger,
)
from ..errors import InfeasiblePrivacyError, ReleaseInterrupted
from ..noise.discrete_gaussian import (
    DiscreteGaussianMechanism,
    calibrate_sigma2,
    sample_discrete_gaussian,
)
from ..private_sample import PrivateSample
from ..seeds import note_seed
from ..validation import resolve_rng
from ._statistics import Spec, spec_of

__all__ = ["NOISE_AWARE", "PrivatePosterior", "calibrate_noise", "family_of", "posterior"]

NOISE_AWARE = "noise-aware"


def calibrate_noise(model, n: int, lam: float, eps: float, spec: Spec | None = None):
    """The noise-aware release's :class:`privbayes.Calibration` from public inputs only:
    sigma^2 with lam Delta^2 / (2 sigma^2) <= eps exactly (method "noise-aware", r = m = 1,
    ``model`` the :class:`DiscreteGaussianMechanism`).

    Raises InfeasiblePrivacyError for lam = inf, eps = 0 with n >= 1, or a sigma^2 beyond
    the float range; TypeError for a model without a noise-aware posterior.
    """
    spec = spec_of(model) if spec is None else spec
    if n == 0:  # nothing to protect: the curve is 0 whatever the noise
        sigma2 = calibrate_sigma2(lam, eps, spec.sensitivity_sq) if eps > 0 else 1.0
    elif eps == 0:
        raise InfeasiblePrivacyError(
            "eps=0 needs infinite noise: ask for eps > 0 (the prior is the posterior of "
            "no release)",
            reachable={"eps": "> 0"},
        )
    else:
        sigma2 = calibrate_sigma2(lam, eps, spec.sensitivity_sq)
    mech = DiscreteGaussianMechanism(sigma2, spec.sensitivity_sq, spec.dim, spec.label, model)
    certified = float(mech.rdp(n, lam))
    if not certified <= eps:  # unreachable: calibrate_sigma2 solves this exactly
        raise InfeasiblePrivacyError(
            f"the discrete Gaussian cannot certify eps={eps:g} at lam={lam:g}",
            reachable={"min_eps": certified},
        )
    pair = {"shift_sq": spec.sensitivity_sq, "statistic": spec.label}
    return Calibration(NOISE_AWARE, 1.0, 1.0, lam, certified, eps, n, pair, 1, mech)


def family_of(model, n: int, statistic, sigma2: float, **options):
    """The posterior family object given a noisy ``statistic`` (public inputs only):
    what :class:`PrivatePosterior` wraps. ``options`` go to the Dirichlet's Gibbs sampler
    (``rng``, ``chains``, ``tune``, ``draws``, ``on_bad_diagnostics``)."""
    kind = spec_of(model).kind
    if kind == "beta-bernoulli":
        from .beta_bernoulli import BetaBernoulliPosterior as cls
    elif kind == "gamma-poisson":
        from .gamma_poisson import GammaPoissonPosterior as cls
    elif kind == "normal":
        from .normal import NormalPosterior as cls
    elif kind == "query":
        from .query import QueryPosterior as cls
    elif kind == "linear":
        from .linear import LinearPosterior

        return LinearPosterior(model.noise_aware_spec(), n, statistic, sigma2, **options)
    else:
        from .dirichlet import DirichletPosterior

        return DirichletPosterior(model, n, statistic, sigma2, **options)
    if options:
        raise ValueError(
            f"options {sorted(options)} apply to DirichletCategorical's Gibbs sampler only"
        )
    return cls(model, n, statistic, sigma2)


def _check_prob(prob) -> float:
    if isinstance(prob, bool) or not isinstance(prob, int | float | np.floating):
        raise TypeError(f"prob must be a number in (0, 1); got {prob!r}")
    p = float(prob)
    if not 0 < p < 1:
        raise ValueError(f"prob must lie strictly between 0 and 1; got {prob!r}")
    return p


def _check_draws(size, name: str = "size") -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {size!r}")
    if size > 10**8:
        raise ValueError(f"{name} must be at most 10**8; got {size}")
    return int(size)


@dataclass(frozen=True, eq=False)
class PrivatePosterior:
    """The posterior given one noise-aware release, and the release's certificate.

    Everything here is a function of the released noisy statistic and public inputs: any
    number of draws, intervals and summaries is post-processing and costs no privacy.

    Attributes
    ----------
    model : the conjugate model (its prior is public).
    statistic : the released noisy statistic (public): an int for BetaBernoulli (count of
        ones), GammaPoisson (sum of counts), NormalKnownVariance and the mean query (a sum
        on the 2^-8 grid, in units of 2^-8: docs/noise_aware.md §1); an int64 array of
        shape (K,) for DirichletCategorical (category counts). Never the true statistic.
    noise : {"mechanism": "discrete_gaussian", "sigma2", "sensitivity", "sensitivity_sq",
        "dim", "statistic"}: enough to recompute the certificate.
    lam, eps, n : the order, the certified eps at ``lam`` (<= the requested eps) and the
        public size. guarantee : "exact" (the released statistic is exactly the
        mechanism's output; the posterior is post-processing).
    calibration : the public :class:`privbayes.Calibration` (method "noise-aware").
    truncation : a proven bound on the total-variation distance between the posterior
        used here and the exact one (the mixtures' window, docs/noise_aware.md §3); 0 for
        the closed forms. For DirichletCategorical it covers each Gibbs update's window;
        the chains' MCMC error is reported in ``diagnostics``.
    diagnostics : DirichletCategorical only: the Gibbs sampler's R-hat, ESS, chains and
        draws (public: the chains read only ``statistic``); None for the exact families.

    delta, dp_eps : for an (eps, delta) target: the delta asked for and the certified eps
        at it (``lam`` / ``eps`` are then the chosen order and the RDP eps there); None for
        an RDP target. :meth:`epsilon` converts at any delta.

    Composes like a release: ``rdp(orders)``, ``size`` (None: one release) and ``tv`` (0).
    """

    model: Any
    n: int
    lam: float
    eps: float
    statistic: Any
    noise: dict
    calibration: Calibration = field(repr=False)
    _family: Any = field(repr=False)
    guarantee: str = "exact"
    method: str = NOISE_AWARE
    size: None = None
    tv: float = 0.0
    _rdp_is_size_times_calibration: ClassVar[bool] = True
    relation: ClassVar[str] = REPLACE_ONE  # neighbours: replace-one, n public

    @property
    def truncation(self) -> float:
        return float(self._family.truncation)

    @property
    def components(self) -> int | None:
        """Number of components of the posterior's law when it is a finite mixture
        (Beta-Bernoulli, Gamma-Poisson: one per latent statistic in the window, a function
        of the released statistic and the public noise), None otherwise."""
        support = getattr(self._family, "support", None)
        return None if support is None else int(np.size(support))

    @property
    def diagnostics(self) -> dict | None:
        diag = self._family.diagnostics
        return None if diag is None else dict(diag)

    @property
    def delta(self) -> float | None:
        return self.calibration.delta

    @property
    def dp_eps(self) -> float | None:
        return self.calibration.dp_eps

    @property
    def gdp_bound(self):
        """The proven GDP bound (docs/gdp.md §6): 0-GDP when n = 0, otherwise None — the
        discrete Gaussian is not exactly mu-GDP (its RDP curve, not a GDP bound, is what
        is proven here)."""
        return self.calibration.gdp_bound

    @property
    def gdp(self) -> float | None:
        """mu where proven (n = 0: 0.0), None otherwise (see :attr:`gdp_bound`)."""
        return self.calibration.gdp

    def epsilon(self, delta: float | None = None) -> float:
        """eps of (eps, delta)-DP certified for the release (its curve converted by an
        accountant, rounded up); ``delta`` defaults to the target's (ValueError for an RDP
        target)."""
        return self.calibration.epsilon(delta)

    def rdp(self, orders) -> np.ndarray:
        """Certified eps of the release at ``orders`` (>= 1 or inf; shaped like ``orders``):
        lam Delta^2 / (2 sigma^2), exact and rounded up (docs/noise_aware.md §2)."""
        return self.calibration.rdp(orders)

    def sample(self, size: int | None = None, rng=None):
        """Posterior draws: one (a float, or an array of shape (K,) for Dirichlet) or, with
        ``size=k``, an array with a leading axis k. ``rng``: None (fresh OS entropy), an int
        seed or a numpy Generator. Free post-processing (no charge). Raises ValueError for
        a bad size; for DirichletCategorical ConvergenceError when the Gibbs run fails its
        diagnostics (unless built with on_bad_diagnostics="warn")."""
        return self._draw(size, rng)[0]

    def _draw(self, size, rng):
        if size is not None:
            size = _check_draws(size)
        return self._family.draw(size, resolve_rng(rng))

    def interval(self, prob: float = 0.9):
        """Central credible interval (lo, hi) of mass ``prob`` in (0, 1): quantiles
        (1 - prob)/2 and (1 + prob)/2 of the posterior (per coordinate for Dirichlet: each
        of lo, hi has shape (K,)). Exact for the mixtures (their CDF, solved to ~1e-13
        relative) and the Normal; for Dirichlet the marginal CDFs averaged over the
        Gibbs draws (Rao-Blackwellised). For the mean query see also
        :meth:`confidence_interval`."""
        return self._family.interval(_check_prob(prob))

    def confidence_interval(self, prob: float = 0.9):
        """Mean query only: an exact confidence interval (lo, hi) for the data's mean
        F(X): it covers F(X) with probability >= ``prob`` for every data set, from the
        noise law alone (docs/noise_aware.md §6). AttributeError for other models."""
        ci = getattr(self._family, "confidence_interval", None)
        if ci is None:
            raise AttributeError(
                "confidence_interval is the mean query's (a frequentist interval for F(X)); "
                "use interval() for a credible interval"
            )
        return ci(_check_prob(prob))

    def mean(self):
        """Posterior mean: a float, or shape (K,) for Dirichlet (exact for the mixtures and
        the Normal; Rao-Blackwellised over the Gibbs draws for Dirichlet)."""
        return self._family.mean()

    def to_inference_data(self, draws: int = 4000, rng=None, chains: int = 4):
        """An ArviZ ``InferenceData`` with ``draws`` posterior draws in its ``posterior``
        group (dims chain, draw and, for Dirichlet, category), split into ``chains`` chains
        (for Dirichlet the Gibbs sampler's own chains), and the certificate and the public
        noisy statistic in its attrs. It has no observed_data, log_likelihood or any other
        group: nothing in it is computed on the private data. Needs ArviZ."""
        import arviz as az

        draws = _check_draws(draws, "draws")
        if isinstance(chains, bool) or not isinstance(chains, int) or not 1 <= chains <= draws:
            raise ValueError(f"chains must be an integer in [1, draws]; got {chains!r}")
        per = math.ceil(draws / chains)
        fam = self._family
        name = fam.var_name
        chained = getattr(fam, "chain_draws", None)
        if chained is not None:
            arr = chained(per, chains, resolve_rng(rng))
        else:
            flat = np.asarray(self.sample(per * chains, rng), dtype=float)
            arr = flat.reshape((chains, per) + flat.shape[1:])
        dims, coords = {}, {}
        if arr.ndim == 3:
            dim = getattr(fam, "dim_name", "category")
            dims = {name: [dim]}
            coords = {dim: np.arange(arr.shape[2])}
        attrs = {
            "privbayes_mechanism": self.noise["mechanism"],
            "privbayes_model": repr(self.model),
            "privbayes_method": NOISE_AWARE,
            "privbayes_sigma2": self.noise["sigma2"],
            # the smallest float >= Delta^2 (an int above 2^53 may round down to nearest)
            "privbayes_sensitivity_sq": round_up(self.noise["sensitivity_sq"]),
            "privbayes_lam": self.lam,
            "privbayes_eps": self.eps,
            "privbayes_n": self.n,
            "privbayes_guarantee": self.guarantee,
            "privbayes_truncation": self.truncation,
            "privbayes_statistic": np.atleast_1d(np.asarray(self.statistic, dtype=np.int64)),
            "privbayes_statistic_units": self.noise["statistic"],
        }
        idata = az.from_dict(posterior={name: arr}, coords=coords, dims=dims, attrs=attrs)
        idata.posterior.attrs.update(attrs)  # on the group too: it travels with the draws
        return idata


def _build(model, spec, noisy, n, cal, **options) -> PrivatePosterior:
    mech = cal.model
    family = family_of(model, n, noisy, mech.sigma2, **options)
    return PrivatePosterior(model, n, cal.lam, cal.eps, noisy, mech.noise(), cal, family)


def _noise_calibration(model, spec, n: int, lam, eps: float, delta, orders=None) -> Calibration:
    """The release's Calibration: at (lam, eps)-RDP, or for an (eps, delta) target the
    largest 1 / sigma^2 over the orders (docs/dp_target.md), with its delta and dp_eps."""
    import dataclasses

    from ..calibration import guarded
    from ..dp_target import search

    def at(lam_: float, eps_: float) -> Calibration:
        return guarded(
            lambda: calibrate_noise(model, n, lam_, eps_, spec), model, n, lam_, eps_, NOISE_AWARE
        )

    if delta is None:
        return at(lam, eps)
    found = search(
        at,
        lambda cal: (1.0 / cal.model.sigma2, cal.eps),
        eps,
        delta,
        name=f"{type(model).__name__}/{NOISE_AWARE}",
        orders=orders,
    )
    return dataclasses.replace(found.result, delta=delta, dp_eps=found.dp_eps, dp_target=eps)


def _noise_release(
    model, spec, stat, n, lam, eps, rng, *, ledger, dataset, note, options, delta=None
):
    """Calibrate, charge, draw the noise, build the posterior (privbayes.release's order)."""
    from ..accounting.default import default_accountant

    generator = resolve_rng(rng)  # a bad rng is refused before anything is charged
    orders = None if ledger is None else ledger.orders
    cal = _noise_calibration(model, spec, n, lam, eps, delta, orders)
    label = None if delta is None else f"(eps={eps:g}, delta={delta:g})"
    charge = Charge(cal, None, 0.0, label)
    charge_id = None
    if ledger is not None:  # charge first: a release that cannot be charged is not made
        charge_id = ledger.charge(dataset, charge, note=note)
    default_accountant().compose(charge)
    note_seed(rng, generator)  # right before the draw: a refused call used no noise
    sigma2 = cal.model.sigma2
    try:
        if spec.dim == 1:
            noisy = int(stat) + sample_discrete_gaussian(sigma2, generator)
        else:
            noise = sample_discrete_gaussian(sigma2, generator, size=spec.dim)
            noisy = np.asarray(stat, dtype=np.int64) + noise
            noisy.setflags(write=False)
    except KeyboardInterrupt:
        message = interrupted_message(model, ledger, dataset, charge_id, "")
        raise ReleaseInterrupted(message) from None
    if spec.kind in ("dirichlet", "linear"):
        options = {"rng": generator, **options}
    return _build(model, spec, noisy, n, cal, **options), generator


def _prepare(model, lam, eps, ledger, dataset, on_bad_diagnostics, column, delta=None):

    if isinstance(model, type) or not callable(getattr(model, "noise_aware_spec", None)):
        check_model(model)
    spec = spec_of(model)  # a model without a noise-aware posterior: TypeError, nothing read
    if spec.kind == "linear" and column is not None:
        raise ValueError("column= does not apply to linear regression: pass the pair (X, y)")
    lam, eps, delta = check_release_target(lam, eps, delta)
    if on_bad_diagnostics not in ("raise", "warn"):
        raise ValueError(
            f"on_bad_diagnostics must be 'raise' or 'warn'; got {on_bad_diagnostics!r}"
        )
    if on_bad_diagnostics == "warn" and spec.kind != "dirichlet":
        raise ValueError(
            f"on_bad_diagnostics='warn' does not apply to {type(model).__name__}: its "
            "noise-aware posterior is exact, with no MCMC diagnostics (DirichletCategorical's "
            "Gibbs sampler has them)"
        )
    check_ledger(ledger, dataset)
    return spec, lam, eps, delta


def posterior(
    model,
    data,
    lam=None,
    eps=None,
    *,
    delta: float | None = None,
    rng=None,
    ledger=None,
    dataset: str | None = None,
    note: str = "",
    column=None,
    on_bad_diagnostics: str = "raise",
) -> PrivatePosterior:
    """Release the sufficient statistic once with discrete Gaussian noise and return the
    posterior given it (noise-aware inference; Bernstein & Sheldon 2018).

    Parameters
    ----------
    model : BetaBernoulli, DirichletCategorical, GammaPoisson, NormalKnownVariance or
        privbayes.models.MeanQuery (the mean of values in [0, 1]); prior and bounds public.
    data : the records, as for :func:`privbayes.sample` (NumPy, lists, pandas, polars,
        pyarrow, Dask; ``column=`` picks a table's column), validated the same way.
    lam : float > 1 (finite: no discrete Gaussian is pure DP), the Rényi order; omit it
        with ``delta``.
    eps : float > 0, the privacy level at ``lam`` (nats), or of (eps, delta)-DP.
    delta : an (eps, delta)-DP target instead (``lam`` omitted), delta in (0, 1): sigma^2
        is the smallest the improved conversion certifies at some order
        (docs/dp_target.md); ``post.delta``, ``post.dp_eps`` and ``post.epsilon()`` report
        it.
    rng : None (fresh OS entropy, the default), an int seed or a numpy Generator: the
        noise's only randomness (uniform integers; docs/noise_aware.md §1). A seed reused
        by another release warns SharedRandomnessWarning, as in ``sample``.
    ledger, dataset, note : as in :func:`privbayes.sample`: the release's whole curve is
        charged before the noise is drawn; BudgetExceededError means nothing was released.
    on_bad_diagnostics : DirichletCategorical only: "raise" (default) makes the posterior's
        draws, interval and mean raise ConvergenceError when its Gibbs chains fail their
        (public) diagnostics; "warn" warns instead.

    Returns
    -------
    PrivatePosterior (statistic, noise, rdp, eps, lam, n, guarantee "exact", sample,
    interval, mean, to_inference_data).

    Raises
    ------
    TypeError for a model without a noise-aware posterior (GLMs), ValueError/TypeError for
    bad arguments, DataError for records outside the domain, NaN, missing or masked values,
    InfeasiblePrivacyError for lam = inf or eps = 0, LedgerError, BudgetExceededError: all
    before anything is charged or released. ReleaseInterrupted if interrupted while the
    noise is drawn (its charge stays).

    Privacy model: replace-one neighbours, n and the prior public (docs/privacy.md §1);
    certificate and posteriors: docs/noise_aware.md.
    """
    post, _ = _checked_release(
        model, data, lam, eps, delta, rng, ledger, dataset, note, column, on_bad_diagnostics
    )
    return post


def _checked_release(
    model, data, lam, eps, delta, rng, ledger, dataset, note, column, on_bad_diagnostics,
    size=None,
):  # fmt: skip
    """The path both entry points share: every public check (``size`` too, when given)
    before the data are read, then the statistic, then one charged release. Returns
    (PrivatePosterior, the Generator the noise came from)."""

    spec, lam, eps, delta = _prepare(
        model, lam, eps, ledger, dataset, on_bad_diagnostics, column, delta
    )
    if size is not None:
        check_size(size, model)
    options = {} if spec.kind != "dirichlet" else {"on_bad_diagnostics": on_bad_diagnostics}
    ledger, close = open_ledger(ledger)
    try:
        check_dataset(ledger, dataset)
        if spec.kind == "linear":  # Delta^2 and the dimension follow from d (public)
            from .linear import linear_release_spec, linear_statistic

            stat, n, d = linear_statistic(spec.kernel, data)
            spec = linear_release_spec(spec, d)
        else:
            stat, n = spec.statistic(data, column=column)
        return _noise_release(
            model, spec, stat, n, lam, eps, rng, ledger=ledger, dataset=dataset, note=note,
            options=options, delta=delta,
        )  # fmt: skip
    finally:
        if close:
            ledger.close()


def noise_aware_sample(
    model,
    data,
    lam,
    eps,
    *,
    size,
    rng,
    on_bad_diagnostics,
    ledger,
    dataset,
    note,
    column,
    delta=None,
):
    """``sample(..., method="noise-aware")``: one release, then ``size`` posterior draws
    (a :class:`privbayes.PrivateSample` whose curve is the one release's, whatever
    ``size``)."""

    post, generator = _checked_release(
        model, data, lam, eps, delta, rng, ledger, dataset, note, column, on_bad_diagnostics,
        size,
    )  # fmt: skip
    size = None if size is None else int(size)  # checked before the charge
    n = post.n
    value, log_value = post._family.draw(size, generator)
    for arr in (value, log_value):
        if isinstance(arr, np.ndarray):
            arr.setflags(write=False)
    cal = post.calibration
    return PrivateSample(
        value,
        log_value,
        NOISE_AWARE,
        1.0,
        1.0,
        cal.lam,
        cal.eps,
        n,
        cal,
        post.diagnostics,
        size,
        cal.guarantee,
        0.0,
        post,
        delta=cal.delta,
        dp_eps=cal.dp_eps,
    )
