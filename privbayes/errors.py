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


class LedgerError(PrivBayesError, OSError):
    """A ledger file cannot be opened, created or written (missing folder, no permission,
    not an SQLite file, locked too long...). The message names the path and the fix."""


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
    ``"data['age']"``), ``rule`` (``"finite"`` or the model's rule number, 0-based),
    ``count`` (offending rows), ``index`` (0-based position of the first among all rows)
    and ``value`` (its value: a float, or a list for a one-hot row). Raised before anything
    is released or charged.
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


class StepCapWarning(UserWarning):
    """Langevin's public step rule hit ``max_steps``: the chain ran fewer steps than it needs
    to forget its start, so the draw may be far from the posterior (the privacy certificate
    still holds: it is for the law actually run). Raised by ``backend="langevin"`` releases
    (docs/langevin.md)."""
