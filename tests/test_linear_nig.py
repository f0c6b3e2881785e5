"""Noise-aware Bayesian linear regression with an unknown noise variance (the
Normal-Inverse-Gamma prior; docs/linear_regression.md §N6), against independent truth:

* the release is unchanged: the same statistic, noise, sensitivity and certificate as with a
  known noise_sd (the calibration never reads noise_sd);
* large eps: the exact conjugate NIG posterior in closed form (Student t coefficients,
  inverse-gamma sigma^2); tiny eps: the prior (its closed-form marginals);
* the covariances of (Z_A w, w^T Z_A w) against Monte Carlo; the Gaussian model of
  (b~, C~) at the true parameters against simulated releases (standardised residuals);
* simulation-based calibration of the 90% intervals (coefficients and sigma) in one cell;
* refusals: every posterior-sampling entry with noise_sd=None raises ValueError before
  the data are read or anything is charged; bad noise_prior values; the estimator's route.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import privbayes as pb
from privbayes.accounting import default_accountant
from privbayes.noise.discrete_gaussian import sample_discrete_gaussian
from privbayes.posterior.linear import linear_statistic
from privbayes.posterior.linear_nig import (
    LinearNIGPosterior,
    conjugate_nig_posterior,
    nig_intervals,
)

LAM = 2.0
A0, B0 = 4.0, 0.75


def _data(rng, n, d, w, sd, intercept=0.0, y_bound=6.0):
    x = rng.normal(size=(n, d)) * 0.35
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1) / 0.85)[:, None]
    y = x @ w + intercept + rng.normal(0.0, sd, n)
    assert np.all(np.abs(y) <= y_bound)
    return x, y


def _model(beta, **kw):
    return pb.BayesianLinearRegression(beta, 1.0, 6.0, None, noise_prior=(A0, B0), **kw)


def test_the_release_does_not_depend_on_noise_sd():
    rng = np.random.default_rng(1)
    x, y = _data(rng, 800, 2, np.array([1.0, -0.5]), 0.4)
    known = pb.BayesianLinearRegression(0.01, 1.0, 6.0, 0.4, fit_intercept=True)
    unknown = _model(0.01, fit_intercept=True)
    a = pb.posterior(known, (x, y), LAM, 1.0, rng=np.random.default_rng(7))
    b = pb.posterior(unknown, (x, y), LAM, 1.0, rng=np.random.default_rng(7))
    assert np.array_equal(a.statistic, b.statistic)  # same statistic, same noise draw
    assert a.noise == b.noise and a.eps == b.eps
    assert np.array_equal(a.rdp([1.5, 2, 8]), b.rdp([1.5, 2, 8]))
    assert type(b.law) is LinearNIGPosterior


@pytest.mark.parametrize("intercept", [False, True])
def test_large_eps_limit_is_the_exact_conjugate_nig_posterior(intercept):
    rng = np.random.default_rng(11)
    n, d = 5000, 2
    x, y = _data(rng, n, d, np.array([1.2, -0.7]), 0.45, 0.3 if intercept else 0.0)
    model = _model(0.05 / n, fit_intercept=intercept)
    spec = model.noise_aware_spec()
    post = pb.posterior(model, (x, y), LAM, 1e7, rng=3)
    mean, v, a_n, b_n = conjugate_nig_posterior(spec, x, y)
    (tlo, thi), (slo, shi) = nig_intervals(mean, v, a_n, b_n, 0.9)
    sd = np.sqrt(np.diag(v) * b_n / (a_n - 1.0))  # the Student t's sd
    assert np.all(np.abs(post.mean() - mean) <= 0.05 * sd)
    lo, hi = post.interval(0.9)
    assert np.all(np.abs(lo - tlo) <= 0.08 * sd) and np.all(np.abs(hi - thi) <= 0.08 * sd)
    got = post.noise_sd_interval(0.9)
    width = shi - slo
    assert abs(got[0] - slo) <= 0.06 * width and abs(got[1] - shi) <= 0.06 * width
    truth_sd_mean = math.sqrt(b_n) * math.exp(special_lgamma_ratio(a_n))
    assert abs(post.law.noise_sd_mean() - truth_sd_mean) <= 0.03 * width


def special_lgamma_ratio(a: float) -> float:
    """log(Gamma(a - 1/2) / Gamma(a)): E[sigma] = sqrt(b) Gamma(a - 1/2) / Gamma(a) for
    sigma^2 ~ IG(a, b)."""
    return math.lgamma(a - 0.5) - math.lgamma(a)


def test_tiny_eps_gives_back_the_prior():
    # the noise swamps the statistic: the posterior is the NIG prior (closed-form marginals:
    # w_j ~ Student t with 2 a0 dof and scale sqrt(b0 / (a0 n beta)), sigma^2 ~ IG(a0, b0))
    rng = np.random.default_rng(2)
    n = 500
    x, y = _data(rng, n, 2, np.array([1.0, 1.0]), 0.5)
    beta = 0.5 / n
    post = pb.posterior(_model(beta), (x, y), LAM, 1e-6, rng=4)
    lo, hi = post.interval(0.9)
    q = stats.t.ppf(0.95, 2 * A0) * math.sqrt(B0 / (A0 * n * beta))
    # the widths are the prior's; the centres move by < 0.1 of the width (the noisy A~
    # still enters the mean A~ w: the flat prior on the design, §N4 item 2)
    assert np.all(np.abs((hi - lo) / (2 * q) - 1) <= 0.06)
    assert np.all(np.abs(hi + lo) / 2 <= 0.1 * q)
    ig = stats.invgamma(A0, scale=B0)
    slo, shi = post.noise_sd_interval(0.9)
    assert abs(slo - math.sqrt(ig.ppf(0.05))) <= 0.03 * math.sqrt(ig.ppf(0.95))
    assert abs(shi - math.sqrt(ig.ppf(0.95))) <= 0.05 * math.sqrt(ig.ppf(0.95))


def test_design_noise_covariances_against_monte_carlo():
    # (Z_A w, w^T Z_A w) for a symmetric Z_A with iid N(0, 1) upper-triangle entries (the
    # intercept's (h, h) entry noiseless): K, k, kappa of §N6
    rng = np.random.default_rng(0)
    post = LinearNIGPosterior.__new__(LinearNIGPosterior)
    p = 3
    post.p, post.mask = p, np.ones((p, p))
    post.mask[-1, -1] = 0.0
    w = np.array([0.7, -1.3, 2.0])
    reps = 200_000
    iu = np.triu_indices(p)
    z = np.zeros((reps, p, p))
    z[:, iu[0], iu[1]] = rng.normal(size=(reps, len(iu[0])))
    z[:, -1, -1] = 0.0
    z = z + np.triu(z, 1).transpose(0, 2, 1)
    zw = z @ w
    emp = np.cov(np.column_stack([zw, zw @ w]).T)
    K, k, kappa = post._design_cov(w[None])
    want = np.block([[K[0], k[0][:, None]], [k[0][None], np.array([[kappa[0]]])]])
    assert np.allclose(emp, want, atol=0.02 * np.max(np.abs(want)))


def test_gaussian_model_of_the_statistic_at_the_truth():
    # simulated releases: (b~ - A~ w, C~ - w^T A~ w - n s^2) standardised by S(w, s^2) have
    # mean 0 and identity covariance (400 releases: se 0.05 and 0.07)
    rng = np.random.default_rng(3)
    n, d = 1000, 2
    w, sd = np.array([1.0, -0.8]), 0.5
    model = _model(0.01)
    spec = model.noise_aware_spec()
    x, y0 = _data(rng, n, d, w, sd)
    post = pb.posterior(model, (x, y0), LAM, 1.0, rng=1)
    law, sigma2 = post.law, post.noise["sigma2"]
    wt, s2 = w / 6.0, (sd / 6.0) ** 2
    zs = []
    for _ in range(400):
        y = x @ w + rng.normal(0.0, sd, n)
        stat, _, _ = linear_statistic(spec, (x, y))
        noisy = stat + sample_discrete_gaussian(sigma2, rng, size=stat.size)
        fam = LinearNIGPosterior.__new__(LinearNIGPosterior)
        fam._setup(spec, n, noisy, sigma2)  # the model of the statistic, without the fit
        S = fam._joint_cov(np.concatenate([wt, [math.log(s2)]]))
        r = np.concatenate([fam.b - fam.A @ wt, [fam.C - wt @ fam.A @ wt - n * s2]])
        zs.append(np.linalg.solve(np.linalg.cholesky(S), r))
    zs = np.array(zs)
    assert np.all(np.abs(zs.mean(axis=0)) < 0.2)
    assert np.allclose(np.cov(zs.T), np.eye(d + 1), atol=0.25)
    assert law.diagnostics["ok"]


def _sbc(n, d, eps, reps, seed):
    """sigma^2 ~ IG(a0, b0), w | sigma^2 ~ N(0, sigma^2 / (n beta)): the NIG prior."""
    rng = np.random.default_rng(seed)
    nb = 0.25  # w | sigma^2 has sd 2 sigma
    model = _model(nb / n)
    hit_w, hit_s = [], []
    for _ in range(reps):
        scales = rng.uniform(0.05, 0.6, d)
        x = rng.uniform(-0.3, 0.3, d) + rng.normal(size=(n, d)) * scales
        x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
        s2 = B0 / rng.gamma(A0)
        w = rng.normal(0.0, math.sqrt(s2 / nb), d)
        y = np.clip(x @ w + rng.normal(0.0, math.sqrt(s2), n), -6.0, 6.0)
        post = pb.posterior(model, (x, y), eps=eps, delta=1e-5, rng=rng)
        lo, hi = post.interval(0.9)
        hit_w.append((lo <= w) & (w <= hi))
        slo, shi = post.noise_sd_interval(0.9)
        hit_s.append(slo <= math.sqrt(s2) <= shi)
    return np.mean(hit_w), np.mean(hit_s)


def test_simulation_based_calibration_of_the_intervals():
    # 300 replications: 600 coefficient intervals (binomial sd 1.2 points) and 300 for sigma
    # (1.7 points); within 4 sd
    cover_w, cover_s = _sbc(2000, 2, 1.0, 300, 123)
    assert abs(cover_w - 0.9) <= 0.05
    assert abs(cover_s - 0.9) <= 0.07


def _ledger(tmp_path):
    ledger = pb.Ledger(tmp_path / "l.sqlite")
    ledger.init_budget("d", eps=50.0, delta=1e-6)
    return ledger


def test_posterior_sampling_refuses_noise_sd_none_before_any_charge(tmp_path):
    model = _model(0.1)
    ledger = _ledger(tmp_path)
    acc = default_accountant()
    before = acc.releases
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    x, y = np.zeros((20, 2)), np.zeros(20)

    class Unreadable:  # any read of the data would raise something else
        shape = (20, 2)

        def __array__(self, *a, **k):
            raise AssertionError("the data were read")

    for method in ("direct", "diffused", "concentrated", "ops"):
        with pytest.raises(ValueError, match="noise_sd=None"):
            pb.sample(model, (Unreadable(), y), LAM, 1.0, method, rng=gen, ledger=ledger,
                      dataset="d")  # fmt: skip
    with pytest.raises(ValueError, match="noise_sd=None"):
        model.rdp(20, LAM)
    with pytest.raises(ValueError, match="noise_sd=None"):
        pb.calibrate(model, 20, LAM, 1.0, d=2)
    with pytest.raises(ValueError, match="noise_sd=None"):
        model.resolve_beta(20, 2)
    assert ledger.spent("d") == 0.0 and acc.releases == before
    assert gen.bit_generator.state == state
    # the noise-aware route runs, through both entry points
    rel = pb.sample(model, (x, y), LAM, 1.0, "noise-aware", size=5, rng=1)
    assert np.shape(rel.value) == (5, 2)
    pb.posterior(model, (x, y), LAM, 1.0, ledger=ledger, dataset="d", rng=2)
    assert ledger.spent("d") > 0


def test_noise_prior_validation():
    with pytest.raises(ValueError, match="noise_prior applies"):
        pb.BayesianLinearRegression(0.1, 1.0, 1.0, 0.5, noise_prior=(1.0, 1.0))
    for bad in [(0.0, 1.0), (1.0, -1.0), (1.0, math.inf), (math.nan, 1.0)]:
        with pytest.raises(ValueError, match="noise_prior"):
            pb.BayesianLinearRegression(0.1, 1.0, 1.0, None, noise_prior=bad)
    for bad in [1.0, (1.0,), (1.0, 2.0, 3.0), "ab", (True, 1.0), (1.0, "2")]:
        with pytest.raises(TypeError, match="noise_prior"):
            pb.BayesianLinearRegression(0.1, 1.0, 1.0, None, noise_prior=bad)
    with pytest.raises(ValueError):
        pb.BayesianLinearRegression(0.1, 1.0, -1.0, None)
    m = pb.BayesianLinearRegression(0.1, 1.0, 2.0, None)
    assert m.noise_prior == (2.0, 0.25)  # the documented default (2, y_bound^2 / 16)
    assert "noise_prior=(2.0, 0.25)" in repr(m)
    assert m.noise_aware_spec().noise_prior == (2.0, 0.25)


def test_public_outputs_and_arviz():
    rng = np.random.default_rng(8)
    x, y = _data(rng, 3000, 2, np.array([1.0, -1.0]), 0.3, 0.2)
    model = _model(0.01, fit_intercept=True)
    post = pb.posterior(model, (x, y), LAM, 1.0, rng=9)
    assert post.sample().shape == (3,) and post.sample(7, rng=1).shape == (7, 3)
    lo, hi = post.interval(0.8)
    assert lo.shape == hi.shape == (3,) and np.all(lo < hi)
    slo, shi = post.noise_sd_interval(0.8)
    assert 0 < slo < shi
    assert post.diagnostics["ok"] and post.diagnostics["public"]
    with pytest.raises(ValueError):
        post.noise_sd_interval(1.0)
    known = pb.posterior(pb.BayesianLinearRegression(0.01, 1.0, 6.0, 0.3), (x, y), LAM, 1.0, rng=3)
    with pytest.raises(AttributeError, match="noise_sd=None"):
        known.noise_sd_interval(0.9)
    pytest.importorskip("arviz")
    idata = post.to_inference_data(draws=400, rng=2)
    assert idata.posterior["w"].dims == ("chain", "draw", "coefficient")
    assert idata.posterior["w"].shape == (4, 100, 3)
    assert idata.posterior["noise_sd"].shape == (4, 100)
    assert float(idata.posterior["noise_sd"].min()) > 0
    assert "observed_data" not in idata.groups()


def test_estimator_with_unknown_noise_sd():
    rng = np.random.default_rng(5)
    n = 20000
    x, y = _data(rng, n, 3, np.array([1.0, -0.5, 0.8]), 0.5, 0.4)
    est = pb.PrivateLinearRegression(
        eps=1.0, delta=1e-5, beta=1e-6, c=1.0, y_bound=6.0, noise_sd=None,
        fit_intercept=True, random_state=1,
    ).fit(x, y)  # fmt: skip
    assert est.route_ == "noise-aware" and est.privacy_["method"] == "noise-aware"
    ols = np.linalg.lstsq(np.column_stack([x, np.ones(n)]), y, rcond=None)[0]
    assert (
        est.score(x, y) >= np.corrcoef(np.column_stack([x, np.ones(n)]) @ ols, y)[0, 1] ** 2 - 0.02
    )
    lo, hi = est.posterior_.noise_sd_interval(0.99)
    assert lo <= est.noise_sd_ <= hi and abs(est.noise_sd_ - 0.5) < 0.1
    for bad in (
        {"route": "sample"},
        {"method": "direct"},
        {"lam": math.inf},
    ):
        with pytest.raises(ValueError):
            pb.PrivateLinearRegression(eps=1.0, noise_sd=None, **bad).fit(x, y)
