"""sample / release_query: draws from the right posterior, no leaks, clear errors."""

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats

import privbayes as pb
from privbayes import BetaBernoulli, DirichletCategorical
from privbayes.models import MeanQuery
from privbayes.sampling.conjugate import sample_dirichlet_log, simplex_from_log


def test_beta_bernoulli_release_fields():
    data = np.r_[np.ones(30), np.zeros(70)]
    rel = pb.sample(BetaBernoulli(2, 3), data, 2.0, 0.5, rng=7)
    assert isinstance(rel.value, float) and 0 < rel.value < 1
    assert rel.method == "diffused" and rel.m == 1.0 and 0 < rel.r < 1
    assert rel.lam == 2.0 and rel.n == 100 and 0 < rel.eps <= 0.5
    # both logs are kept: (log theta, log(1 - theta))
    assert rel.log_value.shape == (2,)
    assert math.log(rel.value) == pytest.approx(rel.log_value[0])
    assert math.log1p(-rel.value) == pytest.approx(rel.log_value[1])
    np.testing.assert_allclose(rel.rdp([2.0]), [rel.eps])
    assert rel.rdp(np.array([1.5, 3.0, np.inf])).shape == (3,)


def test_dirichlet_release_fields_codes_and_one_hot_agree():
    codes = np.array([0, 1, 2, 2, 1, 2])
    a = pb.sample(DirichletCategorical([1, 1, 1]), codes, 3.0, 1.0, "concentrated", rng=3)
    b = pb.sample(
        DirichletCategorical([1, 1, 1]), np.eye(3)[codes], 3.0, 1.0, "concentrated", rng=3
    )
    assert a.value.shape == (3,) and a.value.sum() == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_array_equal(a.value, b.value)
    assert a.method == "concentrated" and a.r == 1.0 and 0 < a.m < 1


def test_draws_follow_the_mechanism_posterior():
    """Kolmogorov-Smirnov against Beta(a/m + r k, b/m + r (n - k)) from scipy."""
    data = np.r_[np.ones(12), np.zeros(28)]
    rng = np.random.default_rng(11)
    for method in ["diffused", "concentrated"]:
        draws = [
            pb.sample(BetaBernoulli(2, 1), data, 2.0, 0.3, method, rng=rng) for _ in range(1500)
        ]
        r, m = draws[0].r, draws[0].m
        target = stats.beta(2 / m + r * 12, 1 / m + r * 28)
        assert stats.kstest([d.value for d in draws], target.cdf).pvalue > 1e-3


def test_log_gamma_sampler_matches_scipy_in_log_space():
    rng = np.random.default_rng(5)
    for a, b in [(0.01, 0.02), (0.5, 0.3), (3.0, 5.0), (1e4, 2e4)]:
        log_p = sample_dirichlet_log([a, b], rng, 20000)[:, 0]

        # log of a Beta(a, b) variable: P(log X <= t) = I_{e^t}(a, b) = 1 - I_{1-e^t}(b, a),
        # the second form resolves X within 1e-17 of 1, where tiny a, b put real mass
        def cdf(t, a=a, b=b):
            near_one = t > -math.log(2)
            return np.where(
                near_one, special.betaincc(b, a, -np.expm1(t)), special.betainc(a, b, np.exp(t))
            )

        assert stats.kstest(log_p, cdf).pvalue > 1e-3


def test_tiny_concentrations_never_nan():
    rng = np.random.default_rng(0)
    p = simplex_from_log(sample_dirichlet_log(np.full(4, 1e-4), rng, 100000))
    assert not np.isnan(p).any()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    # through the public API: zero counts (n = 0) releases the prior
    rel = pb.sample(DirichletCategorical([1e-4] * 3), np.array([], dtype=int), 2.0, 1.0, rng=1)
    assert rel.eps == 0.0 and rel.n == 0 and not np.isnan(rel.value).any()
    assert rel.value.sum() == pytest.approx(1.0)
    assert np.isfinite(rel.log_value).all()


def test_all_zero_and_all_one_data():
    for data in [np.zeros(500), np.ones(500)]:
        rel = pb.sample(BetaBernoulli(), data, 2.0, 0.1, rng=0)
        assert 0 < rel.value < 1 and rel.eps <= 0.1


def test_release_carries_no_statistic_and_no_posterior():
    data = np.r_[np.ones(17), np.zeros(4)]
    rel = pb.sample(BetaBernoulli(), data, 2.0, 1.0, rng=0)
    names = {f.name for f in dataclasses.fields(rel)}
    assert names == {
        "value",
        "log_value",
        "method",
        "r",
        "m",
        "lam",
        "eps",
        "n",
        "calibration",
        "diagnostics",
        "size",
        "guarantee",
        "tv",
        "posterior",  # None here; method="noise-aware": the posterior given the noisy statistic
        "delta",  # None here; an (eps, delta) target's delta
        "dp_eps",  # and the certified eps at it (public: a function of the calibration)
        "dp_target",  # and the eps asked for (public: the request)
    }
    assert rel.posterior is None
    assert rel.guarantee == "exact" and rel.tv == 0.0
    assert rel.diagnostics is None  # exact sampling: nothing computed on the data
    assert not hasattr(rel, "__dict__")  # frozen dataclass with slots-like fields only
    text = repr(rel) + repr(rel.calibration)
    assert "17" not in text.replace("0.17", "")  # the count of ones appears nowhere
    cal_fields = {f.name for f in dataclasses.fields(rel.calibration)}
    assert "counts" not in cal_fields and "posterior" not in cal_fields


def test_rng_handling():
    data = np.r_[np.ones(5), np.zeros(5)]
    same = [pb.sample(BetaBernoulli(), data, 2.0, 1.0, rng=42).value for _ in range(2)]
    assert same[0] == same[1]
    fresh = {pb.sample(BetaBernoulli(), data, 2.0, 1.0).value for _ in range(5)}
    assert len(fresh) == 5  # OS entropy by default
    gen = np.random.default_rng(1)
    assert 0 < pb.sample(BetaBernoulli(), data, 2.0, 1.0, rng=gen).value < 1
    with pytest.raises(TypeError, match="rng"):
        pb.sample(BetaBernoulli(), data, 2.0, 1.0, rng="seed")
    with pytest.raises(ValueError, match="rng"):
        pb.sample(BetaBernoulli(), data, 2.0, 1.0, rng=-1)


def test_release_query():
    values = np.linspace(0, 1, 101) ** 2
    rel = pb.release_query(values, 2.0, 0.5, rng=0)
    assert 0 < rel.value < 1 and rel.eps <= 0.5 and rel.n == 101
    assert isinstance(rel.calibration.model, MeanQuery)
    assert rel.r == pb.calibrate(MeanQuery(), 101, 2.0, 0.5).r
    # same boundary as the Bernoulli case, on the query's coarser exact grid (2^-8 sums)
    cal = pb.calibrate(BetaBernoulli(), 101, 2.0, 0.5)
    assert rel.r <= cal.r and rel.r == pytest.approx(cal.r, rel=2e-9)


def test_release_query_domain_and_clip():
    with pytest.raises(ValueError, match=r"values\[2\] = 1.5"):
        pb.release_query([0.1, 0.2, 1.5, -3], 2.0, 0.5)
    rel = pb.release_query([0.1, 0.2, 1.5, -3], 2.0, 0.5, clip=True, rng=0)
    assert rel.n == 4
    with pytest.raises(ValueError, match="values must be finite"):
        pb.release_query([0.1, np.nan], 2.0, 0.5)
    with pytest.raises(ValueError, match="1-D"):
        pb.release_query([[0.1, 0.2]], 2.0, 0.5)


@pytest.mark.parametrize(
    "model,data,exc,match",
    [
        (BetaBernoulli(), [0, 1, np.nan], ValueError, r"data\[2\] = nan"),
        (BetaBernoulli(), [0, 1, np.inf], ValueError, r"data\[2\] = inf"),
        (BetaBernoulli(), [0, 1, 2], ValueError, r"data\[2\] = 2"),
        (BetaBernoulli(), [0, 0.5], ValueError, r"data\[1\] = 0.5"),
        (BetaBernoulli(), [[0, 1]], ValueError, "1-D"),
        (BetaBernoulli(), ["a", "b"], TypeError, "dtype"),
        (DirichletCategorical([1, 1, 1]), [0, 3], ValueError, r"0\.\.2.*data\[1\] = 3"),
        (DirichletCategorical([1, 1, 1]), [0, -1], ValueError, r"data\[1\] = -1"),
        (DirichletCategorical([1, 1, 1]), [0, 1.5], ValueError, r"data\[1\] = 1.5"),
        (DirichletCategorical([1, 1, 1]), np.eye(4), ValueError, "K=3"),
        (DirichletCategorical([1, 1, 1]), [[1, 1, 0]], ValueError, "row 0"),
        (DirichletCategorical([1, 1, 1]), np.zeros((2, 3, 1)), ValueError, "shape"),
    ],
)
def test_bad_data(model, data, exc, match):
    with pytest.raises(exc, match=match):
        pb.sample(model, data, 2.0, 1.0)


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: BetaBernoulli(0, 1), "alpha"),
        (lambda: BetaBernoulli(1, -1), "beta"),
        (lambda: BetaBernoulli(np.nan, 1), "alpha"),
        (lambda: DirichletCategorical([1.0]), "alpha"),
        (lambda: DirichletCategorical([1.0, 0.0, 2.0]), r"alpha\[1\] = 0"),
        (lambda: BetaBernoulli(1e-320, 1), "1e-300"),
        (lambda: DirichletCategorical([[1.0, 2.0]]), "alpha"),
    ],
)
def test_bad_priors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_prior_types_and_immutability():
    with pytest.raises(TypeError, match="numbers"):
        DirichletCategorical(["1", "2"])
    with pytest.raises(TypeError, match="alpha"):
        BetaBernoulli(True, 1.0)
    model = BetaBernoulli(2.0, 3.0)
    with pytest.raises(AttributeError, match="immutable"):
        model.alpha = 50.0
    with pytest.raises(TypeError, match="instance"):
        pb.sample(BetaBernoulli, [0, 1], 2.0, 1.0)
    with pytest.raises(TypeError, match="clip"):
        pb.release_query([0.2, 1.5], 2.0, 1.0, clip="False")
    rel = pb.sample(BetaBernoulli(), [0, 1], np.float32(2.0), np.array(1.0), rng=0)
    assert rel.lam == 2.0 and type(rel.r) is float


@pytest.mark.parametrize(
    "lam,eps,method,exc,match",
    [
        (1.0, 1.0, "diffused", ValueError, "lam"),
        (2.0, 0.0, "diffused", ValueError, "eps=0"),
        (2.0, -1.0, "diffused", ValueError, "eps"),
        (2.0, float("nan"), "diffused", ValueError, "eps"),
        (2.0, 1.0, "magic", ValueError, "method"),
    ],
)
def test_bad_privacy_arguments(lam, eps, method, exc, match):
    with pytest.raises(exc, match=match):
        pb.sample(BetaBernoulli(), [0, 1], lam, eps, method)


def test_r_and_m_validated_in_curves():
    with pytest.raises(ValueError, match="r must be in"):
        BetaBernoulli().rdp(10, 2.0, r=1.5)
    with pytest.raises(ValueError, match="m must be in"):
        BetaBernoulli().rdp(10, 2.0, m=0.0)
    with pytest.raises(ValueError, match="orders"):
        BetaBernoulli().rdp(10, 0.5)


@pytest.mark.parametrize(
    "model, data",
    [
        (BetaBernoulli(2, 3), [1, 0, 1, 1]),
        (pb.DirichletCategorical([1, 2, 3]), [0, 2, 2, 1]),
    ],
)
@pytest.mark.parametrize("k", [1, 7, 1000])
def test_size_k_composes_to_the_requested_eps(model, data, k):
    rel = pb.sample(model, data, 3.0, 0.7, "concentrated", size=k, rng=1)
    assert rel.size == k and np.shape(rel.value)[0] == k
    # composed: k times one draw's eps, exactly, rounded up (docs/numerics.md)
    assert rel.eps <= 0.7 and Fraction(rel.eps) >= k * Fraction(rel.calibration.eps)
    assert rel.eps <= np.nextafter(k * rel.calibration.eps, np.inf)
    assert rel.eps > 0.7 * (1 - 1e-9)  # the budget is used, not wasted
    orders = np.array([1.5, 3.0, 10.0])
    one, many = rel.calibration.rdp(orders), rel.rdp(orders)
    for a, b in zip(one, many, strict=True):
        assert b == a == np.inf or k * Fraction(a) <= Fraction(b) <= np.nextafter(k * a, np.inf)
    assert float(rel.rdp(3.0)) <= 0.7
    # the per-draw calibration is the one for eps / k
    single = pb.calibrate(model, len(data), 3.0, rel.calibration.target_eps, "concentrated")
    assert single.m == rel.calibration.m


def test_size_k_draws_are_independent_and_exact():
    # k draws of Beta(1 + r k1, 1 + r k0) at the per-draw calibration: KS against scipy
    data = np.r_[np.ones(30), np.zeros(10)]
    rel = pb.sample(BetaBernoulli(), data, 2.0, 5.0, size=4000, rng=3)
    cal = rel.calibration
    dist = stats.beta(1 + cal.r * 30, 1 + cal.r * 10)
    assert stats.kstest(rel.value, dist.cdf).pvalue > 1e-3
    assert rel.log_value.shape == (4000, 2)
    np.testing.assert_allclose(np.exp(rel.log_value[:, 0]), rel.value, rtol=1e-12)
    np.testing.assert_allclose(-np.expm1(rel.log_value[:, 1]), rel.value, rtol=1e-12)
    assert abs(np.corrcoef(rel.value[:-1], rel.value[1:])[0, 1]) < 0.1


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_size_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="size"):
        pb.sample(BetaBernoulli(), [1, 0], 2.0, 1.0, size=bad)


def test_size_k_charges_the_composed_curve(tmp_path):
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=5.0, delta=1e-6)
    rel = pb.sample(BetaBernoulli(), [1, 0, 1], 2.0, 0.5, size=10, ledger=ledger, dataset="d")
    check = pb.Ledger(tmp_path / "check.db")
    check.init_budget("d", eps=5.0, delta=1e-6)
    check.charge("d", 10 * rel.calibration.rdp(check.orders))
    assert ledger.spent("d") == check.spent("d")

    one = pb.Ledger(tmp_path / "one.db")
    one.init_budget("d", eps=5.0, delta=1e-6)
    one.charge("d", rel.calibration)
    assert ledger.spent("d") > one.spent("d")


@pytest.mark.parametrize("rng", [-1, "a", 1.5, np.random.RandomState(0)])
def test_a_bad_rng_is_refused_before_any_charge(tmp_path, rng):
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=10.0, delta=1e-6)
    for model, data in [
        (pb.BetaBernoulli(), np.array([0, 1, 1])),
        (pb.MultinomialLogisticRegression(0.1, 1.0, 3), (np.zeros((30, 2)), np.arange(30) % 3)),
    ]:
        with pytest.raises((TypeError, ValueError), match="rng"):
            pb.sample(model, data, 2.0, 1.0, rng=rng, ledger=ledger, dataset="d")
    assert ledger.spent("d") == 0.0


def test_public_ranges_and_scales_whose_width_overflows_are_refused():
    """A public range or scale whose width or factor is not a finite normal number would
    rescale every record to 0 (or inf) without a word; each is refused, naming the
    arguments, before any data are read (the CLI's --low/--high and --scale: tests/cli)."""
    X = np.full((3, 2), 0.1)
    for bound, c in ((1e308, 1e-100), (1e-320, 1.0), (5e-324, 1e10)):
        with pytest.raises(ValueError, match=r"c / bound = .* not a finite normal number"):
            pb.preprocessing.scale_rows(X, bound, c)
        with pytest.raises(ValueError, match="c / bound"):  # before X is read (refused too)
            pb.preprocessing.scale_rows(np.full((3, 2), np.nan), bound, c)
    np.testing.assert_array_equal(pb.preprocessing.scale_rows(X, 2.0, 1.0), X / 2)
    # the models bound their own ranges so that widths and squares stay finite
    with pytest.raises(ValueError, match=r"\|low\| <= 1e100"):
        pb.NormalKnownVariance(0.0, 1.0, 1.0, -1e308, 1e308)
    with pytest.raises(ValueError, match="max_count must be an integer in"):
        pb.GammaPoisson(1.0, 1.0, 10**400)
    with pytest.raises(ValueError, match=r"c must lie in \[1e-100, 1e100\]"):
        pb.BayesianLogisticRegression(c=1e200)
    with pytest.raises(ValueError, match=r"c must lie in \[1e-100, 1e100\]"):
        pb.MultinomialLogisticRegression(c=1e200, n_classes=2)


def test_clipped_and_normalised_rows_stay_within_c_at_extreme_scales():
    """clip_rows multiplied by c / ||x||, subnormal for c = 1e-100 and rows near 1e220: the
    clipped rows came out up to 2e-4 above c, and the model refused them."""
    rng = np.random.default_rng(0)
    for c, size in ((1e-100, 1e220), (1e100, 1e-300), (1.0, 1.0), (1e-100, 1e-100)):
        X = rng.normal(size=(500, 3)) * size
        model = pb.BayesianLogisticRegression(c=c)
        for f in (pb.preprocessing.clip_rows, pb.preprocessing.normalize_rows):
            norms = np.linalg.norm(f(X, c), axis=1)
            assert (norms <= model._norm_threshold(3)).all(), (f.__name__, c, size)
        norms = np.linalg.norm(pb.preprocessing.normalize_rows(X, c), axis=1)
        np.testing.assert_allclose(norms, c, rtol=1e-15)
