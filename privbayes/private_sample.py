"""PrivateSample: one private release (its draws) and the certificate that covers it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .accounting.relations import REPLACE_ONE
from .calibration import Calibration
from .charges import composed_rdp

__all__ = ["PrivateSample"]


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
    dp_target : the eps of the (eps, delta) target asked for (None for an RDP target).
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
    dp_target: float | None = field(default=None, repr=False)
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
        return composed_rdp(self.calibration, self.size, orders)
