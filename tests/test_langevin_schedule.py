"""Langevin's public step rules (docs/langevin.md §6): the "utility" rule (the default,
an early-stopped run) and the "stationary" one.

* the rule reads public inputs only: different data, same (n, d) -> the same schedule;
* the utility K is the minimiser of the stated bound, checked against a brute-force
  minimisation with the real certificate;
* certificates of capped (short) and tempered (noise != sqrt(2 eta)) runs against the
  EXACT law of the output, by grid convolution (the machinery of test_glm_langevin.py);
* an early-stopped release classifies better than a stationary one at small eps.
"""

import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit
from test_glm_langevin import _pairs_1d, exact_laws, logistic_grad, ratios, renyi  # noqa: I001

import privbayes as pb
from privbayes import BayesianLogisticRegression, MultinomialLogisticRegression
from privbayes.glm.family import MultinomialLogistic
from privbayes.sampling import langevin


def _data(n, d, seed, classes=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    w = rng.normal(size=(d, classes))
    y = np.argmax(x @ w + rng.gumbel(size=(n, classes)), axis=1)
    return x, y if classes > 2 else y.astype(float)


# -- public inputs only ----------------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["utility", "stationary"])
@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_schedule_is_invariant_to_the_data(schedule, method):
    """Two unrelated data sets of the same size give the same schedule, knob and eps (the
    rule never sees the data), for two classes and for K."""
    n, d = 400, 3
    for model in (
        BayesianLogisticRegression(beta="auto", backend="langevin", schedule=schedule),
        MultinomialLogisticRegression(
            beta="auto", n_classes=3, backend="langevin", schedule=schedule
        ),
    ):
        k = getattr(model, "n_classes", 2)
        a = pb.sample(model, _data(n, d, 1, k), 2.0, 0.1, method, rng=1)
        x, y = _data(n, d, 2, k)
        b = pb.sample(model, (-x[::-1] * 0.5, y[::-1]), 2.0, 0.1, method, rng=2)
        assert a.calibration.sampler == b.calibration.sampler
        assert (a.r, a.m, a.eps) == (b.r, b.m, b.eps)
        assert a.calibration.sampler["schedule"] == schedule
        assert a.diagnostics["schedule"] == schedule and a.guarantee == "algorithm"
        assert a.calibration.sampler == pb.calibrate(model, n, 2.0, 0.1, method, d=d).sampler


def test_the_estimator_and_auto_carry_the_schedule():
    x, y = _data(300, 3, 4)
    y = (y > 0).astype(int)
    est = pb.PrivateLogisticRegression(eps=0.3, backend="langevin", random_state=0).fit(x, y)
    assert est.privacy_["schedule"] == "utility"
    stat = pb.PrivateLogisticRegression(
        eps=0.3, backend="langevin", schedule="stationary", random_state=0
    ).fit(x, y)
    assert stat.privacy_["schedule"] == "stationary"
    assert stat.calibration_.sampler["steps"] > est.calibration_.sampler["steps"]
    with pytest.raises(ValueError, match="schedule does not apply to backend='imh'"):
        pb.PrivateLogisticRegression(backend="imh", schedule="utility").fit(x, y)
    with pytest.raises(ValueError, match="schedule must be one of"):
        BayesianLogisticRegression(backend="langevin", schedule="fast")
    auto = BayesianLogisticRegression(beta=1e-3, schedule="stationary")
    assert auto.with_backend("langevin").schedule == "stationary"  # auto's candidate
    assert auto.with_backend("exact").schedule is None  # no Langevin there
    assert BayesianLogisticRegression(backend="langevin").schedule == "utility"  # default
    # a repr shows a non-default schedule, and evaluates back to an equal model
    stationary = BayesianLogisticRegression(0.01, backend="langevin", schedule="stationary")
    assert repr(stationary).endswith("schedule='stationary')")
    assert "schedule" not in repr(BayesianLogisticRegression(0.01, backend="langevin"))
    for model in (
        stationary,
        MultinomialLogisticRegression(0.01, n_classes=3, backend="langevin", schedule="stationary"),
        pb.BayesianLinearRegression(0.01, backend="langevin", schedule="stationary"),
    ):
        again = eval(repr(model), {**vars(pb)})
        assert again.schedule == "stationary" and repr(again) == repr(model)
    # every option that shapes the run is shown, and an intercept evaluates back
    for model in (
        BayesianLogisticRegression(0.01, backend="langevin", max_steps=100, step_scale=0.3),
        BayesianLogisticRegression(0.01, fit_intercept=True, intercept_scaling=0.25),
        MultinomialLogisticRegression(0.01, n_classes=3, fit_intercept=True, delta_f=1e-9),
        pb.BayesianPoissonRegression(0.01, max_count=5, radius=3.0, max_steps=50),
    ):
        again = eval(repr(model), {**vars(pb)})
        assert repr(again) == repr(model)
        for name in ("max_steps", "step_scale", "delta_f", "fit_intercept", "intercept_scaling"):
            assert getattr(again, name) == getattr(model, name), (model, name)


# -- the rule: its formula, its monotonicity, and the bound it minimises ---------------------
def test_utility_steps_formula_and_monotone_in_the_knob():
    """utility: no pull (prec 0), eta = 2h / (r n c^2 k), K = ceil(1 / (2 eta n beta / m))."""
    n, beta, c = 1000, 1e-3, 1.0
    last_steps, last_rho = 0, 0.0
    for r in np.geomspace(1e-3, 1.0, 40):
        u = langevin.schedule(n, beta, c, r, 1.0, kind="utility")
        assert u["prec"] == 0.0 and u["noise"] == math.sqrt(2 * u["step"])
        assert u["step"] == pytest.approx(1.0 / (r * n * c * c / 4), rel=1e-12)
        assert Fraction(u["step"]) * Fraction(r) * n * Fraction(c) ** 2 / 4 <= 2  # exact
        want = max(1, math.ceil(1.0 / (2.0 * u["step"] * n * beta)))
        assert u["steps"] == min(want, langevin.MAX_STEPS)
        rho = langevin.certificate(u, n, r, c)
        assert u["steps"] >= last_steps and rho >= last_rho  # calibration can bisect
        last_steps, last_rho = u["steps"], rho
    m_steps = [
        langevin.schedule(n, beta, c, 1.0, m, kind="utility")["steps"]
        for m in np.geomspace(1e-4, 1.0, 20)
    ]
    assert m_steps == sorted(m_steps) and m_steps[0] < m_steps[-1]  # concentrated: K ~ m
    # concentrated pulls with the extra precision n beta (1/m - 1): its certificate is
    # non-decreasing in m for weak and strong priors, binary and softmax, and reaches any
    # eps > 0 (without the pull it would stop at the one-step value, 1/n for binary)
    for fam in (None, MultinomialLogistic(3)):
        for nn, bb in ((100, 1.0), (100, 10.0), (3000, 1e-4), (50, 0.3)):
            last = (0, 0.0)
            for m in np.geomspace(1e-6, 1.0, 200):
                sc = langevin.schedule(nn, bb, c, 1.0, m, kind="utility", family=fam)
                assert sc["prec"] == pytest.approx(nn * bb * (1 / m - 1), rel=1e-12)
                rho = langevin.certificate(sc, nn, 1.0, c, fam)
                assert sc["steps"] >= last[0] and rho >= last[1], (nn, bb, m)
                last = (sc["steps"], rho)
            tiny = langevin.schedule(nn, bb, c, 1.0, 1e-6, kind="utility", family=fam)
            assert langevin.certificate(tiny, nn, 1.0, c, fam) < 1e-2 / nn
    capped = langevin.schedule(n, 1e-9, c, 1.0, 1.0, max_steps=50, kind="utility")
    assert capped["steps"] == 50 and capped["capped"]
    with pytest.raises(ValueError, match="kind must be one of"):
        langevin.schedule(n, beta, c, 1.0, 1.0, kind="fast")


def _bound(n, d, beta, c, r, steps, sched):
    """The stated bound of docs/langevin.md §6 (binary, B^2 = d / (n beta), no prior pull):
    B^2 / (2 eta_F K) + the noise term, eta_F = eta r n."""
    b2 = d / (n * beta)
    eta, prec = sched["step"], sched["prec"]
    assert prec == 0.0
    eta_f = eta * r * n
    q = eta * r * n * c * c / 4
    noise = d * eta * (c * c / 4) * (1 - (1 - q) ** (2 * steps)) / (q * (2 - q))
    return b2 / (2 * eta_f * steps) + noise


def test_utility_steps_minimise_the_stated_bound():
    """Brute force: for every K, the largest r whose *real* certificate (K steps, first
    step included) meets the target, then the bound at (K, r). The rule's K, found at its
    own calibrated r, is within 10% of the best K and its bound within 1% of the minimum."""
    n, d, c, lam = 3000, 10, 1.0, 2.0
    beta = c * c * d / (n * 100.0)  # beta = c^2 d / (n M^2), M = 10
    model = BayesianLogisticRegression(beta=beta, c=c, backend="langevin")
    cc = float(model._c_cert())
    for eps in (0.003, 0.01, 0.03):

        def largest_r(steps, eps=eps):
            lo, hi = 1e-8, 1.0
            for _ in range(36):
                mid = math.sqrt(lo * hi)
                s = dict(langevin.schedule(n, beta, cc, mid, 1.0, kind="utility"), steps=steps)
                lo, hi = (
                    (mid, hi)
                    if float(lam * langevin.certificate(s, n, mid, cc)) <= eps
                    else (lo, mid)
                )
            return lo

        best = {}
        for steps in range(1, 400):
            r = largest_r(steps)
            sched = langevin.schedule(n, beta, cc, r, 1.0, kind="utility")
            best[steps] = _bound(n, d, beta, c, r, steps, sched)
        k_best = min(best, key=best.get)
        cal = pb.calibrate(model, n, lam, eps)
        k_rule = cal.sampler["steps"]
        assert cal.r < 1 and 1 < k_rule < 399
        assert abs(k_rule - k_best) <= max(2, 0.1 * k_best), (eps, k_rule, k_best)
        assert best[k_rule] <= 1.01 * best[k_best]


def test_utility_release_is_dpgd_with_a_smaller_charge():
    """docs/langevin.md §6, "Against DP-GD": the utility run is DP-GD's iteration (step
    eta_D = eta r n on the mean loss, noise sigma = eta_D sigma_D on w, no pull), and its
    certificate is DP-GD's K-fold composition (experiments/_peers/dpgd.py) with the first
    step charged at a quarter: rho = charge (K - 3/4) / K exactly. With a pull (the
    stationary rule's prec > 0) Theorem 1 is below the composition too."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
    from _peers import dpgd

    cases = [  # the peers study's Abalone and Adult (beta = c^2 d / (n M^2)), tiny
        (2924, 11 / (2924 * 100), 1.0, 0.012),
        (30162, 105 / (30162 * 100), 0.7, 0.04),
        (50, 0.02, 1.0, 1.0),
    ]
    for n, beta, c, r in cases:
        for kind in ("utility", "stationary"):
            base = langevin.schedule(n, beta, c, r, 1.0, kind=kind)
            eta, noise = base["step"], base["noise"]
            eta_d = eta * r * n  # DP-GD's step on the mean loss
            assert kind == "stationary" or eta_d == pytest.approx(4 / c**2, rel=1e-12)
            sigma_d = noise / eta_d  # its noise on the mean gradient
            for steps in sorted({1, 2, 7, base["steps"], 3 * base["steps"]}):
                rho = langevin.certificate(dict(base, steps=steps), n, r, c)
                charge = float(dpgd.dpgd_rdp([2.0], sigma_d, steps, n, c)[0]) / 2.0
                if kind == "utility":
                    assert rho == pytest.approx(charge * (steps - 0.75) / steps, rel=1e-9)
                else:
                    assert rho <= charge * (steps - 0.75) / steps * (1 + 1e-12)


def test_at_knob_one_the_run_extends_as_far_as_the_target_allows():
    n, beta, c, lam = 500, 0.05, 1.0, 2.0
    model = BayesianLogisticRegression(beta=beta, c=c, backend="langevin")
    cc = model._c_cert()
    util = langevin.schedule(n, beta, cc, 1.0, 1.0, kind="utility")
    stat = langevin.schedule(n, beta, cc, 1.0, 1.0, kind="stationary")
    longest = dict(util, steps=stat["steps"])  # the utility run, as long as stationary's
    low = float(langevin.curve(lam, langevin.certificate(util, n, 1.0, cc)))
    high = float(langevin.curve(lam, langevin.certificate(longest, n, 1.0, cc)))
    assert 5 * util["steps"] < stat["steps"] < 12 * util["steps"] and low < high
    eps = math.sqrt(low * high)  # between the two: an extension that stops short
    cal = pb.calibrate(model, n, lam, eps)  # spends (nearly) all of eps: no capped warning
    s = cal.sampler
    assert cal.r == 1.0 and util["steps"] < s["steps"] < stat["steps"] and s["extended"]
    assert s["prec"] == 0.0 and s["schedule"] == "utility"
    assert cal.eps == float(langevin.curve(lam, langevin.certificate(s, n, 1.0, cc))) <= eps
    more = dict(s, steps=s["steps"] + 1)  # the largest K: one more step misses the target
    assert float(langevin.curve(lam, langevin.certificate(more, n, 1.0, cc))) > eps
    with pytest.warns(pb.KnobCappedWarning, match="up to the stationary"):
        roomy = pb.calibrate(model, n, lam, 10 * high)
    assert roomy.sampler["steps"] == stat["steps"]  # never beyond the stationary rule's K
    # below knob 1 nothing is extended, and the recomputed curve is the release's
    cal = pb.calibrate(model, n, lam, low / 4)
    assert cal.r < 1 and "extended" not in cal.sampler
    np.testing.assert_array_equal(model.rdp(n, [2.0, 8.0], cal.r, cal.m), cal.rdp([2.0, 8.0]))


# -- capped and tempered runs against the exact law -----------------------------------------
def test_capped_and_tempered_certificates_bound_the_exact_divergence_1d():
    """Theorem 1 holds for every K and every noise sigma: short (utility-length) runs and
    runs at temperatures 0.5 and 2 (sigma^2 = 2 eta T) stay under their certificates."""
    rng = np.random.default_rng(5)
    c = 1.0 * (1 + 1e-12)
    worst = 0.0
    for n, beta, r, kind, steps, temp in [
        (4, 0.2, 1.0, "utility", None, 1.0),
        (6, 0.1, 0.4, "utility", None, 1.0),
        (4, 0.2, 1.0, "utility", 2, 0.5),
        (6, 0.05, 0.7, "stationary", 6, 2.0),
        (5, 0.2, 1.0, "stationary", 3, 0.25),
    ]:
        base = langevin.schedule(n, beta, c, r, 1.0, kind=kind)
        noise = math.sqrt(2 * base["step"] * temp)
        sampler = dict(base, steps=steps or base["steps"], noise=noise)
        assert sampler["steps"] <= 12  # a short run (the grids stay small)
        for u, u_nb in _pairs_1d(rng, n, 1.0):
            got = ratios(u, u_nb, r, base["prec"], sampler, [0.0], c)
            assert max(got) <= 1.0, (n, beta, r, kind, steps, temp, got)
            worst = max(worst, *got)
    assert worst > 0.1  # not vacuous


def test_tempered_certificate_is_tight_and_its_mutant_fails():
    """Far start (the near-quadratic regime), temperature 0.5: the exact divergence reaches
    most of the tempered certificate, and the same chain run with half its noise variance
    exceeds it."""
    c, n, beta, r = 1.0, 10, 0.05, 0.5
    base = langevin.schedule(n, beta, c, r, 1.0, kind="utility")
    sampler = dict(base, steps=3, noise=math.sqrt(base["step"]))  # T = 1/2
    delta = 0.1
    far_u = np.array([-delta, math.sqrt(1 - delta**2)])
    others = np.tile([1.0, 0.0], (n - 1, 1))
    a, b = np.vstack([far_u, others]), np.vstack([far_u * [1, -1], others])
    got = ratios(a, b, r, base["prec"], sampler, [400.0, 0.0], c)
    assert 0.9 < max(got) <= 1.0
    half = dict(sampler, noise=sampler["noise"] / math.sqrt(2))
    got = ratios(a, b, r, base["prec"], half, [400.0, 0.0], c, cert_noise=sampler["noise"])
    assert min(got) > 1.5


def test_released_law_of_a_short_run_matches_the_convolution():
    """The sampler runs what the utility schedule says: the mean of 20,000 releases of a
    2-step run against the exact law's mean (1-D, 5 standard errors)."""
    n = 5
    u = np.linspace(-1, 1, n)[:, None] * 0.9
    x, y = np.abs(u), np.sign(u[:, 0]) + (u[:, 0] == 0)
    model = BayesianLogisticRegression(beta=0.01, backend="langevin", max_steps=4)
    cal = pb.calibrate(model, n, 2.0, 0.5)
    s = cal.sampler
    assert 2 <= s["steps"] <= 4 and s["schedule"] == "utility"
    uu = x * y[:, None]
    (lp,), cell, axes = exact_laws(
        [logistic_grad(uu, cal.r, s["prec"])], [0.0], s["step"], s["noise"], s["steps"], 1.0
    )
    p = np.exp(lp) * cell
    mean = float(p @ axes[0])
    sd = math.sqrt(float(p @ axes[0] ** 2) - mean**2)
    rel = pb.sample(model, (x, y), 2.0, 0.5 * 20_000, rng=3, size=20_000)  # 0.5 per draw
    assert rel.calibration.sampler == s
    draws = rel.value[:, 0]
    assert abs(draws.mean() - mean) < 5 * sd / math.sqrt(draws.size)
    assert renyi(lp, lp, 2.0, cell) == pytest.approx(0.0, abs=1e-12)


# -- what the early stop buys ----------------------------------------------------------------
def test_early_stopped_release_classifies_better_at_small_eps():
    """Synthetic two-class problem (n = 2,000, d = 10, beta="auto"), eps = 0.3 at lam = 2:
    the mean test accuracy of 48 utility releases beats that of 48 stationary ones by
    more than four standard errors of the difference."""
    rng = np.random.default_rng(11)
    n, d = 2000, 10
    w = rng.normal(size=d)
    w *= 6.0 / np.linalg.norm(w)
    x = rng.normal(size=(2 * n, d)) / math.sqrt(d)
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    y = np.where(rng.uniform(size=2 * n) < expit(x @ w), 1.0, -1.0)
    xtr, ytr, xte, yte = x[:n], y[:n], x[n:], y[n:]
    acc = {}
    for schedule in ("utility", "stationary"):
        model = BayesianLogisticRegression(beta="auto", backend="langevin", schedule=schedule)
        rel = pb.sample(model, (xtr, ytr), 2.0, 0.3, rng=7, size=48)
        acc[schedule] = np.mean(np.sign(xte @ rel.value.T) == yte[:, None], axis=0)
    diff = acc["utility"].mean() - acc["stationary"].mean()
    se = math.sqrt(acc["utility"].var(ddof=1) / 48 + acc["stationary"].var(ddof=1) / 48)
    assert diff > 4 * se, (acc["utility"].mean(), acc["stationary"].mean(), se)


def test_integer_jumps_of_k_are_filled_at_the_k_found():
    """K(r) is an integer, and at small K one more step costs up to 5x (the first step is
    charged a quarter): the knob the rule reaches can certify far below the target. The
    calibration then raises the knob at the K it found (docs/langevin.md §6, "Filling"):
    the release spends the target, its sampler says so, the certificate recomputed from
    the sampler is the reported eps, and a slightly larger knob at that K misses."""
    n, d, lam, eps = 569, 31, 26.0, 7e-4
    model = BayesianLogisticRegression(beta="auto", backend="langevin", fit_intercept=True)
    cal = pb.calibrate(model, n, lam, eps, d=d)
    s = cal.sampler
    assert s["filled"] and s["steps"] == 1 and eps * (1 - 1e-6) <= cal.eps <= eps
    base = model.resolve_beta(n, d)
    cc = base._c_cert()
    assert cal.eps == float(langevin.curve(lam, langevin.certificate(s, n, cal.r, cc)))
    rule = langevin.schedule(n, base.beta, cc, cal.r, 1.0, kind="utility")
    assert rule["steps"] > s["steps"]  # the rule would run longer at this r: a shortened run
    bigger = cal.r * (1 + 1e-9)
    more = dict(langevin.schedule(n, base.beta, cc, bigger, 1.0, kind="utility"), steps=1)
    assert float(langevin.curve(lam, langevin.certificate(more, n, bigger, cc))) > eps
    # without the fill the rule's knob stopped where K jumps 1 -> 2: about a fifth of eps
    unfilled = langevin.schedule(n, base.beta, cc, 0.004358, 1.0, kind="utility")
    assert unfilled["steps"] == 1
    assert float(langevin.curve(lam, langevin.certificate(unfilled, n, 0.004358, cc))) < eps / 3
    # public inputs only: the same calibration from the sample() of two unrelated data sets
    x, y = _data(n, d - 1, 3)
    x *= 0.8  # the intercept's column takes the rest of c
    a = pb.sample(model, (x, y), lam, eps, rng=1)
    b = pb.sample(model, (-x[::-1] * 0.5, y[::-1]), lam, eps, rng=2)
    assert a.calibration.sampler == b.calibration.sampler == s and a.r == b.r == cal.r
