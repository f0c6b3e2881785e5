"""The data seam: every conjugate model's data arrive here (docs/data.md).

One path turns any supported input into the exact sufficient statistics a release needs:

* in memory: NumPy arrays (and lists), pandas Series/DataFrames, polars Series/DataFrames,
  pyarrow Arrays/ChunkedArrays/Tables;
* in a Dask engine: ``dask.array`` arrays and ``dask.dataframe`` Series/DataFrames, run by
  whatever scheduler is active (a ``dask.distributed`` Client when one is, else threads).

A model supplies a *chunk kernel* (:class:`Reduction`): per-chunk domain rules (masks of
offending rows) and per-chunk exact partial statistics (integers: counts, integer sums, or
real sums as exact integer multiples of 2^-1127). The seam runs the same kernel on the
whole in-memory array, or on every Dask partition inside the engine, and combines the
partials with an associative, ordered reduction (a tree of tasks in the engine), so the
client receives only the combined statistics, the row count n and, when a rule fails, the
number of offending rows with the first one (its position and value). Integer arithmetic
makes the result independent of the partitioning: a Dask release and an in-memory release
of the same data give the same statistics, hence the same draw for the same seed.

Non-finite values (NaN, inf, missing) and values outside the model's declared domain are
refused with an error naming the column, the number of offending rows and the first
offending row, before anything is released or charged to a ledger.

Heavy libraries are never imported here unless the input is one of theirs (types are
recognised by their module name), so NumPy-only use loads no pandas, pyarrow, polars or
Dask.
"""

from __future__ import annotations

import glob as _glob
import math
import os
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .errors import DataError

__all__ = [
    "EXACT_SUM_BITS",
    "DataError",
    "Reduction",
    "exact_sum",
    "is_dask",
    "read",
    "statistics",
]

EXACT_SUM_BITS = 1127  # every double is an integer multiple of 2^-1127 (2^-1074 and then some)
_SUB = 1 << 22  # rows per exact-sum block: float64 bincount weights stay exact (< 2^53)
_LOW26 = (1 << 26) - 1
_ROWS = 1 << 20  # rows per block of the in-memory pass


# -- exact summation ---------------------------------------------------------------------
def exact_sum(values: np.ndarray) -> int:
    """The exact sum of finite float64 ``values`` (any shape) as an integer T with
    sum = T * 2^-1127.

    Each value is m 2^(e-53) with an integer mantissa |m| < 2^53 (``np.frexp``); mantissas
    are split into 27- and 26-bit halves and added per exponent with ``np.bincount`` (float64
    weights, exact: at most 2^22 terms of at most 2^27 each), then shifted into one Python
    integer. Vectorised, one pass, exact; ``float(T / 2**1127)`` is the correctly rounded sum
    (what ``math.fsum`` returns).
    """
    flat = np.asarray(values, dtype=float).ravel()
    total = 0
    for start in range(0, flat.size, _SUB):
        mant, expo = np.frexp(flat[start : start + _SUB])
        m = np.ldexp(mant, 53).astype(np.int64)  # exact: 53-bit mantissas (0 for zeros)
        hi, lo = m >> 26, m & _LOW26  # m = hi 2^26 + lo, lo in [0, 2^26)
        e0 = int(expo.min()) if expo.size else 0
        idx = (expo - e0).astype(np.intp)
        s_hi = np.bincount(idx, weights=hi.astype(float))
        s_lo = np.bincount(idx, weights=lo.astype(float))
        for k in np.flatnonzero((s_hi != 0) | (s_lo != 0)):
            part = (int(s_hi[k]) << 26) + int(s_lo[k])
            shift = int(k) + e0 - 53 + EXACT_SUM_BITS  # >= 1 for every double
            total += part << shift
    return total


def fraction_to_float(total: int) -> float:
    """The double nearest T * 2^-1127 (round half to even: int true division is exact)."""
    return total / (1 << EXACT_SUM_BITS)


# -- what a model supplies ----------------------------------------------------------------
class Reduction(Protocol):
    """The chunk kernel of a model (the conjugate models implement it).

    ``_data_ndims``: the accepted numbers of dimensions (e.g. (1,) or (1, 2)).
    ``_data_rules``: the number of domain rules (masks returned per chunk).
    ``_data_shape(shape, name)``: raise ValueError for a shape the model cannot take
    (called on the full shape before any pass; the row count may be unknown, NaN).
    ``_data_chunk(arr) -> (stats, masks)``: for a float64 chunk of finite rows, the exact
    partial statistics (Python ints or int64 arrays, combined with ``+``) and one boolean
    mask of offending rows per domain rule (shape (rows,)), in rule order.
    ``_data_message(rule, where, value, count) -> str``: the error for rule ``rule``.
    ``_data_finish(stats, n) -> (stats, n)``: the model's statistics from the combined
    partials (e.g. the rounding of a real sum).
    """

    _data_ndims: tuple[int, ...]
    _data_rules: int

    def _data_shape(self, shape: tuple, name: str) -> None: ...

    def _data_chunk(self, arr: np.ndarray) -> tuple[Any, list[np.ndarray]]: ...

    def _data_message(self, rule: int, where: str, value, count: int) -> str: ...

    def _data_finish(self, stats, n: int) -> tuple[Any, int]: ...


# -- partial results, combined in order ------------------------------------------------------
@dataclass(frozen=True)
class _Partial:
    n: int  # rows of the chunk(s)
    stats: Any  # None when a rule failed somewhere (statistics are not needed then)
    bad: tuple  # per rule (index 0: non-finite): None or (count, first position, value)


def _combine(a: _Partial, b: _Partial) -> _Partial:
    """a then b: counts add, first offenders keep their global position."""
    bad = []
    for x, y in zip(a.bad, b.bad, strict=True):
        if x is None:
            bad.append(None if y is None else (y[0], a.n + y[1], y[2]))
        elif y is None:
            bad.append(x)
        else:
            bad.append((x[0] + y[0], x[1], x[2]))
    failed = any(v is not None for v in bad)
    stats = None if failed or a.stats is None or b.stats is None else _add(a.stats, b.stats)
    return _Partial(a.n + b.n, stats, tuple(bad))


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def _combine_many(*parts: _Partial) -> _Partial:
    out = parts[0]
    for p in parts[1:]:
        out = _combine(out, p)
    return out


def _first(mask: np.ndarray, arr: np.ndarray):
    """None, or (count, first row, its value) for a row mask."""
    count = int(np.count_nonzero(mask))
    if not count:
        return None
    i = int(np.argmax(mask))
    value = float(arr[i]) if arr.ndim == 1 else arr[i].tolist()
    return (count, i, value)


def _block(model: Reduction, n_rules: int, arr: np.ndarray) -> _Partial:
    """The checks and partial statistics of one block of rows (float64 once here)."""
    arr = arr.astype(float, copy=False)
    rows = int(arr.shape[0])
    finite = np.isfinite(arr) if arr.ndim == 1 else np.isfinite(arr).all(axis=1)
    nonfinite = _first(~finite, arr)
    if nonfinite is not None:
        return _Partial(rows, None, (nonfinite,) + (None,) * n_rules)
    stats, masks = model._data_chunk(arr)
    bad = tuple(_first(m, arr) for m in masks)
    failed = any(v is not None for v in bad)
    return _Partial(rows, None if failed else stats, (None, *bad))


def _kernel(model: Reduction, n_rules: int, chunk, name: str = "data") -> _Partial:
    """The pass over one chunk (the whole array in memory, or one Dask partition on its
    worker), in blocks of 2^20 rows: the temporaries stay bounded, and the integer
    partials make the blocks invisible in the result."""
    arr = _numeric(_to_numpy(chunk), name)
    parts = [_block(model, n_rules, arr[i : i + _ROWS]) for i in range(0, len(arr), _ROWS)]
    return _combine_many(*parts) if parts else _block(model, n_rules, arr)


# -- inputs -----------------------------------------------------------------------------------
def _family(obj) -> str:
    """'dask', 'pandas', 'polars', 'pyarrow' or '' from the type's module (no imports)."""
    mod = type(obj).__module__ or ""
    for fam in ("dask", "pandas", "polars", "pyarrow"):
        if mod == fam or mod.startswith(fam + "."):
            return fam
    return ""


def is_dask(obj) -> bool:
    """True for a dask collection (array, DataFrame, Series)."""
    return _family(obj) == "dask" and hasattr(obj, "__dask_graph__")


def _columns(obj) -> list[str] | None:
    """Column names of a table (None for arrays and series)."""
    fam = _family(obj)
    if fam in ("pandas", "dask") and getattr(obj, "ndim", 0) == 2 and hasattr(obj, "columns"):
        return list(obj.columns)
    if fam == "polars" and hasattr(obj, "columns"):
        return list(obj.columns)
    if fam == "pyarrow" and hasattr(obj, "column_names"):
        return list(obj.column_names)
    return None


def _select(obj, column, name: str):
    """(selection, label) for ``column``: one name (a 1-D column) or a list of names."""
    cols = _columns(obj)
    if cols is None:
        raise TypeError(
            f"column= selects from a table (pandas, polars, pyarrow or Dask DataFrame); "
            f"{name} is a {type(obj).__name__}"
        )
    many = isinstance(column, list | tuple)
    wanted = list(column) if many else [column]
    if not wanted or not all(isinstance(c, str | int) for c in wanted):
        raise TypeError(f"column must be a column name or a list of names; got {column!r}")
    missing = [c for c in wanted if c not in cols]
    if missing:
        shown = ", ".join(map(str, cols[:20])) + (" ..." if len(cols) > 20 else "")
        raise ValueError(f"{name} has no column {missing[0]!r}; columns: {shown}")
    fam = _family(obj)
    if fam == "pyarrow":
        sel = obj.select(wanted) if many else obj.column(column)
    elif fam == "polars":
        sel = obj.select(wanted) if many else obj.get_column(column)
    else:  # pandas, dask
        sel = obj[wanted] if many else obj[column]
    label = f"{name}[{wanted!r}]" if many else f"{name}[{column!r}]"
    return sel, label


def _to_numpy(obj) -> np.ndarray:
    """An in-memory input (array, list, pandas, polars, pyarrow) as a NumPy array."""
    fam = _family(obj)
    if fam == "pyarrow":
        if hasattr(obj, "column_names"):  # a Table or RecordBatch: one column per field
            cols = [_to_numpy(obj.column(i)) for i in range(obj.num_columns)]
            return np.column_stack(cols) if cols else np.empty((obj.num_rows, 0))
        _check_arrow_type(obj.type)
        return np.asarray(obj.to_numpy(zero_copy_only=False))
    if fam == "polars":
        if hasattr(obj, "columns"):
            return np.column_stack([_to_numpy(obj.get_column(c)) for c in obj.columns])
        if not (obj.dtype.is_numeric() or str(obj.dtype) == "Boolean"):
            raise TypeError(f"data must hold numbers (or bools); got polars dtype {obj.dtype}")
        return np.asarray(obj.to_numpy())
    if fam == "pandas":
        dtypes = list(obj.dtypes) if obj.ndim == 2 else [obj.dtype]
        if all(isinstance(dt, np.dtype) for dt in dtypes):  # no copy for NumPy dtypes
            return np.asarray(obj.to_numpy())
        if all(getattr(dt, "kind", "O") in "biuf" for dt in dtypes):  # nullable: NA -> NaN
            return np.asarray(obj.to_numpy(dtype=float, na_value=np.nan))
        return np.asarray(obj.to_numpy())
    if hasattr(obj, "toarray"):  # scipy.sparse
        return obj.toarray()
    return obj


def _check_arrow_type(t) -> None:
    import pyarrow as pa

    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        raise TypeError(f"data must hold numbers (or bools); got pyarrow type {t}")


def _numeric(data, name: str) -> np.ndarray:
    """``data`` as a NumPy array of bools, integers or floats (objects such as pandas' NA
    become float NaN); strings, other objects and complex numbers are refused. NaN and inf
    are kept (the kernel counts them)."""
    try:
        arr = np.asarray(data)
    except ValueError:
        raise ValueError(f"{name} must be a rectangular array of numbers") from None
    if arr.dtype == object:  # e.g. pandas nullable columns: numbers and NA (-> NaN, refused)
        if any(isinstance(v, str | bytes) for v in arr.ravel()):
            raise TypeError(f"{name} must hold numbers (or bools); got strings")
        try:
            arr = np.asarray(data, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold numbers (or bools); got dtype object") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers (or bools); got dtype {arr.dtype}")
    return arr


def as_array(data, name: str = "data") -> np.ndarray:
    """Any supported in-memory input as a float64 NumPy array (no finiteness check).

    Dask collections are refused here: callers that take them go through
    :func:`statistics` (the conjugate models) or privbayes.sampling.passes (the GLMs:
    docs/data.md §7)."""
    if is_dask(data):
        raise TypeError(
            f"{name}: Dask inputs are not supported here (the conjugate models, "
            "release_query and the GLMs' (X, y) reduce Dask data in the engine); call "
            ".compute() to bring the data into memory if they fit (docs/data.md)"
        )
    return _numeric(_to_numpy(data), name).astype(float)


# -- the pass ----------------------------------------------------------------------------------
def statistics(model: Reduction, data, *, column=None, name: str = "data") -> tuple[Any, int]:
    """Validate ``data`` and compute ``model``'s exact sufficient statistics, in one pass.

    Parameters
    ----------
    model : a conjugate model (it supplies the chunk kernel, :class:`Reduction`).
    data : array_like (NumPy, list), pandas/polars Series or DataFrame, pyarrow
        Array/ChunkedArray/Table, or a Dask array/Series/DataFrame, with rows as records.
    column : None, a column name (a 1-D column of a table) or a list of names (a 2-D block,
        e.g. one-hot columns). A table with a single column needs none.
    name : the argument's name in error messages.

    Returns the model's (stats, n). Raises TypeError for non-numeric data, ValueError for a
    wrong shape or a missing column, and :class:`privbayes.errors.DataError` (a ValueError)
    for values that are non-finite or outside the model's domain: its message and
    attributes give the column, the number of offending rows and the first one (its
    0-based position among all rows, across partitions).
    """
    label = name
    if column is not None:
        data, label = _select(data, column, name)
    else:
        cols = _columns(data)
        if cols is not None and len(cols) == 1:  # a one-column table is that column
            data, label = _select(data, cols[0], name)
        elif cols is not None and 2 not in model._data_ndims:
            raise ValueError(
                f"{name} is a table with {len(cols)} columns; pick one with column='name' "
                f"(columns: {', '.join(map(str, cols[:20]))})"
            )
    n_rules = model._data_rules
    if is_dask(data):
        part = _dask_pass(model, n_rules, data, label)
    else:
        arr = _numeric(_to_numpy(data), label)
        _check_shape(model, arr.shape, label)
        part = _kernel(model, n_rules, arr, label)
    for rule, bad in enumerate(part.bad):
        if bad is not None:
            count, i, value = bad
            where = f"{label}[{i}]"
            if rule == 0 and isinstance(value, list):  # a row: name its first bad cell only
                j = next((k for k, v in enumerate(value) if not math.isfinite(float(v))), 0)
                where, value = f"{label}[{i}, {j}]", value[j]
            if rule == 0:
                shown = value if isinstance(value, list) else repr(value)
                message = (
                    f"{label} must be finite; {where} = {shown} ({count} row(s) with NaN, "
                    "inf or a missing value)"
                )
            else:
                message = model._data_message(rule - 1, where, value, count)
            raise DataError(
                message,
                column=label,
                rule="finite" if rule == 0 else rule - 1,
                count=count,
                index=i,
                value=value,
            )
    return model._data_finish(part.stats, part.n)


def _check_shape(model, shape: tuple, label: str) -> None:
    model._data_shape(shape, label)  # raises for a shape the model cannot take


def _dask_pass(model, n_rules: int, data, label: str) -> _Partial:
    """The kernel on every partition inside the engine, then an ordered tree reduction;
    only the combined partial comes back to the client."""
    import dask
    from dask import delayed

    if hasattr(data, "divisions"):  # a dask DataFrame or Series (arrays have none)
        ndim = data.ndim
        if ndim == 2 and len(data.columns) == 1:
            data = data[data.columns[0]]
            ndim = 1
        dtypes = list(data.dtypes) if ndim == 2 else [data.dtype]
        for dt in dtypes:
            kind = getattr(dt, "kind", "O")
            if kind not in "biuf" and str(dt) not in ("Int64", "Float64", "boolean"):
                raise TypeError(f"{label} must hold numbers (or bools); got dtype {dt}")
        shape = (float("nan"),) + ((len(data.columns),) if ndim == 2 else ())
        _check_shape(model, shape, label)
        blocks = list(data.to_delayed())
    else:  # a dask array
        if data.dtype.kind not in "biuf":
            raise TypeError(f"{label} must hold numbers (or bools); got dtype {data.dtype}")
        _check_shape(model, tuple(data.shape), label)
        if data.ndim == 2 and data.numblocks[1] > 1:
            data = data.rechunk({1: -1})  # whole rows per block
        blocks = list(data.to_delayed().ravel())
    if not blocks:
        return _kernel(model, n_rules, np.zeros(0))
    parts = [delayed(_kernel, pure=True)(model, n_rules, b) for b in blocks]
    while len(parts) > 1:  # an ordered tree: adjacent groups of up to 8
        parts = [
            delayed(_combine_many, pure=True)(*parts[i : i + 8]) for i in range(0, len(parts), 8)
        ]
    (out,) = dask.compute(parts[0])
    return out


# -- files -------------------------------------------------------------------------------------
def _expand(path_or_glob) -> list[str]:
    paths = [os.fspath(p) for p in path_or_glob] if isinstance(path_or_glob, list | tuple) else []
    if not paths:
        p = os.fspath(path_or_glob)
        if os.path.isdir(p):
            paths = sorted(
                os.path.join(p, f) for f in os.listdir(p) if f.endswith((".parquet", ".pq"))
            )
        elif any(ch in p for ch in "*?["):
            paths = sorted(_glob.glob(p))
        else:
            paths = [p]
    if not paths:
        raise FileNotFoundError(f"no files match {os.fspath(path_or_glob)!r}")
    for p in paths:
        if not os.path.isfile(p):
            raise FileNotFoundError(f"no such file: {p}")
    return paths


def _format(paths: list[str]) -> str:
    kinds = {("csv" if p.lower().endswith((".csv", ".csv.gz")) else "parquet") for p in paths}
    if len(kinds) > 1:
        raise ValueError("the files mix CSV and Parquet; read one format at a time")
    return kinds.pop()


def read(path_or_glob, columns=None, *, engine: str = "auto", **options) -> Any:
    """Open Parquet or CSV files lazily: a Dask DataFrame when Dask is installed.

    Parameters
    ----------
    path_or_glob : a file, a directory of ``*.parquet`` files, a glob (``"data/*.parquet"``)
        or a list of files; ``.csv`` (optionally ``.csv.gz``) files are read as CSV with a
        header row, everything else as Parquet.
    columns : None (all) or a list of column names to read (Parquet reads only those).
    engine : "auto" (Dask when installed, else pandas, else pyarrow), "dask", "pandas" or
        "pyarrow" (in memory).
    options : passed to ``dask.dataframe.read_parquet`` / ``read_csv`` (Dask only), e.g.
        ``split_row_groups=True`` for one partition per Parquet row group instead of
        Dask's default (about one per file for files below 256 MiB).

    Returns a ``dask.dataframe.DataFrame`` (nothing is read until a release runs), or a
    pandas DataFrame / pyarrow Table in memory. Pass it to :func:`privbayes.sample` with
    ``column=``. Raises FileNotFoundError when nothing matches, ImportError naming the
    ``privbayes[scale]`` extra when the engine is not installed.
    """
    paths = _expand(path_or_glob)
    fmt = _format(paths)
    cols = list(columns) if columns is not None else None
    if engine not in ("auto", "dask", "pandas", "pyarrow"):
        raise ValueError(f"engine must be 'auto', 'dask', 'pandas' or 'pyarrow'; got {engine!r}")
    order = [engine] if engine != "auto" else ["dask", "pandas", "pyarrow"]
    if options and engine in ("pandas", "pyarrow"):
        raise TypeError(f"options {sorted(options)} are Dask's; engine={engine!r} takes none")
    for eng in order:
        try:
            if eng == "dask":
                import dask.dataframe as dd

                if fmt == "csv":  # gzip cannot be split: one partition per .gz file
                    gz = any(p.lower().endswith(".gz") for p in paths)
                    options.setdefault("blocksize", None if gz else "64MB")
                    return dd.read_csv(paths, usecols=cols, **options)
                return dd.read_parquet(paths, columns=cols, **options)
            if eng == "pandas":
                import pandas as pd

                if fmt == "csv":
                    return pd.concat(
                        [pd.read_csv(p, usecols=cols) for p in paths], ignore_index=True
                    )
                return pd.concat(
                    [pd.read_parquet(p, columns=cols) for p in paths], ignore_index=True
                )
            import pyarrow as pa

            if fmt == "csv":
                import pyarrow.csv as pcsv

                opts = pcsv.ConvertOptions(include_columns=cols) if cols else None
                tables = [pcsv.read_csv(p, convert_options=opts) for p in paths]
            else:
                import pyarrow.parquet as pq

                tables = [pq.read_table(p, columns=cols) for p in paths]
            return pa.concat_tables(tables)
        except ImportError:
            if engine != "auto" or eng == order[-1]:
                raise ImportError(
                    f"reading {fmt} files needs {'Dask' if eng == 'dask' else eng} "
                    "(pip install 'privbayes[scale]')"
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover
