"""The IMH back-end against independent truth: grid quadrature in 1-D and 2-D for every
method (OPS's truncation included), and PyMC's NUTS at d = 20. Tolerances come from the
effective sample size: each release is the last state of its own chain, so k releases are
k independent draws (ESS = k) once the chains have converged."""

import math
import tracemalloc
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import privbayes as pb
from privbayes.certified import round_up
from privbayes.sampling import imh

# these tests are about the MCMC back-ends: IMH unless a test says otherwise
BayesianLogisticRegression = partial(pb.BayesianLogisticRegression, backend="imh")

Z = 4.5  # standard errors allowed; with ~40 comparisons per test a false alarm is ~1e-4


def _toy(n, d, seed=0, scale=2.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.full(d, scale))), 1.0, -1.0)
    return X, y


def _log_post(X, y, cal, model, w):
    """Unnormalised log posterior at the rows of w (m, d), computed without imh.Target."""
    n = len(y)
    margins = (w @ X.T) * y
    out = -cal.r * np.logaddexp(0.0, -margins).sum(axis=1)
    out -= 0.5 * n * model.beta / cal.m * (w * w).sum(axis=1)
    if cal.method == "ops":
        out[np.linalg.norm(w, axis=1) > model.radius] = -np.inf
    return out


def _grid_truth(X, y, cal, model, half_width=3.0, points=(4001, 401)):
    """Normalised posterior on a grid around 0: (grid axes, probabilities)."""
    d = X.shape[1]
    k = points[0] if d == 1 else points[1]
    axes = [np.linspace(-half_width, half_width, k)] * d
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
    lp = _log_post(X, y, cal, model, mesh)
    p = np.exp(lp - lp.max())
    assert p.reshape((k,) * d)[(0,) * d] < 1e-12  # the grid holds the whole posterior
    return mesh, p / p.sum()


def _check_against_grid(draws, mesh, p):
    k, d = draws.shape
    mean = p @ mesh
    for j in range(d):
        c = mesh[:, j] - mean[j]
        var, m4 = p @ c**2, p @ c**4
        assert abs(draws[:, j].mean() - mean[j]) < Z * math.sqrt(var / k), ("mean", j)
        assert abs(draws[:, j].var() - var) < Z * math.sqrt((m4 - var**2) / k), ("var", j)
        order = np.argsort(mesh[:, j])
        cdf = np.cumsum(p[order])
        for q in (0.05, 0.25, 0.5, 0.75, 0.95):
            true_q = mesh[order, j][np.searchsorted(cdf, q)]
            below = (draws[:, j] <= true_q).mean()
            # the grid spacing moves the quantile by at most one cell's mass
            cell = p[order][np.searchsorted(cdf, q)]
            assert abs(below - q) < Z * math.sqrt(q * (1 - q) / k) + cell, ("quantile", j, q)
    if d == 2:
        cov = p @ ((mesh[:, 0] - mean[0]) * (mesh[:, 1] - mean[1]))
        prod = (draws[:, 0] - draws[:, 0].mean()) * (draws[:, 1] - draws[:, 1].mean())
        assert abs(prod.mean() - cov) < Z * prod.std() / math.sqrt(k)


N_SKEW = 12
CASES = [  # method, eps at lam = 2, radius (OPS: chosen so that the ball truncates)
    ("direct", 50.0, None),
    ("diffused", 0.5, None),
    ("concentrated", 0.5, None),
    ("ops", 2.0, 1.5),
]


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("method, eps, radius", CASES)
def test_imh_matches_quadrature(method, eps, radius, d):
    # few records and a strong signal: a skewed posterior that a Laplace fit gets wrong
    X, y = _toy(n=N_SKEW, d=d, seed=d, scale=4.0)
    model = BayesianLogisticRegression(beta=0.05, radius=radius)
    cal = pb.calibrate(model, N_SKEW, 2.0, eps, method)
    mesh, p = _grid_truth(X, y, cal, model, half_width=8.0)
    k = 6000
    xy, _ = model._statistics((X, y))
    draws, _, diag = model._draw(xy, cal, np.random.default_rng(10 + d), size=k)
    assert draws.shape == (k, d) and diag["chains"] >= k
    assert diag["rhat_max"] <= 1.01 and diag["pareto_k"] <= 0.7
    _check_against_grid(np.asarray(draws), mesh, p)
    if method == "ops":
        assert (np.linalg.norm(draws, axis=1) <= radius).all()
        # several batches of chains: the diagnostics are the worst over all of them
        assert diag["chains"] > imh.OPS_BATCH and 0.2 < diag["ops_acceptance"] < 0.8


@pytest.mark.parametrize("d", [1, 2])
def test_ops_truncation_matters_in_the_quadrature_case(d):
    # The OPS cases above test the truncation: the ball R = 1.5 drops about half the mass
    X, y = _toy(n=N_SKEW, d=d, seed=d, scale=4.0)
    model = BayesianLogisticRegression(beta=0.05, radius=1.5)
    cal = pb.calibrate(model, N_SKEW, 2.0, 2.0, "ops")
    free = BayesianLogisticRegression(beta=0.05, radius=1e6)  # same t, no ball
    mesh, p = _grid_truth(X, y, cal, free, half_width=8.0)
    assert p[np.linalg.norm(mesh, axis=1) > 1.5].sum() > 0.4


@pytest.mark.slow
def test_imh_matches_the_exact_sampler_d20():
    """At d = 20, n = 2,000 the reference is the exact back-end: 3,000 exact posterior draws
    (rejection sampling with a proven envelope, docs/exact.md) in a few seconds, an
    independent truth for IMH's moments and a two-sample energy test. (NUTS is checked
    against quadrature in tests/test_glm_sampling.py.)"""
    X, y = _toy(n=2000, d=20, seed=5, scale=0.5)
    ref_model = pb.BayesianLogisticRegression(beta=0.01, backend="exact")
    cal = pb.calibrate(ref_model, 2000, 2.0, 0.05, "diffused")
    data = ref_model._statistics((X, y))[0]
    ref = np.asarray(ref_model._draw(data, cal, np.random.default_rng(0), size=3000)[0])
    model = BayesianLogisticRegression(beta=0.01)
    k = 600
    ours, _, diag = model._draw((X, y), cal, np.random.default_rng(1), size=k)
    ours = np.asarray(ours)
    assert diag["rhat_max"] <= 1.01
    var = ref.var(axis=0)
    m4 = ((ref - ref.mean(axis=0)) ** 4).mean(axis=0)
    se_mean = np.sqrt(var / k + var / len(ref))
    se_var = np.sqrt((m4 - var**2) / k + (m4 - var**2) / len(ref))
    assert (np.abs(ours.mean(axis=0) - ref.mean(axis=0)) < Z * se_mean).all()
    assert (np.abs(ours.var(axis=0) - var) < Z * se_var).all()
    assert _energy_test_pvalue(ours, ref[:1000], np.random.default_rng(2)) > 0.01


def _energy_test_pvalue(a, b, rng, permutations=300):
    pooled = np.vstack([a, b])
    dist = cdist(pooled, pooled)
    na = len(a)

    def stat(idx):
        ia, ib = idx[:na], idx[na:]
        return (
            2 * dist[np.ix_(ia, ib)].mean()
            - dist[np.ix_(ia, ia)].mean()
            - dist[np.ix_(ib, ib)].mean()
        )

    base = np.arange(len(pooled))
    observed = stat(base)
    null = [stat(rng.permutation(base)) for _ in range(permutations)]
    return (1 + sum(v >= observed for v in null)) / (1 + permutations)


def test_energy_test_has_power():
    # the two-sample test above is not blind: a 10% shift in variance is rejected
    rng = np.random.default_rng(0)
    a = rng.normal(size=(800, 20))
    b = rng.normal(size=(800, 20)) * 1.1
    assert _energy_test_pvalue(a, b, rng, permutations=100) < 0.01


def test_a_proposal_that_misses_the_posterior_is_caught():
    X, y = _toy(n=60, d=2)
    model = BayesianLogisticRegression(beta=0.05, proposal_scale=0.05)
    with pytest.raises(pb.ConvergenceError) as err:
        pb.sample(model, (X, y), 2.0, 1.0, rng=0)
    assert "burn-in" in str(err.value) or "Pareto" in str(err.value)
    good = pb.sample(BayesianLogisticRegression(beta=0.05), (X, y), 2.0, 1.0, rng=0)
    assert good.diagnostics["pareto_k"] < 0.7 and good.diagnostics["attempts"] >= 1


def test_too_few_draws_fail_rhat_and_warn_mode_releases():
    X, y = _toy(n=60, d=2)
    model = BayesianLogisticRegression(beta=0.05, draws=4, chains=2, reruns=0)
    with pytest.raises(pb.ConvergenceError, match="R-hat"):
        pb.sample(model, (X, y), 2.0, 1.0, rng=0)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        rel = pb.sample(model, (X, y), 2.0, 1.0, rng=0, on_bad_diagnostics="warn")
    assert rel.value.shape == (2,)


def test_size_k_releases_come_from_distinct_chains_and_compose():
    X, y = _toy(n=80, d=3)
    model = BayesianLogisticRegression(beta=0.05)
    rel = pb.sample(model, (X, y), 2.0, 1.0, size=20, rng=4)
    assert rel.value.shape == (20, 3) and len({tuple(v) for v in rel.value}) == 20
    assert rel.diagnostics["chains"] == 20 and rel.eps <= 1.0
    # composed: 20 x one draw's eps, exact and rounded up (docs/numerics.md §9)
    assert rel.eps == round_up(20 * Fraction(rel.calibration.eps))
    again = pb.sample(model, (X, y), 2.0, 1.0, size=20, rng=4)
    np.testing.assert_array_equal(rel.value, again.value)  # threads do not break seeding


def test_weights_are_bounded_so_burn_in_follows_the_estimate():
    assert imh.burn_in(0.0) == 1
    # (1 - 1/M)^t <= 1e-6
    for m in (1.5, 10.0, 300.0):
        t = imh.burn_in(math.log(m))
        assert (1 - 1 / m) ** t <= 1e-6 < (1 - 1 / m) ** (t - 1)


def test_target_log_density_is_exact_and_overflow_free():
    X, y = _toy(n=500, d=4)
    t = imh.Target(X, y, 0.7, 3.0)
    w = np.random.default_rng(0).normal(size=(300, 4)) * np.r_[1, 10, 100, 1e4][:, None].repeat(
        75
    ).reshape(300, 1)
    margins = (w @ X.T) * y
    ref = -0.7 * np.logaddexp(0, -margins).sum(axis=1) - 1.5 * (w * w).sum(axis=1)
    got = t.log_density(w)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_mode_and_laplace_fit():
    X, y = _toy(n=300, d=3)
    t = imh.Target(X, y, 1.0, 15.0)
    w_hat, chol = t.mode()
    margins = (X @ w_hat) * y
    grad = (X * (y / (1 + np.exp(margins)))[:, None]).sum(axis=0) - 15.0 * w_hat
    hess = chol @ chol.T
    assert grad @ np.linalg.solve(hess, grad) < 1e-11  # Newton decrement: the stopping rule
    eps = 1e-4
    h00 = (
        -(
            t.log_density((w_hat + np.r_[eps, 0, 0])[None])[0]
            - 2 * t.log_density(w_hat[None])[0]
            + t.log_density((w_hat - np.r_[eps, 0, 0])[None])[0]
        )
        / eps**2
    )
    assert h00 == pytest.approx(hess[0, 0], rel=1e-4)


def test_memory_stays_linear_in_the_data():
    # never more than O(n d + chains (n + d)) floats: measure the peak of one release
    n, d = 60_000, 20
    X, y = _toy(n=n, d=d, scale=0.3)
    model = BayesianLogisticRegression(beta=0.01, chains=8)
    data = model._statistics((X, y))[0]
    cal = pb.calibrate(model, n, 2.0, 1.0)
    tracemalloc.start()
    model._draw(data, cal, np.random.default_rng(0))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    data_bytes = n * d * 8
    block_bytes = 2 * imh._CELLS * 8 * imh._threads()  # margins and a scratch per thread
    assert peak < 3 * data_bytes + block_bytes + 8 * 8 * n, peak


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("PRIVBAYES_NUM_THREADS", "1")
    assert imh._threads() == 1
    X, y = _toy(n=20_000, d=3)  # 400 proposals: row blocks of 5,242, so 4 blocks
    one = imh.Target(X, y, 1.0, 5.0)
    monkeypatch.setenv("PRIVBAYES_NUM_THREADS", "3")
    three = imh.Target(X, y, 1.0, 5.0)
    w = np.random.default_rng(0).normal(size=(400, 3))
    np.testing.assert_allclose(one.log_density(w), three.log_density(w), rtol=1e-13)
    monkeypatch.setenv("PRIVBAYES_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="PRIVBAYES_NUM_THREADS"):
        imh._threads()


def test_concurrent_releases_leave_blas_threads_alone():
    import threading

    from threadpoolctl import threadpool_info

    before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    X, y = _toy(n=20_000, d=10)
    model = BayesianLogisticRegression()
    out = {}

    def run(seed):
        out[seed] = pb.sample(model, (X, y), 2.0, 1.0, size=20, rng=seed).value

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    assert after == before and len(out) == 4
    np.testing.assert_array_equal(out[2], pb.sample(model, (X, y), 2.0, 1.0, size=20, rng=2).value)


def test_refusals_before_any_charge_and_never_a_frozen_release(tmp_path):
    X, y = _toy(n=30, d=2)
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=1e6, delta=1e-6)
    with pytest.raises(ValueError, match="size must be at most 100000"):
        pb.sample(
            BayesianLogisticRegression(), (X, y), 2.0, 1.0, size=10**12, ledger=ledger, dataset="d"
        )
    assert ledger.spent("d") == 0  # nothing charged
    for bad in (0.0, 1e-7, 1e4, float("nan")):
        with pytest.raises(ValueError, match="proposal_scale"):
            BayesianLogisticRegression(proposal_scale=bad)
    with pytest.raises(ValueError, match="draws"):
        BayesianLogisticRegression(draws=3)
    # "warn" does not release chains that never moved (a proposal far too narrow)
    frozen = BayesianLogisticRegression(beta=0.05, proposal_scale=1e-6, reruns=0)
    with pytest.raises(pb.ConvergenceError):
        pb.sample(frozen, (X, y), 2.0, 1.0, rng=0, on_bad_diagnostics="warn")
    with pytest.raises(pb.SamplingError, match="singular"):
        Xw, yw = _toy(n=5, d=50, scale=50.0)
        pb.sample(BayesianLogisticRegression(beta=1e-100), (Xw, yw), 2.0, 1e100, "direct")


def test_ledger_names_the_composition(tmp_path):
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=50.0, delta=1e-6)
    X, y = _toy(n=40, d=2)
    pb.sample(BayesianLogisticRegression(), (X, y), 2.0, 1.0, size=5, ledger=ledger, dataset="d")
    assert ledger.status("d")[0]["charges"][0]["mechanism"].endswith(
        " x5 backend=imh [approximate]"
    )


def test_ops_calibration_survives_underflow():
    cal = pb.calibrate(BayesianLogisticRegression(beta=0.1), 50, 2.0, 1e-250, "ops")
    assert 0 < cal.eps <= 1e-250
