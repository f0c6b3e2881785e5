"""The exact back-end against independent truth: grid quadrature in 1-D and 2-D (moments,
quantiles, Kolmogorov-Smirnov) for every method, the envelope against brute-force maxima,
the public acceptance bound against adversarial data sets, mpmath for the 1-D bounds, the
binomial budget against scipy, and mutants (a too-small envelope) that must be caught."""

import dataclasses
import math

import mpmath
import numpy as np
import pytest
from scipy import stats

import privbayes as pb
from privbayes import BayesianLogisticRegression
from privbayes.sampling import envelope as E
from privbayes.sampling import exact as X

Z = 4.5  # standard errors allowed; ~40 comparisons per test: a false alarm is ~1e-4


def _toy(n, d, seed=0, scale=2.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-x @ np.full(d, scale))), 1.0, -1.0)
    return x, y


def _log_post(x, y, r, prec, w):
    """Unnormalised tempered log posterior at the rows of w, without the package's code."""
    margins = (w @ x.T) * y
    return -r * np.logaddexp(0.0, -margins).sum(axis=1) - 0.5 * prec * (w * w).sum(axis=1)


def _grid_truth(x, y, cal, model, half_width=8.0, points=(4001, 401)):
    d = x.shape[1]
    k = points[0] if d == 1 else points[1]
    axes = [np.linspace(-half_width, half_width, k)] * d
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
    lp = _log_post(x, y, cal.r, len(y) * model.beta / cal.m, mesh)
    if cal.method == "ops":
        lp[np.linalg.norm(mesh, axis=1) > model.radius] = -np.inf
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
        order = np.argsort(mesh[:, j], kind="stable")
        xs, cdf = mesh[order, j], np.cumsum(p[order])
        for q in (0.05, 0.25, 0.5, 0.75, 0.95):
            i = np.searchsorted(cdf, q)
            below = (draws[:, j] <= xs[i]).mean()
            assert abs(below - q) < Z * math.sqrt(q * (1 - q) / k) + p[order][i], ("q", j, q)
        # Kolmogorov-Smirnov against the grid's marginal CDF (its steps are one cell wide)
        ux, last = np.unique(xs, return_index=True)
        marg = np.append(cdf[np.r_[last[1:] - 1, len(cdf) - 1]], 1.0)[: ux.size]
        ks = stats.kstest(draws[:, j], lambda t, ux=ux, marg=marg: np.interp(t, ux, marg))
        cell = float(np.diff(marg).max())
        assert ks.statistic < 1.95 / math.sqrt(k) + cell, ("ks", j, ks.statistic)  # p ~ 1e-3
    if d == 2:
        cov = p @ ((mesh[:, 0] - mean[0]) * (mesh[:, 1] - mean[1]))
        prod = (draws[:, 0] - draws[:, 0].mean()) * (draws[:, 1] - draws[:, 1].mean())
        assert abs(prod.mean() - cov) < Z * prod.std() / math.sqrt(k)


N_SKEW = 12
CASES = [("direct", 50.0), ("diffused", 0.5), ("concentrated", 0.5), ("ops", 2.0)]


@pytest.fixture
def fresh_plans():
    X._plan.cache_clear()
    yield
    X._plan.cache_clear()


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("method, eps", CASES)
def test_exact_matches_quadrature(method, eps, d, monkeypatch, fresh_plans):
    # few records and a strong signal: a skewed posterior, far from its Laplace fit
    x, y = _toy(n=N_SKEW, d=d, seed=d, scale=4.0)
    radius = 1.5 if method == "ops" else None
    model = BayesianLogisticRegression(beta=0.05, radius=radius, backend="exact")
    cal = pb.calibrate(model, N_SKEW, 2.0, eps, method)
    if method == "ops":
        # R = 1.5 cuts about half of this posterior away (test below): far below what the
        # public ball bound can promise for every data set, so the budget assumes 30% inside
        # (true here); the kept draws must follow the truncated posterior.
        monkeypatch.setattr(E, "log_ball_mass_lower", lambda *a: math.log(0.3))
    mesh, p = _grid_truth(x, y, cal, model)
    k = 4000
    xy, _ = model._statistics((x, y))
    draws, _, diag = model._draw(xy, cal, np.random.default_rng(10 + d), size=k)
    assert draws.shape == (k, d) and diag["public"]["size"] == k
    _check_against_grid(np.asarray(draws), mesh, p)
    if method == "ops":
        assert (np.linalg.norm(draws, axis=1) <= radius).all()
        assert 0.3 < diag["inside_ball"] / diag["accepted"] < 0.7


@pytest.mark.parametrize("d", [1, 2])
def test_ops_truncation_matters_in_the_quadrature_case(d):
    x, y = _toy(n=N_SKEW, d=d, seed=d, scale=4.0)
    model = BayesianLogisticRegression(beta=0.05, radius=1.5)
    cal = pb.calibrate(model, N_SKEW, 2.0, 2.0, "ops")
    free = BayesianLogisticRegression(beta=0.05, radius=1e6)
    mesh, p = _grid_truth(x, y, cal, free)
    assert p[np.linalg.norm(mesh, axis=1) > 1.5].sum() > 0.4


def test_a_sampler_that_ignores_the_envelope_fails_the_quadrature_check():
    # The mutant "accept every proposal" releases the proposal law, not the posterior
    x, y = _toy(n=N_SKEW, d=1, seed=1, scale=4.0)
    model = BayesianLogisticRegression(beta=0.05, backend="exact")
    cal = pb.calibrate(model, N_SKEW, 2.0, 50.0, "direct")
    mesh, p = _grid_truth(x, y, cal, model)
    plan = X.exact_plan(N_SKEW, 1, 0.05, 1.0, cal.r, cal.m, method="direct", size=4000)
    prob = X.Problem(x, np.where(y > 0, 1.0, -1.0), cal.r, N_SKEW * 0.05)
    fit = X._fit(prob, plan)
    rng = np.random.default_rng(0)
    rho, _ = plan.envelope.draw(rng, 4000)
    u = rho[:, None] * X._directions(rng, 4000, 1)
    proposals = fit.w_hat + np.linalg.solve(fit.chol.T, u.T).T  # released unfiltered
    with pytest.raises(AssertionError):
        _check_against_grid(proposals, mesh, p)


# -- the envelope -----------------------------------------------------------------------------
def _h_mp(x):
    x = mpmath.mpf(x)
    if x == 0:
        return mpmath.mpf(0)
    return (x * x / 2 - x + 1 - mpmath.e ** (-x)) / (x * x)


def test_h_upper_against_mpmath():
    mpmath.mp.dps = 40
    xs = np.concatenate([[0.0, 1e-300, 1e-8], np.geomspace(1e-6, 1e3, 400), [0.999999, 1.0]])
    up = E.h_upper(xs)
    for x, u in zip(xs, up, strict=True):
        true = _h_mp(x)
        assert u >= true, x
        assert u <= true * (1 + 1e-12) + 1e-300, x


def test_g_upper_against_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(40):
        kappa, p, c = rng.uniform(0.05, 0.999), 10 ** rng.uniform(-1, 3), 10 ** rng.uniform(-1, 1)
        big_r = 10 ** rng.uniform(-2, 3)
        a = np.linspace(0.0, kappa * big_r, 200_001)
        brute = (a * E.h_upper(c * np.sqrt((big_r - a) / p))).max()
        got = E.g_upper(np.array([big_r]), kappa, p, c)[0]
        assert got >= brute * (1 - 1e-12)
        assert got <= brute * 1.01 + 1e-12


def _bound_check_data():
    """Small data sets, adversarial ones included: (name, X, y, beta)."""
    rng = np.random.default_rng(7)
    out = []
    for d in (1, 2):
        x, y = _toy(30, d, seed=d)
        out.append((f"toy{d}", x, y, 0.05))
        e = np.zeros(d)
        e[0] = 1.0
        out.append((f"identical{d}", np.tile(e, (40, 1)), np.ones(40), 0.02))
        ring = rng.normal(size=(25, d))
        ring /= np.linalg.norm(ring, axis=1)[:, None]
        out.append((f"norm-c{d}", ring, np.where(rng.random(25) < 0.5, 1.0, -1.0), 0.05))
        out.append((f"one{d}", e[None, :], np.ones(1), 0.5))
    return out


@pytest.mark.parametrize("name, x, y, beta", _bound_check_data())
def test_envelope_dominates_brute_force_and_is_tight(name, x, y, beta):
    n, d = x.shape
    plan = X.exact_plan(n, d, beta, 1.0)
    prob = X.Problem(x, y, 1.0, n * beta)
    fit = X._fit(prob, plan)
    # log pi(w_hat + L^-T u) - log pi(w_hat), independently computed, on radii x directions
    rho = np.linspace(1e-4, plan.envelope.rho_max if d == 1 else 12.0, 20_000 if d == 1 else 800)
    if d == 1:
        theta = np.array([[1.0], [-1.0]])
    else:
        a = np.linspace(0.0, 2 * np.pi, 361)[:-1]
        theta = np.stack([np.cos(a), np.sin(a)], axis=1)
    u = (rho[:, None, None] * theta[None]).reshape(-1, d)
    v = np.linalg.solve(fit.chol.T, u.T).T
    ell = _log_post(x, y, 1.0, n * beta, fit.w_hat + v) - _log_post(
        x, y, 1.0, n * beta, fit.w_hat[None]
    )
    best = ell.reshape(rho.size, -1).max(axis=1) + (d - 1) * np.log(rho)  # worst direction
    bound = plan.envelope.bound(rho)
    assert (best <= bound + 1e-9).all(), name  # never below the brute-force ratio
    # tight: the envelope's mass is close to that of the best radial envelope for this data
    # set (the brute-force sup over directions at each radius), log W* below
    log_w_star = E.log_sphere_area(d) + math.log(np.exp(best).sum() * (rho[1] - rho[0]))
    excess = plan.envelope.log_total - log_w_star
    assert -0.01 < excess < (0.05 if name.startswith("identical") else 0.2), (name, excess)


def test_log_mass_lower_bound_against_quadrature():
    for name, x, y, beta in _bound_check_data():
        n, d = x.shape
        plan = X.exact_plan(n, d, beta, 1.0)
        prob = X.Problem(x, y, 1.0, n * beta)
        fit = X._fit(prob, plan)
        k = 40_001 if d == 1 else 401
        axes = [np.linspace(-14, 14, k)] * d
        u = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
        v = np.linalg.solve(fit.chol.T, u.T).T
        ell = _log_post(x, y, 1.0, n * beta, fit.w_hat + v) - _log_post(
            x, y, 1.0, n * beta, fit.w_hat[None]
        )
        log_z = math.log(np.exp(ell).sum() * (28 / (k - 1)) ** d)
        trace = (1 + plan.eta) * min(d * plan.kappa, n / 4 / plan.p)
        low = E.log_mass_lower(d, plan.p, plan.c_env, plan.eta, trace)
        assert low <= log_z, name
        assert low > log_z - 1.0, name
        # so the public acceptance bound is below the data's exact acceptance Z / W
        assert plan.acceptance_lower_bound <= math.exp(log_z - plan.envelope.log_total)


def test_even_moment_ratio_against_mpmath():
    mpmath.mp.dps = 30

    def e4(a):
        return mpmath.e**a - 1 - a - a**2 / 2 - a**3 / 6

    for sigma in (1e-4, 0.1, 0.5, 1.0, 3.0):
        s = mpmath.mpf(sigma)
        integrand = lambda a, s=s: e4(a) * mpmath.npdf(a, 0, s)  # noqa: E731
        true = 2 * mpmath.quad(integrand, [0, s, 10 * s, 60 * s]) / s**2
        got = E._even_moment_ratio(sigma)
        assert got >= true and got <= true * (1 + 1e-9), sigma


def test_ball_mass_bound_against_quadrature():
    # a 2-D p-strongly log-concave law whose mode sits at the public bound's norm
    x, y = _toy(n=N_SKEW, d=2, seed=2, scale=4.0)
    prec = N_SKEW * 0.05
    mesh = np.stack(np.meshgrid(*[np.linspace(-12, 12, 801)] * 2, indexing="ij"), -1).reshape(-1, 2)
    lp = _log_post(x, y, 1.0, prec, mesh)
    p = np.exp(lp - lp.max())
    p /= p.sum()
    mode = mesh[np.argmax(lp)]
    bound = X._mode_norm_bound(N_SKEW, 1.0, 1.0, prec)
    assert np.linalg.norm(mode) <= bound
    for radius in (4.0, 5.0, 8.0):
        inside = p[np.linalg.norm(mesh, axis=1) <= radius].sum()
        low = E.log_ball_mass_lower(2, prec, radius, bound)
        assert low == -math.inf or math.exp(low) <= inside + 1e-3


# -- the public acceptance bound ----------------------------------------------------------------
def _adversarial():
    rng = np.random.default_rng(11)
    d = 3
    e = np.zeros(d)
    e[0] = 1.0
    ring = rng.normal(size=(400, d))
    ring /= np.linalg.norm(ring, axis=1)[:, None]
    return [
        ("identical rows", np.tile(e, (400, 1)), np.where(rng.random(400) < 0.7, 1.0, -1.0)),
        ("all one label", ring, np.ones(400)),
        ("norm exactly c", ring, np.where(ring[:, 0] > 0, 1.0, -1.0)),
        ("separable, aligned", np.tile(e, (400, 1)), np.ones(400)),
    ]


@pytest.mark.parametrize("name, x, y", _adversarial())
def test_public_acceptance_bound_holds_on_adversarial_data(name, x, y):
    n, d = x.shape
    model = BayesianLogisticRegression(beta=0.01, backend="exact")
    cal = pb.calibrate(model, n, 2.0, 1.0, "diffused")
    k = 1000
    xy, _ = model._statistics((x, y))
    _, _, diag = model._draw(xy, cal, np.random.default_rng(1), size=k)
    a_min = diag["public"]["acceptance_lower_bound"]
    m = diag["public"]["proposals"]
    observed = diag["accepted"] / m
    assert observed >= a_min - Z * math.sqrt(a_min * (1 - a_min) / m), (name, observed, a_min)


def test_public_acceptance_bound_with_a_single_record():
    model = BayesianLogisticRegression(beta=0.5, backend="exact")
    cal = pb.calibrate(model, 1, 2.0, 10.0, "diffused")
    xy, _ = model._statistics((np.array([[0.6, 0.8]]), np.array([1.0])))
    _, _, diag = model._draw(xy, cal, np.random.default_rng(2), size=2000)
    pub = diag["public"]
    a, m = pub["acceptance_lower_bound"], pub["proposals"]
    assert diag["accepted"] / m >= a - Z * math.sqrt(a * (1 - a) / m)


# -- mutants, failure, budget, determinism, refusals ---------------------------------------------
def test_a_too_small_envelope_is_caught():
    x, y = _toy(n=200, d=2, seed=4, scale=3.0)
    model = BayesianLogisticRegression(beta=0.02, backend="exact")
    cal = pb.calibrate(model, 200, 2.0, 1.0)
    plan = X.exact_plan(200, 2, 0.02, 1.0, cal.r, cal.m, size=200)
    prob = X.Problem(x, y, cal.r, 200 * 0.02)
    # mutant 1: the envelope of a Gaussian (kappa = 0: no self-concordance term)
    gauss = E.build_envelope(2, plan.p, 0.0, plan.c_env, plan.tau, plan.eta)
    with pytest.raises(X.EnvelopeViolationError, match="bug"):
        X.run(prob, dataclasses.replace(plan, envelope=gauss), np.random.default_rng(0))
    # mutant 2: the right shape, too low by 0.3 nats
    with pytest.raises(X.EnvelopeViolationError):
        X.run(prob, plan, np.random.default_rng(0), _shift=0.3)
    kept, _, stats_ = X.run(prob, plan, np.random.default_rng(0))  # the real one passes
    assert len(kept) >= 200 and stats_["max_log_ratio"] <= 0


def test_failure_releases_nothing_and_says_so(monkeypatch):
    x, y = _toy(n=50, d=2)
    model = BayesianLogisticRegression(beta=0.05, backend="exact")
    real_run = X.run
    monkeypatch.setattr(X, "run", lambda *a, **kw: real_run(*a, **kw, _shift=-200.0))
    with pytest.raises(X.ExactSamplingError, match="nothing was released") as err:
        pb.sample(model, (x, y), 2.0, 1.0, rng=0)
    assert err.value.public["proposals"] >= 1 and err.value.public["delta_f"] == 1e-12
    assert isinstance(err.value, pb.SamplingError)


def test_budget_against_the_binomial_tail():
    for a in (0.85, 0.5, 0.05, 1e-3):
        for delta in (1e-3, 1e-12):
            n1 = X._budget(a, 1, delta, None)
            assert (1 - a) ** n1 <= delta < (1 - a) ** (n1 - 1)
            for k in (2, 64, 500):
                nk = X._budget(a, k, delta, None)
                assert stats.binom.cdf(k - 1, nk, a) <= delta * (1 + 1e-5)
                assert stats.binom.cdf(k - 1, nk - 1, a) > delta * (1 - 1e-5)
                assert nk <= k * n1  # a joint budget never costs more than separate ones
    assert X._budget(1e-3, 1, 1e-12, 1000) is None


def test_same_seed_same_draws_and_a_fixed_number_of_proposals(monkeypatch):
    """The proposals are a public number in public batches whatever the data; only the
    certified fit's step count (running time) depends on the data."""
    evaluated, in_fit = [], [False]
    real = X.Problem.loglik_diff
    real_fit = X.certified_fit

    def counting(self, z0, sp0, vt):
        if not in_fit[0]:
            evaluated.append(vt.shape[1])
        return real(self, z0, sp0, vt)

    def fitting(*args):
        in_fit[0] = True
        try:
            return real_fit(*args)
        finally:
            in_fit[0] = False

    monkeypatch.setattr(X.Problem, "loglik_diff", counting)
    monkeypatch.setattr(X, "certified_fit", fitting)
    model = BayesianLogisticRegression(beta=0.01, backend="exact")
    a = pb.sample(model, _toy(300, 3, seed=1), 2.0, 4.0, size=4, rng=5)
    count_a = list(evaluated)
    evaluated.clear()
    b = pb.sample(model, _toy(300, 3, seed=1), 2.0, 4.0, size=4, rng=5)
    np.testing.assert_array_equal(a.value, b.value)
    evaluated.clear()
    # two different data sets of equal n and d: the same public budget, the same passes
    x2, y2 = _toy(300, 3, seed=9, scale=-6.0)
    c = pb.sample(model, (x2, np.ones(300)), 2.0, 4.0, size=4, rng=6)
    assert evaluated == count_a and sum(count_a) == a.diagnostics["public"]["proposals"]
    assert c.diagnostics["public"] == a.diagnostics["public"]
    assert "newton_steps" not in a.diagnostics["public"]  # data-dependent: private


def test_exact_feasibility_is_public_and_refuses_before_the_data(monkeypatch):
    t, expected = X.exact_feasibility(10**6, 20, 1e-3, 1.0)
    assert 1 <= t <= 40 and 1.0 <= expected < 1.5
    with pytest.raises(X.ExactInfeasibleError) as err:  # MNIST 3-vs-8 at beta = 1e-3
        X.exact_feasibility(11_982, 197, 1e-3, 1.0)
    assert err.value.expected_proposals_per_draw > 1e10
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, pb.InfeasiblePrivacyError)  # one except clause for both
    assert pb.ExactInfeasibleError is X.ExactInfeasibleError
    assert "ExactInfeasibleError" in pb.__all__

    def touched(*a, **k):
        raise AssertionError("the data were touched")

    monkeypatch.setattr(X, "Problem", touched)
    x = np.random.default_rng(0).normal(size=(300, 60)) / 20
    model = BayesianLogisticRegression(beta=1e-4, backend="exact")
    with pytest.raises(X.ExactInfeasibleError, match="max_proposals"):
        pb.sample(model, (x, np.ones(300)), 2.0, 1.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"delta_f": 0.0}, "delta_f"),
        ({"delta_f": 0.9}, "delta_f"),
        ({"delta_f": float("nan")}, "delta_f"),
        ({"max_proposals": 0}, "max_proposals"),
        ({"max_proposals": 2.5}, "max_proposals"),
        ({"max_proposals": True}, "max_proposals"),
        ({"backend": "exakt"}, "backend"),
    ],
)
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        BayesianLogisticRegression(**{"backend": "exact", **kwargs})


def test_bad_public_arguments_are_refused():
    with pytest.raises(ValueError, match="n must be >= 1"):
        X.exact_plan(0, 2, 0.1, 1.0)
    with pytest.raises(ValueError, match="d must be"):
        X.exact_plan(10, 0, 0.1, 1.0)
    with pytest.raises(ValueError, match="m must be 1"):
        X.exact_plan(10, 2, 0.1, 1.0, 0.5, 0.5, method="ops")
    with pytest.raises(ValueError, match="method"):
        X.exact_plan(10, 2, 0.1, 1.0, method="nuts")
    with pytest.raises(ValueError, match="size"):
        X.exact_plan(10, 2, 0.1, 1.0, size=0)


def test_size_k_shares_one_budget_and_composes():
    x, y = _toy(n=400, d=3)
    model = BayesianLogisticRegression(beta=0.05, backend="exact", delta_f=1e-9)
    rel = pb.sample(model, (x, y), 2.0, 8.0, size=8, rng=3)
    assert rel.value.shape == (8, 3) and len({tuple(v) for v in rel.value}) == 8
    pub = rel.diagnostics["public"]
    assert pub["delta_f"] == 1e-9 and pub["size"] == 8
    assert (
        pub["proposals"]
        == X.exact_feasibility(
            400, 3, 0.05, 1.0, rel.calibration.r, rel.calibration.m, size=8, delta_f=1e-9
        )[0]
    )
    assert rel.eps == 8 * rel.calibration.eps <= 8.0


def test_memory_stays_linear_in_the_data():
    # X y (n d), margins and softplus at w_hat (2 n), one block of margins per pass
    import tracemalloc

    n, d = 60_000, 20
    x, y = _toy(n=n, d=d, scale=0.3)
    model = BayesianLogisticRegression(beta=0.01, backend="exact")
    data = model._statistics((x, y))[0]
    cal = pb.calibrate(model, n, 2.0, 1.0)
    X.exact_plan(n, d, 0.01, model.c_bound, cal.r, cal.m)  # the public plan is cached
    tracemalloc.start()
    model._draw(data, cal, np.random.default_rng(0))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    block_bytes = 2 * X._CELLS * 8
    assert peak < 2 * n * d * 8 + block_bytes + 16 * n * 8, peak


def test_loglik_differences_within_their_bound():
    """Lemma 7's bound on the computed sum_i [phi(z0_i + a_i) - phi(z0_i)] (and the rest of
    the log-density ratio) against 80-bit sums, on 20,000 rows (three blocks, grouped)."""
    n, d = 20_000, 4
    x, y = _toy(n, d, seed=12, scale=3.0)
    rng = np.random.default_rng(12)
    w_hat = rng.normal(size=d) * 6
    vt = rng.normal(size=(d, 40)) * rng.uniform(0.01, 3, 40)
    prob = X.Problem(x, y, 1.0, 1.0)
    z0 = X._margins(prob.xy, w_hat)
    got = prob.loglik_diff(z0, prob.base(z0), vt)
    u = (x * y[:, None]).astype(np.longdouble)

    def softplus_ld(z):
        return np.log1p(np.exp(-np.abs(z))) + np.maximum(-z, 0)

    ref0 = softplus_ld(u @ w_hat.astype(np.longdouble))
    w_norm = float(np.linalg.norm(w_hat)) * 1.0001
    for j in range(vt.shape[1]):
        wj = w_hat.astype(np.longdouble) + vt[:, j].astype(np.longdouble)
        ref = (softplus_ld(u @ wj) - ref0).sum()
        v_norm = float(np.linalg.norm(vt[:, j])) * 1.0001
        bound = X._log_density_error(n, d, 1.0, 1.0, 1.0, w_norm, v_norm, 1.0)
        assert abs(float(got[j] - ref)) <= bound, j
