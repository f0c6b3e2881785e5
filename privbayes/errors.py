"""Typed errors raised by privbayes."""

from __future__ import annotations


class PrivBayesError(Exception):
    """Base class of every error privbayes raises on purpose."""


class InfeasiblePrivacyError(PrivBayesError, ValueError):
    """The requested (lam, eps) cannot be certified by the chosen mechanism.

    ``reachable`` describes what can be reached instead (a dict, public values only).
    """

    def __init__(self, message: str, *, reachable: dict | None = None) -> None:
        super().__init__(message)
        self.reachable = dict(reachable or {})


class BudgetExceededError(PrivBayesError):
    """A charge would exceed a privacy budget (used by the ledger)."""


class NeighbourRelationError(PrivBayesError, ValueError):
    """Curves of different neighbour relations (replace-one, add/remove) were to be composed
    in one accountant or ledger budget (docs/accounting.md §9). Raised before anything is
    recorded: the accountant's state and the ledger's rows are unchanged. ``expected`` is
    the accountant's (or budget's) relation, ``got`` the curve's."""

    def __init__(self, message: str, *, expected: str | None = None, got: str | None = None):
        super().__init__(message)
        self.expected, self.got = expected, got


class LedgerError(PrivBayesError, OSError):
    """A ledger file cannot be opened, created or written (missing folder, no permission,
    not an SQLite file, locked too long...), or has no budget for the data set named. The
    message names the path or the data set, and the fix."""


class UnknownDatasetError(LedgerError, KeyError):
    """The ledger has no budget for this data set (a LedgerError; also a KeyError, which
    the ledger raised before). ``dataset`` is the name asked for."""

    def __init__(self, message: str, *, dataset: str | None = None) -> None:
        super().__init__(message)
        self.dataset = dataset

    __str__ = OSError.__str__  # the message as is (KeyError's would quote it)


class ConvergenceError(PrivBayesError, RuntimeError):
    """MCMC did not converge (R-hat > 1.01 or divergent transitions): no release is made.

    ``diagnostics`` holds the figures (computed on private data: do not publish them).
    """

    def __init__(self, message: str, *, diagnostics: dict | None = None) -> None:
        super().__init__(message)
        self.diagnostics = dict(diagnostics or {})


class SamplingError(PrivBayesError, RuntimeError):
    """A sampler could not produce a valid draw (e.g. OPS rejection found no accepted draw)."""


class DataError(PrivBayesError, ValueError):
    """Records outside the model's domain, or NaN/inf/missing (privbayes.data, docs/data.md §3).

    Attributes: ``column`` (the argument and column as named in the message, e.g.
    ``"data['age']"``; ``"X"`` or ``"y"`` for a GLM), ``rule`` (``"finite"`` or the model's
    rule number, 0-based; GLMs: 0 the label, 1 the row norm), ``count`` (offending rows;
    None where it would count valid records, e.g. a label-coding mix, and for a CSVError),
    ``index`` (0-based position of the first among all rows; None when no single row is
    at fault, e.g. a GLM's y mixing the 0/1 and -1/+1 codings) and ``value`` (its value: a
    float, or a list for a one-hot row; for a GLM the non-finite entry, the label, or the
    row's norm — never the row itself; None with ``index`` None). The same input gives the
    same error, attributes included, in memory (NumPy, pandas, polars, pyarrow) and in a
    Dask engine. Raised before anything is released or charged.
    """

    def __init__(self, message: str, *, column: str, rule, count: int, index: int, value) -> None:
        super().__init__(message)
        self.column, self.rule, self.count, self.index, self.value = (
            column,
            rule,
            count,
            index,
            value,
        )


class ReleaseInterrupted(KeyboardInterrupt):
    """The release was interrupted (Ctrl-C, SIGINT) while it sampled: nothing was released.

    A KeyboardInterrupt (so ``except Exception`` does not swallow it), raised by every
    back-end — including ``backend="pymc"``, whose sampler would otherwise stop a chain
    and return a partial trace. The ledger charge and the default accountant's record,
    made before sampling started, stay (the sampler had read the data); the message says
    which charge. The command line prints it in one line and exits with status 130.
    """


class StepCapWarning(UserWarning):
    """Langevin's public step rule hit ``max_steps``: the chain ran fewer steps than it needs
    to forget its start, so the draw may be far from the posterior (the privacy certificate
    still holds: it is for the law actually run). Raised by ``backend="langevin"`` releases
    (docs/langevin.md)."""


class KnobCappedWarning(UserWarning):
    """Calibration capped the mechanism's knob (diffused r, concentrated m, OPS's t at 1, or
    at the largest value the order certifies) and the certified eps is far below the one
    asked for (below :data:`privbayes.capping.FAR_BELOW` times it): the release spends
    less of the budget than requested, and more eps cannot buy more accuracy with this
    prior and method. The message says what to change (a smaller beta or weaker prior,
    ``method="direct"``, a smaller lam, or asking for the certified eps). The certificate is
    correct. Attributes (public): ``certified_eps``, ``target_eps`` (for an (eps, delta)
    target, the eps of (eps, delta)-DP at ``delta``; else the RDP eps at lam), ``delta``
    (None for an RDP target), ``method``, ``knob`` (its name) and ``value`` (where it
    stopped). Issued once per public call
    (:func:`privbayes.calibrate`, :func:`privbayes.sample`, ``release_query``,
    ``PrivateLogisticRegression.fit``) by :func:`privbayes.capping.warn_if_capped`."""

    def __init__(
        self,
        message: str,
        *,
        certified_eps: float = float("nan"),
        target_eps: float = float("nan"),
        method: str = "",
        knob: str = "",
        value: float = float("nan"),
        delta: float | None = None,
    ) -> None:
        super().__init__(message)
        self.certified_eps, self.target_eps, self.delta = certified_eps, target_eps, delta
        self.method, self.knob, self.value = method, knob, value


class SharedRandomnessWarning(UserWarning):
    """A release draws its noise from the same random state as an earlier release of this
    process: the same int seed, or a copy of the same Generator (e.g. one deep-copied by
    ``sklearn.base.clone``). The two releases then share their noise, and their composition
    is *not* covered by the certificates charged for them, which assume independent
    releases. Also issued for every seeded release made in a child process (e.g. a joblib
    worker with ``n_jobs > 1``), whose record of seeds cannot see the other processes'
    releases. Pass ``rng=None`` / ``random_state=None`` (fresh OS entropy) for independent
    releases, or a different seed per release (README, "Repeated fits"; docs/privacy.md §7)."""
