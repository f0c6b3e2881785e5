"""The exact back-end's certified fit, its edge and its accept test (docs/exact.md §6-§7).

Regression tests for the audit of issue 19 §1: whether the exact back-end released used to
depend on one record (the warm start and a fixed number of Newton steps); the rounding
allowance was bounded on the envelope's grid only; the triangular solve's error was in no
bound; and a 53-bit uniform decided each acceptance.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import linalg, stats

import privbayes as pb
from privbayes.sampling import bernoulli
from privbayes.sampling import exact as X
from privbayes.sampling import exact_fit as F


def _signal_free_warm_rows(n: int, flipped: int):
    """x = 1 except on the rows the warm start reads (every n/50,000-th: x = 0), labels 1
    except ``flipped`` of the other rows: the warm start sees no signal at all."""
    x = np.ones((n, 1))
    x[:: n // 50_000] = 0.0
    y = np.ones(n)
    y[np.flatnonzero(x[:, 0] > 0)[:flipped]] = 0.0
    return x, y


@pytest.mark.slow
def test_neighbours_that_defeat_the_warm_start_both_release():
    """The audit's pair: one label apart, one used to raise SamplingError on every seed
    (8 + 8 Newton steps, then the tolerance test), the other released."""
    model = pb.BayesianLogisticRegression(beta=1e-6, c=1.0, backend="exact")
    n = 500_000
    cand = np.flatnonzero(np.arange(n) % 10 != 0)
    x = np.ones((n, 1))
    x[::10] = 0.0
    for j in (1093, 1094):
        y = np.ones(n)
        y[cand[:j]] = 0.0
        for seed in (0, 1):
            rel = pb.sample(model, (x, y), 2.0, 10.0, method="direct", rng=seed)
            dg = rel.diagnostics
            assert rel.guarantee == "exact" and np.isfinite(rel.value).all()
            assert 1 <= dg["newton_steps"] <= dg["public"]["newton_step_bound"]
            assert dg["gradient_bound"] <= X.GRAD_TOL
            assert abs(rel.value[0] - math.log((n - n // 10 - j) / j)) < 0.2


def _adversarial():
    rng = np.random.default_rng(3)
    sep = rng.normal(size=(20_000, 2))
    sep /= np.linalg.norm(sep, axis=1, keepdims=True)
    yield "signal-free warm rows, n = 2e6", *_signal_free_warm_rows(2_000_000, 2_000), 1e-6
    n = 400_000
    pick = (np.arange(50_000) * n) // 50_000
    y = np.ones(n)
    y[pick] = 0.0  # the warm start is pulled the wrong way: f there exceeds f(0)
    yield "warm rows labelled against the rest", np.ones((n, 1)), y, 1e-4
    yield "separable", sep, (sep[:, 0] > 0).astype(float), 1e-4
    same = np.full((100_000, 3), 1 / math.sqrt(3))
    yield "identical rows, one label", same, np.ones(100_000), 1e-5
    yield "all-zero rows", np.zeros((20_000, 3)), np.ones(20_000), 1e-3
    yield "rows of norm c, alternating labels", sep, (np.arange(20_000) % 2).astype(float), 1e-3


_ADVERSARIAL = list(_adversarial())


@pytest.mark.slow
@pytest.mark.parametrize("name, x, y, beta", _ADVERSARIAL, ids=[c[0] for c in _ADVERSARIAL])
def test_adversarial_arrangements_release_within_the_public_step_bound(name, x, y, beta):
    model = pb.BayesianLogisticRegression(beta=beta, c=1.0, backend="exact")
    rel = pb.sample(model, (x, y), 2.0, 10.0, rng=0)
    dg = rel.diagnostics
    assert dg["newton_steps"] <= dg["public"]["newton_step_bound"], name
    assert dg["gradient_bound"] <= X.GRAD_TOL


@pytest.mark.slow
def test_softmax_neighbours_that_defeat_the_warm_start_release():
    n = 200_000
    x = np.full((n, 2), 1 / math.sqrt(2))
    x[:: n // 50_000] = 0.0
    model = pb.MultinomialLogisticRegression(beta=1e-4, c=1.0, n_classes=3, backend="exact")
    live = np.flatnonzero(x[:, 0] > 0)
    for extra in (0, 1):  # neighbours: one label changed from 0 to 2
        y = np.zeros(n, dtype=int)
        y[live[:300]] = 1
        y[live[300 : 400 + extra]] = 2
        rel = pb.sample(model, (x, y), 2.0, 5.0, method="direct", rng=0)
        assert rel.diagnostics["newton_steps"] <= rel.diagnostics["public"]["newton_step_bound"]


# -- Theorem 5's inequalities along the iterates, against long-double truth -----------------
def _truth(x, y, r, p, w):
    """(f, lambda, ||grad||) at w in long double: f = r sum softplus(-y x.w) + p/2 ||w||^2."""
    xl, wl = x.astype(np.longdouble), np.asarray(w, dtype=np.longdouble)
    z = (xl * np.where(y > 0, 1, -1)[:, None].astype(np.longdouble)) @ wl
    sp = np.where(z > 0, np.log1p(np.exp(-z)), -z + np.log1p(np.exp(z)))
    f = r * sp.sum() + p / 2 * (wl @ wl)
    sig = 1 / (1 + np.exp(z))  # sigma(-z)
    u = xl * np.where(y > 0, 1, -1)[:, None]
    g = -r * (u * sig[:, None]).sum(axis=0) + p * wl
    h = r * (u * (sig * (1 - sig))[:, None]).T @ u + p * np.eye(len(wl))
    lam = float(np.sqrt(g @ np.linalg.solve(h.astype(float), g.astype(float))))
    return float(f), lam


def _iterates(monkeypatch, x, y, beta, start=None):
    model = pb.BayesianLogisticRegression(beta=beta, c=1.0, backend="exact")
    n, d = x.shape
    cal = pb.calibrate(model, n, 2.0, 10.0, "diffused")
    plan = X.exact_plan(n, d, beta, model.c_bound, cal.r, cal.m, method="diffused")
    path = []
    real = F._step

    def step(prob, kern, w, *args):
        out = real(prob, kern, w, *args)
        path.append((np.array(w), None if out[1] else np.array(out[0])))
        return out

    monkeypatch.setattr(F, "_step", step)
    prob = X.Problem(x, np.where(y > 0, 1.0, -1.0), cal.r, n * beta / cal.m)
    if start is not None:
        monkeypatch.setattr(F, "warm_start", lambda *a: np.array(start, dtype=float))
        monkeypatch.setattr(F, "WARM_ROWS", 0)
    fit = X._fit(prob, plan)
    return plan, prob, path, fit


_SMALL = [
    ("signal-free rows, mode at 6", *_signal_free_warm_rows(50_000, 120), 1e-5, None),
    ("a far start (restart at 0)", *_signal_free_warm_rows(50_000, 120), 1e-5, [-40.0]),
    ("separable, d = 2", None, None, 1e-4, None),
    ("identical rows, one label", np.full((4000, 2), 1 / math.sqrt(2)), np.ones(4000), 1e-4, None),
]


@pytest.mark.parametrize("name, x, y, beta, start", _SMALL, ids=[c[0] for c in _SMALL])
def test_theorem5_inequalities_hold_along_the_iterates(monkeypatch, name, x, y, beta, start):
    if x is None:
        rng = np.random.default_rng(5)
        x = rng.normal(size=(4000, 2))
        x /= np.linalg.norm(x, axis=1, keepdims=True) * (1 + 1e-9)
        y = (x[:, 0] > 0).astype(float)
    plan, prob, path, fit = _iterates(monkeypatch, x, y, beta, start)
    fb = plan.fit
    assert fit.steps == sum(1 for _, nxt in path) <= fb.max_steps
    for w, nxt in path:
        if nxt is None:  # the start was refused: f there was not certainly <= f(0)
            assert _truth(x, y, prob.r, prob.p, w)[0] > prob.r * prob.n * math.log(2) - 1e-6
            continue
        f0, lam0 = _truth(x, y, prob.r, prob.p, w)
        f1, lam1 = _truth(x, y, prob.r, prob.p, nxt)
        assert np.linalg.norm(w) <= fb.w_bound
        if lam0 >= fb.lam1:  # damped region: f falls by at least D_1'
            assert f1 <= f0 - fb.decrease * (1 - 1e-6), (name, lam0)
        else:  # local region: the decrement contracts as R says
            assert lam1 <= fb.contraction(lam0) * (1 + 1e-6) + 1e-15, (name, lam0, lam1)
        assert lam0 > fb.lam_cert  # otherwise the certificate would have stopped the loop
    assert _truth(x, y, prob.r, prob.p, fit.w_hat)[1] <= X.GRAD_TOL * 1.01


def test_public_step_bound_and_its_reasons():
    plan = X.exact_plan(2924, 11, 1e-3, 1.0, 1.0, 1.0)
    fb = plan.fit
    assert fb.lam_cert > 0 and fb.contraction(fb.lam1) < fb.lam1
    assert fb.max_steps == fb.damped_steps + fb.local_steps + 2
    assert plan.public()["newton_step_bound"] == fb.max_steps
    # R is increasing and its iterates from lambda_1 fall below lam_cert in local_steps
    lam = fb.lam1
    for _ in range(fb.local_steps):
        assert fb.contraction(lam * 0.999) <= fb.contraction(lam)
        lam = fb.contraction(lam)
    assert lam <= fb.lam_cert


def test_a_tolerance_the_gradient_rounding_cannot_reach_is_refused_publicly():
    """Audit (a): at n = 4e8, beta = 1e-6 the gradient's rounding alone exceeds tau; the
    exact back-end is refused before any data is read and auto takes Langevin."""
    with pytest.raises(pb.InfeasiblePrivacyError, match="Newton fit"):
        X.exact_plan(4 * 10**8, 1, 1e-6, 1.0)
    model = pb.BayesianLogisticRegression(beta=1e-6, c=1.0)
    assert pb.calibrate(model, 4 * 10**8, 2.0, 1.0, d=1).model.backend == "langevin"
    assert pb.calibrate(model, 10**7, 2.0, 1.0, d=1).model.backend == "exact"


# -- the edge: the allowance on the whole support (audit (b)) --------------------------------
def test_the_allowance_holds_for_proposals_far_beyond_the_grid(monkeypatch):
    """The audit's OPS case: n = 1000, d = 2, beta = 0.1, t = 0.01, R = 10. Proposals forced
    out to three times the grid's end (on main: e(u) 10x above the public bound)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1000, 2))
    x /= np.linalg.norm(x, axis=1, keepdims=True) * (1 + 1e-9)
    y = (rng.random(1000) < 0.5).astype(float)
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0, backend="exact", radius=10.0)
    cal = pb.calibrate(model, 1000, 2.0, 0.2, "ops")
    plan = X.exact_plan(1000, 2, 0.1, model.c_bound, cal.r, 1.0, method="ops", radius=10.0)
    env = plan.envelope
    far = min(3.0 * env.rho_max, getattr(plan, "edge_radius", 3.0 * env.rho_max))
    real = type(env).draw

    def draw(self, gen, size):
        rho, log_q = real(self, gen, size)
        rho[::3] = np.linspace(self.rho_max, far, rho[::3].size)
        return rho, self.bound(rho)

    monkeypatch.setattr(type(env), "draw", draw)
    rel = pb.sample(model, (x, y), 2.0, 0.2, method="ops", rng=1)
    assert rel.diagnostics["log_density_error_max"] <= plan.log_density_error


def test_edge_probability_and_the_tail_sampler_match_their_laws():
    plan = X.exact_plan(2924, 11, 1e-3, 1.0, 1.0, 1.0)
    env = plan.envelope
    s, g = env.tail_slope, env.tail_curvature
    # the tail's law: density proportional to exp(-s x - g x^2 / 2), x >= 0
    rng = np.random.default_rng(4)
    for ss, gg in ((s, g), (0.01, 4.0), (30.0, 1e-4)):  # both of Robert's regimes
        draws = X.env_mod.tail_draw(rng, 20_000, ss, gg)
        assert (draws >= 0).all()
        mass = math.exp(X.env_mod.log_tail_mass(ss, gg))
        # independent truth for the closed form: quadrature of the density
        f = lambda u, ss=ss, gg=gg: mpmath.exp(-ss * u - 0.5 * gg * u * u)  # noqa: E731
        assert abs(float(mpmath.quad(f, [0, mpmath.inf])) / mass - 1) < 1e-9
        cut = float(np.quantile(draws, 0.7))
        assert abs(float(mpmath.quad(f, [0, cut])) / mass - 0.7) < 0.02

        def cdf(t, ss=ss, gg=gg):
            b = ss / math.sqrt(gg) + math.sqrt(gg) * np.asarray(t)
            out = -np.asarray(t) * (ss + 0.5 * gg * np.asarray(t))
            out = out + X.env_mod.log_mills(b) - X.env_mod.log_mills(ss / math.sqrt(gg))
            return -np.expm1(out)

        assert stats.kstest(draws, cdf).pvalue > 1e-4
    # the edge: P(radius beyond rho_K + x) in closed form against quadrature
    w = env.weights.astype(float)
    with mpmath.workdps(30):
        for xx in (0.0, 30.0, 300.0):

            def dens(u):
                return mpmath.exp(-s * u - 0.5 * g * u * u)

            def mass(lo):
                return mpmath.quad(dens, [lo, lo + 10, lo + 100, lo + 1000, mpmath.inf])

            want = float(mpmath.log(mass(xx) / mass(0))) + math.log(w[-1] / w.sum())
            got = env.log_tail_beyond(xx)
            assert want <= got <= want + 1e-7 * (1 + abs(want))
    assert plan.edge_radius >= env.rho_max
    assert plan.log_edge_probability + X.EDGE_EPS <= math.log(plan.delta_f * X.EDGE_SHARE)


def test_the_public_allowance_covers_every_radius_up_to_the_edge():
    """ē against the run-time allowance evaluated on a grid of radii out to the edge, with
    the public worst case of every other input (||w_hat|| = w_max, ||v|| at its bound)."""
    for shape in ((2924, 11, 1e-3, 0), (30162, 20, 1e-2, 0), (20_000, 4, 1e-2, 3)):
        n, d, beta, k = shape
        plan = X.exact_plan(n, d, beta, 1.0, 1.0, 1.0, classes=k)
        kern = X._kernels(plan)
        dim = plan.d
        rho = np.concatenate([[1e-300, 1e-3], np.linspace(0.1, plan.edge_radius, 400)])
        inv_l = math.sqrt((1 + plan.eta) / plan.p) * (1 + 4 * 2**-53)
        v = rho * inv_l * 1.01
        grad = n * (plan.c_self if k else plan.c_env)
        e = (
            kern.log_density_n(n, dim, 1.0, plan.p, plan.w_max, v, rho)
            + plan.envelope.log_q_error(rho)
            + X.solve_error(
                plan.c_self,
                plan.lam_bound,
                plan.p,
                plan.p,
                plan.eta,
                X.GRAD_TOL,
                plan.lf2_max,
                dim,
                rho,
                v,
                grad,
                plan.w_max,
            )  # fmt: skip
        )
        assert e.max() <= plan.log_density_error * 1.02, shape


# -- the triangular solve (audit (c)) ---------------------------------------------------------
def test_solve_error_bounds_the_difference_it_makes():
    """|f(w_hat + v_hat) - f(w_hat + L^-T u)| in 40 digits against the bound, on an
    ill-conditioned Hessian (condition ~1e4), radii from the bulk to the far tail."""
    mpmath.mp.dps = 40
    try:
        rng = np.random.default_rng(7)
        n, d, beta = 60, 4, 1e-5
        x = rng.normal(size=(n, d)) * np.array([1.0, 1e-3, 1e-5, 0.3])
        x /= np.linalg.norm(x, axis=1, keepdims=True).max() * (1 + 1e-9)
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
        p = n * beta
        xy = x * y[:, None]
        w_hat = rng.normal(size=d)
        z = xy @ w_hat
        curv = 1 / (1 + np.exp(z)) / (1 + np.exp(-z))
        h = (xy * curv[:, None]).T @ xy + p * np.eye(d)  # the true Hessian at w_hat
        chol = np.linalg.cholesky(h)
        lf2 = float((chol * chol).sum()) * 1.01
        g = -(xy * (1 / (1 + np.exp(z)))[:, None]).sum(axis=0) + p * w_hat
        tau = float(np.linalg.norm(linalg.solve_triangular(chol, g, lower=True))) * 1.01
        xm = [[mpmath.mpf(float(v)) for v in row] for row in xy]

        def f_mp(w):
            tot = mpmath.mpf(0)
            for row in xm:
                zz = mpmath.fsum(a * b for a, b in zip(row, w, strict=True))
                tot += mpmath.log1p(mpmath.exp(-zz))
            return tot + p / 2 * mpmath.fsum(wi * wi for wi in w)

        lm = mpmath.matrix([[float(v) for v in row] for row in chol])
        diffs = []
        for rho in (0.5, 3.0, 30.0, 300.0, 3000.0):
            u = rng.normal(size=d)
            u *= rho / np.linalg.norm(u)
            v_hat = linalg.solve_triangular(chol, u, trans="T", lower=True)
            v_exact = mpmath.lu_solve(lm.T, mpmath.matrix([float(t) for t in u]))
            w1 = [
                mpmath.mpf(float(a)) + mpmath.mpf(float(b))
                for a, b in zip(w_hat, v_hat, strict=True)
            ]
            w2 = [mpmath.mpf(float(a)) + v_exact[i] for i, a in enumerate(w_hat)]
            diff = abs(float(f_mp(w1) - f_mp(w2)))
            bound = X.solve_error(
                1.0, n / 4.0, p, p, 1e-9, tau, lf2, d, rho, np.linalg.norm(v_hat) * 1.01,
                n * 1.0, np.linalg.norm(w_hat) * 1.01,
            )  # fmt: skip
            assert diff <= float(bound), (rho, diff, bound)
            diffs.append(diff)
        assert max(diffs) > 0  # the solve really errs: the bound is about something
    finally:
        mpmath.mp.dps = 15


# -- exact Bernoulli decisions ---------------------------------------------------------------
class _Scripted:
    """A generator stand-in whose random() returns scripted words."""

    def __init__(self, words):
        self.words = list(words)

    def random(self, size):
        out, self.words = np.array(self.words[:size]), self.words[size:]
        return out


def test_acceptance_below_2_to_the_minus_53_is_decided_exactly():
    """A uniform word of 0 used to reject alpha = 0.7 * 2^-53 for sure (log1p(-0) = 0 >
    log alpha): the refined uniform accepts it with probability exactly alpha."""
    a = 0.7 * 2.0**-53
    la = np.array([math.log(a)])
    first = np.array([0.0])
    assert bernoulli.accept_exp(_Scripted([0.5]), first, la)[0]  # U = (0 + 0.5) 2^-53 < a
    assert not bernoulli.accept_exp(_Scripted([0.75]), first, la)[0]
    assert not bernoulli.accept_exp(_Scripted([]), np.array([2.0**-53]), la)[0]


@pytest.mark.parametrize("log_alpha", [-0.1, -1.0, -5.0])
def test_acceptance_frequencies(log_alpha):
    rng = np.random.default_rng(11)
    n = 400_000
    acc = bernoulli.accept_exp(rng, rng.random(n), np.full(n, log_alpha))
    prob = math.exp(log_alpha)
    assert abs(acc.mean() - prob) <= 5 * math.sqrt(prob * (1 - prob) / n)


def test_split_acceptance_keeps_its_law(monkeypatch):
    monkeypatch.setattr(bernoulli, "SPLIT", -1.0)  # -3 -> four factors of exp(-0.75)
    rng = np.random.default_rng(12)
    n = 400_000
    acc = bernoulli.accept_exp(rng, rng.random(n), np.full(n, -3.0))
    prob = math.exp(-3.0)
    assert abs(acc.mean() - prob) <= 5 * math.sqrt(prob * (1 - prob) / n)
    assert not bernoulli.accept_exp(rng, np.zeros(2), np.array([-2e6, -math.inf])).any()


def test_failure_allowances_are_not_claimed_beyond_eps_700():
    """The edge event's tv term grows like e^eps: with a failure allowance present, no
    finite eps above 700 is reported, and delta(eps) is evaluated at min(eps, 700)."""
    from privbayes.accounting import RdpAccountant, gaussian_rdp
    from privbayes.accounting.accountant import TV_EPS_MAX, eps_with_tv

    class Curve:
        tv = 1e-12

        def __call__(self, orders):
            return gaussian_rdp(orders, sigma=0.002)  # eps(delta) far above 700

    acc = RdpAccountant().compose(Curve())
    assert acc.get_epsilon(1e-6) == math.inf
    plain = RdpAccountant().compose(lambda o: gaussian_rdp(o, sigma=0.002))
    assert TV_EPS_MAX < plain.get_epsilon(1e-6) < math.inf  # without tv: a finite value
    assert acc.get_delta(1e4) == acc.get_delta(TV_EPS_MAX)
    assert eps_with_tv(lambda d: (800.0, 2.0), 1e-6, 0)[0] < math.inf  # no allowance


def test_each_acceptance_factor_stays_below_its_exact_value():
    """Audit B: subtracting exp's error bound from a large |L| is lost in rounding; the
    factor is shrunk after exp instead, so it never exceeds exp(L / 2^j)."""
    rng = np.random.default_rng(0)
    pieces = np.concatenate([-rng.uniform(16.0, 700.0, 4000), -rng.uniform(0, 16.0, 1000)])
    with mpmath.workdps(40):
        for piece in pieces:
            used = float(np.exp(piece) * bernoulli.SHRINK)
            exact = mpmath.exp(mpmath.mpf(float(piece)))
            assert used <= exact
            assert used >= exact * (1 - mpmath.mpf(bernoulli.error(piece)))


def test_the_tail_constants_are_below_their_exact_values():
    """Audit C: gamma = (1 - eta) - kappa (1 + eta) cancels; the tail's curvature and slope
    are computed in rationals and rounded down."""
    from fractions import Fraction

    for shape in ((10**5, 3, 1e-5), (2924, 11, 1e-3), (10**6, 1, 1e-6)):
        env = X.exact_plan(*shape, 1.0).envelope
        eta, kappa = Fraction(env.eta), Fraction(env.kappa)
        gam = (1 - eta) - kappa * (1 + eta)
        rk = Fraction(env.rho_max)
        slope = gam * rk - Fraction(env.tau) - (env.d - 1) / rk
        assert Fraction(env.tail_curvature) <= gam and Fraction(env.tail_slope) <= slope
        assert env.tail_curvature > 0.99 * float(gam)


def test_a_failing_warm_start_falls_back_to_zero(monkeypatch):
    """The warm start only chooses where the certified loop starts: any failure there (a
    Cholesky factor, a rounding bound) restarts from 0 instead of refusing."""
    x, y = _signal_free_warm_rows(60_000, 100)
    model = pb.BayesianLogisticRegression(beta=1e-4, c=1.0, backend="exact")
    real = F._hessian_factor
    calls = []

    def flaky(h, p):
        calls.append(1)
        if len(calls) == 3:  # the warm start's third step
            raise F.FitBoundError("simulated")
        return real(h, p)

    monkeypatch.setattr(F, "_hessian_factor", flaky)
    rel = pb.sample(model, (x, y), 2.0, 10.0, rng=0)
    assert rel.diagnostics["newton_steps"] <= rel.diagnostics["public"]["newton_step_bound"]
