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

Non-finite values (NaN, inf, missing: None, pandas' NA, a masked entry) and values outside
the model's declared domain are refused with an error naming the column, the number of
offending rows and the first offending row, before anything is released or charged to a
ledger.

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


def _refuse_lazy(obj, name: str) -> None:
    """A polars LazyFrame is a query, not data: refused with a TypeError (running it here
    would hold its whole result in memory without the caller asking; docs/data.md §1)."""
    if _family(obj) == "polars" and type(obj).__name__ == "LazyFrame":
        raise TypeError(
            f"{name} is a polars LazyFrame (a query, not data); call .collect() and pass the "
            "DataFrame it returns"
        )


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


def _no_names(count: int) -> str:
    """What an error says about a table's columns: their number, never their names (a CSV
    file read without its header row takes its first record for the names, and a first
    record of words cannot be told from a header: docs/data.md §2)."""
    return (
        f"it has {count} column(s), not listed here (a table read from a CSV file without "
        "its header row would show its first record as names); see the table's columns"
    )


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
        raise ValueError(f"{name} has no column {missing[0]!r}; {_no_names(len(cols))}")
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


def _unmasked(data):
    """A NumPy masked array (or a list or tuple that holds some) with every masked entry
    as NaN, so that it is refused like any missing value; other inputs unchanged.

    ``np.asarray`` drops a mask and keeps the hidden values, which would then count as
    records (n and the statistics would include entries the caller had masked out). An
    all-False mask hides nothing: such an array is its data."""
    if isinstance(data, list | tuple):
        if not any(isinstance(v, np.ma.MaskedArray) for v in data):
            return data  # np.ma.masked inside a list already becomes NaN in np.asarray
        data = np.ma.asarray(data)
    elif not isinstance(data, np.ma.MaskedArray):
        return data
    mask = np.ma.getmaskarray(data)
    if not mask.any():
        return np.ma.getdata(data)
    kind = data.dtype.kind
    return np.ma.filled(data.astype(float if kind in "biuf" else object), np.nan)


def _numeric(data, name: str) -> np.ndarray:
    """``data`` as a NumPy array of bools, integers or floats (objects such as pandas' NA
    and the masked entries of a NumPy masked array become float NaN); strings, other
    objects and complex numbers are refused. NaN and inf are kept (the kernel counts them)."""
    try:
        arr = np.asarray(_unmasked(data))
    except ValueError:
        raise ValueError(f"{name} must be a rectangular array of numbers") from None
    if arr.dtype == object:  # e.g. pandas nullable columns: numbers and NA (-> NaN, refused)
        if any(isinstance(v, str | bytes) for v in arr.ravel()):
            raise TypeError(f"{name} must hold numbers (or bools); got strings")
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold numbers (or bools); got dtype object") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers (or bools); got dtype {arr.dtype}")
    return arr


def as_array(data, name: str = "data") -> np.ndarray:
    """Any supported in-memory input as a float64 NumPy array (no finiteness check).

    Dask collections are refused here: callers that take them go through
    :func:`statistics` (the conjugate models) or privbayes.glm.passes (the GLMs:
    docs/data.md §7)."""
    _refuse_lazy(data, name)
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
    _refuse_lazy(data, name)
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
                "(see the table's columns)"
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


# -- CSV files: one set of rules for every reader (docs/data.md §6) --------------------------
class CSVError(DataError):
    """A CSV file that breaks the rules of docs/data.md §6: a record with more or fewer fields
    than the header, a blank or repeated header, a quote left open, text that is not UTF-8,
    files of one glob with different headers, a blank line where the command line reads a
    column. The message names the file and the line, never a record value.

    Attributes: ``path``, ``line`` (1-based line of the file where the record starts; None
    for the whole file) and DataError's: ``column`` the file, ``rule`` "csv", ``count``,
    ``index`` and ``value`` None. Raised before anything is released or charged (by a Dask
    worker during the release's pass, and then on the client as itself: it pickles)."""

    def __init__(self, message: str, path: str, line: int | None = None) -> None:
        super().__init__(message, column=path, rule="csv", count=None, index=None, value=None)
        self.path, self.line = path, line

    def __reduce__(self):
        return (type(self), (self.args[0], self.path, self.line))


def _fields(k: int) -> str:
    return f"{k} field" + ("" if k == 1 else "s")


def _csv_bytes(path: str) -> bytes:
    """The bytes of a CSV file (gunzipped when its name ends in .gz), without a UTF-8
    byte-order mark (Excel writes one). Reads pipes and devices too (one read)."""
    import codecs

    with open(path, "rb") as fh:
        raw = fh.read()
    if path.lower().endswith(".gz"):
        import gzip
        import zlib

        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):  # gzip's messages quote the file's bytes
            raise CSVError(f"{path} is not a complete gzip file", path) from None
    return raw[len(codecs.BOM_UTF8) :] if raw.startswith(codecs.BOM_UTF8) else raw


def _csv_text(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # its message quotes a byte of the file
        raise CSVError(f"{path} is not a UTF-8 text CSV file", path) from None


def _csv_rows(text: str, path: str):
    """(the record's first line, its fields) for every record of a CSV text, the header
    first. Python's csv module with its strict rules: a quote left open to the end of the
    file and text after a closing quote are refused (CSVError naming the line), never read
    as some other split of the fields. A quoted field may hold line breaks; line numbers
    count every line."""
    import csv
    import io

    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    while True:
        first = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise _csv_error(exc, path, first, reader.line_num) from None
        yield first, row


def _csv_error(exc, path: str, first: int, last: int) -> CSVError:
    """csv's error (its messages quote no data) as one line naming the file and line."""
    import csv

    text = str(exc)
    if "unexpected end of data" in text:
        what = f"line {first} of {path} opens a quote that is never closed (an unbalanced '\"')"
    elif "expected after" in text:
        what = f"line {last} of {path} has text after a closing quote in a field"
    elif "field larger than field limit" in text:
        what = (
            f"line {first} of {path} has a field longer than {csv.field_size_limit()} "
            "characters (an unbalanced '\"'?)"
        )
    else:
        what = f"line {last} of {path} is not valid CSV ({text})"
    return CSVError(
        f"{what}; fix the quotes (a field that holds a comma, a quote or a line break is "
        'quoted, and a quote inside it is doubled: "a ""b"", c")',
        path,
        first,
    )


def _blank(row: list[str]) -> bool:
    """An empty line ([] from csv.reader) or one of spaces only (one blank field)."""
    return not row or (len(row) == 1 and not row[0].strip())


def _csv_header(row: list[str] | None, path: str) -> list[str]:
    """The column names of a header row (stripped of surrounding spaces); refuses an empty
    file, a blank first line and a repeated name (named by field positions: a file without
    its header row has a record there, and messages never quote one)."""
    if row is None:
        raise CSVError(f"{path} is empty (a header row is expected)", path)
    if _blank(row):
        raise CSVError(
            f"line 1 of {path} is blank (a header row of column names is expected)", path, 1
        )
    header = [h.strip() for h in row]
    seen: dict[str, int] = {}
    for k, h in enumerate(header, start=1):
        if h in seen:
            raise CSVError(
                f"line 1 of {path}, the header, repeats a column name (fields {seen[h]} and "
                f"{k}); a header row of distinct column names is expected (is the header row "
                "missing?)",
                path,
                1,
            )
        seen[h] = k
    return header


def _csv_record(line: int, row: list[str], width: int, path: str, blank_ok: bool) -> None:
    """Refuses a record whose number of fields is not the header's (the cells may have
    shifted: never guessed), and a blank line unless ``blank_ok`` (a record of missing
    values, refused later by a release when it reads the column)."""
    if _blank(row):
        if blank_ok:
            return
        raise CSVError(
            f"line {line} of {path} is blank, a record with no value (polars and pyarrow "
            "write a missing value of a one-column CSV as an empty line); fill in the value "
            "or delete the line",
            path,
            line,
        )
    if len(row) != width:
        raise CSVError(
            f"line {line} of {path} has {_fields(len(row))} but the header has {width}; fix "
            "the row (quote cells that contain commas)",
            path,
            line,
        )


def _csv_header_of(path: str) -> list[str]:
    """The header of a CSV file, reading no more of it than the header's lines (a gzip
    file: all of it)."""
    import codecs

    if path.lower().endswith(".gz"):
        first = next(_csv_rows(_csv_text(_csv_bytes(path), path), path), None)
        return _csv_header(None if first is None else first[1], path)
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    text = ""
    with open(path, "rb") as fh:
        while True:
            more = fh.read(1 << 16)
            try:
                text += decoder.decode(more, final=not more)
            except UnicodeDecodeError:
                raise CSVError(f"{path} is not a UTF-8 text CSV file", path) from None
            whole = text if not more else text[: text.rfind("\n") + 1]
            if not whole and more:
                continue  # no line break yet
            try:
                first = next(_csv_rows(whole, path), None)
            except CSVError:
                if not more:
                    raise
                continue  # a quoted header field runs past what was read
            return _csv_header(None if first is None else first[1], path)


def _same_header(own: list[str], header: list[str] | None, path: str) -> None:
    if header is not None and own != header:
        raise CSVError(
            f"the header (line 1) of {path} is not the first file's ({_fields(len(own))}, "
            f"against {len(header)}, or other names); the files read together must share one "
            "header row",
            path,
            1,
        )


# Bytes that are not visible text: ASCII whitespace as str.strip() sees it, and every byte of
# a non-ASCII character (it may be a space too, such as U+00A0).
_INVISIBLE = np.zeros(256, dtype=np.int32)
_INVISIBLE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = 1
_INVISIBLE[128:] = 1
_PLAIN_CHUNK = 1 << 22  # bytes per block of the line count (bounded temporaries)


def _plain(raw: bytes) -> bool:
    """No quote, no NUL, and every CR part of a CRLF: csv splits such a text at commas and
    line ends only, which NumPy can count (:func:`_plain_records`)."""
    return b'"' not in raw and b"\x00" not in raw and raw.count(b"\r") == raw.count(b"\r\n")


def _plain_records(raw: bytes, start: int, width: int) -> int | None:
    """The number of records after the header (which ends at byte ``start``) of a plain
    file (:func:`_plain`) when csv's rules certainly hold: every line has ``width`` fields
    (width - 1 commas), a one-column file's lines each hold a visible character (no blank
    record) and no field is longer than csv's limit. None when a line may break a rule:
    the csv module then reads the file record by record and names the line. Vectorised
    (about 1 GB/s against csv's 25 MB/s), in blocks of whole lines."""
    import csv

    limit = csv.field_size_limit()
    records, pos, size = 0, start, len(raw)
    view = memoryview(raw)
    while pos < size:
        stop = min(size, pos + _PLAIN_CHUNK)
        if stop < size:  # end the block after a line break
            cut = raw.rfind(b"\n", pos, stop)
            cut = cut if cut >= 0 else raw.find(b"\n", stop)
            stop = size if cut < 0 else cut + 1
        block = np.frombuffer(view[pos:stop], dtype=np.uint8)
        # one segment per line, its line break included: none is empty (reduceat needs that)
        starts = np.concatenate(([0], np.flatnonzero(block[:-1] == 10) + 1))
        commas = np.add.reduceat((block == 44).astype(np.int32), starts)
        if np.any(commas != width - 1):
            return None
        if np.diff(starts, append=block.size).max() > limit:
            return None
        if width == 1:
            visible = np.diff(starts, append=block.size) - np.add.reduceat(
                _INVISIBLE[block], starts
            )
            if np.any(visible == 0):
                return None
        records += starts.size
        pos = stop
    return records


def _csv_checked(path: str, header: list[str] | None, blank_ok: bool):
    """Reads one CSV file and checks it by the rules (docs/data.md §6).

    Returns (bytes, header, records): the UTF-8 bytes without a byte-order mark (lines of
    spaces only, blank records, made empty so that every parser reads them as missing),
    the file's header and its number of records. ``header``: the header the file must have
    (the first file's, for a glob), or None. Raises CSVError."""
    raw = _csv_bytes(path)
    text = _csv_text(raw, path)
    if _plain(raw):  # no quotes: the header is the first line, and lines can be counted
        cut = raw.find(b"\n") + 1 or len(raw)
        first = next(_csv_rows(raw[:cut].decode("utf-8"), path), None)
        own = _csv_header(None if first is None else first[1], path)
        _same_header(own, header, path)
        records = _plain_records(raw, cut, len(own))
        if records is not None:
            return raw, own, records
    rows = _csv_rows(text, path)  # the record-by-record rules, with the line of any failure
    first = next(rows, None)
    own = _csv_header(None if first is None else first[1], path)
    _same_header(own, header, path)
    width, records, spaces = len(own), 0, []
    for line, row in rows:
        _csv_record(line, row, width, path, blank_ok)
        records += 1
        if row and _blank(row) and row[0]:
            spaces.append(line)
    if spaces:  # a record of spaces only would be read as text, not as missing
        import re

        lines = re.split(r"(\r\n|\r|\n)", text)  # csv's line breaks, kept at odd positions
        for line in spaces:
            lines[2 * (line - 1)] = ""
        raw = "".join(lines).encode("utf-8")
    return raw, own, records


def _csv_part(
    path: str,
    columns: list[str] | None = None,
    *,
    header: list[str] | None = None,
    dtypes: dict | None = None,
    text: bool = False,
    blank_ok: bool = True,
):
    """One CSV file as a pandas DataFrame (a partition of :func:`read`'s Dask DataFrame),
    checked by the rules first (:func:`_csv_checked`), then parsed by pandas with its first
    column never taken for an index. ``columns``: the columns to return, in order (Dask
    pushes a selection down to here). ``dtypes``: the types of an empty file's columns.
    ``text``: every cell as its text (no conversion; empty cells as "")."""
    import io

    import pandas as pd

    raw, own, records = _csv_checked(path, header, blank_ok)
    options = {"dtype": str, "keep_default_na": False} if text else {}
    try:
        frame = pd.read_csv(
            io.BytesIO(raw),
            header=0,
            names=own,
            index_col=False,  # a longer first record never makes an index (it is refused)
            usecols=columns,
            skip_blank_lines=False,  # a blank line: a record of missing values
            encoding="utf-8",
            **options,
        )
    except ValueError:  # pandas' messages (ParserError too) may quote a record
        raise CSVError(
            f"{path}: pandas cannot parse the file (its message is left out: it may quote a "
            "record)",
            path,
        ) from None
    if len(frame) != records:  # never expected: the two parsers split records alike
        raise CSVError(
            f"{path}: pandas and Python's csv module split its records differently; please "
            "report this file's layout as a privbayes bug",
            path,
        )
    if columns is not None:
        frame = frame[list(columns)]
    if not records and dtypes is not None:
        frame = frame.astype({c: dtypes[c] for c in frame.columns if c in dtypes})
    return frame


def _csv_meta(path: str, header: list[str], columns, text: bool):
    """The empty frame Dask needs before any partition is read: pandas' types for a sample of
    the first file (its first 1,000 records), float64 for a column without values."""
    import warnings

    import pandas as pd

    options = {"dtype": str, "keep_default_na": False} if text else {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. a longer record (the partition refuses it)
            sample = pd.read_csv(
                path,
                header=0,
                names=header,
                index_col=False,
                usecols=columns,
                skip_blank_lines=False,
                nrows=1000,
                encoding="utf-8-sig",
                **options,
            )
    except Exception:  # the partition refuses the file with the rule it breaks
        sample = pd.DataFrame({c: pd.Series(dtype=str if text else float) for c in header})
    if columns is not None:
        sample = sample[list(columns)]
    if not text:
        empty = [c for c in sample.columns if sample[c].isna().all()]
        sample = sample.astype(dict.fromkeys(empty, "float64"))
    return sample.iloc[:0]


def _check_columns(columns, header: list[str], path: str) -> None:
    for c in columns or ():
        if c not in header:
            raise ValueError(
                f"no column {c!r} in {path}: its header (line 1) has {_fields(len(header))} "
                f"(see them with: {_head_command(path)}); a file without a header row would "
                "show its first record there, so names are not listed"
            )


def _head_command(path: str) -> str:
    import shlex

    quoted = shlex.quote(path)
    return f"gzip -dc {quoted} | head -1" if path.lower().endswith(".gz") else f"head -1 {quoted}"


def _read_csv(
    paths: list[str], cols, engine: str, *, text: bool = False, blank_ok: bool = True
) -> Any:
    """CSV files by the rules of docs/data.md §6, with every engine: Dask (one partition per
    file, read and checked on the workers), pandas or pyarrow (in memory)."""
    order = [engine] if engine != "auto" else ["dask", "pandas", "pyarrow"]
    header = _csv_header_of(paths[0])
    _check_columns(cols, header, paths[0])
    for eng in order:
        try:
            if eng == "dask":
                import dask.dataframe as dd

                meta = _csv_meta(paths[0], header, cols, text)
                return dd.from_map(
                    _csv_part,
                    paths,
                    columns=cols,
                    header=header,
                    dtypes=dict(meta.dtypes),
                    text=text,
                    blank_ok=blank_ok,
                    meta=meta,
                    label="privbayes-read-csv",
                )
            if eng == "pandas":
                import pandas as pd

                meta = _csv_meta(paths[0], header, cols, text)
                kw = {"header": header, "dtypes": dict(meta.dtypes), "text": text}
                parts = [_csv_part(p, cols, blank_ok=blank_ok, **kw) for p in paths]
                return pd.concat(parts, ignore_index=True)
            return _read_csv_arrow(paths, cols, header, blank_ok)
        except ImportError:
            if engine != "auto" or eng == order[-1]:
                raise ImportError(
                    f"reading csv files needs {'Dask' if eng == 'dask' else eng} "
                    "(pip install 'privbayes[scale]')"
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _read_csv_arrow(paths: list[str], cols, header: list[str], blank_ok: bool):
    import io

    import pyarrow as pa
    import pyarrow.csv as pcsv

    tables = []
    for p in paths:
        raw, own, records = _csv_checked(p, header, blank_ok)
        try:
            table = pcsv.read_csv(
                io.BytesIO(raw),
                read_options=pcsv.ReadOptions(column_names=own, skip_rows=1),
                parse_options=pcsv.ParseOptions(ignore_empty_lines=False),  # a null row
                convert_options=pcsv.ConvertOptions(include_columns=cols),
            )
        except pa.ArrowInvalid as exc:
            raise ValueError(f"{p}: {_arrow_csv_error(exc)}") from None
        if table.num_rows != records:
            raise CSVError(
                f"{p}: pyarrow and Python's csv module split its records differently; please "
                "report this file's layout as a privbayes bug",
                p,
            )
        tables.append(table)
    try:  # an empty file's columns (type null) take the other files' types
        table = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise ValueError(
            "the CSV files' columns have different types (numbers in one, text in another?)"
        ) from None
    for i, field in enumerate(table.schema):
        if pa.types.is_null(field.type):  # no file has a value there: missing numbers
            table = table.set_column(i, field.name, table.column(i).cast(pa.float64()))
    return table


# -- files -------------------------------------------------------------------------------------
def _arrow_csv_error(exc) -> str:
    """pyarrow's CSV error without the record it quotes ("Expected 2 columns, got 3: 1,0.2,9"
    or "invalid value 'abc'"): messages carry positions and counts, never record values."""
    import re

    text = str(exc)
    shape = re.search(r"(Row #\d+: )?Expected \d+ columns?, got \d+", text)
    if shape:
        return f"not valid CSV: {shape.group(0)} (fix the row)"
    if "conversion error" in text.lower():
        return (
            "not valid CSV for pyarrow: a cell does not fit the type inferred for its "
            "column (text in a numeric column?)"
        )
    return "not valid CSV for pyarrow (its message is left out: it may quote a record)"


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
        if not os.path.exists(p):
            raise FileNotFoundError(f"no such file: {p}")
        if not os.path.isfile(p):
            raise ValueError(
                f"{p} is not a regular file (a directory, a pipe such as <(...), or a device): "
                "a lazy read opens the file later, perhaps more than once and on another "
                "machine; save the data to a file"
            )
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
        or a list of files; ``.csv`` and ``.csv.gz`` files are read as CSV, everything else
        as Parquet.
    columns : None (all) or a list of column names to read (Parquet reads only those).
    engine : "auto" (Dask when installed, else pandas, else pyarrow), "dask", "pandas" or
        "pyarrow" (in memory).
    options : passed to ``dask.dataframe.read_parquet`` (Dask only), e.g.
        ``split_row_groups=True`` for one partition per Parquet row group instead of
        Dask's default (about one per file for files below 256 MiB). CSV files take none.

    CSV files are read by the command line's rules (docs/data.md §6), whatever the engine: a
    header row of distinct names (surrounding spaces removed), then records with exactly as
    many fields as the header (a record with more or fewer is refused, never re-aligned:
    pandas would make a longer first record's first field the index and shift every
    value), closed quotes, UTF-8 text; the files of a glob share one header row. A blank
    line is a record of missing values (as polars and pyarrow write a null in a one-column
    CSV), which a release then refuses; it is never skipped (that would change n). A
    header-only file has no records. With Dask each file is one partition, read and
    checked on a worker when a release runs (a file's line numbers, and whether a line
    break is inside quotes, depend on all of it before).

    Returns a ``dask.dataframe.DataFrame`` (nothing but the first file's header and first
    records is read until a release runs), or a pandas DataFrame / pyarrow Table in
    memory. Pass it to :func:`privbayes.sample` with ``column=``. Raises
    FileNotFoundError when nothing matches, ValueError for a path that is not a regular
    file or a column that is not in the header, TypeError for options with CSV files,
    ImportError naming the ``privbayes[scale]`` extra when the engine is not installed,
    and :class:`CSVError` (a :class:`privbayes.DataError`) naming the file and the line
    for a CSV file that breaks the rules (with Dask, from the release that reads it,
    before anything is charged).
    """
    paths = _expand(path_or_glob)
    fmt = _format(paths)
    cols = list(columns) if columns is not None else None
    if engine not in ("auto", "dask", "pandas", "pyarrow"):
        raise ValueError(f"engine must be 'auto', 'dask', 'pandas' or 'pyarrow'; got {engine!r}")
    if options and (engine in ("pandas", "pyarrow") or fmt == "csv"):
        raise TypeError(
            f"options {sorted(options)} are Dask's read_parquet options; "
            + (f"engine={engine!r} takes none" if fmt != "csv" else "CSV files take none")
        )
    if fmt == "csv":
        return _read_csv(paths, cols, engine)
    order = [engine] if engine != "auto" else ["dask", "pandas", "pyarrow"]
    for eng in order:
        try:
            if eng == "dask":
                import dask.dataframe as dd

                return dd.read_parquet(paths, columns=cols, **options)
            if eng == "pandas":
                import pandas as pd

                return pd.concat(
                    [pd.read_parquet(p, columns=cols) for p in paths], ignore_index=True
                )
            import pyarrow as pa
            import pyarrow.parquet as pq

            return pa.concat_tables([pq.read_table(p, columns=cols) for p in paths])
        except ImportError:
            if engine != "auto" or eng == order[-1]:
                raise ImportError(
                    f"reading {fmt} files needs {'Dask' if eng == 'dask' else eng} "
                    "(pip install 'privbayes[scale]')"
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover
