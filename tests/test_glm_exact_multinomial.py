"""The exact back-end for K-class softmax regression against independent truth
(docs/multinomial.md §6): grid quadrature in d K = 3 dimensions (moments, quantiles,
Kolmogorov-Smirnov) for direct, diffused and concentrated; the envelope against
brute-force maxima over directions; the acceptance bound against quadrature and
adversarial data; the line-cumulant lemma, M_K, the mode bound and F_K against brute force
and mpmath; the rounding-error bounds against 80-bit sums; mutants that must be caught."""

import dataclasses
import math

import mpmath
import numpy as np
import pytest
from scipy import optimize, special, stats
from test_glm_exact import Z  # noqa: I001  (tests/ on sys.path)

import privbayes as pb
from privbayes.audit import pairs as A
from privbayes.sampling import envelope as E
from privbayes.sampling import exact as X
from privbayes.sampling import exact_softmax as S


def _toy(n, d, k, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    w = rng.normal(size=(d, k)) * scale
    logits = x @ w
    p = special.softmax(logits, axis=1)
    y = np.array([rng.choice(k, p=row) for row in p])
    return x, y


def _check_against_grid(draws, mesh, p):
    """Means, variances, quantiles and KS of every coordinate against the grid's marginals
    (midpoint CDF: a grid slice holds a few percent of the mass in 3-D)."""
    k, dim = draws.shape
    mean = p @ mesh
    for j in range(dim):
        c = mesh[:, j] - mean[j]
        var, m4 = p @ c**2, p @ c**4
        assert abs(draws[:, j].mean() - mean[j]) < Z * math.sqrt(var / k), ("mean", j)
        assert abs(draws[:, j].var() - var) < Z * math.sqrt((m4 - var**2) / k), ("var", j)
        ux, inv = np.unique(mesh[:, j], return_inverse=True)
        marg = np.bincount(inv, weights=p)
        cdf = np.cumsum(marg) - marg / 2  # CDF at the slice centres
        for q in (0.05, 0.25, 0.5, 0.75, 0.95):
            i = int(np.argmin(np.abs(cdf - q)))
            below = (draws[:, j] <= ux[i]).mean()
            tol = Z * math.sqrt(cdf[i] * (1 - cdf[i]) / k) + 0.004
            assert abs(below - cdf[i]) < tol, ("q", j, q, below, cdf[i])
        ks = stats.kstest(draws[:, j], lambda t, ux=ux, cdf=cdf: np.interp(t, ux, cdf))
        assert ks.statistic < 1.95 / math.sqrt(k) + 0.004, ("ks", j, ks.statistic)


def _log_post(x, y, k, r, prec, w):
    """Unnormalised tempered log posterior at the rows of w (B, d K), written afresh."""
    d = x.shape[1]
    out = -0.5 * prec * (w * w).sum(axis=1)
    wm = w.reshape(-1, d, k)
    for i in range(x.shape[0]):  # one record at a time: (B, K) scores
        z = np.einsum("a,bak->bk", x[i], wm)
        out -= r * (special.logsumexp(z, axis=1) - z[:, y[i]])
    return out


def _w(theta, d, k):
    """Shift-free coordinates (B, d (K - 1)) -> W (B, d K) (the sampler's map Theta Q^T)."""
    return S.to_weights(np.asarray(theta).reshape(-1, d, k - 1), k).reshape(-1, d * k)


def _log_post_theta(x, y, k, r, prec, theta):
    """The target of the exact sampler: the log posterior at W = Theta Q^T (||W|| = ||Theta||
    up to rounding, and the likelihood ignores the shift)."""
    d = x.shape[1]
    t = np.asarray(theta)
    return _log_post(x, y, k, r, prec, _w(t, d, k)) - 0.5 * prec * (
        (t * t).sum(axis=1) - (_w(t, d, k) ** 2).sum(axis=1)
    )


def _model(beta, k, **kw):
    return pb.MultinomialLogisticRegression(beta=beta, n_classes=k, backend="exact", **kw)


@pytest.fixture
def fresh_plans():
    X._plan.cache_clear()
    yield
    X._plan.cache_clear()


# -- the law: quadrature in d K = 3 dimensions ------------------------------------------------
N_SKEW = 12
CASES = [("direct", 50.0), ("diffused", 0.5), ("concentrated", 0.5)]


def _grid_truth(x, y, k, cal, beta, half_width=6.0, points=121):
    d = x.shape[1]
    axis = np.linspace(-half_width, half_width, points)
    mesh = np.stack(np.meshgrid(*[axis] * (d * k), indexing="ij"), -1).reshape(-1, d * k)
    lp = _log_post(x, y, k, cal.r, len(y) * beta / cal.m, mesh)
    p = np.exp(lp - lp.max())
    assert p.reshape((points,) * (d * k))[(0,) * (d * k)] < 1e-12  # the grid holds it all
    return mesh, p / p.sum()


@pytest.mark.parametrize("method, eps", CASES)
def test_exact_matches_quadrature(method, eps, fresh_plans):
    # twelve records and a strong signal: a skewed posterior in W (1 x 3)
    x, y = _toy(N_SKEW, 1, 3, seed=5, scale=4.0)
    beta = 0.2
    model = _model(beta, 3)
    cal = pb.calibrate(model, N_SKEW, 2.0, eps, method)
    mesh, p = _grid_truth(x, y, 3, cal, beta)
    k = 4000
    xy, _ = model._statistics((x, y))
    draws, _, diag = model._draw(xy, cal, np.random.default_rng(3), size=k)
    assert draws.shape == (k, 3) and diag["public"]["size"] == k
    _check_against_grid(np.asarray(draws), mesh, p)
    # the column-sum direction is untouched by the likelihood: N(0, 3 / p) exactly
    total = np.asarray(draws).sum(axis=1)
    prec = N_SKEW * beta / cal.m
    assert abs(total.var() * prec / 3 - 1) < Z * math.sqrt(2 / k)


def test_proposals_released_unfiltered_fail_the_quadrature_check():
    x, y = _toy(N_SKEW, 1, 3, seed=5, scale=4.0)
    model = _model(0.2, 3)
    cal = pb.calibrate(model, N_SKEW, 2.0, 50.0, "direct")
    mesh, p = _grid_truth(x, y, 3, cal, 0.2)
    plan = X.exact_plan(N_SKEW, 1, 0.2, 1.0, cal.r, cal.m, method="direct", classes=3)
    prob = S.SoftmaxProblem(x, y, 3, cal.r, N_SKEW * 0.2)
    fit = X._fit(prob, plan)
    rng = np.random.default_rng(0)
    rho, _ = plan.envelope.draw(rng, 4000)
    u = rho[:, None] * X._directions(rng, 4000, 2)
    proposals = prob.full_weights(fit.w_hat + np.linalg.solve(fit.chol.T, u.T).T, rng)
    with pytest.raises(AssertionError):
        _check_against_grid(proposals, mesh, p)


# -- the envelope and the mass bound -----------------------------------------------------------
def _bound_data():
    rng = np.random.default_rng(9)
    out = []
    for d, k in ((1, 3), (1, 4), (2, 3)):
        x, y = _toy(30, d, k, seed=d + k)
        out.append((f"toy{d}x{k}", x, y, k, 0.1))
        e = np.zeros(d)
        e[0] = 1.0
        out.append((f"identical{d}x{k}", np.tile(e, (40, 1)), np.zeros(40, int), k, 0.05))
        ring = rng.normal(size=(25, d))
        ring /= np.linalg.norm(ring, axis=1)[:, None]
        out.append((f"norm-c{d}x{k}", ring, rng.integers(0, k, 25), k, 0.1))
        out.append((f"one{d}x{k}", e[None, :], np.array([k - 1]), k, 1.0))
    return out


@pytest.mark.parametrize("name, x, y, k, beta", _bound_data())
def test_envelope_dominates_brute_force(name, x, y, k, beta):
    n, d = x.shape
    dim = d * (k - 1)
    plan = X.exact_plan(n, d, beta, 1.0, classes=k, max_proposals=10**9)
    prob = S.SoftmaxProblem(x, y, k, 1.0, n * beta)
    fit = X._fit(prob, plan)
    rng = np.random.default_rng(1)
    theta = rng.normal(size=(1500, dim))
    theta /= np.linalg.norm(theta, axis=1)[:, None]
    # the worst directions of the cubic term: along a single class difference
    for a in range(d):
        for j in range(1, k):
            t = np.zeros((d, k))
            t[a, 0], t[a, j] = 1.0, -1.0
            t = (t @ S.basis(k)).ravel()  # its shift-free coordinates
            theta = np.vstack([theta, t / np.linalg.norm(t), -t / np.linalg.norm(t)])
    rho = np.linspace(1e-3, min(plan.envelope.rho_max, 16.0), 300)
    u = (rho[:, None, None] * theta[None]).reshape(-1, dim)
    v = np.linalg.solve(fit.chol.T, u.T).T
    ell = _log_post_theta(x, y, k, 1.0, n * beta, fit.w_hat + v) - _log_post_theta(
        x, y, k, 1.0, n * beta, fit.w_hat[None]
    )
    best = ell.reshape(rho.size, -1).max(axis=1) + (dim - 1) * np.log(rho)
    assert (best <= plan.envelope.bound(rho) + 1e-9).all(), name


def _log_z_grid(x, y, k, beta, fit, half=14.0):
    n, d = x.shape
    dim = d * (k - 1)
    axis = np.linspace(-half, half, 81 if dim == 3 else 401)
    u = np.stack(np.meshgrid(*[axis] * dim, indexing="ij"), -1).reshape(-1, dim)
    v = np.linalg.solve(fit.chol.T, u.T).T
    ell = _log_post_theta(x, y, k, 1.0, n * beta, fit.w_hat + v) - _log_post_theta(
        x, y, k, 1.0, n * beta, fit.w_hat[None]
    )
    return math.log(np.exp(ell).sum() * (axis[1] - axis[0]) ** dim)


def test_log_mass_lower_bound_against_quadrature():
    for name, x, y, k, beta in _bound_data():
        n, d = x.shape
        dim = d * (k - 1)
        if dim > 3:
            continue
        plan = X.exact_plan(n, d, beta, 1.0, classes=k, max_proposals=10**9)
        prob = S.SoftmaxProblem(x, y, k, 1.0, n * beta)
        fit = X._fit(prob, plan)
        log_z = _log_z_grid(x, y, k, beta, fit)
        trace = (1 + plan.eta) * min(dim * plan.kappa, n * (1 - 1 / k) / plan.p)
        low = E.log_mass_lower(dim, plan.p, plan.c_env, plan.eta, trace, spread_dof=k - 1)
        assert low <= log_z, name
        assert low > log_z - 1.5, (name, log_z - low)
        assert plan.acceptance_lower_bound <= math.exp(log_z - plan.envelope.log_total), name


def test_two_classes_have_the_binary_envelope_at_half_the_prior_precision():
    """Section 6.4: K = 2 in the shift-free coordinate is binary logistic regression in
    w = sqrt(2) theta with prior precision p / 2; the two public plans, computed by separate
    code paths (c' = sqrt(2) c, F_1(sqrt(2) sigma), M_2), must agree."""
    for n, d, beta in ((30_162, 105, 1e-2), (2_000, 5, 1e-2), (12, 1, 0.2)):
        two = X.exact_plan(n, d, beta, 1.0, classes=2, max_proposals=10**12)
        binary = X.exact_plan(n, d, beta / 2, 1.0, max_proposals=10**12)
        assert two.log_envelope == pytest.approx(binary.log_envelope, rel=1e-6, abs=1e-6)
        assert two.kappa == pytest.approx(binary.kappa, rel=1e-12)


def test_chi_even_moment_ratio_against_mpmath():
    mpmath.mp.dps = 30

    def e4(a):
        return mpmath.e**a - 1 - a - a**2 / 2 - a**3 / 6

    for k in (1, 2, 3, 10):
        for s in (1e-3, 0.1, 0.7, 2.0):
            sm = mpmath.mpf(s)
            norm = mpmath.mpf(2) ** (1 - mpmath.mpf(k) / 2) / mpmath.gamma(mpmath.mpf(k) / 2)

            def f(t, k=k, sm=sm, norm=norm):
                return e4(sm * t) * norm * t ** (k - 1) * mpmath.e ** (-t * t / 2)

            true = mpmath.quad(f, [0, 1, 4, 12, 40]) / (sm * sm * k)
            got = E.chi_even_moment_ratio(s, k)
            assert got >= true and got <= true * (1 + 1e-9), (k, s)
    # dof 1 is the binary family's F
    for s in (0.01, 0.5, 3.0):
        assert E.chi_even_moment_ratio(s, 1) == pytest.approx(E._even_moment_ratio(s), rel=1e-12)


def test_line_cumulants_are_bounded_by_the_range():
    """Lemma M1: along a line the loss's derivatives are the cumulants of a_J, J ~ s;
    |k3| <= R k2 and |k4| <= R^2 k2 for R = max a - min a; checked on random and extreme
    cases."""
    rng = np.random.default_rng(0)
    for _ in range(3000):
        k = int(rng.integers(2, 12))
        a = rng.normal(size=k) * 10 ** rng.uniform(-3, 1)
        if rng.random() < 0.3:
            a = np.where(rng.random(k) < 0.5, a.max(), a.min())  # two-point extremes
        s = special.softmax(rng.normal(size=k) * 10 ** rng.uniform(-2, 1.5))
        mu = s @ a
        c = a - mu
        k2, k3, k4 = s @ c**2, s @ c**3, s @ c**4 - 3 * (s @ c**2) ** 2
        rng_a = a.max() - a.min()
        top = float(np.abs(a).max())  # float noise of the moments when a is flat
        assert abs(k3) <= rng_a * k2 * (1 + 1e-9) + 1e-12 * top**3
        assert abs(k4) <= rng_a**2 * k2 * (1 + 1e-9) + 1e-12 * top**4
        assert k2 <= rng_a**2 / 4 * (1 + 1e-12) + 1e-12 * top**2  # Popoviciu
        assert rng_a <= math.sqrt(2) * np.linalg.norm(a) + 1e-12


def test_mode_constant_against_brute_force():
    rng = np.random.default_rng(2)
    for k in (2, 3, 5, 10, 100):
        bound = S.mode_constant(k)
        a = np.linspace(1e-6, 1 - 1e-6, 400_001)  # the others equal: the maximising shape
        line = ((1 - a) * np.log(a * (k - 1) / (1 - a))).max()
        assert line <= bound <= line * (1 + 1e-8) + 1e-12, k
        s = rng.dirichlet(np.full(k, 0.3), size=20_000)
        val = -(s * np.log(np.maximum(s, 1e-300))).sum(axis=1) + np.log(s[:, 0])
        assert val.max() <= bound, k
    assert S.mode_constant(2) == pytest.approx(0.2784645, abs=1e-7)  # the binary ZSIG_MAX


@pytest.mark.parametrize("k", [2, 3, 5])
def test_mode_norm_bound_holds_at_the_fitted_mode(k):
    rng = np.random.default_rng(k)
    cases = [
        _toy(60, 2, k, seed=k),
        (np.tile([1.0, 0.0], (60, 1)), np.zeros(60, int)),  # one class, one direction
        (rng.normal(size=(60, 2)) * 0 + [[0.6, 0.8]], rng.integers(0, k, 60)),
    ]
    for x, y in cases:
        n, d = x.shape
        for beta in (1.0, 0.05, 0.002):
            p = n * beta

            def f(w, x=x, y=y, p=p, n=n, d=d):
                z = x @ w.reshape(d, k)
                s = special.softmax(z, axis=1)
                s[np.arange(n), y] -= 1.0
                grad = (x.T @ s).ravel() + p * w
                return -_log_post(x, y, k, 1.0, p, w[None])[0], grad

            res = optimize.minimize(f, np.zeros(d * k), jac=True, method="L-BFGS-B", tol=1e-14)
            assert np.linalg.norm(f(res.x)[1]) < 1e-5 * (1 + p)
            bound = S.mode_norm_bound(n, 1.0, 1.0, p, k)
            assert np.linalg.norm(res.x) <= bound * (1 + 1e-6), (k, beta)


# -- rounding ------------------------------------------------------------------------------
def _loss_ld(z, y):
    """logsumexp(z) - z_y in 80-bit arithmetic (the reference for the rounding bounds)."""
    z = z.astype(np.longdouble)
    m = z.max(axis=-1, keepdims=True)
    picked = np.take_along_axis(z, np.broadcast_to(y, z.shape[:-1])[..., None], axis=-1)[..., 0]
    return np.log(np.exp(z - m).sum(axis=-1)) + m[..., 0] - picked


def test_loss_kernel_within_its_rounding_bound():
    rng = np.random.default_rng(4)
    for k in (2, 3, 10, 50):
        for scale in (1e-3, 1.0, 30.0, 700.0):
            z = rng.normal(size=(5000, k)) * scale
            y = rng.integers(0, k, 5000)
            got = S.losses(z.copy(), y)
            err = np.abs(got.astype(np.longdouble) - _loss_ld(z, y))
            bound = S.eval_error(np.abs(z).max(), k)
            assert float(err.max()) <= bound, (k, scale, float(err.max()), bound)


def test_softmax_kernel_within_its_relative_bound():
    rng = np.random.default_rng(5)
    for k in (2, 7, 40):
        z = rng.normal(size=(5000, k)) * 20
        got = S.softmax(z.copy())
        zl = z.astype(np.longdouble)
        e = np.exp(zl - zl.max(axis=1, keepdims=True))
        ref = e / e.sum(axis=1, keepdims=True)
        rel = np.abs(got - ref) / ref
        assert float(rel.max()) <= float(S.softmax_rel_error(0.0, np.abs(z).max(), k))


def _ref_grad_hess(x, y, k, r, p, theta):
    """Gradient and Hessian in Theta, in 80-bit arithmetic from the stored basis Q."""
    q = S.basis(k).astype(np.longdouble)
    d = x.shape[1]
    xl = x.astype(np.longdouble)
    wm = theta.astype(np.longdouble).reshape(d, k - 1) @ q.T
    z = xl @ wm
    e = np.exp(z - z.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    res = s.copy()
    res[np.arange(len(y)), y] -= 1
    g = r * ((xl.T @ res) @ q).ravel() + p * theta.astype(np.longdouble)
    size = d * (k - 1)
    h = np.zeros((size, size), dtype=np.longdouble)
    for i in range(len(y)):
        sm = q.T @ (np.diag(s[i]) - np.outer(s[i], s[i])) @ q
        h += np.kron(np.outer(xl[i], xl[i]), sm)
    return g, r * h


def test_gradient_and_hessian_within_their_bounds():
    for seed, (n, d, k) in enumerate([(3000, 3, 4), (500, 2, 3)]):
        x, y = _toy(n, d, k, seed=seed, scale=5.0)
        x *= 1.0 / np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
        r, p = 0.7, n * 0.01
        w = np.random.default_rng(seed).normal(size=d * (k - 1)) * 8
        prob = S.SoftmaxProblem(x, y, k, r, p)
        _, g, h = prob.grad_hess(w)
        g_ref, h_ref = _ref_grad_hess(x, y, k, r, p, w)
        w_norm = float(np.linalg.norm(w)) * 1.0001
        g_err = float(np.linalg.norm((g - g_ref).astype(float)))
        assert g_err <= S.grad_error(n, d, k, r, 1.0, w_norm, float(np.linalg.norm(g)), p)
        h_err = float(np.linalg.norm((h - h_ref).astype(float), 2))
        assert h_err <= S.delta_h(n, d, k, r, 1.0, w_norm, 0.0, p)
        assert g_err > 0 and h_err > 0  # the reference does differ: the check has teeth


def test_loglik_differences_within_their_bound():
    n, d, k = 4000, 3, 5
    x, y = _toy(n, d, k, seed=8, scale=4.0)
    rng = np.random.default_rng(8)
    w_hat = rng.normal(size=d * (k - 1)) * 5
    vt = rng.normal(size=(d * (k - 1), 40)) * rng.uniform(0.01, 3, 40)
    prob = S.SoftmaxProblem(x, y, k, 1.0, 1.0)
    wm = prob.weights(w_hat)
    z0 = np.concatenate([x[s : s + S.FIT_ROWS] @ wm for s in range(0, n, S.FIT_ROWS)])
    got = prob.loglik_diff(z0, prob.base(z0), vt)
    xl = x.astype(np.longdouble)
    q = S.basis(k).astype(np.longdouble)
    ref0 = _loss_ld(xl @ (w_hat.astype(np.longdouble).reshape(d, k - 1) @ q.T), y)
    w_norm = float(np.linalg.norm(w_hat)) * 1.0001
    for j in range(vt.shape[1]):
        tj = (w_hat.astype(np.longdouble) + vt[:, j].astype(np.longdouble)).reshape(d, k - 1)
        ref = (_loss_ld(xl @ (tj @ q.T), y) - ref0).sum()
        v_norm = float(np.linalg.norm(vt[:, j])) * 1.0001
        bound = S.log_density_error(n, d, k, 1.0, 1.0, 1.0, w_norm, v_norm, 1.0)
        assert abs(float(got[j] - ref)) <= bound, j


# -- the public acceptance bound, mutants, refusals, audit ---------------------------------------
def _adversarial(k=3):
    rng = np.random.default_rng(12)
    d = 2
    e = np.array([1.0, 0.0])
    ring = rng.normal(size=(400, d))
    ring /= np.linalg.norm(ring, axis=1)[:, None]
    return [
        ("identical rows", np.tile(e, (400, 1)), rng.integers(0, k, 400)),
        ("all one label", ring, np.zeros(400, int)),
        ("norm exactly c", ring, (ring[:, 0] > 0).astype(int)),
        ("separable, aligned", np.tile(e, (400, 1)), np.full(400, k - 1)),
    ]


@pytest.mark.parametrize("name, x, y", _adversarial())
def test_public_acceptance_bound_holds_on_adversarial_data(name, x, y):
    n = x.shape[0]
    model = _model(0.02, 3)
    cal = pb.calibrate(model, n, 2.0, 1.0, "diffused")
    xy, _ = model._statistics((x, y))
    _, _, diag = model._draw(xy, cal, np.random.default_rng(1), size=500)
    a_min = diag["public"]["acceptance_lower_bound"]
    m = diag["public"]["proposals"]
    assert diag["accepted"] / m >= a_min - Z * math.sqrt(a_min * (1 - a_min) / m), name
    assert diag["max_log_ratio"] <= 0


def test_a_too_small_envelope_is_caught():
    x, y = _toy(200, 2, 3, seed=4)
    model = _model(0.05, 3)
    cal = pb.calibrate(model, 200, 2.0, 1.0)
    plan = X.exact_plan(200, 2, 0.05, 1.0, cal.r, cal.m, size=100, classes=3)
    prob = S.SoftmaxProblem(x, y, 3, cal.r, 200 * 0.05)
    gauss = E.build_envelope(4, plan.p, 0.0, plan.c_self, plan.tau, plan.eta)
    with pytest.raises(X.EnvelopeViolationError, match="bug"):
        X.run(prob, dataclasses.replace(plan, envelope=gauss), np.random.default_rng(0))
    with pytest.raises(X.EnvelopeViolationError):
        X.run(prob, plan, np.random.default_rng(0), _shift=0.3)
    kept, _, stats_ = X.run(prob, plan, np.random.default_rng(0))
    assert len(kept) >= 100 and stats_["max_log_ratio"] <= 0


def test_release_api_labels_and_shapes():
    x, y = _toy(3000, 3, 4, seed=6)
    model = _model(0.01, 4)
    rel = pb.sample(model, (x, y), 2.0, 1.0, size=3, rng=0)
    assert rel.guarantee == "exact" and rel.value.shape == (3, 3, 4)
    assert rel.diagnostics["public"]["backend"] == "exact"
    again = pb.sample(model, (x, y), 2.0, 1.0, size=3, rng=0)
    assert np.array_equal(rel.value, again.value)  # a seed reproduces the release
    auto = pb.MultinomialLogisticRegression(beta=0.01, n_classes=4)
    assert pb.calibrate(auto, 3000, 2.0, 1.0, d=3).guarantee == "exact"
    assert pb.calibrate(auto, 3000, 2.0, 1.0).guarantee == "undetermined (pass d)"
    # where the public budget does not fit, auto falls back to Langevin; exact refuses
    assert pb.calibrate(auto, 200, 2.0, 1.0, d=30).guarantee == "algorithm"
    with pytest.raises(X.ExactInfeasibleError, match="max_proposals"):
        pb.sample(_model(0.01, 4), (x[:200, :].repeat(10, 1)[:, :30] / 4, y[:200]), 2.0, 1.0)


def test_exact_multinomial_audit_at_the_worst_pair():
    model = _model(0.1, 3)
    res = A.audit_model(model, 20, 2.0, 2.0, "diffused", 3000, rng=0, d=1)
    assert 0 < res.eps_lower <= res.eps_certified and not res.violation


def test_audit_catches_the_sampler_calibrated_for_the_wrong_n():
    model = _model(0.1, 3)
    n, lam, eps, delta = 20, 2.0, 0.01, 1e-5
    wrong = pb.calibrate(model, 100 * n, lam, eps)

    def broken(data, size=None, rng=None):
        xy, _ = model._statistics(data)
        return np.asarray(model._draw(xy, wrong, rng, size=size)[0])  # (size, 3): projected

    d0, d1 = A.worst_case_pair(model, n, lam, eps)
    claimed = A.certified_dp(pb.calibrate(model, n, lam, eps), delta)
    res = A.audit(broken, d0, d1, 10**4, delta=delta, confidence=0.95, rng=0)
    assert res.eps_lower > claimed, (res.eps_lower, claimed)


# -- OPS (docs/multinomial.md §3b) -----------------------------------------------------------------
def test_ops_loss_range_against_brute_force():
    """sup over W in the ball of (max over records - min over records) of the loss is at
    most Delta = min(2a, a + log(K - 1)), a = sqrt(2) c R; reached as R grows (K = 2: a)."""
    rng = np.random.default_rng(3)
    for k in (2, 3, 6):
        c, radius = 1.0, 1.7
        model = pb.MultinomialLogisticRegression(0.1, c, k, radius)
        delta = model._ops_eps0(0.5)  # 2 t Delta with t = 1/2
        worst = 0.0
        for trial in range(400):
            d = int(rng.integers(1, 4))
            w = rng.normal(size=(d, k))
            if trial % 2:  # the extremal shape: one column against the others
                w = np.zeros((d, k))
                w[0, 0], w[0, 1:] = 1.0, -1.0 / (k - 1)
            w *= radius / np.linalg.norm(w)
            xs = rng.normal(size=(300, d))
            xs = np.vstack([xs, np.eye(d), -np.eye(d)])
            xs *= c / np.linalg.norm(xs, axis=1)[:, None]
            z = xs @ w
            loss = special.logsumexp(z, axis=1)[:, None] - z  # every (x, y)
            worst = max(worst, float(loss.max() - loss.min()))
        assert worst <= delta, (k, worst, delta)
        assert worst >= 0.6 * delta, (k, worst, delta)  # not a vacuous bound


def test_ops_is_pure_dp_on_the_grid():
    """|log pi_D(W) - log pi_D'(W)| <= eps0 on the ball, normalisers included, at the worst
    pair and at random neighbours (grid in W, d = 1, K = 3)."""
    model = _model(0.2, 3, radius=2.0)
    n = N_SKEW
    cal = pb.calibrate(model, n, math.inf, 1.5, "ops")
    eps0 = model._ops_eps0(cal.r)
    assert eps0 <= 1.5
    axis = np.linspace(-2.0, 2.0, 81)
    mesh = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)
    inside = np.linalg.norm(mesh, axis=1) <= 2.0
    mesh = mesh[inside]
    rng = np.random.default_rng(4)
    pairs = [model._worst_pair(n, cal)]
    for _ in range(6):
        x, y = _toy(n, 1, 3, seed=int(rng.integers(1000)))
        x2, y2 = x.copy(), y.copy()
        x2[0], y2[0] = -x[0] if rng.random() < 0.5 else x[0] * 0.3, (y[0] + 1) % 3
        pairs.append(((x, y), (x2, y2)))
    worst = 0.0
    for (x, y), (x2, y2) in pairs:
        a = _log_post(x, np.asarray(y, int), 3, cal.r, n * 0.2, mesh)
        b = _log_post(x2, np.asarray(y2, int), 3, cal.r, n * 0.2, mesh)
        a -= special.logsumexp(a)
        b -= special.logsumexp(b)
        worst = max(worst, float(np.abs(a - b).max()))
    assert worst <= eps0
    assert worst >= 0.2 * eps0  # the worst pair comes near the bound


def test_exact_ops_matches_quadrature(monkeypatch, fresh_plans):
    x, y = _toy(N_SKEW, 1, 3, seed=5, scale=4.0)
    beta, radius = 0.2, 1.3
    model = _model(beta, 3, radius=radius)
    cal = pb.calibrate(model, N_SKEW, 2.0, 2.0, "ops")
    # R = 1.3 cuts a good part of this posterior away: far below what the public ball bound
    # promises for every data set, so the budget assumes 30% inside (true here)
    monkeypatch.setattr(E, "log_ball_mass_lower", lambda *a: math.log(0.3))
    mesh, p = _grid_truth(x, y, 3, cal, beta)
    cut = np.linalg.norm(mesh, axis=1) > radius
    assert 0.3 < p[cut].sum() < 0.7
    p = np.where(cut, 0.0, p)
    p /= p.sum()
    xy, _ = model._statistics((x, y))
    draws, _, diag = model._draw(xy, cal, np.random.default_rng(8), size=3000)
    draws = np.asarray(draws)
    assert (np.linalg.norm(draws, axis=1) <= radius).all()
    _check_against_grid(draws, mesh, p)


def test_ops_audit_and_auto():
    model = pb.MultinomialLogisticRegression(0.1, 1.0, 3)
    assert model.radius == pytest.approx(math.sqrt(2) * 10)
    cal = pb.calibrate(model, 20, 2.0, 2.0, "ops", d=1)
    assert cal.model.backend == "exact" and cal.guarantee == "exact"  # OPS needs exact
    res = A.audit_model(model.with_backend("exact"), 20, 2.0, 2.0, "ops", 2000, rng=0, d=1)
    assert res.eps_lower <= res.eps_certified and not res.violation
    with pytest.raises(pb.InfeasiblePrivacyError, match="OPS needs the exact back-end"):
        pb.calibrate(pb.MultinomialLogisticRegression(1e-4, 1.0, 10), 50, 2.0, 1.0, "ops", d=40)


def test_calibrate_with_d_runs_the_public_checks_of_sample():
    # wine's shape (178 rows, 13 features, 3 classes) is beyond the exact budget: calibrate
    # refuses it as sample would, before any data are read
    model = _model(1e-2, 3)
    with pytest.raises(X.ExactInfeasibleError, match=r"d=13, K=3"):
        pb.calibrate(model, 178, 2.0, 1.0, d=13)
    assert pb.calibrate(model, 178, 2.0, 1.0).guarantee == "exact"  # without d: no check
    assert pb.calibrate(model, 4177, 2.0, 1.0, d=9).guarantee == "exact"
    with pytest.raises(X.ExactInfeasibleError, match="larger beta or a smaller c"):
        pb.calibrate(_model(1e-100, 3), 178, 2.0, 1.0, d=13)


def test_estimator_names_a_bad_random_state():
    x, y = _toy(60, 2, 3, seed=1)
    for bad in ("a", -3):
        est = pb.PrivateLogisticRegression(lam=2.0, eps=1.0, random_state=bad)
        with pytest.raises(ValueError, match="random_state"):
            est.fit(x, y)


def test_estimator_ops_radius():
    x, y = _toy(300, 2, 3, seed=2)
    x *= 0.8  # room for the intercept column
    est = pb.PrivateLogisticRegression(
        lam=2.0, eps=1.0, method="ops", radius=25.0, beta=0.1, random_state=0, classes=[0, 1, 2]
    ).fit(x, y)
    assert est.calibration_.model.radius == 25.0 and est.privacy_["guarantee"] == "exact"
    with pytest.raises(ValueError, match="radius applies to method='ops' only"):
        pb.PrivateLogisticRegression(radius=2.0).fit(x, y)


@pytest.mark.parametrize("k", [None, 4])
def test_the_rounding_allowance_is_in_every_exact_certificate(k):
    """docs/exact.md §7: the accepted law is within e^(+-2e) of the posterior, so the
    release's curve is the posterior's plus 2e(2 lam - 1)/(lam - 1); calibrated below eps."""
    x, y = _toy(3000, 3, 4, seed=9)
    if k is None:
        model = pb.BayesianLogisticRegression(0.01, backend="exact")
        y = (y > 1).astype(float)
    else:
        model = _model(0.01, k)
    for eps, method in ((0.5, "diffused"), (0.3, "concentrated"), (1.0, "ops")):
        rel = pb.sample(model, (x, y), 2.0, eps, method, rng=0)
        e = rel.calibration.sampler["log_density_error"]
        assert 0 < e < 1e-3 and rel.eps <= eps
        orders = np.array([1.5, 2.0, 8.0, np.inf])
        ideal = model.rdp(3000, orders, rel.calibration.r, rel.calibration.m, method)
        fin = np.where(np.isinf(orders), 2.0, orders)  # (no inf / inf below)
        extra = np.where(np.isinf(orders), 4 * e, 2 * e * (2 * fin - 1) / (fin - 1))
        got = rel.calibration.rdp(orders)
        at_lam = orders == 2.0
        assert (got[~at_lam] >= ideal[~at_lam] + extra[~at_lam]).all()
        assert np.allclose(got, ideal + extra, rtol=1e-12, atol=1e-15)
        assert rel.calibration.rdp(1.0) == np.inf
        same = pb.calibrate(model, 3000, 2.0, eps, method, d=3)  # as sample calibrates
        assert (same.r, same.eps, same.sampler) == (
            rel.calibration.r,
            rel.calibration.eps,
            rel.calibration.sampler,
        )
    # direct sampling has no knob: a target at the posterior's own certificate is refused
    direct = model.rdp(3000, 2.0, 1.0, 1.0, "direct")
    with pytest.raises(pb.InfeasiblePrivacyError):
        pb.sample(model, (x, y), 2.0, float(direct), "direct", rng=0)
