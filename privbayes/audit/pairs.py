"""privbayes mechanisms under audit: worst-case pairs, calibrated releases, model audits."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from ..accounting.accountant import OrdersWarning, RdpAccountant
from ..calibration import Calibration, calibrate
from ..errors import InfeasiblePrivacyError
from ..models import MeanQuery
from ..models._dirichlet import DirichletFamily
from ..validation import as_numeric_array, check_n, resolve_rng
from .blackbox import AuditResult, audit
from .stats import _check_delta


def certified_dp(curve, delta: float) -> float:
    """The certified eps of (eps, delta)-DP of a mechanism with RDP curve ``curve``.

    ``curve``: a Calibration, a PrivateSample or a function orders -> eps. The curve is
    converted at every order of the accountant's dense grid (refined between grid points,
    improved conversion of docs/background.md §1) and minimised. delta = 0 gives the order-inf
    (pure DP) value.
    """
    delta = _check_delta(delta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        return float(RdpAccountant().compose(curve).get_epsilon(delta))


def _calibration(model, n, lam, eps, method, d=None) -> Calibration:
    """The calibration a release would use; for GLMs with backend="auto", the back-end
    :func:`privbayes.sample` would pick for d features (its ``model`` carries it)."""
    if isinstance(model, type) or not hasattr(model, "_calibrate"):
        raise TypeError(f"model must be a privbayes model instance; got {model!r}")
    return calibrate(model, n, lam, eps, method, d=d if hasattr(model, "_resolve") else None)


def worst_case_pair(model, n, lam, eps, method: str = "diffused", *, d: int = 1):
    """The worst-case neighbouring pair (D, D') of a privbayes mechanism, as data sets.

    Calibrates ``method`` for (n, lam, eps) and asks the model (its ``_worst_pair`` hook,
    docs/models.md) for two data sets of size n, differing in one record, where the
    certified sup is attained:

    * BetaBernoulli: 0/1 arrays, shape (n,), from the calibrator's boundary pair of count
      vectors (docs/boundary.md; also the worst pair of a statistical query);
      DirichletCategorical: category codes, shape (n,).
    * GammaPoisson: count arrays, shape (n,), one record at 0 vs max_count, the others all
      0 or all max_count (docs/gamma_poisson.md).
    * NormalKnownVariance: n records at ``low``, record 0 at ``high`` vs ``low``
      (docs/normal.md: every such pair attains the sup).
    * BayesianLogisticRegression: no calibrator pair exists (the bound is analytic): n - 1
      records x = 0 and one x = c e_1 labelled +1 in D and -1 in D'; returns
      ((X, y), (X, y')) with X of shape (n, d).

    The pair is a fact about the mechanism (public inputs only), never about any data set.
    Raises ValueError / TypeError for bad arguments (n >= 1 needed), InfeasiblePrivacyError
    when (lam, eps) cannot be certified.
    """
    n = check_n(n)
    if n < 1:
        raise ValueError("n must be >= 1: with no records there is no neighbouring pair")
    cal = _calibration(model, n, lam, eps, method, d)
    hook = getattr(model, "_worst_pair", None)
    if hook is None:
        raise TypeError(f"no worst-case pair is known for {type(model).__name__}")
    return hook(n, cal, d=d)


class CalibratedMechanism:
    """A privbayes release with a fixed calibration, as a black-box mechanism for :func:`audit`.

    ``mech(data, size=None, rng=None)`` runs the library's own draw (``model._draw``) with
    the calibration made once for (n, lam, eps, method): each call or batch row is one
    (lam, eps)-RDP release (unlike ``sample(size=k)``, which splits eps over k draws).

    Outputs (a bijection of the release, which changes no divergence): BetaBernoulli and
    queries: log theta, shape () or (size,) (exact where theta underflows);
    DirichletCategorical: log p, shape (K,) or (size, K); GammaPoisson: log theta, shape ()
    or (size,); NormalKnownVariance: theta, shape () or (size,); BayesianLogisticRegression:
    w, shape (d,) or (size, d).

    ``query=True`` (BetaBernoulli only) releases a statistical query: data are values in
    [0, 1] and the statistic is their sum, as in :func:`privbayes.release_query`.
    ``options`` go to the GLM back-end (e.g. ``on_bad_diagnostics``). ``d``: GLMs with
    backend="auto" only — the number of features, from which the back-end is chosen as
    :func:`privbayes.sample` would (default: the exact back-end's calibration).
    """

    def __init__(
        self,
        model,
        n,
        lam,
        eps,
        method: str = "diffused",
        *,
        query: bool = False,
        d: int | None = None,
        **options,
    ) -> None:
        self.query = bool(query)
        if self.query:
            if not (isinstance(model, DirichletFamily) and model.K == 2):
                raise TypeError("query=True needs a BetaBernoulli model (the query's Beta prior)")
            # the query's own mechanism: exact sum floored to 2^-8, its parameter grid
            model = MeanQuery(*model._alpha.tolist())
        self.calibration = _calibration(model, n, lam, eps, method, d)
        self.model = self.calibration.model  # GLMs: the concrete back-end ("auto" resolved)
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
        return self.model._statistics(arr)

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
        if log_value is None:
            return value
        # Beta releases keep (log theta, log(1 - theta)); the audit's scalar is log theta
        two = isinstance(self.model, DirichletFamily) and self.model.K == 2
        return log_value[..., 0] if two else log_value

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
    glm = hasattr(model, "_resolve")
    mech = CalibratedMechanism(
        model, n, lam, eps, method, query=query, d=d if glm else None, **options
    )
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
