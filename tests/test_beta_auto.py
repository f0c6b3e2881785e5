"""beta="auto" (issue 21 §5): the public rule beta = c^2 d / (n M^2), resolved the same way by
calibrate() and sample(), and the knob-cap warning (privbayes.capping)."""

import warnings
from fractions import Fraction

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

import privbayes as pb
from privbayes.capping import FAR_BELOW, _up4, capped, quiet, warn_if_capped


def _rule(n, d, c, m):
    """The documented formula, independently: exact rationals, then the nearest double."""
    return float(Fraction(c) ** 2 * d / (n * Fraction(m) ** 2))


@pytest.mark.parametrize(
    "n,d,c,m",
    [(569, 31, 1.0, 10.0), (30162, 105, 1.0, 10.0), (150, 5, 1.0, 10.0), (7, 2, 0.3, 2.5),
     (10**6, 784, 4.0, 1.0), (1, 1, 1e-3, 1e-2)],
)  # fmt: skip
def test_auto_beta_is_the_documented_formula(n, d, c, m):
    beta = pb.auto_beta(n, d, c, m)
    assert beta == pytest.approx(_rule(n, d, c, m), rel=4e-16)
    model = pb.BayesianLogisticRegression("auto", c, margin_scale=m).resolve_beta(n, d)
    assert model.beta == beta and model.radius == c / beta  # the default OPS radius follows
    soft = pb.MultinomialLogisticRegression("auto", c, 4, margin_scale=m).resolve_beta(n, d)
    assert soft.beta == beta and soft.n_classes == 4
    # the prior it gives does not depend on n: n beta = c^2 d / M^2
    assert n * beta == pytest.approx(c * c * d / (m * m), rel=1e-15)


def test_default_margin_scale_is_ten_and_readme_figures():
    assert pb.auto_beta(569, 31, 1.0) == pytest.approx(31 / 56900, rel=1e-15)
    # the Adult user: beta = 1e-3 capped r at 1 with eps 0.13; the rule's beta does not
    assert pb.auto_beta(30162, 105, 1.0) == pytest.approx(3.4812e-5, rel=1e-4)


def test_calibrate_needs_d_and_resolves_as_sample_does():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = pb.preprocessing.clip_rows(X / 4000.0, c=0.8)
    model = pb.BayesianLogisticRegression("auto", 1.0, fit_intercept=True, backend="langevin")
    with pytest.raises(ValueError, match="beta='auto'.*pass d"):
        pb.calibrate(model, len(y), 2.0, 1.0)
    d = X.shape[1] + 1  # the intercept's column counts
    cal = pb.calibrate(model, len(y), 2.0, 1.0, d=d)
    rel = pb.sample(model, (X, y), 2.0, 1.0, rng=np.random.default_rng(3))
    assert cal.model.beta == rel.calibration.model.beta == pb.auto_beta(len(y), d, 1.0)
    assert (cal.r, cal.eps) == (rel.r, rel.eps)
    # a different n: a different beta, the same prior precision n beta
    half = pb.sample(model, (X[:300], y[:300]), 2.0, 1.0, rng=np.random.default_rng(4))
    assert half.calibration.model.beta == pb.auto_beta(300, d, 1.0)
    assert 300 * half.calibration.model.beta == pytest.approx(len(y) * cal.model.beta)


def test_unresolved_model_refuses_certificates_and_bad_arguments():
    model = pb.BayesianLogisticRegression("auto")
    assert model.beta_is_auto and model.radius is None and model.margin_scale == 10.0
    assert "margin_scale=10.0" in repr(model)
    with pytest.raises(ValueError, match="resolve_beta"):
        model.rdp(100, 2.0)
    with pytest.raises(ValueError, match="margin_scale applies to beta='auto' only"):
        pb.BayesianLogisticRegression(0.01, margin_scale=5.0)
    with pytest.raises(ValueError, match="number > 0 or 'auto'"):
        pb.BayesianLogisticRegression("Auto")
    with pytest.raises(ValueError, match="margin_scale"):
        pb.BayesianLogisticRegression("auto", margin_scale=-1.0)
    with pytest.raises(ValueError, match="d must be an integer"):
        model.resolve_beta(10, 0)
    with pytest.raises(ValueError, match="outside"):
        pb.BayesianLogisticRegression("auto", 1e-60, margin_scale=1e60).resolve_beta(10, 1)
    # options survive resolution and the back-end choice
    m2 = pb.BayesianLogisticRegression("auto", 2.0, fit_intercept=True, max_steps=77)
    r2 = m2.resolve_beta(50, 3)
    assert (r2.c, r2.fit_intercept, r2.max_steps, r2.backend) == (2.0, True, 77, "auto")
    assert r2.with_backend("langevin").beta == r2.beta
    assert pb.BayesianLogisticRegression(0.5).resolve_beta(10, 2).beta == 0.5  # a number stays


def test_estimator_beta_auto_sets_beta_and_keeps_params():
    from sklearn.base import clone

    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(400, 3)) / 3, c=0.8)
    y = (X[:, 0] > 0).astype(int)
    est = pb.PrivateLogisticRegression(beta="auto", fit_intercept=True, eps=1.0)
    est.fit(X, y)
    assert est.beta == "auto" and est.get_params()["beta"] == "auto"  # params untouched
    assert est.beta_ == pb.auto_beta(400, 4, 1.0)  # d = 3 features + the intercept
    assert est.calibration_.model.beta == est.beta_
    est2 = clone(est).set_params(margin_scale=5.0).fit(X, y)
    assert est2.beta_ == pb.auto_beta(400, 4, 1.0, 5.0)
    three = pb.PrivateLogisticRegression(beta="auto", classes=[0, 1, 2]).fit(X, y)
    assert three.beta_ == pb.auto_beta(400, 3, 1.0)  # per class: the rows of W
    fixed = pb.PrivateLogisticRegression(beta=0.02).fit(X, y)
    assert fixed.beta_ == 0.02
    with pytest.raises(ValueError, match="margin_scale applies"):
        pb.PrivateLogisticRegression(beta=0.02, margin_scale=3.0).fit(X, y)


# -- the knob-cap warning -----------------------------------------------------------------
def test_warns_when_the_knob_is_capped_far_below_the_target():
    model = pb.BayesianLogisticRegression(1e-3)  # the Adult user: n = 30162
    with pytest.warns(pb.KnobCappedWarning, match=r"r=1.*0\.13.*smaller beta") as rec:
        cal = pb.calibrate(model, 30162, 2.0, 1.0)
    assert len(rec) == 1 and rec[0].filename == __file__  # once, at the caller's line
    w = rec[0].message
    assert (w.knob, w.value, w.method) == ("r", 1.0, "diffused")
    assert w.certified_eps == cal.eps < FAR_BELOW * w.target_eps and w.target_eps == 1.0
    # the suggested beta meets the request at r = 1 (the curve is 1 / beta)
    suggested = 1e-3 * cal.eps / 1.0
    assert f"beta={suggested:.3g}" in str(w)
    assert pb.calibrate(pb.BayesianLogisticRegression(suggested * 1.001), 30162, 2.0, 1.0).r == 1.0


def test_no_warning_when_not_capped_or_near_the_target():
    model = pb.BayesianLogisticRegression(1e-3)
    eps_direct = pb.calibrate(model, 30162, 2.0, 100.0, "direct").eps  # r = 1's eps
    with warnings.catch_warnings():
        warnings.simplefilter("error", pb.KnobCappedWarning)
        pb.calibrate(model, 30162, 2.0, 0.1)
        pb.calibrate(model, 30162, 2.0, eps_direct * 1.9)  # capped, but not "far": > half
        pb.calibrate(model, 30162, 2.0, 100.0, "direct")  # no knob
        pb.calibrate(pb.BetaBernoulli(2, 2), 0, 2.0, 1.0)  # n = 0: the prior
    assert pb.calibrate(model, 30162, 2.0, 0.1).r < 1
    with pytest.warns(pb.KnobCappedWarning):
        pb.calibrate(model, 30162, 2.0, eps_direct / FAR_BELOW * 1.01)


def test_an_eps_delta_target_is_judged_and_quoted_as_eps_delta():
    """An (eps, delta) request is converted to an RDP target inside; the warning compares
    and quotes what the user asked for, (eps, delta), not that internal target."""
    model = pb.BayesianLogisticRegression(0.5)
    with pytest.warns(pb.KnobCappedWarning) as rec:
        cal = pb.calibrate(model, 1000, eps=5.0, delta=1e-5, d=5)
    w = rec[0].message
    assert cal.r == 1.0 and cal.dp_target == 5.0
    assert (w.target_eps, w.delta) == (5.0, 1e-5)
    # the release's whole curve at delta (its failure allowance included), within its
    # chosen order's dp_eps
    assert cal.epsilon() <= w.certified_eps <= cal.dp_eps
    assert f"certifies eps={_up4(w.certified_eps)} at delta=1e-05" in str(w)
    assert "requested eps=5 at delta=1e-05" in str(w)
    assert f"{cal.target_eps:g}" not in str(w)  # the internal RDP target is not "requested"
    assert f"ask for eps={_up4(w.certified_eps)} at delta=1e-05" in str(w)
    assert float(_up4(w.certified_eps)) >= w.certified_eps  # quoted rounded up
    # the suggested beta (from the RDP ratio: linear in 1/beta) certifies more of the
    # request at r = 1 (about: the back-end and the run's length move with beta)
    beta = float(str(w).split("beta=")[1].split(" ")[0])
    more = pb.calibrate(pb.BayesianLogisticRegression(beta), 1000, eps=5.0, delta=1e-5, d=5)
    assert cal.dp_eps < 0.5 * more.dp_eps and more.dp_eps <= 5.0
    # judged in (eps, delta) units: half the (eps, delta) target spent means no warning,
    # although the RDP eps is further below its internal target
    half = pb.calibrate(model, 1000, eps=cal.dp_eps / 0.6, delta=1e-5, d=5)
    assert half.eps < FAR_BELOW * half.target_eps and not capped(half)
    assert capped(cal) and w.certified_eps < FAR_BELOW * w.target_eps
    with pytest.warns(pb.KnobCappedWarning, match=r"lam=2.*requested 5,") as rec:
        pb.calibrate(model, 1000, 2.0, 5.0, d=5)  # an RDP target stays in RDP units
    assert rec[0].message.delta is None


def test_an_exact_back_end_held_back_by_its_budget_says_so():
    """backend="exact" at (1, 1e-5) on a breast-cancer-sized problem: every order that would
    spend the target asks for a knob whose one draw exceeds the proposal budget, so the
    search settles at lam ~ 2e4 and a small r. The chosen order's conversion (dp_eps) is
    then ~1, but the release's whole curve certifies ~0.025: the warning judges by the
    latter, and names the way out (another back-end)."""
    model = pb.BayesianLogisticRegression(beta="auto", backend="exact", fit_intercept=True)
    with pytest.warns(pb.KnobCappedWarning, match="proposal budget") as rec:
        cal = pb.calibrate(model, 569, eps=1.0, delta=1e-5, d=31)
    w = rec[0].message
    assert cal.lam > 1e3 and cal.r < 0.01 and cal.dp_eps > 0.99
    assert cal.dp_tv > 0  # the exact back-end's failure allowance, kept for reporting
    assert cal.epsilon() <= w.certified_eps < 0.05 and w.target_eps == 1.0
    assert "backend='langevin' or backend='auto'" in str(w)
    auto = pb.calibrate(pb.BayesianLogisticRegression(beta="auto", fit_intercept=True), 569,
                        eps=1.0, delta=1e-5, d=31)  # fmt: skip
    assert auto.r > 10 * cal.r and auto.epsilon() > 0.9  # the way out spends the target


def _capped_of(rec):
    """The KnobCappedWarning among recorded warnings (others, e.g. a shared seed's, may be
    recorded too in a full run)."""
    return next(r.message for r in rec if isinstance(r.message, pb.KnobCappedWarning))


def test_releases_and_fits_are_judged_by_their_whole_call():
    """A release of any size, and a fitted estimator, is judged by what the whole call
    certifies at delta (``rel.epsilon(delta)``: every draw and the exact back-end's failure
    allowance included), quoted exactly, never below it; spending at least half is silent."""
    X, y = load_breast_cancer(return_X_y=True)
    X = pb.preprocessing.clip_rows((X - X.mean(0)) / X.std(0), 1.0)
    exact = pb.BayesianLogisticRegression(0.5, backend="exact")
    with pytest.warns(pb.KnobCappedWarning, match="at delta=2e-12") as rec:
        rel = pb.sample(exact, (X, y), eps=5.0, delta=2e-12)
    w = _capped_of(rec)  # a tiny delta: the failure allowance (1e-12) moves eps by 1.6%
    # never below what the call certifies (rel.epsilon: the accountant's refined
    # conversion), within a few % of it, and within the chosen order's dp_eps
    assert rel.epsilon(2e-12) <= w.certified_eps <= min(rel.dp_eps, 1.05 * rel.epsilon(2e-12))
    assert w.delta == 2e-12
    assert f"certifies eps={_up4(w.certified_eps)} at delta=2e-12" in str(w)
    half = rel.epsilon(2e-12) / 0.51  # the same release spends 51% of this request: silent
    with warnings.catch_warnings():
        warnings.simplefilter("error", pb.KnobCappedWarning)
        pb.sample(exact, (X, y), eps=half, delta=2e-12)
        # per draw far below its (RDP) share, the whole call not: silent
        pb.sample(pb.BayesianLogisticRegression(0.2, backend="exact"), (X, y), eps=3.0,
                  delta=1e-11, size=3)  # fmt: skip
    with pytest.warns(pb.KnobCappedWarning, match="for its 2 draws, .* at delta=1e-05") as rec:
        rel = pb.sample(exact, (X, y), eps=5.0, delta=1e-5, size=2)
    got = _capped_of(rec).certified_eps  # the whole call, not a draw
    assert rel.epsilon(1e-5) <= got <= 1.05 * rel.epsilon(1e-5) < 2.5
    est = pb.PrivateLogisticRegression(eps=5.0, delta=1e-5, beta=0.5, backend="exact", n_samples=2)
    with pytest.warns(pb.KnobCappedWarning, match="requested eps=5 at delta=1e-05") as rec:
        est.fit(X, y)
    w = _capped_of(rec)
    assert w.delta == 1e-5 and w.certified_eps <= est.privacy_["dp_eps"]
    assert w.certified_eps == pytest.approx(got, rel=1e-9)  # the same call as rel's


@pytest.mark.parametrize(
    "model,method,knob",
    [
        (pb.BetaBernoulli(4, 4), "diffused", "r"),  # lam = 2 < 1 + alpha: r reaches 1
        (pb.BetaBernoulli(4, 4), "concentrated", "m"),
        (pb.BetaBernoulli(1, 1), "diffused", "r"),  # the pole at r = 1 (lam = 1 + alpha)
        (pb.GammaPoisson(1.0, 1.0, 20), "concentrated", "m"),  # the pole caps m below 1
        (pb.BayesianLogisticRegression(1e-2), "concentrated", "m"),
        (pb.MultinomialLogisticRegression(1e-2, 1.0, 3), "diffused", "r"),
    ],
)
def test_every_model_warns_at_its_cap(model, method, knob):
    with pytest.warns(pb.KnobCappedWarning) as rec:
        cal = pb.calibrate(model, 1000, 2.0, 1000.0, method)
    assert len(rec) == 1
    w = rec[0].message
    assert w.knob == knob and w.certified_eps == cal.eps < 500.0
    assert "ask for eps=" in str(w)
    assert capped(cal)


def test_ops_cap():
    model = pb.BayesianLogisticRegression(1.0, radius=0.1)  # eps0 = 2 t c R <= 0.2
    with pytest.warns(pb.KnobCappedWarning, match="larger radius") as rec:
        cal = pb.calibrate(model, 100, 2.0, 5.0, "ops")
    assert cal.t == 1.0 and rec[0].message.knob == "t"


def test_sample_and_estimator_warn_once_at_the_callers_line():
    rng = np.random.default_rng(1)
    X = pb.preprocessing.clip_rows(rng.normal(size=(300, 2)), c=1.0)
    y = (X[:, 0] > 0).astype(int)
    # the stationary rule (the utility rule at r = 1 lengthens its run to spend the target)
    model = pb.BayesianLogisticRegression(1.0, backend="langevin", schedule="stationary")
    with pytest.warns(pb.KnobCappedWarning, match="per draw") as rec:
        pb.sample(model, (X, y), 2.0, 1.0, size=3)
    assert len(rec) == 1 and rec[0].filename == __file__
    with pytest.warns(pb.KnobCappedWarning) as rec:
        pb.PrivateLogisticRegression(
            beta=1.0, eps=1.0, backend="langevin", schedule="stationary"
        ).fit(X, y)
    assert len(rec) == 1 and rec[0].filename == __file__
    with pytest.warns(pb.KnobCappedWarning, match="weaker prior") as rec:
        pb.release_query(np.full(50, 0.5), 2.0, 10.0, alpha=30.0, beta=30.0)
    assert len(rec) == 1 and rec[0].filename == __file__


def test_internal_searches_are_quiet_and_the_helper_warns_once():
    model = pb.BayesianLogisticRegression(1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pb.KnobCappedWarning)
        with quiet():
            cals = [pb.calibrate(model, 30162, 2.0, e) for e in (1.0, 2.0, 4.0)]
    with pytest.warns(pb.KnobCappedWarning) as rec:
        assert warn_if_capped(cals[-1], stacklevel=1) is True  # 1: the line calling it
    assert len(rec) == 1 and rec[0].filename == __file__
    assert warn_if_capped(pb.calibrate(model, 30162, 2.0, 0.1)) is False


def test_certified_values_are_quoted_rounded_up():
    """_up4: 4 significant digits, never below the value (subnormals and the largest double
    included: the numerics extremes reach both)."""
    rng = np.random.default_rng(3)
    values = [5e-324, 2.2204461e-316, 0.0740000001, 0.99995, 1.7976931348623157e308]
    values += list(10.0 ** rng.uniform(-300, 300, 200))
    for x in values:
        text = _up4(x)
        assert float(text) >= x, (x, text)
        assert len(text.split("e")[0].replace(".", "").lstrip("0")) <= 4
    assert _up4(0.0740000001) == "0.07401" and _up4(0.125) == "0.125"
