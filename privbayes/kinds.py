"""Which objects are privbayes calibrations, without importing privbayes.calibration.

The accountant, the neighbour relations and the ledger treat a privbayes
:class:`~privbayes.calibration.Calibration` specially (its curve is a fixed function of
frozen numbers; it certifies the replace-one relation; its model can be re-calibrated for
refusal advice). privbayes.calibration sits above accounting (it converts through the
accountant), so instead of importing it here it registers its class at import
(:func:`register_calibration`): accounting never imports calibration, and no import circle
forms. Before privbayes.calibration is imported no Calibration can exist, so
:func:`is_calibration` is then correctly False.
"""

from __future__ import annotations

__all__ = ["is_calibration", "register_calibration"]

_TYPES: list[type] = []


def register_calibration(cls: type) -> type:
    """Record ``cls`` as the Calibration class (called once by privbayes.calibration)."""
    _TYPES[:] = [cls]
    return cls


def is_calibration(obj) -> bool:
    """True when ``type(obj)`` is exactly the registered Calibration class (no subclasses:
    a subclass could override what its curve reports)."""
    return bool(_TYPES) and type(obj) is _TYPES[0]
