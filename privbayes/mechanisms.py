"""The posterior-sampling mechanisms (docs/background.md §3, paper Algorithms 1-3).

Each samples from ``prior^(1/m) * likelihood^r``: in natural parameters
``eta0 / m + r * (s, n)``. ``direct`` has r = m = 1, ``diffused`` tunes r (tempers the
likelihood), ``concentrated`` tunes m (the prior counts 1/m times).
"""

from __future__ import annotations

CONJUGATE_METHODS = ("direct", "diffused", "concentrated")

KNOB = {"direct": None, "diffused": "r", "concentrated": "m"}


def check_method(method, allowed: tuple[str, ...] = CONJUGATE_METHODS) -> str:
    """Validate a method name against ``allowed``; returns it."""
    if not isinstance(method, str) or method not in allowed:
        raise ValueError(f"method must be one of {', '.join(map(repr, allowed))}; got {method!r}")
    return method


def knobs(method: str, value: float) -> tuple[float, float]:
    """(r, m) for ``method`` with its knob at ``value`` (direct ignores ``value``)."""
    if method == "diffused":
        return value, 1.0
    if method == "concentrated":
        return 1.0, value
    return 1.0, 1.0
