"""Passes over a GLM's rows held in a Dask engine (docs/data.md §7).

A GLM back-end reads its data only through *passes*: per-row-block reductions at a
point (loss sums, gradients, Hessians at w; log-densities of a batch of proposals;
Langevin gradients). In memory a pass is the family's NumPy kernel on the whole array.
For a Dask input the validated rows are persisted once per release on the workers
(:class:`DaskRows`), in row chunks that are multiples of FIT_ROWS (so the exact back-end's
blocks are those of the in-memory path); each pass is one graph: the kernel on every chunk,
then an ordered tree of sums (adjacent groups of up to 8) inside the engine. The client
receives only the combined reduction, and the fixed order makes the result independent
of timing and of which worker ran what.

Validation (row norms, labels, NaN/inf) runs inside the engine before anything is charged,
through privbayes.data.statistics (its offender reporting: column, count, first row).

Nothing here imports Dask at module import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAX_FEATURES", "DaskRows", "GLMRules", "dask_rows", "is_rows"]

GROUP = 8  # partials per node of the ordered reduction tree
FIT_ROWS = 32_768  # privbayes.sampling.exact.FIT_ROWS (the chunks are multiples of it)
MAX_CHUNK_BLOCKS = 8  # at most 8 * FIT_ROWS = 262,144 rows per chunk
MAX_FEATURES = 2**24  # d the GLM certificates cover (the OPS ball's float norm test)


def is_rows(obj) -> bool:
    """True for GLM rows held in a Dask engine (:class:`DaskRows`)."""
    return isinstance(obj, DaskRows)


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def _sum_many(*parts):
    out = parts[0]
    for p in parts[1:]:
        out = _add(out, p)
    return out


def _apply(kernel, block, *args):
    return kernel(np.asarray(block), *args)


@dataclass(eq=False)
class DaskRows:
    """A GLM's prepared rows, persisted on the workers of a Dask engine.

    arr : persisted dask array, shape (n, width), one chunk of whole rows per task, row
        chunks multiples of FIT_ROWS (the last one excepted). Binary logistic: the rows
        u_i = y_i x_i (width d); multinomial: [x_i, y_i] (width d + 1, y_i a class code).
    n, d : rows and features (with the intercept column); ``shape`` is (n, d).
    kind : "binary" or "multinomial".

    Never gathered: :meth:`reduce` runs a kernel on every chunk and returns the ordered sum.
    """

    arr: Any
    n: int
    d: int
    kind: str

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.d)

    def reduce(self, kernel, *args) -> Any:
        """sum over chunks (in row order, by an ordered tree inside the engine) of
        ``kernel(chunk, *args)``; the kernel returns an array, a number, or a tuple of them.
        Array arguments travel once per worker (one key each), not once per task."""
        import dask
        from dask import delayed

        shared = [delayed(a, pure=True) if isinstance(a, np.ndarray | list) else a for a in args]
        blocks = list(self.arr.to_delayed().ravel())
        parts = [delayed(_apply, pure=True)(kernel, b, *shared) for b in blocks]
        while len(parts) > 1:
            parts = [
                delayed(_sum_many, pure=True)(*parts[i : i + GROUP])
                for i in range(0, len(parts), GROUP)
            ]
        (out,) = dask.compute(parts[0])
        return out

    def subsample(self, rows: int) -> DaskRows:
        """The rows (arange(rows) n) // rows (evenly spread; chosen from n alone), persisted
        on the workers in FIT_ROWS-aligned chunks (self when n <= rows)."""
        if self.n <= rows:
            return self
        idx = (np.arange(rows) * self.n) // rows
        sub = self.arr[idx].rechunk({0: _row_chunks(rows), 1: -1}).persist()
        return DaskRows(sub, rows, self.d, self.kind)

    def unpack(self, block: np.ndarray) -> Any:
        """A chunk as the family's kernels take it (binary: u; multinomial: (x, y))."""
        return unpack(self.kind, self.d, block)


def unpack(kind: str, d: int, block: np.ndarray) -> Any:
    """A prepared chunk (rows, width) as a family's kernels take it: binary: the rows u
    (rows, d); multinomial: (x (rows, d), y (rows,) int64)."""
    if kind == "binary":
        return block
    if kind == "xy":  # a real response (linear, Poisson regression): (x, y float)
        return (np.ascontiguousarray(block[:, :d]), np.ascontiguousarray(block[:, d]))
    return (np.ascontiguousarray(block[:, :d]), block[:, d].astype(np.int64))


def _family_block(block, kind, d, family, method, *args):
    return getattr(family, method)(unpack(kind, d, block), *args)


def family_pass(family, method: str, rows: DaskRows, *args) -> Any:
    """``family.method(data, *args)`` summed over the chunks (a row-additive kernel:
    loss_sums, loss, neg_grad_sums, grad_hess)."""
    return rows.reduce(_family_block, rows.kind, rows.d, family, method, *args)


def _row_chunks(n: int) -> tuple[int, ...]:
    """Row chunks from n alone: multiples of FIT_ROWS, about 8 chunks up to 262,144 rows."""
    blocks = math.ceil(n / FIT_ROWS)
    per = max(1, min(MAX_CHUNK_BLOCKS, math.ceil(blocks / 8)))
    size = per * FIT_ROWS
    chunks = [size] * (n // size)
    if n % size:
        chunks.append(n % size)
    return tuple(chunks) or (0,)


# -- validation inside the engine ------------------------------------------------------------
class GLMRules:
    """The chunk kernel (privbayes.data.Reduction) that validates [X | y] rows.

    Rules: 0: the label (binary: in {-1, 0, +1}; multinomial: an integer in 0..K-1);
    1: the row norm of [x, s] (with the intercept column s) above ``threshold``.
    Statistics: binary: (rows with y = 0, rows with y = -1), to refuse a mix of the two
    codings; multinomial: 0.
    """

    _data_ndims = (2,)
    _data_rules = 2

    def __init__(self, d: int, threshold: float, intercept, classes, norm_text: str, family=None):
        self.d = d  # features without the intercept
        # a family with its own response rule (``bad_labels``, ``label_text``): "xy" rows
        self.family = family if hasattr(family, "bad_labels") else None
        self.threshold = threshold
        self.intercept = intercept  # None or the scaling s
        self.classes = classes  # None (binary) or K
        self.norm_text = norm_text

    def _data_shape(self, shape: tuple, name: str) -> None:
        if len(shape) != 2 or shape[1] != self.d + 1:
            raise ValueError(f"{name}: expected rows [X | y] of width {self.d + 1}")

    def _data_chunk(self, arr: np.ndarray):
        x, y = arr[:, : self.d], arr[:, self.d]
        if self.family is not None:
            bad_label, stats = self.family.bad_labels(y), 0
        elif self.classes is None:
            bad_label = ~np.isin(y, [-1.0, 0.0, 1.0])
            stats = (int(np.count_nonzero(y == 0.0)), int(np.count_nonzero(y == -1.0)))
        else:
            bad_label = ~np.isin(y, np.arange(self.classes, dtype=float))
            stats = 0
        if self.intercept is not None:
            x = np.hstack([x, np.full((x.shape[0], 1), self.intercept)])
        over = np.linalg.norm(x, axis=1) > self.threshold
        return stats, [bad_label, over]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        i = where[where.rindex("[") + 1 : -1]
        if rule == 0 and self.family is not None:
            return (
                f"y must hold {self.family.label_text}; y[{i}] = {float(value[-1])!r} "
                f"({count} row(s) outside)"
            )
        if rule == 0:
            want = (
                "{0, 1} or {-1, +1}"
                if self.classes is None
                else f"{{0, ..., {self.classes - 1}}} (n_classes={self.classes})"
            )
            return (
                f"y must hold labels in {want}; y[{i}] = {float(value[-1])!r} "
                f"({count} row(s) with other labels)"
            )
        return (
            f"{count} row(s) of X have norm > {self.norm_text} (first: X[{i}]); scale by a "
            "public bound or clip rows with privbayes.preprocessing"
        )

    def _data_finish(self, stats, n: int):
        return stats, n


def check_rows(model, raw, d0: int) -> None:
    """Validate a GLM's records [X | y] (raw: (n, d0 + 1), a NumPy or a persisted Dask array)
    with privbayes.data.statistics — the same pass, checks and errors in memory and in the
    engine: DataError naming X or y (NaN/inf, then the label, then the row norm against the
    model's threshold, with the intercept column), the count and the first row. Its
    ``value`` is the offending entry, the label, or the row's norm: never the row."""
    from ..data import DataError, statistics

    classes = getattr(model, "n_classes", None)
    s = model.intercept_scaling if model.fit_intercept else None
    norm_text = (
        f"sqrt(c^2 - intercept_scaling^2) = {model.feature_bound:.6g} (the intercept "
        f"column s = {s:g} takes the rest of c = {model.c:g})"
        if s is not None
        else f"c = {model.c:g}"
    )
    family = getattr(model, "family", None)
    rules = GLMRules(d0, model._norm_threshold(d0 + (s is not None)), s, classes, norm_text, family)
    try:
        stats, _ = statistics(rules, raw, name="(X, y)")
    except DataError as exc:
        raise _named(exc, raw, d0, s) from None
    if rules.family is None and classes is None and stats[0] and stats[1]:
        raise _mixed_labels(raw, d0)


def _mixed_labels(raw, d0: int):
    """The DataError of a y that holds both 0 and -1 (two label codings at once, one of them
    perhaps a typo): it names the first 0 and the first -1 by position only. No counts:
    either coding's rows may be the valid records, and their number is a statistic of the
    data (the documented report names offending rows only)."""
    from ..data import DataError, is_dask

    y = raw[:, d0]
    if is_dask(y):
        import dask
        import dask.array as da

        i0, i1 = dask.compute(da.argmax(y == 0.0), da.argmax(y == -1.0))
    else:
        i0, i1 = np.argmax(y == 0.0), np.argmax(y == -1.0)
    return DataError(
        "y must hold labels in {0, 1} or {-1, +1}, one coding; it holds both 0 (the first "
        f"at y[{int(i0)}]) and -1 (the first at y[{int(i1)}]): recode the labels",
        column="y",
        rule=0,
        count=None,
        index=None,
        value=None,
    )


def check_arrays(model, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Validate in-memory (X, y) (float arrays (n, d0) and (n,)) by GLMRules' rules; returns
    X with the intercept column when the model has one (the rows the release uses).

    The rules are evaluated on the whole arrays first (the norms as GLMRules computes them:
    the same floats); only when a record breaks one does the [X | y] pass of
    :func:`check_rows` run, to raise the DataError the Dask path raises for that input."""
    classes = getattr(model, "n_classes", None)
    rows = x
    if model.fit_intercept:  # the certificate's bound c covers the row [x, s]
        rows = np.hstack([x, np.full((x.shape[0], 1), model.intercept_scaling)])
    ok = bool(np.isfinite(x).all() and np.isfinite(y).all())
    family = getattr(model, "family", None)
    if ok and hasattr(family, "bad_labels"):  # a real response: the family's own rule
        ok = not bool(family.bad_labels(y).any())
    elif ok and classes is None:
        ok = bool(np.isin(y, [0.0, 1.0]).all() or np.isin(y, [-1.0, 1.0]).all())
    elif ok:
        ok = bool(np.isin(y, np.arange(classes, dtype=float)).all())
    if ok:
        over = np.linalg.norm(rows, axis=1) > model._norm_threshold(rows.shape[1])
        ok = not bool(over.any())
    if ok:
        return rows
    check_rows(model, np.column_stack([x, y]), x.shape[1])
    raise RuntimeError("privbayes: the GLM data checks disagree; please report this as a bug")


def _named(exc, raw, d0: int, s):
    """The DataError of the [X | y] pass, as the argument it is about: X or y."""
    from ..data import DataError

    i, value, count = exc.index, exc.value, exc.count
    if exc.rule == "finite":
        # the first non-finite entry of row i: only its column position leaves the engine
        row = raw[i]
        row = row.compute() if hasattr(row, "compute") else row
        row = np.ma.filled(np.ma.asarray(row, dtype=float), np.nan)  # masked: missing
        j = int(np.argmax(~np.isfinite(row)))
        column = "X" if j < d0 else "y"
        where = f"X[{i}, {j}]" if j < d0 else f"y[{i}]"
        message = (
            f"{column} must be finite; {where} = {value!r} ({count} row(s) of (X, y) with "
            "NaN, inf or a missing value)"
        )
    elif exc.rule == 0:
        column, message, value = "y", str(exc), float(value[-1])
    else:
        row = np.asarray(value[:d0], dtype=float)
        if s is not None:
            row = np.append(row, s)
        column, message, value = "X", str(exc), float(np.linalg.norm(row))
    return DataError(message, column=column, rule=exc.rule, count=count, index=i, value=value)


def _dask_array(obj, name: str):
    """A Dask array (or DataFrame/Series) as a float64 Dask array with known row chunks."""
    if hasattr(obj, "divisions"):  # a DataFrame or Series
        for dt in list(obj.dtypes) if obj.ndim == 2 else [obj.dtype]:
            if getattr(dt, "kind", "O") not in "biuf" and str(dt) not in (
                "Int64",
                "Float64",
                "boolean",
            ):
                raise TypeError(f"{name} must hold numbers (or bools); got dtype {dt}")
        # float64 in every partition first: pandas' nullable columns hold pd.NA, which
        # becomes NaN (refused by the checks as in memory), not a TypeError from float()
        obj = obj.map_partitions(_float_part, meta=_float_part(obj._meta))
        arr = obj.to_dask_array(lengths=True)
    else:
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold numbers (or bools); got dtype {obj.dtype}")
        arr = obj
        if any(math.isnan(c) for c in arr.chunks[0]):
            arr = arr.compute_chunk_sizes()
    return arr.astype(float)


def _float_part(part):
    """A pandas partition as float64, a missing value (pd.NA in a nullable column) as NaN."""
    import pandas as pd

    values = part.to_numpy(dtype=float, na_value=np.nan)
    if part.ndim == 1:
        return pd.Series(values, index=part.index, name=part.name)
    return pd.DataFrame(values, index=part.index, columns=part.columns)


def dask_rows(model, x, y) -> tuple[DaskRows, int]:
    """Validate (X, y) held in Dask inside the engine, then persist the prepared rows.

    X : Dask array (n, d) or DataFrame of d feature columns; y : Dask array (n,) or
    Series (or a one-column DataFrame). ``model`` is the GLM (its c, intercept, classes).
    Returns (rows, n). Raises TypeError (non-numeric, mixed Dask and in-memory inputs),
    ValueError (shapes), DataError (NaN/inf, labels, row norms: column, count, first row)
    — all before anything is charged.
    """
    import dask.array as da

    from ..data import is_dask

    if not (is_dask(x) and is_dask(y)):
        raise TypeError(
            "X and y must both be Dask collections (or both in memory); got "
            f"{type(x).__name__} and {type(y).__name__}"
        )
    if getattr(y, "ndim", 1) == 2 and hasattr(y, "columns") and len(y.columns) == 1:
        y = y[y.columns[0]]
    xa, ya = _dask_array(x, "X"), _dask_array(y, "y")
    if xa.ndim != 2:
        raise ValueError(f"X must be 2-D, shape (n, d); got {xa.ndim}-D")
    if xa.shape[1] == 0:
        raise ValueError("X has d = 0 features; need at least one")
    if ya.ndim != 1 or ya.shape[0] != xa.shape[0]:
        raise ValueError(f"y must have shape ({xa.shape[0]},) to match X; got {ya.shape}")
    n, d0 = int(xa.shape[0]), int(xa.shape[1])
    if n == 0:
        raise ValueError("X has n = 0 rows: the prior N(0, (n beta)^-1 I) is improper at n = 0")
    d = d0 + (1 if model.fit_intercept else 0)
    if d > MAX_FEATURES:
        raise ValueError(f"X has d = {d} features; at most 2**24 are supported")
    classes = getattr(model, "n_classes", None)
    raw = da.concatenate([xa, ya.rechunk((xa.chunks[0],))[:, None]], axis=1)
    raw = raw.rechunk({0: _row_chunks(n), 1: -1}).persist()  # one read of the source
    check_rows(model, raw, d0)
    kind = getattr(getattr(model, "family", None), "kind", "binary")
    if classes is not None:
        kind = "multinomial"
    s = model.intercept_scaling if model.fit_intercept else None
    width = d if kind == "binary" else d + 1
    prepared = raw.map_blocks(
        _prepare_block, kind, d0, s, dtype=float, chunks=(raw.chunks[0], (width,))
    ).persist()
    del raw
    return DaskRows(prepared, n, d, kind), n


def _prepare_block(block: np.ndarray, kind: str, d0: int, s) -> np.ndarray:
    """[X | y] -> binary: u = y x (with [x, s]), y -> {-1, +1}; multinomial: [x, s, y]."""
    x, y = block[:, :d0], block[:, d0]
    if s is not None:
        x = np.hstack([x, np.full((x.shape[0], 1), s)])
    if kind == "binary":
        return np.ascontiguousarray(x * np.where(y > 0, 1.0, -1.0)[:, None])
    return np.ascontiguousarray(np.hstack([x, y[:, None]]))  # multinomial and "xy"
