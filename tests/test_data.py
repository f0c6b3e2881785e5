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
    with pytest.raises(ValueError, match="no column 'z'; columns: a, b"):
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
