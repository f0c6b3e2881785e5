"""Dask inputs on a real 2-process LocalCluster (docs/data.md): a release from Dask data is
the same draw as from the same data in memory; bad data inside one partition are found
and reported before anything is charged; a worker that dies mid-pass is retried, or the
call fails with nothing released or charged."""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting.default import default_accountant
from privbayes.accounting.ledger import Ledger

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

N = 20_011  # not a multiple of any chunk size below


@pytest.fixture(scope="module")
def client():
    import sys

    import cloudpickle

    # the helpers below travel to the workers by value (tests/ is not importable there)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=40,
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _data(seed: int = 7):
    rng = np.random.default_rng(seed)
    return {
        "bit": (rng.random(N) < 0.3).astype(float),
        "code": rng.integers(0, 5, N).astype(float),
        "count": rng.integers(0, 4, N).astype(float),
        "x": rng.uniform(-2.0, 2.0, N),  # real-valued: the exact-sum path
        "q": rng.random(N),
    }


MODELS = [
    (pb.BetaBernoulli(2.0, 3.0), "bit"),
    (pb.DirichletCategorical(np.ones(5)), "code"),
    (pb.GammaPoisson(1.0, 1.0, 3), "count"),
    (pb.NormalKnownVariance(0.0, 1.0, 1.0, -2.0, 2.0), "x"),
]


@pytest.mark.parametrize("model,col", MODELS, ids=lambda v: getattr(v, "__name__", None))
def test_dask_release_is_the_in_memory_draw(client, model, col):
    cols = _data()
    frame = dd.from_pandas(pd.DataFrame(cols), npartitions=7)
    arr = da.from_array(cols[col], chunks=3001)
    want = pb.sample(model, cols[col], 2.0, 0.5, rng=11)
    for data, kw in [(arr, {}), (frame, {"column": col})]:
        got = pb.sample(model, data, 2.0, 0.5, rng=11, **kw)
        assert np.array_equal(got.value, want.value) and got.n == N
        assert got.calibration == want.calibration
    # the statistics themselves, against an independent truth
    stats, n = model._statistics(frame[col])
    if col == "x":  # the correctly rounded sum of the centred records (centre 0 here)
        assert stats == math.fsum(cols[col]) and n == N
    elif col == "count":
        assert stats == int(cols[col].sum())


def test_dask_query_is_the_in_memory_draw(client):
    q = _data()["q"]
    want = pb.release_query(q, 2.0, 0.5, rng=3)
    got = pb.release_query(da.from_array(q, chunks=4000), 2.0, 0.5, rng=3)
    assert got.value == want.value
    # the floored sum is exact: floor(2^8 * sum) / 2^8 with the sum in rationals
    exact = sum(Fraction(v) for v in q)
    s, _ = pb.models.MeanQuery()._statistics(da.from_array(q, chunks=999))[0]
    assert Fraction(s) == Fraction(math.floor(exact * 256), 256)


def test_one_hot_dask_frame(client):
    codes = _data()["code"].astype(int)
    onehot = pd.DataFrame(np.eye(5)[codes], columns=list("abcde"))
    model = pb.DirichletCategorical(np.ones(5))
    got = pb.sample(
        model, dd.from_pandas(onehot, npartitions=4), 2.0, 1.0, rng=5, column=list("abcde")
    )
    assert np.array_equal(got.value, pb.sample(model, codes, 2.0, 1.0, rng=5).value)


def test_bad_rows_in_one_partition_are_reported_and_nothing_is_charged(client, tmp_path):
    cols = _data()
    x = cols["x"].copy()
    x[[15_001, 15_100, 19_999]] = [2.5, -3.0, 7.0]  # all inside the last partitions
    frame = dd.from_pandas(pd.DataFrame({"x": x}), npartitions=6)
    ledger = Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 10.0, 1e-6)
    model = pb.NormalKnownVariance(0.0, 1.0, 1.0, -2.0, 2.0)
    before = np.array(default_accountant().rdp)
    with pytest.raises(ValueError, match=r"data\['x'\]\[15001\] = 2.5 \(3 outside\)") as err:
        pb.sample(model, frame, 2.0, 0.5, column="x", ledger=ledger, dataset="d")
    assert isinstance(err.value, pb.DataError)
    assert (err.value.column, err.value.count, err.value.index) == ("data['x']", 3, 15001)
    bits = cols["bit"].copy()
    bits[12_345] = np.nan
    with pytest.raises(ValueError, match=r"data\[12345\] = nan \(1 row"):
        pb.sample(pb.BetaBernoulli(), da.from_array(bits, chunks=2000), 2.0, 0.5, ledger=ledger,
                  dataset="d")  # fmt: skip
    assert ledger.status("d")[0]["charges"] == [] and ledger.spent("d") == 0
    assert np.array_equal(default_accountant().rdp, before)  # nothing composed either
    ledger.close()


def test_csv_files_on_worker_processes(client, tmp_path):
    """CSV globs are read and checked on the workers, one partition per file: the release is
    the in-memory draw, and a file that breaks the rules (a longer first record, which
    pandas read by shifting every value) is refused on the client by its CSVError, which
    travelled pickled from the worker, before anything is charged."""
    cols = _data()
    frame = pd.DataFrame({"bit": cols["bit"].astype(int), "x": cols["x"]})
    folder = tmp_path / "logs"
    folder.mkdir()
    for i, start in enumerate(range(0, N, 7_000)):
        frame.iloc[start : start + 7_000].to_csv(folder / f"p{i}.csv", index=False)
    table = pb.data.read(str(folder / "*.csv"))
    assert table.npartitions == 3
    for model, col in MODELS[::3]:
        got = pb.sample(model, table, 2.0, 0.5, rng=3, column=col)
        want = pb.sample(model, cols[col], 2.0, 0.5, rng=3)
        assert np.array_equal(got.value, want.value) and got.n == N
    with open(folder / "p2.csv") as fh:
        lines = fh.read().split("\n")
    lines[1] += ",0"  # the first record of the last file, one field longer
    (folder / "p2.csv").write_text("\n".join(lines))
    ledger = Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 10.0, 1e-6)
    before = np.array(default_accountant().rdp)
    with pytest.raises(pb.data.CSVError, match=r"line 2 of .*p2.csv has 3 fields") as err:
        pb.sample(pb.BetaBernoulli(), pb.data.read(str(folder / "*.csv")), 2.0, 0.5,
                  column="bit", ledger=ledger, dataset="d")  # fmt: skip
    assert (err.value.path, err.value.line) == (str(folder / "p2.csv"), 2)
    assert ledger.status("d")[0]["charges"] == [] and ledger.spent("d") == 0
    assert np.array_equal(default_accountant().rdp, before)
    ledger.close()


def _die_once(block, marker, client_pid):
    """Kill this worker process the first time any task runs it (a crash mid-pass)."""
    if os.getpid() == client_pid:  # never the test process (e.g. dask's meta inference)
        return block
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return block
    os.close(fd)
    os._exit(1)


META = np.array((), float)


def _set_allowed_failures(dask_scheduler, value):
    old = dask_scheduler.allowed_failures
    dask_scheduler.allowed_failures = value
    return old


def test_killed_worker_is_retried_or_the_call_fails_uncharged(client, tmp_path):
    bits = _data()["bit"]
    model = pb.BetaBernoulli()
    want = pb.sample(model, bits, 2.0, 0.5, rng=1)
    ledger = Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 10.0, 1e-6)
    # the scheduler retries the task on the other (or a restarted) worker: same draw
    arr = da.from_array(bits, chunks=5000).map_blocks(
        _die_once, str(tmp_path / "a"), os.getpid(), meta=META
    )
    got = pb.sample(model, arr, 2.0, 0.5, rng=1, ledger=ledger, dataset="d")
    assert got.value == want.value and len(ledger.status("d")[0]["charges"]) == 1
    assert (tmp_path / "a").exists()  # a worker did die
    # no retries allowed: the call fails, nothing is released and nothing charged
    before = np.array(default_accountant().rdp)
    old = client.run_on_scheduler(_set_allowed_failures, value=0)
    try:
        arr = da.from_array(bits, chunks=5000).map_blocks(
            _die_once, str(tmp_path / "b"), os.getpid(), meta=META
        )
        with pytest.raises(distributed.KilledWorker):
            pb.sample(model, arr, 2.0, 0.5, rng=1, ledger=ledger, dataset="d")
    finally:
        client.run_on_scheduler(_set_allowed_failures, value=old)
    assert len(ledger.status("d")[0]["charges"]) == 1
    assert np.array_equal(default_accountant().rdp, before)
    ledger.close()
    client.wait_for_workers(2, timeout=60)
