"""NormalKnownVariance (docs/normal.md): the closed-form sup against a dense grid of sums,
correctly rounded sums, the rounding the certificate covers, calibration, validation."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from catalogue import mp_normal_posterior, normal_exact_sup  # noqa: I001

import privbayes as pb
from privbayes import InfeasiblePrivacyError, NormalKnownVariance

U = 2.0**-53


def _model(rng):
    lo = float(rng.uniform(-50, 10))
    hi = lo + float(10 ** rng.uniform(-2, 2))
    return NormalKnownVariance(
        float(rng.normal() * 5),
        float(10 ** rng.uniform(-2, 2)),
        float(10 ** rng.uniform(-2, 2)),
        lo,
        hi,
    )


def _slack(model, n):
    """Relative room above the exact sup left for rounding: (1 + 8u + 6u n Y / dy)^2."""
    y = max(-model._ylo, model._yhi)
    dy = model._yhi - model._ylo
    return 1e-13 + 2.5 * (8 * U + 6 * U * n * y / dy)


def test_closed_form_equals_the_dense_grid(rng):
    """sup over a grid of sums S in [n low, n high] and shifts |t| <= high - low, computed
    from the posterior formulas in mpmath, against the certificate."""
    for _ in range(25):
        model = _model(rng)
        n = int(rng.integers(1, 40))
        lam = float(1 + 59 * rng.random() ** 2)
        r, m = (float(10 ** rng.uniform(-3, 0)), 1.0)
        if rng.random() < 0.5:
            r, m = m, r
        grid = normal_exact_sup(model, n, lam, r, m, grid=21)
        cert = float(model.rdp(n, lam, r=r, m=m))
        rel = (cert - grid) / grid
        assert 0 <= rel < _slack(model, n), (model, n, lam, r, m, cert, grid)
        # the textbook expression lam r^2 (high - low)^2 / (2 noise^4 tau)
        with mp.workdps(40):
            tau = (
                1 / (mp.mpf(m) * mp.mpf(model.sigma) ** 2)
                + mp.mpf(r) * n / mp.mpf(model.noise_sigma) ** 2
            )
            d = mp.mpf(model.high) - mp.mpf(model.low)
            closed = (
                mp.mpf(lam) * mp.mpf(r) ** 2 * d**2 / (2 * mp.mpf(model.noise_sigma) ** 4 * tau)
            )
        assert float(closed) == pytest.approx(grid, rel=1e-12)


def test_any_low_vs_high_pair_attains_the_sup():
    model = NormalKnownVariance(1.0, 2.0, 0.5, -1.0, 4.0)
    n, lam, r = 9, 3.0, 0.3
    cert = float(model.rdp(n, lam, r=r))
    rng = np.random.default_rng(0)
    for _ in range(5):
        others = rng.uniform(-1, 4, n - 1)
        with mp.workdps(40):
            s = mp.fsum(mp.mpf(float(v)) for v in others)
            m1, v = mp_normal_posterior(model, s + 4, n, r, 1.0)
            m2, _ = mp_normal_posterior(model, s - 1, n, r, 1.0)
            d = float(mp.mpf(lam) * (m1 - m2) ** 2 / (2 * v))
        assert d == pytest.approx(cert, rel=1e-13) and d <= cert
    # the library's general closed form agrees at the released laws
    w, mu0, sd = model._constants(n, r, 1.0)
    assert pb.renyi_normal(w * 5.0, sd, 0.0, sd, lam) == pytest.approx(cert, rel=1e-14)


def test_sums_are_correctly_rounded():
    rng = np.random.default_rng(4)
    model = NormalKnownVariance(0.0, 1.0, 1.0, -1e6, 1e6 + 3.0)
    for _ in range(20):
        x = rng.uniform(-1e6, 1e6, 5000) * 10.0 ** rng.integers(-8, 1, 5000)
        s, n = model._statistics(x)
        exact = sum((Fraction(float(v)) for v in x - model._centre), Fraction(0))
        assert s == float(exact) and n == 5000  # float(Fraction) rounds correctly
    x = rng.uniform(-1e6, 1e6, 140_000)  # fed to fsum in three chunks
    exact = sum((Fraction(float(v)) for v in x - model._centre), Fraction(0))
    assert model._statistics(x)[0] == float(exact)


def test_rounding_of_the_mean_is_covered_and_needed():
    """The computed data term fl(w S_c) of two neighbours can differ by more than
    w (high - low); the certificate's delta covers every computed shift (exact rationals),
    the exact-arithmetic certificate (a mutant without the rounding terms) would not."""
    rng = np.random.default_rng(5)
    exceed = 0
    for _ in range(150):
        lo = float(rng.uniform(-3, 3))
        model = NormalKnownVariance(
            float(rng.normal() * 50),
            1.0,
            float(10 ** rng.uniform(-1, 1)),
            lo,
            lo + float(10 ** rng.uniform(-1, 1)),
        )
        n = int(rng.integers(1000, 20000))
        r = float(10 ** rng.uniform(-2, 0))
        w, _, _ = model._constants(n, r, 1.0)
        delta = w * model._spread(n) + 2.0**-1072
        base = rng.uniform(model.low, model.high, n)
        base[: n // 2] = model.high  # sums far from 0: rounding at its largest
        d0, d1 = base.copy(), base.copy()
        d0[-1], d1[-1] = model.high, model.low
        loc = [w * model._statistics(d)[0] for d in (d0, d1)]  # what _draw computes
        shift = abs(Fraction(loc[0]) - Fraction(loc[1]))
        assert shift <= Fraction(delta)
        exact_shift = Fraction(w) * (Fraction(model._yhi) - Fraction(model._ylo))
        exceed += shift > exact_shift
    assert exceed > 10, exceed


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_calibration_matches_the_closed_form_root(method):
    """eps(r) = lam r^2 D^2 / (2 s^2 (s^2/sigma^2 + r n)): a quadratic in r; eps(m) is
    linear-fractional in m. The calibrated knob is their root to ~1e-12 (rounding terms)."""
    model = NormalKnownVariance(0.0, 2.0, 1.5, -1.0, 2.0)
    d, s2, sg2 = 3.0, 1.5**2, 4.0
    for n, lam, eps in [
        (100, 2.0, 0.01),
        (10**6, 8.0, 1e-4),
        (3, 1.5, 0.2),
        (10**9, 1 + 1e-9, 1e-8),
    ]:
        cal = pb.calibrate(model, n, lam, eps, method)
        c = lam * d * d / (2 * s2 * s2)
        if method == "diffused":
            b, e = eps * n / s2, eps / sg2  # c r^2 - b r - e = 0
            root = (b + math.sqrt(b * b + 4 * c * e)) / (2 * c)
            knob = cal.r
        else:  # c / (1/(m sg2) + n/s2) = eps
            root = eps / (sg2 * (c - eps * n / s2)) if c > eps * n / s2 else 1.0
            knob = cal.m
        assert knob == pytest.approx(min(root, 1.0), rel=1e-9) and knob <= min(root, 1.0)
        assert cal.eps <= eps and cal.iterations <= 40


def test_direct_sampling_and_infeasible_targets():
    model = NormalKnownVariance(0.0, 1.0, 1.0, 0.0, 1.0)
    direct = float(model.rdp(50, 3.0))
    assert direct == pytest.approx(3.0 / (2 * (1 + 50)), rel=1e-12)
    cal = pb.calibrate(model, 50, 3.0, 1.0, "direct")
    assert (cal.r, cal.m, cal.eps) == (1.0, 1.0, direct)
    with pytest.raises(InfeasiblePrivacyError, match="ask for eps >=") as e:
        pb.calibrate(model, 50, 3.0, 0.01, "direct")
    assert e.value.reachable["min_eps"] == direct
    # every finite order is reachable, even a huge one; lam = inf is not (no pure DP)
    assert np.isfinite(model.rdp(50, 1e300)) and np.isinf(model.rdp(50, np.inf))
    with pytest.raises(InfeasiblePrivacyError, match="no pure-DP"):
        pb.calibrate(model, 50, math.inf, 1.0, "direct")
    for method in ("diffused", "concentrated"):
        cal = pb.calibrate(model, 50, 1e6, 1e-3, method)
        assert cal.eps <= 1e-3


def test_tiny_eps_and_extreme_scales_certify():
    """The certificate has no floor: only fl(w S_c) depends on the data (docs/normal.md)."""
    for model, n, methods in [
        (NormalKnownVariance(1e6, 1.0, 1.0, 0.0, 1.0), 10, ("diffused", "concentrated")),
        (NormalKnownVariance(0.0, 1e-50, 1e50, -1e90, 1e90), 10**15, ("diffused", "concentrated")),
        # a prior 1e160 times wider than the noise: m >= 1e-300 cannot make it informative
        (NormalKnownVariance(-3.0, 1e80, 1e-80, 0.0, 1e-60), 3, ("diffused",)),
    ]:
        for method in methods:
            for eps in (1e-25, 1e-3, 30.0):
                cal = pb.calibrate(model, n, 2.0, eps, method)
                assert 0 < cal.eps <= eps and cal.iterations <= 40
    with pytest.raises(InfeasiblePrivacyError, match="below what any m >= 1e-300") as e:
        pb.calibrate(
            NormalKnownVariance(-3.0, 1e80, 1e-80, 0.0, 1e-60), 3, 2.0, 1.0, "concentrated"
        )
    assert e.value.reachable["min_eps"] > 1.0


def test_data_validation_and_clipping():
    model = NormalKnownVariance(0.0, 1.0, 1.0, -2.0, 2.0)
    with pytest.raises(
        ValueError, match=r"\[low, high\] = \[-2, 2\]; data\[1\] = 2.5 \(2 outside\)"
    ):
        model._statistics([0.0, 2.5, -7.0])
    clipped = NormalKnownVariance(0.0, 1.0, 1.0, -2.0, 2.0, clip=True)
    assert clipped._statistics([0.0, 2.5, -7.0]) == (0.0, 3)
    with pytest.raises(ValueError, match=r"data\[0\] = nan"):
        clipped._statistics([np.nan])  # clipping never hides NaN
    with pytest.raises(ValueError, match="1-D"):
        model._statistics(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="low must be < high"):
        NormalKnownVariance(0.0, 1.0, 1.0, 2.0, -2.0)
    for bad in (1e-120, 1e120):
        with pytest.raises(ValueError, match="sigma"):
            NormalKnownVariance(0.0, bad, 1.0, 0.0, 1.0)
    with pytest.raises(TypeError, match="mu"):
        NormalKnownVariance("0", 1.0, 1.0, 0.0, 1.0)
    assert "clip=True" in repr(clipped)


def test_release_value_and_prior_at_n_zero():
    model = NormalKnownVariance(3.0, 0.5, 1.0, 0.0, 10.0)
    rel = pb.sample(model, [], 2.0, 1.0, size=20000, rng=0)
    assert rel.eps == 0 and rel.log_value is None
    assert abs(rel.value.mean() - 3.0) < 0.02 and abs(rel.value.std() - 0.5) < 0.01
    one = pb.sample(model, [1.0, 9.0], 2.0, 1.0, rng=0)
    assert isinstance(one.value, float) and one.log_value is None


def test_audit_at_the_worst_pair_reaches_a_fraction_of_the_certificate():
    """1e5 trials at delta = 1e-3 (direct sampling meets eps here): measured 0.63."""
    from privbayes.audit import audit_model

    model = NormalKnownVariance(0.0, 1.0, 1.0, -3.0, 3.0)
    res = audit_model(model, 100, 2.0, 1.0, "diffused", 10**5, delta=1e-3, confidence=0.99, rng=7)
    assert not res.violation and res.eps_lower <= res.eps_certified
    assert res.fraction >= 0.3, res
