"""Calibration at extreme public inputs: a certified release (eps <= target, checked
against independent mpmath / exact-rational values) or a typed error saying what is
reachable — never OverflowError, ZeroDivisionError, RuntimeError or "math domain error".

Each case below is a path a new-user trial found crashing (docs/numerics.md, the
certificates; privbayes.calibration.guarded, the last line of defence)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from catalogue import gamma_exact_sup, mp_gamma_same_rate  # noqa: I001

import privbayes as pb
from privbayes import InfeasiblePrivacyError
from privbayes.calibration import solve_knob
from privbayes.cli import main as cli_main
from privbayes.sampling import envelope


def _gp_boundary_sup(model, n, lam, r, m) -> float:
    """mpmath D_lam at the four boundary sum pairs, at the float shapes the sampler uses."""
    big = model.max_count
    pairs = [(big, 0), (n * big, (n - 1) * big), (0, big), ((n - 1) * big, n * big)]
    return max(
        mp_gamma_same_rate(model.alpha / m + r * float(s), model.alpha / m + r * float(t), lam)
        for s, t in pairs
    )


# -- case 1: log of 0 in the high-precision certificate (equal shapes) ---------------------
@pytest.mark.parametrize(
    ("alpha", "n", "lam", "eps", "method"),
    [
        (1.0, 1000, 2.0, 1e-14, "concentrated"),
        (1.0, 1000, 100.0, 1e-12, "concentrated"),
        (2.0, 2, 2.0, 1e-40, "diffused"),
    ],
)
def test_gamma_poisson_tiny_eps_certifies(alpha, n, lam, eps, method):
    model = pb.GammaPoisson(alpha=alpha, beta=1, max_count=20)
    cal = pb.calibrate(model, n=n, lam=lam, eps=eps, method=method)
    assert 0 <= cal.eps <= eps
    # independent: the float shapes of every data set coincide (then D = 0 exactly), or
    # mpmath's divergence at the boundary pairs is below the certificate
    lo = model.alpha / cal.m
    hi = model.alpha / cal.m + cal.r * float(n * model.max_count)
    if lo == hi:
        assert cal.eps == 0.0
    else:
        assert _gp_boundary_sup(model, n, lam, cal.r, cal.m) <= cal.eps


def test_gamma_poisson_tiny_eps_release_and_cli(capsys):
    res = pb.sample(pb.GammaPoisson(alpha=2, beta=1, max_count=20), [1, 2], 2.0, 1e-40, rng=0)
    assert res.eps <= 1e-40 and res.value > 0
    code = cli_main(
        "calibrate --model gamma-poisson --max-count 20 --n 1000 --lam 2 --eps 1e-14 "
        "--method concentrated".split()
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "math domain" not in out.err


# -- case 2: the exact back-end's mass bound overflowed at flat priors (OPS) ----------------
@pytest.mark.parametrize(("beta", "c"), [(1e-8, 1.0), (1e-4, 100.0), (1e-6, 1.0)])
def test_ops_at_small_beta_is_infeasible_not_overflow(beta, c):
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-0.5, 0.5, (200, 2)), rng.integers(0, 2, 200)
    model = pb.BayesianLogisticRegression(beta=beta, c=c)
    with pytest.raises(InfeasiblePrivacyError) as info:
        pb.sample(model, (x, y), 2.0, 1.0, method="ops")
    assert info.value.reachable
    with pytest.raises(ValueError, match="exact back-end"):  # explicit: its typed error
        pb.sample(model.with_backend("exact"), (x, y), 2.0, 1.0, method="ops")


def test_even_moment_ratio_is_inf_not_overflow_for_wide_spreads():
    # F(sigma) >= sigma^2 E|N|^4 / 4! = sigma^2 / 8 (its first term): inf is a valid bound
    assert envelope._even_moment_ratio(1e3) == math.inf
    assert envelope._even_moment_ratio(math.inf) == math.inf
    assert envelope._even_moment_ratio(0.5) >= 0.5**2 / 8


# -- case 3: Normal model, float ** and m sigma^2 underflow ---------------------------------
def test_normal_extreme_scales_say_what_is_reachable():
    model = pb.NormalKnownVariance(mu=0, sigma=1e100, noise_sigma=1e-100, low=-1e100, high=1e100)
    with pytest.raises(InfeasiblePrivacyError) as info:
        pb.sample(model, [1], 2, 1.0)
    floor = info.value.reachable["min_eps"]
    # independent, in exact rationals: the diffused curve increases in r, so its smallest
    # value over r >= e^-690 is at r = e^-690: lam r^2 A^2 / (2 s^4 tau)
    r = Fraction(math.exp(-690.0))
    s2, a = Fraction(1e-100) ** 2, Fraction(2e100)
    tau = 1 / Fraction(1e100) ** 2 + r / s2
    exact = 2 * r * r * a * a / (2 * s2 * s2 * tau)
    assert float(exact) <= floor <= float(exact) * (1 + 1e-9)


@pytest.mark.parametrize("method", ["diffused", "concentrated", "direct"])
@pytest.mark.parametrize("sigma", [1e-100, 1e100])
@pytest.mark.parametrize("noise", [1e-100, 1e100])
def test_normal_extreme_scales_never_crash(method, sigma, noise):
    model = pb.NormalKnownVariance(mu=1e100, sigma=sigma, noise_sigma=noise, low=-1e100, high=1e100)
    for eps in (1e-300, 1.0, 1e300):
        try:
            cal = pb.calibrate(model, n=10**9, lam=1e6, eps=eps, method=method)
        except InfeasiblePrivacyError:
            continue
        assert 0 <= cal.eps <= eps


def test_normal_prior_variance_underflow_certifies_nothing():
    model = pb.NormalKnownVariance(mu=0, sigma=1e-100, noise_sigma=1.0, low=0, high=1)
    assert model._sup_at(5, 2.0, 1.0, 1e-300)[0] == math.inf  # m sigma^2 = 0 in floats


# -- case 4: the bracket search stalled when a probe hit the root within rounding -----------
def test_multinomial_bracket_at_the_root():
    # the stationary rule: the utility run's K is capped at max_steps here, and its
    # certificate at m = 1 is already below the target (no root to bracket)
    model = pb.MultinomialLogisticRegression(
        beta=1.7e-87, c=496.8, n_classes=5, schedule="stationary"
    )
    args = dict(n=139709164, lam=5.3128, eps=0.528, d=62, method="concentrated")
    cal = pb.calibrate(model, **args)
    assert cal.eps <= 0.528
    # near the target: a knob 1e-6 larger certifies above it (tight, not a lucky floor)
    bigger = float(cal.model.rdp(args["n"], args["lam"], r=1.0, m=cal.m * (1 + 1e-6),
                                 method="concentrated"))  # fmt: skip
    assert bigger > 0.528 * (1 - 1e-5)


def test_solve_knob_reaches_a_root_just_above_a_probe():
    # the first power-law probe lands on the root in w = log(knob) ~ -28, where eps_of is a
    # few ulps above the target: a secant step smaller than w's ulp used to stall there
    target, k0 = 0.528, math.exp(-28.0)

    def eps_of(knob):
        if abs(knob / k0 - 1) < 1e-13:
            return target * (1 + 1e-15)
        return target * knob / k0

    knob, value, _ = solve_knob(eps_of, target, 2.0, 1.0, "m")
    assert value <= target and knob > k0 * (1 - 1e-9)


def test_solve_knob_without_certified_probe_falls_back_or_says_what_is_reachable():
    # infinite except at tiny knobs: the last resort is the smallest knob
    knob, value, _ = solve_knob(lambda k: k if k < 1e-250 else math.inf, 1e-260, 2.0, 1.0, "r")
    assert value <= 1e-260 and knob > 0
    with pytest.raises(InfeasiblePrivacyError) as info:
        solve_knob(lambda k: math.inf, 1.0, 2.0, 1.0, "r")
    assert "min_eps" in info.value.reachable


# -- case 5: GammaPoisson at alpha ~ 1e-300 (the float trigamma bounds overflowed) ----------
@pytest.mark.parametrize("eps", [1e-10, 1.0, 1e6, 1e100])
def test_gamma_poisson_tiny_alpha_diffused_is_certified(eps):
    model = pb.GammaPoisson(alpha=1e-300, beta=1, max_count=20)
    res = pb.sample(model, [0, 0], 2.0, eps, rng=0)
    cal = res.calibration
    assert cal.eps <= eps
    # independent: brute force over every pair of neighbouring sums (n = 2), mpmath
    assert gamma_exact_sup(model, 2, 2.0, cal.r, cal.m) <= cal.eps
    conc = pb.sample(model, [0, 0], 2.0, eps, method="concentrated", rng=0)
    assert conc.eps <= eps


# -- the last line of defence -----------------------------------------------------------------
@pytest.mark.parametrize(
    "failure",
    [
        OverflowError("math range error"),
        ZeroDivisionError("float division by zero"),
        ValueError("math domain error"),
    ],  # fmt: skip
)
def test_arithmetic_failure_in_a_certificate_is_infeasible(monkeypatch, failure):
    model = pb.GammaPoisson(alpha=1, beta=1, max_count=20)

    def broken(*_args, **_kw):
        raise failure

    monkeypatch.setattr(pb.GammaPoisson, "_sup_at", broken)
    monkeypatch.setattr(pb.GammaPoisson, "_sup_float", broken)
    with pytest.raises(InfeasiblePrivacyError, match="GammaPoisson") as info:
        pb.calibrate(model, n=10, lam=2.0, eps=1.0)
    assert "n=10" in str(info.value) and info.value.reachable
    with pytest.raises(InfeasiblePrivacyError, match="GammaPoisson"):
        pb.sample(model, [1, 2], 2.0, 1.0)


def test_argument_errors_pass_through_unchanged():
    with pytest.raises(ValueError, match="method") as info:
        pb.calibrate(pb.GammaPoisson(alpha=1, beta=1, max_count=20), 10, 2.0, 1.0, "bogus")
    assert not isinstance(info.value, InfeasiblePrivacyError)


# -- seeded fuzz over every conjugate model and both GLMs at extreme public inputs ----------
_BAD = (OverflowError, ZeroDivisionError, FloatingPointError, RuntimeError)
_ARGS = ("n", "lam", "eps", "method", "d", "max_count", "backend", "r", "m")


def _fuzz_model(kind, pick, rng):
    p = [1e-300, 1e-100, 1e-8, 1.0, 1e8, 1e100, 1e300]
    if kind == 0:
        return pb.BetaBernoulli(alpha=pick(p), beta=pick(p)), None
    if kind == 1:
        return pb.DirichletCategorical([pick(p) for _ in range(int(rng.integers(2, 5)))]), None
    if kind == 2:
        return pb.GammaPoisson(alpha=pick(p), beta=pick(p[1:-1]), max_count=pick([1, 20])), None
    if kind == 3:
        s = [1e-100, 1e-50, 1.0, 1e50, 1e100]
        return pb.NormalKnownVariance(
            mu=pick([0.0, 1e100]), sigma=pick(s), noise_sigma=pick(s), low=-pick(s),
            high=pick(s),
        ), None  # fmt: skip
    b, c, d = pick(p[1:-1]), pick([1e-8, 1.0, 1e8]), pick([1, 5])
    if kind == 4:
        return pb.BayesianLogisticRegression(beta=b, c=c), d
    return pb.MultinomialLogisticRegression(beta=b, c=c, n_classes=pick([2, 5])), d


def test_fuzz_extreme_public_inputs_never_crash():
    rng = np.random.default_rng(20261201)

    def pick(values):
        return values[int(rng.integers(len(values)))]

    outcomes = {"certified": 0, "infeasible": 0}
    for it in range(150):
        kind = it % 6
        model, d = _fuzz_model(kind, pick, rng)
        n = pick([1, 2, 1000, 10**9])
        lam = pick([1 + 1e-9, 2.0, 100.0, 1e6, math.inf])
        eps = pick([1e-300, 1e-40, 1e-6, 1.0, 1e6, 1e300])
        method = pick(["diffused", "concentrated", "direct"] + (["ops"] if kind == 4 else []))
        case = (model, n, lam, eps, method, d)
        try:
            if d is None and it % 12 < 6:  # a release on a small data set
                small = {0: [1, 0], 1: [0, 1], 2: [model.max_count if kind == 2 else 0, 0]}
                data = small.get(kind, [getattr(model, "low", 0.0), getattr(model, "high", 0.0)])
                got = pb.sample(model, data, lam, eps, method=method, rng=1).eps
            else:
                got = pb.calibrate(model, n, lam, eps, method, **({"d": d} if d else {})).eps
        except InfeasiblePrivacyError as err:
            assert isinstance(err.reachable, dict) and err.reachable, case
            outcomes["infeasible"] += 1
            continue
        except _BAD as err:  # pragma: no cover - the failure this test exists for
            pytest.fail(f"{type(err).__name__}: {err} at {case}")
        except ValueError as err:
            text = str(err)
            assert "math domain" not in text and "math range" not in text, case
            assert any(a in text for a in _ARGS), (case, text)
            continue
        assert 0 <= got <= eps, case
        outcomes["certified"] += 1
    assert outcomes["certified"] > 20 and outcomes["infeasible"] > 20


def test_certify_down_without_any_finite_certificate_does_not_ask_for_more_eps():
    from privbayes.calibration import certify_down

    with pytest.raises(InfeasiblePrivacyError, match="another method") as info:
        certify_down(1.0, lambda v: (math.inf,), 1e6, "r")
    assert info.value.reachable["method"] == "another"
    assert "more eps" not in str(info.value)


def _normal_exact_eps(model, n, lam, r, m) -> Fraction:
    """lam r^2 A^2 / (2 s^4 tau), tau = 1/(m sigma^2) + r n / s^2, in exact rationals
    (the certificate also covers the sampler's rounding, so it may be a little above)."""
    s2 = Fraction(model.noise_sigma) ** 2
    tau = 1 / (Fraction(m) * Fraction(model.sigma) ** 2) + Fraction(r) * n / s2
    a = Fraction(model.high) - Fraction(model.low)
    return Fraction(lam) * Fraction(r) ** 2 * a * a / (2 * s2 * s2 * tau)


def test_normal_concentrated_floor_where_the_prior_precision_overflows():
    # m sigma^2 underflows (and 1/(m sigma^2) overflows) below m ~ 5.6e-109: this used to be
    # a ZeroDivisionError, then "min_eps inf"; the floor is where the certificate is finite
    model = pb.NormalKnownVariance(mu=0, sigma=1e-100, noise_sigma=1e-50, low=-1e50, high=1e-50)
    with pytest.raises(InfeasiblePrivacyError) as info:
        pb.calibrate(model, n=1000, lam=100.0, eps=1e-40, method="concentrated")
    floor = info.value.reachable["min_eps"]
    # independent: at m = 1e-108 (a little above the overflow) the exact value is ~1.4e-6,
    # and nothing below the exact value at the largest finite tau (~1.8e308) is reachable
    assert float(_normal_exact_eps(model, 1000, 100.0, 1.0, 1e-108)) > floor
    best = (
        Fraction(100)
        * Fraction(model.high - model.low) ** 2
        / (2 * Fraction(1e-50) ** 4 * Fraction(1.7976931348623157e308))
    )
    assert floor >= float(best)
    cal = pb.calibrate(model, n=1000, lam=100.0, eps=floor * 1.01, method="concentrated")
    assert float(_normal_exact_eps(model, 1000, 100.0, cal.r, cal.m)) <= cal.eps <= floor * 1.01


def test_normal_diffused_at_a_huge_prior_and_tiny_range():
    # was ZeroDivisionError in the closed-form guess
    model = pb.NormalKnownVariance(
        mu=-1e100, sigma=1e100, noise_sigma=1e100, low=-1e-100, high=1e-100
    )
    cal = pb.calibrate(model, n=2**40, lam=2.0, eps=1e-300, method="diffused")
    assert float(_normal_exact_eps(model, 2**40, 2.0, cal.r, cal.m)) <= cal.eps <= 1e-300


@pytest.mark.parametrize("alpha", [1e-300, 1e-200, 1.0])
@pytest.mark.parametrize("method", ["diffused", "concentrated"])
@pytest.mark.parametrize("eps", [1e-300, 1e-100])
def test_gamma_poisson_eps_below_e_minus_690(alpha, method, eps):
    # a certificate of 0 used to count as log eps = -690 in the search, above log(1e-300):
    # "infeasible, min_eps 0"; and at alpha ~ 1e-300 the smallest knobs underflow to 0
    model = pb.GammaPoisson(alpha=alpha, beta=1, max_count=20)
    cal = pb.calibrate(model, n=2, lam=2.0, eps=eps, method=method)
    assert 0 <= cal.eps <= eps
    # independent: D = 0 iff every data set's float shape is the same (then exactly 0)
    if model.alpha / cal.m == model.alpha / cal.m + cal.r * 40.0:
        assert cal.eps == 0.0
    else:
        assert gamma_exact_sup(model, 2, 2.0, cal.r, cal.m) <= cal.eps


def test_normal_certificate_never_underflows_to_zero():
    # the exact D is ~1e-800 > 0: a float certificate of 0 would claim the release ignores
    # the data; the certificate must stay >= the exact value (here the smallest float)
    model = pb.NormalKnownVariance(mu=0, sigma=1e-100, noise_sigma=1e100, low=0, high=1e-100)
    exact = _normal_exact_eps(model, 1, 2.0, 1.0, 1.0)
    assert 0 < exact
    cert = model.rdp(1, [2.0, 1e6])
    assert (cert > 0).all()
    assert cert[0] >= exact and cert[1] >= _normal_exact_eps(model, 1, 1e6, 1.0, 1.0)


def test_normal_concentrated_window_of_finite_certificates_is_found():
    # finite only for m in ~(5.6e-109, 4.5e-93): below, 1/(m sigma^2) overflows; above, the
    # divergence itself exceeds the float range. The search used to jump over the window
    # ("min_eps inf, ask for a larger eps")
    model = pb.NormalKnownVariance(mu=0, sigma=1e-100, noise_sigma=1e-100, low=-1e100, high=1e100)
    with pytest.raises(InfeasiblePrivacyError) as info:
        pb.sample(model, [1], 2, 1.0, method="concentrated")
    floor = info.value.reachable["min_eps"]
    # independent: D = lam (w A)^2 tau / 2 = 4e600 / tau and tau < 2^1024
    assert floor >= float(Fraction(4 * 10**600) / Fraction(2**1024))
    for eps in (floor, 1e295, 1e300):
        cal = pb.calibrate(model, 1, 2.0, eps, "concentrated")
        assert float(_normal_exact_eps(model, 1, 2.0, cal.r, cal.m)) <= cal.eps <= eps
