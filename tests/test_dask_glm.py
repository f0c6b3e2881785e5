"""GLMs on Dask inputs, on a real 2-process LocalCluster (docs/data.md §7): the passes over X
run on the workers and only reductions come back. The exact back-end's internals (the
gradient, the Hessian, the line values, the proposals' log-likelihoods, the certified
Newton point) agree with the in-memory path to 1e-10; releases from Dask and NumPy inputs
are the same draws up to rounding (the reductions are deterministic); bad rows inside a
partition are found with nothing charged."""

from __future__ import annotations

import os

import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting.default import default_accountant
from privbayes.accounting.ledger import Ledger
from privbayes.sampling import exact

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

N, D = 70_011, 4  # more rows than the Newton fit's warm subsample (50,000); odd chunks
BETA = 0.01


@pytest.fixture(scope="module")
def client():
    import sys

    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _die_once travels by value
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _data(seed: int = 3, n: int = N, classes: int | None = None):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1) * 1.01)[:, None]
    if classes is None:
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-x @ np.arange(1.0, D + 1.0)))).astype(float)
    else:
        y = rng.integers(0, classes, n).astype(float)
    return x, y


def _dask(x, y, chunk: int = 9_001):
    return da.from_array(x, chunks=(chunk, 2)), da.from_array(y, chunks=chunk // 2 + 1)


def _close(a, b, tol=1e-10):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = max(1.0, float(np.abs(a).max()))
    assert np.abs(a - b).max() <= tol * scale, (a, b)


def test_exact_internals_agree_with_numpy(client):
    x, y = _data()
    x *= 0.85  # the intercept column (s = 0.5) takes the rest of c = 1
    model = pb.BayesianLogisticRegression(beta=BETA, c=1.0, backend="exact", fit_intercept=True)
    (xa, ya), n = model._statistics((x, y))
    (rows, _), n2 = model._statistics(_dask(x, y))
    assert n == n2 == N and rows.shape == xa.shape
    r, p = 0.7, N * BETA
    mem, dsk = exact.Problem(xa, ya, r, p), exact.DaskProblem(rows, r, p)
    w = np.random.default_rng(1).normal(size=D + 1)
    z, g1, h1 = mem.grad_hess(w)
    zd, g2, h2 = dsk.grad_hess(w)
    assert np.array_equal(g1, g2)  # the same blocks, exact sums: the same floats
    _close(h1, h2)
    # an independent truth for the gradient: -r sum_i u_i sigma(-u_i w) + p w, in quadruple
    u = (xa * ya[:, None]).astype(np.longdouble)
    s = 1.0 / (1.0 + np.exp(u @ w.astype(np.longdouble)))
    _close(-r * (u * s[:, None]).sum(axis=0) + p * w, g2, 1e-12)
    steps = np.stack([0.1 * w, -0.037 * w], axis=1)  # the fit's line-search candidates
    _close(mem.loglik_diffs(z, mem.base(z), [steps])[0], dsk.loglik_diffs(zd, None, [steps])[0])
    # the warm subsample
    _close(mem.subsample(50_000).grad_hess(w)[1], dsk.subsample(50_000).grad_hess(w)[1])
    # the certified Newton point and proposal log-likelihoods
    plan = exact.exact_plan(N, D + 1, BETA, model.c_bound, r, 1.0, method="diffused", size=1)
    f1, f2 = exact._fit(mem, plan), exact._fit(dsk, plan)
    _close(f1.w_hat, f2.w_hat)
    _close(f1.chol, f2.chol)
    v = np.random.default_rng(2).normal(size=(D + 1, 300)) * 0.05
    want = mem.loglik_diff(f1.z0, mem.base(f1.z0), v)
    got = dsk.loglik_diffs(f2.z0, dsk.base(f2.z0), [v, v[:, :7]])
    _close(want, got[0])
    _close(want[:7], got[1])


def test_exact_release_is_the_in_memory_draw(client):
    x, y = _data(4)
    model = pb.BayesianLogisticRegression(beta=BETA, c=1.0, backend="exact")
    want = pb.sample(model, (x, y), 2.0, 0.5, rng=11, size=3)
    got = pb.sample(model, _dask(x, y), 2.0, 0.5, rng=11, size=3)
    _close(want.value, got.value, 1e-9)
    assert got.calibration == want.calibration
    # a Dask DataFrame: feature columns and a label column, 0/1 labels
    frame = dd.from_pandas(
        pd.DataFrame({**{f"f{j}": x[:, j] for j in range(D)}, "label": y}), npartitions=5
    )
    got = pb.sample(model, (frame[[f"f{j}" for j in range(D)]], frame["label"]), 2.0, 0.5,
                    rng=11, size=3)  # fmt: skip
    _close(want.value, got.value, 1e-9)


def test_langevin_and_imh_releases_match(client):
    x, y = _data(5, n=6_000)
    xd, yd = _dask(x, y, 1_700)
    model = pb.BayesianLogisticRegression(beta=0.05, c=1.0, backend="langevin")
    cal = pb.calibrate(model, 6_000, 2.0, 4.0, "diffused")
    assert cal.sampler["steps"] <= 200  # K passes: K scheduler round trips on Dask
    want = pb.sample(model, (x, y), 2.0, 4.0, rng=2, size=2)
    got = pb.sample(model, (xd, yd), 2.0, 4.0, rng=2, size=2)
    _close(want.value, got.value, 1e-8)
    imh = pb.BayesianLogisticRegression(beta=0.05, c=1.0, backend="imh")
    want = pb.sample(imh, (x, y), 2.0, 4.0, rng=3)
    got = pb.sample(imh, (xd, yd), 2.0, 4.0, rng=3)
    _close(want.value, got.value, 1e-8)
    # the same internals, against the in-memory kernel
    from privbayes.glm.family import BINARY_LOGISTIC as fam

    (rows, _), _ = imh._statistics((xd, yd))
    u = x * np.where(y > 0, 1.0, -1.0)[:, None]
    w = np.random.default_rng(0).normal(size=(D, 3))
    _close(fam.neg_grad_sums(u, w, None, 1), fam.neg_grad_sums(rows, w, None, 1))
    _close(fam.loss_sums(u, w.T, 1), fam.loss_sums(rows, w.T, 1))


def test_multinomial_langevin_matches(client):
    x, y = _data(6, n=5_000, classes=3)
    model = pb.MultinomialLogisticRegression(beta=0.05, c=1.0, n_classes=3, backend="langevin")
    want = pb.sample(model, (x, y), 2.0, 4.0, rng=4)
    got = pb.sample(model, _dask(x, y, 1_300), 2.0, 4.0, rng=4)
    _close(want.value, got.value, 1e-8)


def test_multinomial_exact_matches(client):
    # 70,000 rows: three FIT_ROWS blocks, a warm start on a subsample, several chunks
    x, y = _data(8, n=70_000, classes=3)
    model = pb.MultinomialLogisticRegression(beta=0.01, c=1.0, n_classes=3, backend="exact")
    want = pb.sample(model, (x, y), 2.0, 1.0, size=2, rng=5)
    got = pb.sample(model, _dask(x, y, 9_000), 2.0, 1.0, size=2, rng=5)
    assert want.guarantee == got.guarantee == "exact"
    assert want.diagnostics["public"] == got.diagnostics["public"]
    _close(want.value, got.value, 1e-8)


def test_bad_rows_inside_a_partition_charge_nothing(client, tmp_path):
    x, y = _data(7, n=20_000)
    model = pb.BayesianLogisticRegression(beta=BETA, c=1.0, backend="exact")
    ledger = Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 10.0, 1e-6)
    before = np.array(default_accountant().rdp)

    def refused(xb, yb, pattern, **kw):
        with pytest.raises(ValueError, match=pattern) as err:
            pb.sample(kw.pop("m", model), _dask(xb, yb, 3_001), 2.0, 0.5, ledger=ledger,
                      dataset="d")  # fmt: skip
        return err.value

    xb = x.copy()
    xb[[12_345, 17_000], 1] = [np.nan, np.inf]
    err = refused(xb, y, r"X must be finite; X\[12345, 1\] = nan \(2 row")
    assert isinstance(err, pb.DataError) and (err.column, err.count, err.index) == ("X", 2, 12_345)
    yb = y.copy()
    yb[[9_999, 15_000]] = 2.0
    err = refused(x, yb, r"y must hold labels in \{0, 1\} or \{-1, \+1\}; y\[9999\] = 2.0 \(2 row")
    assert (err.column, err.index) == ("y", 9_999)
    yb = y.copy()
    yb[y == 0] = -1.0
    yb[4] = 0.0
    err = refused(x, yb, r"holds both 0 \(the first at y\[4\]\) and -1 \(the first at y\[0\]\)")
    assert "row(s)" not in str(err) and err.count is None
    xb = x.copy()
    xb[[6_002, 6_003, 19_000]] = 0.8
    err = refused(xb, y, r"3 row\(s\) of X have norm > c = 1 \(first: X\[6002\]\)")
    assert (err.column, err.count, err.index) == ("X", 3, 6_002)
    mult = pb.MultinomialLogisticRegression(beta=BETA, c=1.0, n_classes=3)
    refused(x, np.where(np.arange(20_000) == 13_131, 3.0, 0.0), r"y\[13131\] = 3.0", m=mult)
    assert ledger.status("d")[0]["charges"] == [] and ledger.spent("d") == 0
    assert np.array_equal(default_accountant().rdp, before)
    ledger.close()


def test_refusals(client):
    x, y = _data(8, n=1_000)
    xd, yd = _dask(x, y, 300)
    with pytest.raises(TypeError, match="both be Dask"):
        pb.sample(pb.BayesianLogisticRegression(backend="exact"), (xd, y), 2.0, 0.5)
    with pytest.raises(TypeError, match="backend='pymc' needs X in memory"):
        pb.sample(pb.BayesianLogisticRegression(backend="pymc"), (xd, yd), 2.0, 0.5)


def test_passes_per_backend_are_public(client):
    """The exact back-end's passes (docs/data.md §7): 2 per Newton step (the gradient and
    Hessian, then the step's candidates), 1 for the certificate, and one per group of 32
    proposal batches; the number of steps is the certified fit's (private)."""
    x, y = _data(9, n=3_000)
    model = pb.BayesianLogisticRegression(beta=BETA, c=1.0, backend="exact")
    (rows, _), n = model._statistics(_dask(x, y, 1_000))
    calls = []
    real = rows.reduce
    rows.reduce = lambda *a: calls.append(a[0].__name__) or real(*a)  # type: ignore[method-assign]
    cal = pb.calibrate(model, n, 2.0, 0.5, "diffused")
    _, dg = exact.release_draw(model, (rows, None), cal, np.random.default_rng(0))
    steps = dg["newton_steps"]  # n <= 50,000: no subsample
    assert 1 <= steps <= dg["public"]["newton_step_bound"]
    assert calls.count("_gh_chunk") == steps + 1
    assert calls.count("_loglik_chunk") == steps + 1  # the steps, then one proposal pass


def _die_once(u, marker, client_pid, w, r):
    """The Newton pass's chunk kernel, but the first worker to run it dies (mid-pass)."""
    if os.getpid() != client_pid:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            pass
        else:
            os._exit(1)
    return exact._gh_chunk(u, w, r)


def test_a_worker_lost_mid_pass_is_retried_with_the_same_result(client, tmp_path):
    x, y = _data(10, n=40_000)
    model = pb.BayesianLogisticRegression(beta=BETA, c=1.0, backend="exact")
    (rows, _), _ = model._statistics(_dask(x, y, 7_000))
    w = np.linspace(-1.0, 1.0, D)
    want = rows.reduce(exact._gh_chunk, w, 0.5)
    got = rows.reduce(_die_once, str(tmp_path / "m"), os.getpid(), w, 0.5)
    assert (tmp_path / "m").exists()  # a worker did die; its chunks were recomputed
    assert got[0] == want[0] and np.array_equal(got[1], want[1])
    assert np.array_equal(rows.reduce(exact._gh_chunk, w, 0.5)[1], want[1])
    client.wait_for_workers(2, timeout=60)


def test_estimator_fit_on_dask_inputs_is_the_in_memory_fit(client, tmp_path):
    """PrivateLogisticRegression.fit takes Dask X, y (public classes required): the same
    seeded coefficients as the in-memory fit, for two and three classes; an undeclared
    label is refused inside the engine with nothing charged."""
    for classes, beta in ((None, BETA), (3, 0.05)):
        x, y = _data(classes=classes)
        x *= 0.85  # the intercept column takes the rest of c = 1
        labels = [0.0, 1.0] if classes is None else [0.0, 1.0, 2.0]
        est = pb.PrivateLogisticRegression(
            lam=2.0, eps=1.0, beta=beta, classes=labels, random_state=5, backend="langevin"
        )
        mem = est.__class__(**est.get_params())
        mem.fit(x, y)
        est.fit(*_dask(x, y))
        assert est.coef_.shape == mem.coef_.shape
        _close(est.coef_, mem.coef_, 1e-8)
        _close(est.intercept_, mem.intercept_, 1e-8)
        assert est.n_features_in_ == D and list(est.classes_) == labels
    x, y = _data()
    # the default class set [0, 1] is public too: the same fit as the declared one
    default = pb.PrivateLogisticRegression(eps=1.0, random_state=6).fit(*_dask(x * 0.85, y))
    declared = pb.PrivateLogisticRegression(eps=1.0, random_state=6, classes=[0, 1])
    _close(default.coef_, declared.fit(*_dask(x * 0.85, y)).coef_, 0.0)
    assert list(default.classes_) == [0, 1]
    path = tmp_path / "l.sqlite"
    Ledger.create(path, "d", 50.0, 1e-6).close()
    y_bad = y.copy()
    y_bad[N - 7] = 4.0  # in the last partition
    est = pb.PrivateLogisticRegression(eps=1.0, classes=[0.0, 1.0], ledger=str(path), dataset="d")
    with pytest.raises(ValueError, match="y"):
        est.fit(*_dask(x * 0.85, y_bad))
    assert Ledger(path, create=False).status("d")[0]["charges"] == []
