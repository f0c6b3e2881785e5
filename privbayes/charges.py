"""What one release is charged for, and the checks made before any charge.

Shared by the release flows (privbayes.release: ``sample``, ``release_query``;
privbayes.posterior.release: the noise-aware posteriors) so that neither imports the other
for them: a :class:`Charge` (the calibrated mechanism, the number of draws, the
total-variation allowance), the composed k-draw curve, and the argument checks that must
run before the data are read or anything is charged (a call that cannot run spends no
budget).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from .accounting.relations import REPLACE_ONE
from .calibration import Calibration, check_target
from .certified import round_up
from .validation import check_bool, check_eps, check_lam

__all__ = [
    "MAX_SIZE",
    "Charge",
    "check_call_options",
    "check_dataset",
    "check_ledger",
    "check_model",
    "check_release_target",
    "check_size",
    "composed_eps",
    "composed_rdp",
    "interrupted_message",
    "open_ledger",
    "per_draw_eps",
]


def composed_rdp(cal: Calibration, size: int | None, orders) -> np.ndarray:
    """k draws: k times one draw's curve, each product exact and rounded up."""
    curve = cal.rdp(orders)
    if size is None:
        return curve
    flat = np.asarray(curve, float).ravel()
    out = np.array(
        [round_up(Fraction(size) * Fraction(v)) if math.isfinite(v) else v for v in flat]
    )
    return out.reshape(np.shape(curve))


def composed_eps(cal: Calibration, size: int) -> float:
    """size * cal.eps rounded up: <= the requested eps by :func:`per_draw_eps`."""
    return round_up(Fraction(size) * Fraction(cal.eps))


@dataclass(frozen=True)
class Charge:
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
        return composed_rdp(self.calibration, self.size, orders)


MAX_SIZE = 10**7  # draws per call (conjugate models; a model may set a lower max_size)


def check_size(size, model) -> int | None:
    """Checked before any charge: a call that cannot run must not spend budget."""
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise ValueError(f"size must be None or an integer >= 1; got {size!r}")
    limit = getattr(model, "max_size", MAX_SIZE)
    if size > limit:
        raise ValueError(f"size must be at most {limit} for {type(model).__name__}; got {size}")
    return int(size)


def per_draw_eps(eps: float, size: int) -> float:
    """The largest float t with size * t <= eps exactly (RDP adds at one order)."""
    t = eps / size
    while Fraction(size) * Fraction(t) > Fraction(eps):
        t = math.nextafter(t, 0.0)
    return t


def check_release_target(lam, eps, delta) -> tuple:
    """(lam, eps, delta) checked: an RDP target (lam, eps, None) or an (eps, delta) target
    (None, eps, delta)."""
    from .dp_target import check_delta_target

    check_target(lam, eps, delta)
    if delta is None:
        return check_lam(lam), check_eps(eps), None
    return None, check_eps(eps), check_delta_target(delta)


def check_model(model) -> None:
    if isinstance(model, type):
        raise TypeError(
            f"model must be a model instance, e.g. {model.__name__}(...); got the class"
        )
    if not hasattr(model, "_statistics"):
        raise TypeError(f"model must be a privbayes model; got {type(model).__name__}")


def check_ledger(ledger, dataset) -> None:
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


def check_dataset(ledger, dataset) -> None:
    """The ledger has a budget for ``dataset`` (LedgerError otherwise), checked before the
    data are read; the charge checks it again under the write lock."""
    if ledger is not None and hasattr(ledger, "budget"):
        ledger.budget(dataset)


def check_call_options(model, method: str, progressbar, on_bad_diagnostics) -> None:
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


def interrupted_message(model, ledger, dataset, charge_id, detail: str) -> str:
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


def open_ledger(ledger):
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
