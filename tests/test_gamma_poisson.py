"""Gamma-Poisson (docs/gamma_poisson.md): the boundary reduction against brute force over
every data set, the rounding the certificate covers, extremes, data validation."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from catalogue import gamma_exact_sup, mp_gamma_same_rate  # noqa: I001

import privbayes as pb
from privbayes import GammaPoisson, InfeasiblePrivacyError
from privbayes.divergence import _second_difference


def _setting(rng):
    lam = 1 + 59 * rng.random() ** 2
    method = rng.choice(["diffused", "concentrated"])
    knob = float(10 ** rng.uniform(-3, 0))
    return lam, *((knob, 1.0) if method == "diffused" else (1.0, knob))


# The float evaluation of T (privbayes.divergence) errs by up to ~1e-11 relative either way
# (measured; docs/divergence.md); a final interval-arithmetic check of the returned knob is
# to bound it (another branch). The reduction itself is exact.
EVAL = 5e-11


def _slack(model, n, r, m):
    """Relative room the certificate leaves above the exact sup for rounding of the
    shapes: D ~ shift^2 and the shift carries 4.5 u U / (r M) extra (docs/gamma_poisson.md)."""
    up = model.alpha / m + r * n * model.max_count
    return EVAL + 2.5 * 4.5 * 2.0**-53 * up / (r * model.max_count)


def _rel(a, b):
    if math.isinf(a) or math.isinf(b):
        return 0.0 if a == b else math.inf
    return (a - b) / b


def test_neighbouring_data_sets_reach_exactly_the_sum_pairs():
    """Enumerating every count vector and every replaced record gives every pair of sums in
    [0, nM] at distance 1..M, and nothing else: the sums carry the whole problem."""
    for n, big in [(1, 3), (2, 2), (3, 3), (4, 2)]:
        seen = set()
        for data in itertools.product(range(big + 1), repeat=n):
            s = sum(data)
            for i, new in itertools.product(range(n), range(big + 1)):
                if new != data[i]:
                    seen.add((s, s - data[i] + new))
        want = {
            (s, t) for s in range(n * big + 1) for t in range(n * big + 1) if 1 <= abs(s - t) <= big
        }
        assert seen == want


def test_boundary_equals_brute_force_over_every_data_set(rng):
    """Every count vector of n <= 5 records (M <= 3), every replaced record, in mpmath."""
    for _ in range(12):
        alpha, beta = 10 ** rng.uniform(-1, 1.5, 2)
        n, big = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        lam, r, m = _setting(rng)
        model = GammaPoisson(alpha, beta, big)
        shapes = {}
        best = 0.0
        for data in itertools.product(range(big + 1), repeat=n):
            s = sum(data)
            for i, new in itertools.product(range(n), range(big + 1)):
                s2 = s - data[i] + new
                if s2 != s and (s, s2) not in shapes:
                    with mp.workdps(50):
                        p = mp.mpf(alpha) / m + mp.mpf(r) * s
                        q = mp.mpf(alpha) / m + mp.mpf(r) * s2
                    shapes[s, s2] = mp_gamma_same_rate(p, q, lam)
                    best = max(best, shapes[s, s2])
        cert = float(model.rdp(n, lam, r=r, m=m))
        rel = _rel(cert, best)
        assert -EVAL <= rel < _slack(model, n, r, m), (alpha, n, big, lam, r, m, cert, best)


def test_boundary_equals_brute_force_over_every_sum(rng):
    """Every pair of sums, n <= 12, M <= 5, random priors, orders and knobs (mpmath)."""
    for _ in range(30):
        alpha, beta = 10 ** rng.uniform(-1.5, 2, 2)
        n, big = int(rng.integers(1, 13)), int(rng.integers(1, 6))
        lam, r, m = _setting(rng)
        model = GammaPoisson(alpha, beta, big)
        brute = gamma_exact_sup(model, n, lam, r, m)
        cert = float(model.rdp(n, lam, r=r, m=m))
        rel = _rel(cert, brute)
        assert -EVAL <= rel < _slack(model, n, r, m), (alpha, n, big, lam, r, m, cert, brute)
        # the calibrator's function is the certificate
        assert model._sup_at(n, lam, r, m)[0] == cert or cert == math.inf


def test_the_worst_pair_is_the_one_reported():
    model = GammaPoisson(0.5, 1.0, 4)
    cal = pb.calibrate(model, 10, 3.0, 0.4, "diffused")
    assert cal.pair == {"sum": 0, "neighbour_sum": 4, "record": 0, "neighbour_record": 4}
    # a large prior shape and a large n: the top of the range is worst (the mirror pair)
    cal = pb.calibrate(GammaPoisson(50.0, 1.0, 4), 3, 1.5, 0.4, "diffused")
    assert cal.pair["sum"] in (0, 4) or cal.pair["neighbour_sum"] == 12


def test_corollary_one_direct_sampling_limit():
    """Direct sampling is RDP at order lam iff lam < 1 + alpha / max_count (pair 0 vs M)."""
    model = GammaPoisson(1.5, 2.0, 3)
    edge = 1 + 1.5 / 3
    assert np.isfinite(model.rdp(20, edge * (1 - 1e-9)))
    assert np.isinf(model.rdp(20, edge * (1 + 1e-9)))
    cal = pb.calibrate(model, 20, 1.4, 100.0, "direct")
    assert (cal.r, cal.m) == (1.0, 1.0) and cal.eps <= 100.0
    with pytest.raises(InfeasiblePrivacyError, match=r"lam < 1 \+ alpha/max_count = 1.5") as e:
        pb.calibrate(model, 20, 1.6, 100.0, "direct")
    assert e.value.reachable == {"max_lam": edge}
    with pytest.raises(InfeasiblePrivacyError, match="ask for eps >=") as e:
        pb.calibrate(model, 20, 1.4, 1e-3, "direct")
    assert e.value.reachable["min_eps"] == pytest.approx(cal.eps)
    # diffusion and concentration reach any order: finite iff alpha/m > r M (lam - 1)
    for r, m in [(0.25, 1.0), (1.0, 0.25)]:
        edge = 1 + 1.5 / (m * r * 3)
        assert np.isfinite(model.rdp(20, edge * (1 - 1e-9), r=r, m=m))
        assert np.isinf(model.rdp(20, edge * (1 + 1e-9), r=r, m=m))
    for method in ("diffused", "concentrated"):
        assert pb.calibrate(model, 20, 50.0, 0.1, method).eps <= 0.1


def _actual_shapes(model, n, r, m):
    """Every shape the sampler can use, as it computes it: fl(alpha/m + fl(r S))."""
    return np.array([model._shape(s, r, m) for s in range(n * model.max_count + 1)])


def test_rounding_of_the_shapes_is_covered_and_needed():
    """Neighbouring shapes as the sampler computes them can differ by more than r M. The
    certificate's shift W covers every released pair (exactly, in rationals) and its
    vertices dominate the released boundary pairs (mpmath); the exact-arithmetic vertices
    (shift r M) are exceeded by some released pair: that mutant would under-certify."""
    exceed, naive_broken = 0, 0
    rng = np.random.default_rng(3)
    lam = 2.0
    for _ in range(60):
        big, n = int(rng.integers(1, 6)), int(rng.integers(50, 300))
        model = GammaPoisson(float(10 ** rng.uniform(-1, 2)), 1.0, big)
        r = float(10 ** rng.uniform(-3, 0))
        shapes = _actual_shapes(model, n, r, 1.0)
        pairs = model._pairs(n, r, 1.0)
        lo, up, w = pairs[0][0], pairs[3][0], pairs[0][1]
        assert shapes.min() == lo and shapes.max() == up  # L and U are attained exactly
        exact = [Fraction(float(v)) for v in shapes]
        widest = max(
            abs(exact[s + t] - exact[s]) for s in range(len(exact) - big) for t in range(1, big + 1)
        )
        assert widest <= Fraction(w)  # the certificate's shift covers every released pair
        if widest <= Fraction(r) * big:
            continue
        exceed += 1
        top = n * big
        released = [(shapes[big], shapes[0]), (shapes[top], shapes[top - big])]
        released += [(q, p) for p, q in released]  # (P's shape, Q's shape)
        with mp.workdps(40):
            rm = mp.mpf(r) * big
            naive = [(lo + rm, lo), (up, up - rm), (lo, lo + rm), (up - rm, up)]
            ours = [(mp.mpf(x) + mp.mpf(h), mp.mpf(x)) for x, h in pairs]
            d_rel = [mp_gamma_same_rate(mp.mpf(p), mp.mpf(q), lam) for p, q in released]
            d_naive = [mp_gamma_same_rate(p, q, lam) for p, q in naive]
            d_ours = [mp_gamma_same_rate(p, q, lam) for p, q in ours]
        naive_broken += max(d_rel) > max(d_naive)
        assert max(d_rel) <= max(d_ours)
    assert exceed > 10 and naive_broken > 0, (exceed, naive_broken)


def test_vertices_against_mpmath_at_extreme_parameters():
    """The four T values of the certificate against mpmath: shapes 1e-4 .. 1e12."""
    worst = 0.0
    rng = np.random.default_rng(8)
    for _ in range(300):
        alpha = float(10 ** rng.uniform(-4, 12))
        big = int(rng.integers(1, 100))
        n = int(10 ** rng.uniform(0, 7))
        lam = float(rng.choice([1 + 10 ** rng.uniform(-10, -1), 10 ** rng.uniform(0.01, 3)]))
        r = float(10 ** rng.uniform(-8, 0))
        model = GammaPoisson(alpha, 1.0, big)
        for x, h in model._pairs(n, r, 1.0):
            got = float(_second_difference(x, h, lam))
            with mp.workdps(60):  # x + h exactly
                want = mp_gamma_same_rate(mp.mpf(x) + mp.mpf(h), mp.mpf(x), lam)
            if math.isinf(want):
                assert math.isinf(got)
                continue
            if want > 1e-290:
                worst = max(worst, abs(got - want) / want)
    # measured 3e-10 (x = 2e11, h = 2e-4, lam = 1 + 3e-10); docs/divergence.md
    assert worst < 1e-9


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_calibration_at_extreme_sizes_and_priors(method):
    for alpha, n, lam, eps in [
        (1e-4, 10**7, 2.0, 1e-3),
        (1e12, 10**6, 1e3, 1.0),
        (1.0, 10**9, 1 + 1e-10, 1e-6),
        (3.0, 1, 8.0, 10.0),
        (0.1, 10**12, 4.0, 0.01),
    ]:
        model = GammaPoisson(alpha, 1.0, 7)
        cal = pb.calibrate(model, n, lam, eps, method)
        assert 0 < cal.eps <= eps and cal.iterations <= 60
        knob = cal.r if method == "diffused" else cal.m
        near_pole = knob >= model._cap(n, lam) * (1 - 2.0**-19)  # solve_knob stops there
        if knob < 1 and not near_pole:  # tight: a knob 1e-9 larger breaks the target
            bigger = {"r" if method == "diffused" else "m": knob * (1 + 1e-9)}
            assert float(model.rdp(n, lam, **bigger)) > eps


def test_data_validation_and_clipping():
    model = GammaPoisson(1.0, 1.0, 3)
    assert model._statistics([0, 3, 2, 1]) == (6, 4)
    assert model._statistics(np.array([True, False])) == (1, 2)
    with pytest.raises(ValueError, match=r"max_count = 3; data\[1\] = 7.0 \(2 above\)"):
        model._statistics([1, 7, 9])
    clipped = GammaPoisson(1.0, 1.0, 3, clip=True)
    assert clipped._statistics([1, 7, 9]) == (7, 3)
    for bad, match in [([1, -2], r"data\[1\] = -2"), ([0.5], r"data\[0\] = 0.5")]:
        with pytest.raises(ValueError, match=match):
            clipped._statistics(bad)  # clipping never hides negatives or fractions
    with pytest.raises(ValueError, match="1-D"):
        model._statistics([[1, 2]])
    with pytest.raises(ValueError, match="2\\*\\*53"):
        pb.calibrate(GammaPoisson(1.0, 1.0, 2**40), 2**14, 2.0, 1.0)
    # exact integer sums up to 2**53
    big = GammaPoisson(1.0, 1.0, 2**50)
    assert big._statistics([2**50] * 7 + [2**50 - 1])[0] == 2**53 - 1
    assert float(big.rdp(8, 1.5)) >= 0
    assert repr(clipped) == "GammaPoisson(alpha=1.0, beta=1.0, max_count=3, clip=True)"


def test_tiny_and_huge_shapes_sample_without_nan():
    rel = pb.sample(GammaPoisson(1e-4, 1.0, 5), np.zeros(0), 2.0, 1.0, size=20000, rng=0)
    assert rel.eps == 0 and np.isfinite(rel.log_value).all() and not np.isnan(rel.value).any()
    assert (rel.value == 0).any()  # theta underflows, its log does not
    np.testing.assert_allclose(np.exp(rel.log_value), rel.value, rtol=1e-12)
    huge = pb.sample(GammaPoisson(1e12, 1e12, 5), [1, 2, 3], 2.0, 1.0, size=1000, rng=0)
    assert np.allclose(huge.value, 1.0, atol=1e-4)
    # beta / m overflowing: the rate is data-independent, the release stays finite
    rel = pb.sample(GammaPoisson(1e-3, 1e300, 1), [1, 0, 1], 2.0, 1e-3, "concentrated", rng=0)
    assert np.isfinite(rel.log_value) and rel.m < 1


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_audit_at_the_worst_pair_reaches_a_fraction_of_the_certificate(method):
    """1e5 trials at delta = 1e-3: never above the certificate; measured fractions 0.54
    (diffused) and 0.62 (concentrated), asserted >= 0.3."""
    from privbayes.audit import audit_model

    res = audit_model(
        GammaPoisson(1.0, 1.0, 5), 100, 2.0, 1.0, method, 10**5, delta=1e-3, confidence=0.99, rng=7
    )
    assert not res.violation and res.eps_lower <= res.eps_certified
    assert res.fraction >= 0.3, res


def test_max_count_and_clip_messages():
    for bad in (-1, 0, 2**60):
        with pytest.raises(ValueError, match=r"max_count must be an integer in \[1, 2\*\*53 - 1\]"):
            GammaPoisson(1.0, 1.0, bad)
    with pytest.raises(TypeError, match=r"max_count must be an integer in \[1, 2\*\*53 - 1\]"):
        GammaPoisson(1.0, 1.0, 2.5)
    for counts in ([-1.0, 1.0], [2.5, 1.0]):
        with pytest.raises(pb.DataError, match="clip=True only lowers counts above max_count"):
            pb.sample(GammaPoisson(1.0, 1.0, 5, clip=True), np.array(counts), 2.0, 1.0)
        with pytest.raises(pb.DataError) as err:
            pb.sample(GammaPoisson(1.0, 1.0, 5), np.array(counts), 2.0, 1.0)
        assert "clip=True" not in str(err.value)


def test_counts_above_2_to_the_53_are_never_rounded_into_the_domain():
    """An int64 count 2**53 + 1 becomes the float 2**53; with max_count = 2**53 allowed it
    passed the domain check as an implicit clip. max_count < 2**53: every such count is a
    float >= 2**53 > max_count, refused."""
    with pytest.raises(ValueError, match=r"2\*\*53 - 1"):
        pb.GammaPoisson(1.0, 1.0, max_count=2**53)
    model = pb.GammaPoisson(1.0, 1.0, max_count=2**53 - 1)
    with pytest.raises(pb.DataError):
        pb.sample(model, np.array([2**53 + 1], dtype=np.int64), 2.0, 1.0, rng=0)
