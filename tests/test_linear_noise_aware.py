"""Noise-aware Bayesian linear regression against independent truth
(docs/linear_regression.md §N1-§N4).

* the sensitivity: the integer statistic's change between single-record data sets, by
  brute force over adversarial records at the bounds (the sphere ||x|| = c, the float
  threshold itself, y = +-y_bound, the 120-degree pairs that attain the bound), never
  above the proven Delta^2, and within 1% of it (the bound is tight);
* the certificate: post.rdp equals lam Delta^2 / (2 sigma^2) in exact rationals, rounded
  up, with Delta^2 recomputed here from §N2's formula;
* refusals before any charge (ledger and noise untouched): y outside +-y_bound,
  ||x|| > c, NaN in X or y, n = 0, column=, bad shapes;
* the posterior: sigma -> 0 gives the exact conjugate Gaussian posterior; Cov(Z_A w)
  against Monte Carlo; simulation-based calibration of the 90% intervals in one cell.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting import default_accountant
from privbayes.certified import round_up
from privbayes.posterior import family_of
from privbayes.posterior.linear import (
    GRID,
    LinearNoiseAwareSpec,
    LinearPosterior,
    LinearStatistics,
    conjugate_posterior,
    linear_sensitivity_sq,
    linear_statistic,
    normal_interval,
    statistic_dim,
)

LAM = 2.0


def _record_stat(kernel: LinearStatistics, x, y) -> np.ndarray:
    x = np.asarray(x, dtype=float)[None, :]
    y = np.asarray([y], dtype=float)
    bad_y, over = kernel.masks(x, y)
    assert not (bad_y.any() or over.any())
    return kernel.vector(kernel.gram(x, y)).astype(object)


def _adversarial(d: int, c: float, rng) -> list[np.ndarray]:
    """Rows at the bound: axes, the diagonal, random directions, pairs at 120 degrees
    (rotated so that x x^T - x' x'^T is diagonal: the bound is attained), each scaled to
    the float threshold itself, and zero."""
    kernel_thr = LinearStatistics(LinearNoiseAwareSpec(1.0, c, 1.0, 1.0), d).threshold
    dirs = [np.eye(d)[j] for j in range(d)] + [np.ones(d), -np.ones(d)]
    dirs += list(rng.normal(size=(6, d)))
    if d >= 2:
        # unit u, u' with u.u' = -1/2 and u u^T - u' u'^T diagonal: u + u' and u - u' along
        # (e_1 + e_2) / sqrt 2 and (e_1 - e_2) / sqrt 2 (the bound's maximiser, §N2)
        rot = np.array([[1.0, -1.0], [1.0, 1.0]]) / math.sqrt(2.0)
        for sign in (1, -1):
            for v in ((0.5, math.sqrt(0.75) * sign), (0.5, -math.sqrt(0.75) * sign)):
                u = np.zeros(d)
                u[:2] = rot @ np.array(v)
                dirs.append(u)
    rows = [np.zeros(d)]
    for v in dirs:
        v = np.asarray(v, float)
        unit = v / np.linalg.norm(v)
        rows.append(unit * c)
        t = unit * kernel_thr
        while np.linalg.norm(t) > kernel_thr:  # the float norm exactly at the threshold
            t = t * (1 - 2**-52)
        rows.append(t)
    return rows


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("c,y_bound", [(1.0, 1.0), (3.7, 0.3)])
def test_sensitivity_brute_force_never_exceeds_the_proven_bound(d, intercept, c, y_bound):
    rng = np.random.default_rng(d + 10 * intercept)
    spec = LinearNoiseAwareSpec(1.0, c, y_bound, 1.0, fit_intercept=intercept)
    kernel = LinearStatistics(spec, d)
    delta_sq = linear_sensitivity_sq(d, spec.h)
    ys = [y_bound, -y_bound, 0.0, y_bound * (1 - 2**-53), y_bound / 3]
    recs = [(x, y) for x in _adversarial(d, c, rng) for y in ys]
    stats = [_record_stat(kernel, x, y) for x, y in recs]
    worst = 0
    for i in range(len(stats)):
        for j in range(i + 1, len(stats)):
            diff = stats[i] - stats[j]
            worst = max(worst, int(sum(int(v) * int(v) for v in diff)))
    assert worst <= delta_sq
    if d >= 2 and not intercept:
        assert worst >= 0.99 * delta_sq  # the 120-degree pair attains the bound (§N2)


def test_sensitivity_formula_is_the_documented_one():
    # Delta^2 recomputed from §N2's closed form with the grid bound P written out here
    for d, h in [(1, 0), (5, 0), (20, 2**15), (2**20, 2**15)]:
        root = Fraction(GRID) * (1 + Fraction(1, 2**53)) ** 2 * (
            1 + Fraction(2, 10**12)
        ) + Fraction(math.isqrt(d - 1) + 1, 2)
        P, M, H = math.floor(root**2), GRID**2, h * h
        want = math.floor(
            2 * P * P + 2 * H * P + Fraction((H + M) ** 2, 2)
            + max(2 * P * M + 4 * H * M, P * M + 2 * H * M + M * M)
        )  # fmt: skip
        assert linear_sensitivity_sq(d, h) == want
    # normalised: 4.5 without intercept (P ~ M ~ 2^32)
    assert linear_sensitivity_sq(2, 0) / 2.0**64 == pytest.approx(4.5, rel=1e-4)


def test_replace_one_in_a_data_set_moves_the_statistic_by_the_record_difference():
    rng = np.random.default_rng(3)
    spec = LinearNoiseAwareSpec(1.0, 2.0, 1.5, 1.0, fit_intercept=True)
    n, d = 3000, 4
    x = rng.normal(size=(n, d))
    x *= (2.0 * rng.random(n) / np.linalg.norm(x, axis=1))[:, None]
    y = rng.uniform(-1.5, 1.5, n)
    s1, _, _ = linear_statistic(spec, (x, y))
    x2, y2 = x.copy(), y.copy()
    x2[17] = np.array([2.0, 0, 0, 0]) * (1 - 1e-15)
    y2[17] = -1.5
    s2, _, _ = linear_statistic(spec, (x2, y2))
    kernel = LinearStatistics(spec, d)
    want = _record_stat(kernel, x2[17], y2[17]) - _record_stat(kernel, x[17], y[17])
    assert np.array_equal((s2.astype(object) - s1.astype(object)), want)
    diff_sq = sum(int(v) ** 2 for v in want)
    assert diff_sq <= linear_sensitivity_sq(d, spec.h)
    # the sums are exact: any order of the rows gives the same integers
    perm = rng.permutation(n)
    s3, _, _ = linear_statistic(spec, (x[perm], y[perm]))
    assert np.array_equal(s1, s3)


@pytest.mark.parametrize("intercept", [False, True])
def test_certificate_is_exact_and_rounded_up(intercept):
    rng = np.random.default_rng(0)
    x = rng.uniform(-0.5, 0.5, (200, 3))
    y = rng.uniform(-1, 1, 200)
    model = pb.BayesianLinearRegression(0.1, 1.0, 1.0, 0.5, fit_intercept=intercept)
    for lam, eps in [(2.0, 1.0), (1.5, 0.01), (64.0, 3.0)]:
        post = pb.posterior(model, (x, y), lam, eps, rng=1)
        h = GRID // 2 if intercept else 0
        d2 = linear_sensitivity_sq(3, h)
        assert post.noise["sensitivity_sq"] == d2
        assert post.noise["dim"] == statistic_dim(3, intercept) == post.statistic.size
        s2 = Fraction(post.noise["sigma2"])
        for order in (1.0, 1.5, lam, 10.0, 1000.0):
            assert post.rdp(order) == round_up(Fraction(order) * d2 / (2 * s2))
        assert post.eps <= eps and post.rdp(lam) <= eps
        assert post.guarantee == "exact"
    post = pb.posterior(model, (x, y), eps=1.0, delta=1e-5, rng=2)
    assert post.dp_eps <= 1.0 and post.delta == 1e-5


def _ledger(tmp_path):
    ledger = pb.Ledger(tmp_path / "l.sqlite")
    ledger.init_budget("d", eps=50.0, delta=1e-6)
    return ledger


def _bad_cases():
    rng = np.random.default_rng(5)
    x = rng.uniform(-0.4, 0.4, (50, 3))
    y = rng.uniform(-1, 1, 50)
    y_out = y.copy()
    y_out[7] = 1.0 + 1e-12
    x_out = x.copy()
    x_out[9] = [1.0, 0.1, 0.0]
    x_nan, y_nan = x.copy(), y.copy()
    x_nan[4, 2] = np.nan
    y_nan[11] = np.nan
    return [
        ((x, y_out), "y", 0, 7),
        ((x_out, y), "X", 1, 9),
        ((x_nan, y), "X", "finite", 4),
        ((x, y_nan), "y", "finite", 11),
    ]


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("intercept", [False, True])
def test_bad_records_are_refused_before_any_charge(case, intercept, tmp_path):
    data, column, rule, index = _bad_cases()[case]
    model = pb.BayesianLinearRegression(0.1, 1.0, 1.0, 0.5, fit_intercept=intercept)
    ledger = _ledger(tmp_path)
    acc = default_accountant()
    before = acc.releases
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with pytest.raises(pb.DataError) as info:
        pb.posterior(model, data, LAM, 1.0, rng=gen, ledger=ledger, dataset="d")
    err = info.value
    assert (err.column, err.rule, err.index, err.count) == (column, rule, index, 1)
    assert ledger.spent("d") == 0.0 and acc.releases == before
    assert gen.bit_generator.state == state


def test_other_refusals_before_any_charge(tmp_path):
    model = pb.BayesianLinearRegression(0.1, 1.0, 1.0, 0.5)
    ledger = _ledger(tmp_path)
    x, y = np.zeros((5, 2)), np.zeros(5)
    with pytest.raises(ValueError, match="n = 0"):
        pb.posterior(model, (np.zeros((0, 2)), np.zeros(0)), LAM, 1.0, ledger=ledger, dataset="d")
    with pytest.raises(ValueError, match="column"):
        pb.posterior(model, (x, y), LAM, 1.0, column="a", ledger=ledger, dataset="d")
    with pytest.raises(TypeError, match="pair"):
        pb.posterior(model, x, LAM, 1.0, ledger=ledger, dataset="d")
    with pytest.raises(ValueError, match="shape"):
        pb.posterior(model, (x, np.zeros(4)), LAM, 1.0, ledger=ledger, dataset="d")
    with pytest.raises(pb.InfeasiblePrivacyError):
        pb.posterior(model, (x, y), math.inf, 1.0, ledger=ledger, dataset="d")
    with pytest.raises(TypeError, match="instance"):
        pb.posterior(pb.BayesianLinearRegression, (x, y), LAM, 1.0)
    with pytest.raises(ValueError):
        pb.BayesianLinearRegression(0.1, -1.0, 1.0, 0.5)
    with pytest.raises(ValueError):
        pb.BayesianLinearRegression(0.1, 1.0, 1.0, 0.0)
    assert ledger.spent("d") == 0.0
    post = pb.posterior(model, (x, y), LAM, 1.0, ledger=ledger, dataset="d", rng=3)
    assert ledger.spent("d") > 0  # one charge for the release
    spent = ledger.spent("d")
    post.sample(500, rng=4)
    post.interval(0.9)
    assert ledger.spent("d") == spent  # post-processing is free


# -- the posterior ----------------------------------------------------------------------------


def test_zero_noise_limit_is_the_exact_conjugate_posterior():
    rng = np.random.default_rng(11)
    n, d = 4000, 3
    spec = LinearNoiseAwareSpec(0.05, 1.0, 3.0, 0.4, fit_intercept=True)
    x = rng.uniform(-0.55, 0.55, (n, d))
    w = np.array([1.0, -0.7, 0.3])
    y = np.clip(x @ w + 0.2 + rng.normal(0, 0.4, n), -3, 3)
    stat, n, _ = linear_statistic(spec, (x, y))
    post = LinearPosterior(spec, n, stat, 1e-12, rng=np.random.default_rng(1))
    mu, cov = conjugate_posterior(spec, x, y)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(post.mean() - mu) <= 0.03 * sd)
    lo, hi = post.interval(0.9)
    tlo, thi = normal_interval(mu, cov, 0.9)
    assert np.all(np.abs(lo - tlo) <= 0.06 * sd) and np.all(np.abs(hi - thi) <= 0.06 * sd)
    draws = post.draw(20000, np.random.default_rng(2))[0]
    assert np.all(np.abs(draws.std(axis=0) / sd - 1) < 0.04)


def test_noise_covariance_of_the_design_term_against_monte_carlo():
    # Cov(Z_A w) for a symmetric Z_A with iid N(0, tau^2) upper-triangle entries (the
    # intercept's (h, h) entry noiseless) is tau^2 K(w): §N3's formula
    rng = np.random.default_rng(4)
    spec = LinearNoiseAwareSpec(1.0, 1.0, 1.0, 1.0, fit_intercept=True)
    x = rng.uniform(-0.5, 0.5, (300, 3))
    y = rng.uniform(-1, 1, 300)
    stat, n, _ = linear_statistic(spec, (x, y))
    post = LinearPosterior(spec, n, stat, 1e18, rng=np.random.default_rng(0), proposals=2000)
    p = post.p
    w = np.array([0.7, -1.3, 0.4, 2.0])
    reps = 200_000
    iu = np.triu_indices(p)
    z = np.zeros((reps, p, p))
    z[:, iu[0], iu[1]] = rng.normal(size=(reps, len(iu[0])))
    z[:, -1, -1] = 0.0
    z = z + np.triu(z, 1).transpose(0, 2, 1)
    emp = np.cov((z @ w).T)
    base = post.se2 * post.A_psd + post.tau2 * np.eye(p)
    k = (post._cov(w[None])[0] - base) / post.tau2
    assert np.allclose(emp, k, atol=0.03 * np.max(np.abs(k)))


def _sbc(n, d, eps, reps, seed):
    rng = np.random.default_rng(seed)
    model = pb.BayesianLinearRegression(1.0 / n, 1.0, math.sqrt(d) + 3.0, 0.5)
    spec = model.noise_aware_spec()
    hits = []
    for _ in range(reps):
        scales = rng.uniform(0.05, 0.6, d)
        x = rng.uniform(-0.3, 0.3, d) + rng.normal(size=(n, d)) * scales
        x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
        w = rng.normal(0, 1.0, d)
        y = np.clip(x @ w + rng.normal(0, spec.noise_sd, n), -spec.y_bound, spec.y_bound)
        post = pb.posterior(model, (x, y), eps=eps, delta=1e-5, rng=rng)
        lo, hi = post.interval(0.9)
        hits.append((lo <= w) & (w <= hi))
    return np.mean(hits)


def test_simulation_based_calibration_of_the_intervals():
    # 600 intervals: binomial sd 1.2 points at 90%; within 4 sd
    cover = _sbc(2000, 2, 1.0, 300, 123)
    assert abs(cover - 0.9) <= 0.05


def test_public_outputs_and_arviz():
    rng = np.random.default_rng(8)
    x = rng.uniform(-0.5, 0.5, (500, 2))
    y = np.clip(x @ [1.0, -1.0] + rng.normal(0, 0.3, 500), -2, 2)
    model = pb.BayesianLinearRegression(0.01, 1.0, 2.0, 0.3, fit_intercept=True)
    post = pb.posterior(model, (x, y), LAM, 1.0, rng=9)
    assert post.sample().shape == (3,) and post.sample(7, rng=1).shape == (7, 3)
    lo, hi = post.interval(0.8)
    assert lo.shape == hi.shape == (3,) and np.all(lo < hi)
    assert post.mean().shape == (3,)
    assert post.diagnostics["ok"] and post.diagnostics["public"]
    sigma2 = post.noise["sigma2"]
    again = family_of(model, post.n, post.statistic, sigma2, rng=np.random.default_rng(3))
    assert np.allclose(again.mean(), post.mean(), atol=0.05 * np.max(hi - lo))
    pytest.importorskip("arviz")
    idata = post.to_inference_data(draws=400, rng=2)
    assert idata.posterior["w"].dims == ("chain", "draw", "coefficient")
    assert idata.posterior["w"].shape == (4, 100, 3)
    assert idata.attrs["privbayes_sensitivity_sq"] >= post.noise["sensitivity_sq"]
    assert "observed_data" not in idata.groups()


def test_dask_input_gives_the_same_statistic_and_errors():
    da = pytest.importorskip("dask.array")
    import dask

    rng = np.random.default_rng(6)
    x = rng.uniform(-0.5, 0.5, (5000, 3))
    y = rng.uniform(-1, 1, 5000)
    spec = LinearNoiseAwareSpec(0.1, 1.0, 1.0, 0.5, fit_intercept=True)
    mem, n, d = linear_statistic(spec, (x, y))
    with dask.config.set(scheduler="synchronous"):
        lazy, n2, d2 = linear_statistic(
            spec, (da.from_array(x, chunks=(777, 3)), da.from_array(y, chunks=777))
        )
        assert np.array_equal(mem, lazy) and (n, d) == (n2, d2)
        y[4321] = 1.5
        with pytest.raises(pb.DataError) as info:
            linear_statistic(spec, (da.from_array(x, chunks=(777, 3)), da.from_array(y)))
    assert (info.value.column, info.value.index, info.value.count) == ("y", 4321, 1)
