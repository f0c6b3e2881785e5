"""Argument checks shared by every entry point: each error names the argument."""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np


def check_lam(lam, name: str = "lam") -> float:
    """A Rényi order: a real number > 1, or inf. Returns a float."""
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real):
        raise TypeError(f"{name} must be a real number > 1 (or inf); got {lam!r}")
    lam = float(lam)
    if math.isnan(lam) or lam <= 1.0:
        raise ValueError(f"{name} must be > 1 (or inf); got {lam}")
    return lam


def check_eps(eps, name: str = "eps") -> float:
    """A privacy level: a finite real number >= 0 (0 is reachable only when n = 0)."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"{name} must be a finite real number > 0; got {eps!r}")
    eps = float(eps)
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
        if isinstance(n, numbers.Real) and float(n).is_integer():
            n = int(n)
        else:
            raise TypeError(f"{name} must be an integer >= 0; got {n!r}") from None
    if n < 0:
        raise ValueError(f"{name} must be an integer >= 0; got {n}")
    return n


def check_unit_knob(value, name: str) -> float:
    """r or m: a real number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1]; got {value!r}")
    value = float(value)
    if not (0.0 < value <= 1.0):
        raise ValueError(f"{name} must be in (0, 1]; got {value}")
    return value


def check_positive_vector(values, name: str, min_len: int = 1) -> np.ndarray:
    """A 1-D vector of finite positive reals (prior concentrations)."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of positive reals; got {values!r}") from None
    if arr.ndim != 1 or arr.size < min_len:
        raise ValueError(
            f"{name} must be 1-D with at least {min_len} entries; got shape {arr.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(arr) | (arr <= 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name} must be finite and > 0; {name}[{i}] = {arr[i]}")
    arr.setflags(write=False)
    return arr


def check_positive(value, name: str) -> float:
    """A finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite real number > 0; got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite real number > 0; got {value}")
    return value


def as_numeric_array(data, name: str = "data") -> np.ndarray:
    """Data as a float or bool array; strings, objects and complex numbers are refused."""
    arr = np.asarray(data)
    if arr.dtype == bool:
        return arr.astype(float)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold numbers (or bools); got dtype {arr.dtype}")
    arr = arr.astype(float)
    bad = np.flatnonzero(~np.isfinite(arr.ravel()))
    if bad.size:
        idx = np.unravel_index(int(bad[0]), arr.shape)
        where = idx[0] if len(idx) == 1 else tuple(int(i) for i in idx)
        raise ValueError(f"{name} must be finite; {name}[{where}] = {arr[idx]}")
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
