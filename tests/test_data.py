"""The data seam (privbayes.data, docs/data.md): exact sums against rational arithmetic,
table inputs (pandas, polars, pyarrow) against NumPy, column selection and error reports,
Parquet/CSV reading, and a privbayes without the scale extras."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import privbayes as pb
from privbayes.data import EXACT_SUM_BITS, exact_sum, fraction_to_float

ROOT = Path(__file__).resolve().parents[1]


def test_exact_sum_is_the_rational_sum(rng):
    tiny = np.array([5e-324, -5e-324, 2.2250738585072014e-308, 1e-310])
    for values in (
        rng.normal(size=1000) * 10.0 ** rng.integers(-300, 300, 1000),
        rng.uniform(-1, 1, 5000),
        np.r_[1e300, 1.0, -1e300, 2.0**-1074, tiny],
        np.zeros(3),
        np.zeros(0),
    ):
        truth = sum((Fraction(v) for v in values), Fraction(0))
        total = exact_sum(values)
        assert Fraction(total, 2**EXACT_SUM_BITS) == truth
        assert fraction_to_float(total) == math.fsum(values)  # both correctly rounded


def test_exact_sum_blocks_and_order_do_not_matter(rng):
    x = rng.uniform(-3, 3, 9000)
    assert exact_sum(x) == exact_sum(x[:4001]) + exact_sum(x[4001:]) == exact_sum(x[::-1])


MODELS = [
    (pb.BetaBernoulli(), lambda r: (r.random(500) < 0.4).astype(float)),
    (pb.DirichletCategorical(np.ones(3)), lambda r: r.integers(0, 3, 500).astype(float)),
    (pb.GammaPoisson(1.0, 1.0, 4), lambda r: r.integers(0, 5, 500).astype(float)),
    (pb.NormalKnownVariance(0.5, 1.0, 1.0, -1.0, 3.0), lambda r: r.uniform(-1, 3, 500)),
]


def _tables(x: np.ndarray):
    """(data, column) pairs holding ``x`` in every installed table library."""
    out = [(x, None), (x.tolist(), None)]
    try:
        import pandas as pd

        frame = pd.DataFrame({"v": x, "other": np.arange(x.size)})
        out += [(frame, "v"), (frame["v"], None), (frame[["v"]], None)]
    except ImportError:
        pass
    try:
        import polars as pl

        frame = pl.DataFrame({"v": x, "other": np.arange(x.size)})
        out += [(frame, "v"), (frame["v"], None)]
    except ImportError:
        pass
    try:
        import pyarrow as pa

        out += [
            (pa.table({"v": x, "other": np.arange(x.size)}), "v"),
            (pa.array(x), None),
            (pa.chunked_array([x[:123], x[123:]]), None),
        ]
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("model,make", MODELS, ids=lambda v: getattr(v, "__name__", None))
def test_table_inputs_give_the_numpy_draw(model, make):
    x = make(np.random.default_rng(1))
    want = pb.sample(model, x, 2.0, 0.5, rng=4)
    for data, column in _tables(x):
        got = pb.sample(model, data, 2.0, 0.5, rng=4, column=column)
        assert np.array_equal(got.value, want.value), type(data)


def test_integer_and_bool_columns():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"b": [True, False, True], "c": np.array([0, 3, 2], dtype=np.int32)})
    assert pb.BetaBernoulli()._statistics(frame["b"])[1] == 3
    assert pb.GammaPoisson(1.0, 1.0, 3)._statistics(frame["c"]) == (5, 3)


def test_missing_values_and_strings_are_refused():
    pd = pytest.importorskip("pandas")
    nullable = pd.Series([1, None, 0, None], dtype="Int64")
    with pytest.raises(ValueError, match=r"data\[1\] = nan \(2 row\(s\) with NaN"):
        pb.sample(pb.BetaBernoulli(), nullable, 2.0, 0.5)
    with pytest.raises(TypeError, match="numbers"):
        pb.sample(pb.BetaBernoulli(), pd.Series(["1", "0"]), 2.0, 0.5)
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(ValueError, match=r"data\['v'\]\[0\] = nan"):
        pb.sample(pb.BetaBernoulli(), pa.table({"v": [None, 1]}), 2.0, 0.5, column="v")
    with pytest.raises(TypeError, match="pyarrow type string"):
        pb.sample(pb.BetaBernoulli(), pa.array(["1"]), 2.0, 0.5)


def test_column_selection_errors_and_reports():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [0.0, 1.0, 3.0, 2.0], "b": [1.0, 0.0, 0.0, 1.0]})
    with pytest.raises(ValueError, match="2 columns; pick one with column='name'"):
        pb.sample(pb.BetaBernoulli(), frame, 2.0, 0.5)
    with pytest.raises(ValueError, match=r"no column 'z'; it has 2 column\(s\), not listed"):
        pb.sample(pb.BetaBernoulli(), frame, 2.0, 0.5, column="z")
    with pytest.raises(ValueError, match=r"data\['a'\]\[2\] = 3.0 \(2 value\(s\) outside"):
        pb.sample(pb.BetaBernoulli(), frame, 2.0, 0.5, column="a")
    with pytest.raises(ValueError, match=r"values\['a'\]\[2\] = 3.0 \(2 outside\)"):
        pb.release_query(frame, 2.0, 0.5, column="a")
    with pytest.raises(TypeError, match="column= selects from a table"):
        pb.sample(pb.BetaBernoulli(), np.zeros(3), 2.0, 0.5, column="a")
    with pytest.raises(TypeError, match="column= applies to the conjugate models"):
        pb.sample(pb.BayesianLogisticRegression(), frame, 2.0, 0.5, column="a")


def test_glms_take_tables_in_memory_and_refuse_mixed_dask():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(40, 2)), 0.9)
    y = (X[:, 0] > 0).astype(float)
    model = pb.BayesianLogisticRegression(beta=0.1, backend="imh")
    a = pb.sample(model, (X, y), 2.0, 1.0, rng=0)
    b = pb.sample(model, (pd.DataFrame(X), pd.Series(y)), 2.0, 1.0, rng=0)
    assert np.array_equal(a.value, b.value)
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="X and y must both be Dask collections"):
        pb.sample(model, (da.from_array(X), y), 2.0, 1.0)  # (tests/test_dask_glm.py: both)


def test_dask_chunking_does_not_change_the_statistics():
    da = pytest.importorskip("dask.array")
    import dask

    x = np.random.default_rng(2).uniform(-1, 3, 3001)
    model = pb.NormalKnownVariance(0.5, 1.0, 1.0, -1.0, 3.0)
    want = model._statistics(x)
    with dask.config.set(scheduler="synchronous"):
        for chunks in (1, 7, 1000, 3001):
            assert model._statistics(da.from_array(x, chunks=chunks)) == want
        assert model._statistics(da.zeros(0, chunks=1)) == (0.0, 0)


def test_read_parquet_glob_and_csv(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    x = (np.random.default_rng(3).random(1000) < 0.5).astype(float)
    for i in range(3):
        part = pd.DataFrame({"bit": x[i::3], "noise": 0.5})
        part.to_parquet(tmp_path / f"p{i}.parquet")
        part.to_csv(tmp_path / f"c{i}.csv", index=False)
    want = pb.sample(pb.BetaBernoulli(), np.r_[x[0::3], x[1::3], x[2::3]], 2.0, 0.5, rng=0)
    for source in (tmp_path / "p*.parquet", tmp_path, tmp_path / "c*.csv"):
        for engine in ("auto", "pandas", "pyarrow"):
            table = pb.data.read(source, columns=["bit"], engine=engine)
            got = pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, rng=0, column="bit")
            assert got.value == want.value and got.n == 1000
    gz = tmp_path / "gz"
    gz.mkdir()
    pd.DataFrame({"bit": x}).to_csv(gz / "all.csv.gz", index=False)
    for engine in ("auto", "pandas", "pyarrow"):
        table = pb.data.read(str(gz / "*.csv.gz"), engine=engine)
        (got, n), (want_stats, _) = (pb.BetaBernoulli()._statistics(d) for d in (table, x))
        assert np.array_equal(got, want_stats) and n == x.size
    with pytest.raises(FileNotFoundError, match="no files match"):
        pb.data.read(tmp_path / "none*.parquet")
    with pytest.raises(ValueError, match="mix CSV and Parquet"):
        pb.data.read([tmp_path / "p0.parquet", tmp_path / "c0.csv"])


BLOCKED = """
import sys
for name in ("dask", "distributed", "pandas", "polars", "pyarrow"):
    sys.modules[name] = None  # import fails as if not installed
import numpy as np, privbayes as pb
r = pb.sample(pb.GammaPoisson(1.0, 1.0, 3), np.array([0, 1, 3]), 2.0, 0.5, rng=0)
q = pb.release_query([0.2, 0.9], 2.0, 0.5, rng=0)
assert r.n == 3 and q.n == 2
try:
    pb.data.read("{path}")
except ImportError as exc:
    assert "privbayes[scale]" in str(exc), exc
else:
    raise AssertionError("read() without engines")
print("ok")
"""


def test_everything_else_works_without_the_scale_extras(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = BLOCKED.replace("{path}", str(path))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_first_offender_and_count_across_in_memory_blocks():
    x = np.zeros(2_500_000)  # three blocks of the in-memory pass
    x[[2_100_000, 2_200_000, 2_499_999]] = [4.0, 5.0, 0.5]
    with pytest.raises(ValueError, match=r"data\[2100000\] = 4.0 \(3 value\(s\) outside"):
        pb.BetaBernoulli()._statistics(x)
    x[[1_000_000, 2_400_000]] = [np.inf, np.nan]
    with pytest.raises(ValueError, match=r"data\[1000000\] = inf \(2 row\(s\)"):
        pb.BetaBernoulli()._statistics(x)


def test_dask_reports_the_global_first_offender_for_any_chunking():
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    import dask

    rng = np.random.default_rng(5)
    model = pb.GammaPoisson(1.0, 1.0, 3)
    with dask.config.set(scheduler="synchronous"):
        for _ in range(5):
            x = rng.integers(0, 4, 2000).astype(float)
            bad = np.sort(rng.choice(2000, size=rng.integers(1, 6), replace=False))
            x[bad] = 4 + rng.integers(0, 3, bad.size)
            cuts = np.sort(rng.choice(np.arange(1, 2000), size=rng.integers(1, 12), replace=False))
            chunks = tuple(np.diff(np.r_[0, cuts, 2000]).tolist())
            match = rf"data\[{bad[0]}\] = {float(x[bad[0]])!r} \({bad.size} above\)"
            with pytest.raises(ValueError, match=match):
                model._statistics(da.from_array(x, chunks=(chunks,)))
            frame = dd.from_pandas(pd.DataFrame({"c": x}), npartitions=len(chunks))
            with pytest.raises(ValueError, match=match.replace("data", r"data\['c'\]")):
                model._statistics(frame)  # a one-column table needs no column=


# -- masked arrays, header-less tables, blank CSV lines (audit: "nothing about a release may
# depend on data the certificate does not cover") ---------------------------------------------
def _masked(values, masked_rows):
    """A masked array of ``values`` whose ``masked_rows`` are masked (whole rows)."""
    data = np.asarray(values)
    mask = np.zeros(data.shape, bool)
    mask[list(masked_rows)] = True
    return np.ma.masked_array(data, mask=mask)


CONJUGATE_MASKED = [
    (pb.BetaBernoulli(), [1, 0, 1, 1, 0, 1]),
    (pb.DirichletCategorical([1.0, 1.0, 1.0]), [2, 0, 1, 1, 0, 2]),
    (pb.DirichletCategorical([1.0, 1.0]), np.eye(2)[[0, 1, 1, 0, 0, 1]]),  # one-hot rows
    (pb.GammaPoisson(1.0, 1.0, 5), [3, 0, 5, 1, 2, 4]),
    (pb.NormalKnownVariance(0.0, 1.0, 1.0, -1.0, 1.0), [0.5, -0.2, 0.9, 0.1, -1.0, 0.3]),
]


@pytest.mark.filterwarnings("ignore:Warning. converting a masked element to nan")
@pytest.mark.parametrize("model,values", CONJUGATE_MASKED)
def test_masked_entries_are_refused_like_missing_values(model, values):
    """A masked array gave n = 4 for 2 unmasked values: np.asarray dropped the mask and
    the hidden values were released as records. Every masked entry is now a missing value,
    refused with its count and first row (every input path: arrays, lists of them, Dask)."""
    arr = _masked(values, [1, 4])
    for data in (arr, [arr[i] for i in range(len(arr))]):  # and a list of its rows
        with pytest.raises(pb.DataError, match=r"\[1(, 0)?\] = nan \(2 row\(s\)") as exc:
            pb.sample(model, data, 2.0, 1.0, rng=0)
        assert (exc.value.count, exc.value.index, exc.value.rule) == (2, 1, "finite")
    # a mask that hides nothing: the same release as the plain data
    none = np.ma.masked_array(np.asarray(values), mask=False)
    got, want = (pb.sample(model, d, 2.0, 1.0, rng=0) for d in (none, np.asarray(values)))
    assert got.n == want.n == len(values) and np.array_equal(got.value, want.value)


def test_masked_entries_are_refused_by_every_entry_point():
    with pytest.raises(pb.DataError, match=r"values\[2\] = nan \(1 row"):
        pb.release_query(_masked([0.1, 0.5, 0.7, 0.2], [2]), 2.0, 1.0)
    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(40, 2)), 0.9)
    y = (X[:, 0] > 0).astype(float)
    models = (
        pb.BayesianLogisticRegression(beta=0.1, backend="langevin"),
        pb.MultinomialLogisticRegression(beta=0.1, n_classes=2, backend="langevin"),
    )
    for model in models:
        with pytest.raises(pb.DataError, match=r"X must be finite; X\[3, 0\] = nan"):
            pb.sample(model, (_masked(X, [3]), y), 2.0, 1.0, rng=0)
        with pytest.raises(pb.DataError, match=r"y must be finite; y\[5\] = nan"):
            pb.sample(model, (X, _masked(y, [5])), 2.0, 1.0, rng=0)
    with pytest.raises(ValueError, match="finite"):
        pb.preprocessing.clip_rows(_masked(X, [0]), 1.0)
    assert pb.data.as_array(np.ma.masked_array([1, 2], mask=[False, False])).tolist() == [1, 2]
    assert math.isnan(pb.data.as_array(np.ma.masked_array([1, 2], mask=[False, True]))[1])
    # None in an object array or a list is a missing value too (not dropped, not 0)
    for data in (np.array([1, None, 0], dtype=object), [1, None, 0]):
        with pytest.raises(pb.DataError, match=r"data\[1\] = nan \(1 row"):
            pb.sample(pb.BetaBernoulli(), data, 2.0, 1.0)


def test_masked_dask_chunks_are_refused_in_the_engine():
    da = pytest.importorskip("dask.array")
    import dask

    arr = _masked([1, 0, 1, 1, 0, 0, 1], [3, 5])
    with dask.config.set(scheduler="synchronous"):
        lazy = da.ma.masked_array(
            da.from_array(arr.data, chunks=2), mask=da.from_array(arr.mask, chunks=2)
        )
        with pytest.raises(pb.DataError, match=r"data\[3\] = nan \(2 row") as exc:
            pb.sample(pb.BetaBernoulli(), lazy, 2.0, 1.0)
        assert exc.value.count == 2
        rng = np.random.default_rng(1)
        X = pb.preprocessing.clip_rows(rng.normal(size=(12, 2)), 0.9)
        y = da.from_array((X[:, 0] > 0).astype(float), chunks=4)
        mask = np.zeros(X.shape, bool)
        mask[7, 1] = True
        Xm = da.ma.masked_array(da.from_array(X, chunks=4), mask=da.from_array(mask, chunks=4))
        model = pb.BayesianLogisticRegression(beta=0.1, backend="langevin")
        with pytest.raises(pb.DataError, match=r"\[7, 1\] = nan \(1 row"):
            pb.sample(model, (Xm, y), 2.0, 1.0)


def test_column_names_are_never_listed():
    """A CSV file read without its header row makes its first record the column names, and
    the errors listed them ("columns: 39, State-gov, 77516"; a record of words, "HIV
    positive, London", even after numbers were held back): no message lists them."""
    pd = pytest.importorskip("pandas")
    for names in (["39", "true", "77516"], ["HIV positive", "London", "Paris"]):
        frame = pd.DataFrame([[39, 1, 77516], [50, 0, 83311]], columns=names)
        for call in (
            lambda f=frame: pb.sample(pb.BetaBernoulli(), f, 2.0, 0.5, column="age"),
            lambda f=frame: pb.sample(pb.BetaBernoulli(), f, 2.0, 0.5),
            lambda f=frame: pb.release_query(f, 2.0, 0.5, column="age"),
            lambda f=frame: pb.sample(pb.DirichletCategorical([1, 1]), f, 2.0, 0.5, column=["x"]),
        ):
            with pytest.raises(ValueError, match="3 column") as exc:
                call()
            assert not any(c in str(exc.value) for c in names), exc.value


@pytest.mark.parametrize("engine", ["pandas", "pyarrow", "dask"])
def test_header_less_csv_files_do_not_print_their_first_record(tmp_path, engine):
    pytest.importorskip(engine)
    pytest.importorskip("pyarrow")
    path = tmp_path / "adult.csv"
    path.write_text("39,State-gov,77516\n50,Self-emp-not-inc,83311\n")
    table = pb.data.read(path, engine=engine)
    with pytest.raises(ValueError, match="no column 'age'") as exc:
        pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column="age")
    assert "State-gov" not in str(exc.value) and "77516" not in str(exc.value)


BLANK_LINES = {  # file text -> (the refused record's 0-based row, the file without it)
    "x\n1\n\n0\n": (1, "x\n1\n0\n"),  # a blank line inside
    "x\n1\n0\n\n": (2, "x\n1\n0\n"),  # polars' null in the last row: an empty last line
    "x\n\n1\n0": (0, "x\n1\n0"),  # no final line break
    "a,b\n1,0\n\n0,1\n": (1, "a,b\n1,0\n0,1\n"),  # a blank line in a two-column file
}


@pytest.mark.parametrize("engine", ["pandas", "pyarrow", "dask"])
@pytest.mark.parametrize("text", list(BLANK_LINES))
def test_blank_csv_lines_are_missing_values_never_skipped(tmp_path, engine, text):
    """pandas, pyarrow and Dask skipped blank lines: a one-column CSV written by polars or
    pyarrow with a null lost that record (n and the data changed without a word)."""
    pytest.importorskip(engine)
    pytest.importorskip("pyarrow")
    row, clean = BLANK_LINES[text]
    column = text[0]
    for name, body in (("blank.csv", text), ("clean.csv", clean)):
        (tmp_path / name).write_text(body)
    table = pb.data.read(tmp_path / "blank.csv", engine=engine)
    with pytest.raises(pb.DataError, match=rf"\[{row}\] = nan \(1 row") as exc:
        pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column=column)
    assert exc.value.index == row
    table = pb.data.read(tmp_path / "clean.csv", engine=engine)  # the final line break: fine
    assert pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column=column).n == 2


def test_polars_and_pyarrow_nulls_in_a_one_column_csv_are_refused(tmp_path):
    pl = pytest.importorskip("polars")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.csv as pcsv

    pl.DataFrame({"x": [1, 0, None]}).write_csv(tmp_path / "polars.csv")
    pcsv.write_csv(pa.table({"x": [1, None, 0]}), tmp_path / "arrow.csv")
    for name, row in (("polars.csv", 2), ("arrow.csv", 1)):
        for engine in ("pandas", "pyarrow"):
            table = pb.data.read(tmp_path / name, engine=engine)
            with pytest.raises(pb.DataError) as exc:
                pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column="x")
            assert (exc.value.index, exc.value.count) == (row, 1)


# -- CSV files: the single-file rules on every reader (docs/data.md §6) -----------------------
ENGINES = ["dask", "pandas", "pyarrow"]

# A file that breaks a rule -> the refused line (None: the whole file) and a phrase of the
# message. Every record holds 9731 or "Zq", which no message may quote.
MALFORMED = {
    "a longer first record (pandas made its first field the index, shifting every value)": (
        "flip,other\n1,9731,0\n1,9731\n1,9731\n", 2, "has 3 fields but the header has 2"),
    "a trailing comma on every record": (
        "visits,hours\n3,9731,\n2,9731,\n", 2, "has 3 fields but the header has 2"),
    "a longer later record": ("flip,other\n1,9731\n1,9731,0\n", 3, "has 3 fields"),
    "a shorter record (pandas filled in NaN)": (
        "flip,other,x\n1,9731,Zq\n1,9731\n", 3, "has 2 fields but the header has 3"),
    "a repeated header name (pandas renamed it flip.1)": (
        "flip,flip\n1,9731\n", 1, "repeats a column name"),
    "a repeated header name, spaces around it": ("flip, flip\n1,9731\n", 1, "fields 1 and 2"),
    "a quote never closed": ('flip,other\n1,"9731\n0,Zq\n', 2, "never closed"),
    "text after a closing quote": ('flip,other\n1,"9731"Zq\n', 2, "after a closing quote"),
    "not UTF-8": (b"flip,other\n1,\xff9731\n", None, "not a UTF-8 text CSV file"),
    "an empty file": ("", None, "is empty"),
    "a blank header line": ("\nflip\n1\n", 1, "line 1 of"),
}  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", list(MALFORMED))
def test_csv_files_that_break_the_rules_are_refused_by_every_engine(tmp_path, engine, case):
    """pb.data.read and CSV globs went through pandas/Dask read_csv, which read a longer first
    record by making its first field the index: every value shifted left, so one changed
    record changed every record (the replace-one neighbour relation broke). Every engine
    now applies the single-file reader's rules, refusing the file with its line."""
    pytest.importorskip(engine)
    pytest.importorskip("pyarrow")
    body, line, phrase = MALFORMED[case]
    folder = tmp_path / "logs"
    folder.mkdir()
    raw = body if isinstance(body, bytes) else body.encode()
    header = raw.split(b"\n")[0] if line != 1 and raw else b"flip,other"
    good = b",".join([b"1"] * len(header.split(b",")))
    (folder / "a.csv").write_bytes(header + b"\n" + good + b"\n")  # a good file first
    bad = folder / "b.csv"
    bad.write_bytes(raw)
    acc = pb.accounting.default.default_accountant()
    before = np.array(acc.rdp)
    with pytest.raises(pb.data.CSVError) as exc:
        table = pb.data.read(str(folder / ("b.csv" if line == 1 else "*.csv")), engine=engine)
        pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column=header.split(b",")[0].decode())
    err = exc.value
    assert isinstance(err, pb.DataError) and err.rule == "csv" and err.path == str(bad)
    assert err.line == line and phrase in str(err), str(err)
    if line is not None:
        assert f"line {line} of {bad}" in str(err)
    assert "9731" not in str(err) and "Zq" not in str(err) and "\n" not in str(err)
    assert np.array_equal(acc.rdp, before)  # refused before anything was charged


@pytest.mark.parametrize("engine", ENGINES)
def test_a_changed_record_changes_one_record(tmp_path, engine):
    """The trial's neighbours: nb2 differs from nb1 in its first record only (a third
    field), and read [0, 0, 0, 0] where nb1 read [1, 1, 1, 1]."""
    pytest.importorskip(engine)
    pytest.importorskip("pyarrow")
    for name, first in (("nb1", "1,0"), ("nb2", "1,0,0")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.csv").write_text(f"flip,other\n{first}\n1,0\n1,0\n1,0\n")
    table = pb.data.read(str(tmp_path / "nb1" / "*.csv"), engine=engine)
    assert pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column="flip").n == 4
    table = pb.data.read(tmp_path / "nb1" / "a.csv", columns=["flip"], engine=engine)
    stats, n = pb.BetaBernoulli()._statistics(table)
    assert stats.tolist() == [4, 0] and n == 4  # (ones, zeros)
    with pytest.raises(pb.data.CSVError, match="line 2 of .* has 3 fields"):
        table = pb.data.read(str(tmp_path / "nb2" / "*.csv"), engine=engine)
        pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column="flip")


@pytest.mark.parametrize("engine", ENGINES)
def test_csv_globs_read_what_the_single_file_reader_reads(tmp_path, engine):
    """Header-only files have no records (n = 0, as from a single file); header names lose
    their surrounding spaces; quoted fields may hold commas and line breaks; CRLF, a
    byte-order mark and gzip are read; every file must have the first file's header."""
    pytest.importorskip(engine)
    pytest.importorskip("pyarrow")
    import gzip

    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text(' flip , note\n1,"a, b"\n0,"two\nlines"\n')
    (folder / "b.csv").write_text(" flip , note\n")  # header only
    (folder / "c.csv").write_bytes("\ufeff flip , note\r\n1,x\r\n 1 ,y\r\n".encode())
    (folder / "d.csv.gz").write_bytes(gzip.compress(b" flip , note\n0,z\n"))
    paths = sorted(str(p) for p in folder.iterdir())
    table = pb.data.read(paths, columns=["flip"], engine=engine)
    stats, n = pb.BetaBernoulli()._statistics(table)
    assert stats.tolist() == [3, 2] and n == 5  # records 1, 0, 1, 1, 0
    if engine != "pyarrow":  # the quoted cells, as written
        notes = pb.data.read(paths, engine=engine)["note"]
        notes = notes.compute() if engine == "dask" else notes
        assert list(notes) == ["a, b", "two\nlines", "x", "y", "z"]
    empty = pb.data.read(folder / "b.csv", engine=engine)
    rel = pb.sample(pb.BetaBernoulli(), empty, 2.0, 0.5, column="flip")
    assert rel.n == 0
    (folder / "e.csv").write_text("note,flip\nx,1\n")  # the same names in another order
    with pytest.raises(pb.data.CSVError, match="not the first file's") as exc:
        table = pb.data.read(str(folder / "*.csv"), engine=engine)
        pb.sample(pb.BetaBernoulli(), table, 2.0, 0.5, column="flip")
    assert exc.value.path == str(folder / "e.csv") and "note" not in str(exc.value)


@pytest.mark.parametrize(
    "body,phrase",
    [
        (b"", "is empty"),  # read() looped for ever on an empty first file
        (b"\n1\n", "line 1 of"),
        (b"flip,flip\n1,0\n", "repeats a column name"),
        (b"fl\xffip\n1\n", "not a UTF-8 text CSV file"),
        (b'"fl\nip\n1\n', "never closed"),
    ],
)
def test_the_first_file_is_checked_when_it_is_opened(tmp_path, body, phrase):
    """read() takes the header from the first file at once (Dask needs the columns): that
    file is held to the same rules, and a header longer than a read block is read whole."""
    pytest.importorskip("pandas")
    path = tmp_path / "a.csv"
    path.write_bytes(body)
    with pytest.raises(pb.data.CSVError, match=phrase):
        pb.data.read(path)
    long = "x" * 40_000  # 80,001 characters: more than a 64 KiB read
    path.write_text(f'"{long}\n{long}",flip\n0,1\n')  # a quoted line break in the header
    table = pb.data.read(path, columns=["flip"], engine="pandas")
    assert list(table.columns) == ["flip"] and table["flip"].tolist() == [1]


def test_csv_options_and_missing_columns_are_refused_up_front(tmp_path):
    pytest.importorskip("pandas")
    path = tmp_path / "a.csv"
    path.write_text("HIV positive,London\nnegative,Paris\n")
    with pytest.raises(TypeError, match="CSV files take none"):
        pb.data.read(path, blocksize="1MB")
    with pytest.raises(ValueError, match="no column 'age'.*2 fields") as exc:
        pb.data.read(path, columns=["age"])
    assert "London" not in str(exc.value) and "HIV" not in str(exc.value)


def test_csv_errors_pickle_as_themselves():
    """A Dask worker raises CSVError; with worker processes it travels pickled."""
    import pickle

    err = pickle.loads(pickle.dumps(pb.data.CSVError("line 3 of a.csv is blank", "a.csv", 3)))
    assert isinstance(err, pb.DataError) and (err.path, err.line, err.rule) == ("a.csv", 3, "csv")
    assert str(err) == "line 3 of a.csv is blank"


def test_paths_that_are_not_regular_files_say_so(tmp_path):
    pytest.importorskip("pandas")
    r, w = os.pipe()
    try:
        with pytest.raises(ValueError, match="not a regular file"):
            pb.data.read(f"/dev/fd/{r}")
        with pytest.raises(FileNotFoundError, match="no such file"):
            pb.data.read(tmp_path / "none.csv")
    finally:
        os.close(r)
        os.close(w)


def test_polars_lazy_frames_are_refused_with_a_type_error():
    """A LazyFrame gave an AttributeError (after PerformanceWarnings): it is a query, not
    data, and is refused with a TypeError that says to collect it."""
    import warnings

    pl = pytest.importorskip("polars")
    lazy = pl.DataFrame({"flip": [1, 0, 1], "x": [0.1, 0.2, 0.3]}).lazy()
    glm = pb.BayesianLogisticRegression(backend="langevin")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PerformanceWarning either
        for call in (
            lambda: pb.sample(pb.BetaBernoulli(), lazy, 2.0, 0.5, column="flip"),
            lambda: pb.sample(pb.BetaBernoulli(), lazy.select("flip"), 2.0, 0.5),
            lambda: pb.release_query(lazy, 2.0, 0.5, column="x"),
            lambda: pb.sample(glm, (lazy.select("x"), np.ones(3)), 2.0, 0.5),
        ):
            with pytest.raises(TypeError, match=r"LazyFrame.*\.collect\(\)"):
                call()
    rel = pb.sample(pb.BetaBernoulli(), lazy.collect(), 2.0, 0.5, column="flip")
    assert rel.n == 3


def test_the_plain_line_count_agrees_with_the_csv_module():
    """The vectorised count of a quote-free file's records (the fast path) answers only when
    the csv module accepts every record, and then with its count; else the csv module
    reads the file and names the line (here: random texts of commas, line breaks, spaces,
    a non-ASCII space, text and digits, in blocks of a few bytes)."""
    from privbayes import data as pbdata

    rng = np.random.default_rng(5)
    pieces = [",", "\n", "\r\n", " ", "\t", "\xa0", "a", "1", "22", "\n\n", ",,"]
    answered = 0
    for trial in range(3000):
        width = int(rng.integers(1, 4))
        header = ",".join(f"c{k}" for k in range(width)) + "\n"
        body = "".join(rng.choice(pieces, size=int(rng.integers(0, 14))))
        if trial % 3 == 0:  # mostly well-formed records
            cells = [
                ",".join(rng.choice(["1", " a", "22 ", "\xa0b"], size=width)) for _ in range(4)
            ]
            body = "\n".join(cells) + rng.choice(["", "\n", "\r\n"])
        raw = (header + body).encode()
        assert pbdata._plain(raw)
        old, pbdata._PLAIN_CHUNK = pbdata._PLAIN_CHUNK, int(rng.integers(1, 12))  # tiny blocks
        try:
            got = pbdata._plain_records(raw, len(header), width)
        finally:
            pbdata._PLAIN_CHUNK = old
        rows = list(pbdata._csv_rows(raw.decode(), "t.csv"))[1:]
        try:
            for line, row in rows:
                pbdata._csv_record(line, row, width, "t.csv", blank_ok=False)
        except pbdata.CSVError:
            assert got is None, (raw, got)
        else:
            assert got in (None, len(rows)), (raw, got, len(rows))
            answered += got is not None
    assert answered > 500  # the fast path did answer
