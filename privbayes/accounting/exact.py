"""Exact running sums of RDP curves, read back rounded up (docs/accounting.md §3).

Every finite double is an integer multiple of 2^-1074, so a sum of doubles (times integer
counts) is held exactly as a Python integer count of 2^-1074 units, one per order; ``inf``
is kept as a flag. Reading the sum back gives the smallest double >= the exact sum, so a
charge, however small, is never lost to rounding and composition never under-reports.
"""

from __future__ import annotations

import math

import numpy as np

_SHIFT = 1074  # 2^-1074 is the smallest positive double
_UNIT = 1 << _SHIFT


def to_units(x: float) -> int:
    """The exact value of the finite double ``x`` in units of 2^-1074."""
    n, d = x.as_integer_ratio()  # d is a power of two, at most 2^1074
    return n << (_SHIFT + 1 - d.bit_length())


def round_up(units: int) -> float:
    """The smallest double >= units * 2^-1074 (inf when it exceeds the largest double)."""
    try:
        f = units / _UNIT  # CPython's int / int is correctly rounded
    except OverflowError:
        return math.inf
    if math.isfinite(f) and to_units(f) < units:
        f = math.nextafter(f, math.inf)
    return f


class ExactSum:
    """Exact sum of non-negative float arrays of one shape (a curve on fixed orders).

    ``add(values, count)`` adds ``count`` copies exactly; ``upper()`` returns the sum
    rounded up to doubles; ``partials()`` / ``from_partials`` store it exactly as short
    lists of doubles (a non-overlapping expansion, usually one or two numbers per order).
    """

    __slots__ = ("_units", "_inf")

    def __init__(self, size: int) -> None:
        self._units = [0] * size
        self._inf = [False] * size

    def __len__(self) -> int:
        return len(self._units)

    def copy(self) -> ExactSum:
        new = ExactSum(0)
        new._units, new._inf = list(self._units), list(self._inf)
        return new

    def add(self, values, count: int = 1) -> None:
        """Add ``count`` (an int >= 0) copies of ``values`` (finite or inf, >= 0, no NaN)."""
        arr = np.asarray(values, float).ravel()
        if arr.size != len(self._units):
            raise ValueError(f"expected {len(self._units)} values; got {arr.size}")
        count = int(count)
        if count == 0:
            return  # no 0 * inf
        if np.isinf(arr).any():
            for i in np.flatnonzero(np.isinf(arr)).tolist():
                self._inf[i] = True
            arr = np.where(np.isinf(arr), 0.0, arr)
        # x = m 2^e with 2^53 m an integer M: x is M * 2^(e + 1021) units (a right shift,
        # exact, for subnormal x). Vectorised split, then one big-int shift and add each.
        m, e = np.frexp(arr)
        big_m = (m * 2.0**53).astype(np.int64).tolist()
        shifts = (e + (_SHIFT - 53)).tolist()
        scaled = [a << b if b >= 0 else a >> -b for a, b in zip(big_m, shifts, strict=True)]
        if count == 1:
            self._units = [u + v for u, v in zip(self._units, scaled, strict=True)]
        else:
            self._units = [u + count * v for u, v in zip(self._units, scaled, strict=True)]

    def is_zero(self) -> np.ndarray:
        """Where the exact sum is 0 (every curve added was exactly 0 there)."""
        return np.array([u == 0 and not f for u, f in zip(self._units, self._inf, strict=True)])

    def upper(self) -> np.ndarray:
        """The smallest doubles >= the exact sums (inf where a curve was inf)."""
        return np.array(
            [math.inf if f else round_up(u) for u, f in zip(self._units, self._inf, strict=True)]
        )

    def partials(self) -> list[list[float]]:
        """Per entry, doubles whose exact sum is the entry ([inf] where infinite)."""
        out = []
        for u, f in zip(self._units, self._inf, strict=True):
            if f:
                out.append([math.inf])
                continue
            parts, rest = [], u
            while rest:
                try:
                    p = rest / _UNIT
                except OverflowError:  # beyond the largest double: only inf bounds it
                    parts = [math.inf]
                    break
                parts.append(p)
                rest -= to_units(p)
            out.append(parts or [0.0])
        return out

    @classmethod
    def from_partials(cls, rows) -> ExactSum:
        """Inverse of :meth:`partials`; a plain float per entry is accepted too."""
        new = cls(0)
        for row in rows:
            parts = row if isinstance(row, list) else [row]
            vals = [float(p) for p in parts]
            if any(math.isnan(v) for v in vals):
                raise ValueError("a stored total is NaN")
            if any(v == math.inf for v in vals):
                new._units.append(0)
                new._inf.append(True)
            else:
                new._units.append(sum(to_units(v) for v in vals))
                new._inf.append(False)
        return new


def sum_up(values, counts=None) -> float:
    """The smallest double >= sum(count * value) over finite-or-inf values >= 0."""
    vals = np.asarray(values, float).ravel().tolist()
    cs = [1] * len(vals) if counts is None else [int(c) for c in counts]
    total, inf = 0, False
    for v, c in zip(vals, cs, strict=True):
        if c == 0:
            continue
        if v == math.inf:
            inf = True
        elif v:
            total += c * to_units(v)
    return math.inf if inf else round_up(total)
