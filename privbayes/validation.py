"""Argument checks shared by every entry point: each error names the argument."""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np

MAX_N = 2**53  # larger sizes are not exactly representable as floats
PRIOR_MIN, PRIOR_MAX = 1e-300, 1e300  # prior concentrations stay normal doubles


def _real(value, name: str, what: str) -> float:
    """A real scalar (Python or numpy number, or a 0-d numeric array) as a float."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be {what}; got {value!r}")
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        return float(value)
    raise TypeError(f"{name} must be {what}; got {value!r}")


def check_lam(lam, name: str = "lam") -> float:
    """A Rényi order: a real number > 1, or inf. Returns a float."""
    lam = _real(lam, name, "a real number > 1 (or inf)")
    if math.isnan(lam) or lam <= 1.0:
        raise ValueError(f"{name} must be > 1 (or inf); got {lam}")
    return lam


def check_eps(eps, name: str = "eps") -> float:
    """A privacy level: a finite real number >= 0 (0 is reachable only when n = 0)."""
    eps = _real(eps, name, "a finite real number > 0")
    if not math.isfinite(eps) or eps < 0.0:
        raise ValueError(f"{name} must be a finite real number > 0; got {eps}")
    return eps


def check_n(n, name: str = "n") -> int:
    """A data set size: an integer >= 0."""
    if isinstance(n, bool):
        raise TypeError(f"{name} must be an integer >= 0; got {n!r}")
    try:
        n = operator.index(n)
    except TypeError:
        if isinstance(n, numbers.Real) and math.isfinite(n) and float(n).is_integer():
            n = int(n)
        else:
            raise TypeError(f"{name} must be an integer >= 0; got {n!r}") from None
    if n < 0 or n > MAX_N:
        raise ValueError(f"{name} must be an integer in [0, 2**53]; got {n}")
    return n


def check_unit_knob(value, name: str) -> float:
    """r or m: a real number in (0, 1]."""
    value = _real(value, name, "a real number in (0, 1]")
    if not (0.0 < value <= 1.0):
        raise ValueError(f"{name} must be in (0, 1]; got {value}")
    return value


def check_positive_vector(values, name: str, min_len: int = 1) -> np.ndarray:
    """A 1-D vector of prior concentrations in [1e-300, 1e300] (numbers, not strings)."""
    try:
        raw = np.asarray(values)
    except ValueError:
        raise ValueError(f"{name} must be a 1-D array of numbers; got {values!r}") from None
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold numbers; got dtype {raw.dtype}")
    arr = raw.astype(float)
    if arr.ndim != 1 or arr.size < min_len:
        raise ValueError(
            f"{name} must be 1-D with at least {min_len} entries; got shape {arr.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < PRIOR_MIN) | (arr > PRIOR_MAX))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name} must lie in [1e-300, 1e300]; {name}[{i}] = {float(arr[i])!r}")
    arr.setflags(write=False)
    return arr


def check_positive(value, name: str) -> float:
    """A finite real number > 0."""
    value = _real(value, name, "a finite real number > 0")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite real number > 0; got {value}")
    return value


def check_prior(value, name: str) -> float:
    """A prior concentration: a real number in [1e-300, 1e300]."""
    value = check_positive(value, name)
    if not PRIOR_MIN <= value <= PRIOR_MAX:
        raise ValueError(f"{name} must lie in [1e-300, 1e300]; got {value!r}")
    return value


def check_bool(value, name: str) -> bool:
    """A real boolean (a string like "False" is refused, not read as True)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def as_numeric_array(data, name: str = "data") -> np.ndarray:
    """Data as a float array (bools as 0/1); strings, objects and complex numbers are
    refused, and so are NaN/inf (privbayes.DataError, a ValueError: column ``name``, rule
    "finite", the rows with one, the first row and its entry). Accepts what
    :func:`privbayes.data.as_array` accepts (NumPy, lists, pandas, polars, pyarrow,
    scipy.sparse); Dask collections are refused with a pointer to the models that reduce
    them in the engine (docs/data.md)."""
    from .data import DataError, as_array

    arr = as_array(data, name)
    bad = np.flatnonzero(~np.isfinite(arr.ravel()))
    if bad.size:
        idx = np.unravel_index(int(bad[0]), arr.shape)
        cell = f"{name}[{', '.join(str(int(i)) for i in idx)}]" if idx else name
        finite = (
            np.isfinite(arr)
            if arr.ndim <= 1
            else np.isfinite(arr).all(axis=tuple(range(1, arr.ndim)))
        )
        count = int(np.count_nonzero(~finite))  # rows (records) with a non-finite entry
        value = float(arr[idx])
        raise DataError(
            f"{name} must be finite; {cell} = {value!r} ({count} row(s) with NaN, "
            "inf or a missing value)",
            column=name,
            rule="finite",
            count=count,
            index=int(idx[0]) if idx else 0,
            value=value,
        )
    return arr


def resolve_rng(rng) -> np.random.Generator:
    """None -> fresh OS entropy; an int or SeedSequence -> seeded; a Generator -> itself."""
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, bool):
        raise TypeError(f"rng must be None, an int seed or a numpy Generator; got {rng!r}")
    if isinstance(rng, (numbers.Integral, np.random.SeedSequence)):
        if isinstance(rng, numbers.Integral) and rng < 0:
            raise ValueError(f"rng seed must be >= 0; got {rng}")
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, an int seed or a numpy Generator; got {rng!r}")


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the caller of this function point
    at the first frame outside the privbayes package (the user's line), however many
    internal calls (decorators, estimators, the CLI's own modules excepted) lie between."""
    import os
    import sys

    root = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1  # the caller of user_stacklevel, i.e. the warner
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(root + os.sep):
            return level
        frame, level = frame.f_back, level + 1
    return level
