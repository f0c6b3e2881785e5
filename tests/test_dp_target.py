"""(eps, delta)-DP targets: the order searched from public inputs, the knob the largest the
conversion certifies (docs/dp_target.md)."""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting import (
    WIDE_ORDERS,
    RdpAccountant,
    default_accountant,
    reset_default_accountant,
)
from privbayes.dp_target import ORDERS, inverse_conversion
from privbayes.errors import InfeasiblePrivacyError


def _conversion(orders, curve, delta):
    """The improved conversion written out independently (Balle et al. 2020 Thm 21 /
    Canonne-Kamath-Steinke Prop. 12), in float, without the accountant's rounding."""
    orders, curve = np.asarray(orders, float), np.asarray(curve, float)
    fin = np.isfinite(orders) & np.isfinite(curve) & (orders > 1)
    lam, e = orders[fin], curve[fin]
    val = e + np.log((lam - 1) / lam) - (np.log(delta) + np.log(lam)) / (lam - 1)
    return float(np.min(np.maximum(val, 0.0))) if val.size else math.inf


def _brute_knob(at, eps, delta, step=1):
    """The best knob any single order of the grid gives (every ``step``-th order)."""
    targets = inverse_conversion(ORDERS, eps, delta)
    best = 0.0
    for lam, e in zip(ORDERS[::step], targets[::step], strict=True):
        if not e > 0:
            continue
        try:
            cal = at(float(lam), float(e))
        except InfeasiblePrivacyError:
            continue
        best = max(best, cal.r * cal.m)
    return best


DENSE = np.concatenate([1 + np.geomspace(1e-3, 1e6, 3000)])


@pytest.mark.parametrize(
    ("model", "method", "n", "eps", "delta"),
    [
        (pb.BetaBernoulli(1, 1), "diffused", 6, 1.0, 1e-6),
        (pb.BetaBernoulli(1, 1), "diffused", 1000, 0.1, 1e-5),
        (pb.BetaBernoulli(0.5, 3), "concentrated", 100, 1.0, 1e-6),
        (pb.BetaBernoulli(2, 2), "concentrated", 1000, 5.0, 1e-9),
    ],
)
def test_conjugate_target_held_and_knob_best(model, method, n, eps, delta):
    cal = pb.calibrate(model, n, eps=eps, delta=delta, method=method)
    assert cal.delta == delta and cal.dp_target == eps
    assert cal.dp_eps <= eps
    assert cal.epsilon() <= eps
    # independent: the curve itself, on a dense grid of orders, converted by the formula
    grid = np.union1d(DENSE, [cal.lam])
    assert _conversion(grid, cal.rdp(grid), delta) <= eps * (1 + 1e-12)
    assert _conversion([cal.lam], [cal.eps], delta) <= eps * (1 + 1e-12)
    # the knob is within 2% of the best any single order gives (every 2nd grid order)
    best = _brute_knob(lambda lam, e: pb.calibrate(model, n, lam, e, method=method), eps, delta, 2)
    assert cal.r * cal.m >= 0.98 * best
    # and it is (nearly) the largest: 5% more knob breaks the target at every order
    bigger = pb.BetaBernoulli(model.alpha, model.beta)
    r, m = (cal.r * 1.05, cal.m) if method == "diffused" else (cal.r, min(cal.m * 1.05, 1.0))
    if m < 1.0 or method == "diffused":
        curve = bigger.rdp(n, DENSE, r=r, m=m, method=method)
        assert _conversion(DENSE, curve, delta) > eps


def test_issue_reproducer_small_n():
    """Beta(1, 1), n = 6: (2, 1)-RDP costs ~10.7 at delta 1e-6; an (1, 1e-6) target is met."""
    m = pb.BetaBernoulli(1, 1)
    rdp2 = pb.calibrate(m, 6, 2.0, 1.0)
    assert rdp2.epsilon(1e-6) > 10
    cal = pb.calibrate(m, 6, eps=1.0, delta=1e-6)
    assert 5 < cal.lam < 40 and cal.dp_eps <= 1.0


def test_sample_size_k_default_accountant_and_ledger(tmp_path):
    reset_default_accountant()
    x = np.array([0, 1] * 50)
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 2.0, 1e-6)
    rel = pb.sample(
        pb.BetaBernoulli(1, 1), x, eps=1.0, delta=1e-6, size=10, rng=1, ledger=ledger, dataset="d"
    )
    assert rel.delta == 1e-6 and rel.dp_eps <= 1.0 and rel.size == 10
    acc = RdpAccountant(orders=np.union1d(WIDE_ORDERS, [rel.lam]))
    acc.compose(rel)
    assert acc.get_epsilon(1e-6) <= 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert default_accountant().get_epsilon(1e-6) <= 1.0 + 1e-9
    assert ledger.spent("d") <= 1.0 + 1e-9
    label = ledger.status("d")[0]["charges"][0]["mechanism"]
    assert "target (eps=1, delta=1e-06)" in label
    # the same call on other data gives the same knob: calibration reads public inputs only
    rel2 = pb.sample(pb.BetaBernoulli(1, 1), 1 - x[:100] * 0, eps=1.0, delta=1e-6, size=10, rng=2)
    assert (rel2.r, rel2.lam) == (rel.r, rel.lam)


def test_glm_exact_with_failure_allowance():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (X[:, 0] > 0).astype(float)
    model = pb.BayesianLogisticRegression(beta=0.05, c=1.0, backend="exact")
    rel = pb.sample(model, (X, y), eps=1.0, delta=1e-6, rng=3)
    assert rel.tv > 0 and rel.dp_eps <= 1.0 and rel.epsilon() <= 1.0
    acc = RdpAccountant(orders=np.union1d(WIDE_ORDERS, [rel.lam]))
    acc.compose(rel)
    assert acc.tv == rel.tv and acc.get_epsilon(1e-6) <= 1.0
    # the knob against single orders (every 4th grid order; the knob of exact posterior
    # draws without the release's rounding allowance, an upper bound on the release's)
    best = _brute_knob(
        lambda lam, e: pb.calibrate(model, 400, lam, e),
        float(np.nextafter(1.0 - (-math.log1p(-rel.tv)), 0)),
        1e-6 - rel.tv,
        4,
    )
    assert rel.r >= 0.98 * best


def test_glm_langevin_and_estimator():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = X / np.linalg.norm(X, axis=1).max() * 0.8
    est = pb.PrivateLogisticRegression(eps=1.0, delta=1e-6, beta=0.01, random_state=0)
    est.fit(X, y)
    p = est.privacy_
    assert p["delta"] == 1e-6 and p["dp_eps"] <= 1.0 and p["lam"] > 1
    with pytest.raises(TypeError, match="not both"):
        pb.PrivateLogisticRegression(lam=2.0, eps=1.0, delta=1e-6).fit(X, y)
    lang = pb.BayesianLogisticRegression(beta=0.01, c=1.0, backend="langevin")
    rel = pb.sample(lang, (X, y), eps=1.0, delta=1e-6, rng=4)
    assert rel.guarantee == "algorithm" and rel.dp_eps <= 1.0 and rel.epsilon() <= 1.0
    # at its order the release's RDP eps is the calibrated one (the smaller of two proven
    # bounds), so the independent conversion includes that order; without a ledger the
    # release may instead be calibrated through its GDP bound (docs/gdp.md §7): then the
    # Gaussian profile at its mu is checked independently, in mpmath
    grid = np.union1d(DENSE, [rel.lam])
    by_rdp = _conversion(grid, rel.rdp(grid), 1e-6)
    mu = rel.gdp_bound.mu
    with mpmath.workdps(40):
        m, e = mpmath.mpf(mu), mpmath.mpf(1.0)
        by_gdp = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
    assert by_rdp <= 1.0 * (1 + 1e-12) or by_gdp <= mpmath.mpf(1e-6)
    n, d = X.shape
    best = _brute_knob(lambda lam, e: pb.calibrate(lang, n, lam, e, d=d), 1.0, 1e-6, 3)
    assert rel.r >= 0.98 * best


def test_pure_dp_targets():
    """delta = 0 asks for order inf: Beta-Bernoulli has no finite eps there; the exact GLM
    back-end (OPS, pure at inf) has a failure allowance, so it needs delta > delta_f."""
    with pytest.raises(InfeasiblePrivacyError, match="pure DP"):
        pb.calibrate(pb.BetaBernoulli(1, 1), 10, eps=1.0, delta=0.0)
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0, backend="exact")
    with pytest.raises(InfeasiblePrivacyError, match="failure allowance"):
        pb.calibrate(model, 1000, eps=1.0, delta=0.0, method="ops", d=3)
    cal = pb.calibrate(model, 1000, eps=1.0, delta=1e-9, method="ops", d=3)
    assert cal.dp_eps <= 1.0 and cal.epsilon() <= 1.0


def test_noise_aware_target():
    x = np.array([0, 1, 1] * 100)
    post = pb.posterior(pb.BetaBernoulli(1, 1), x, eps=1.0, delta=1e-6, rng=5)
    assert post.delta == 1e-6 and post.dp_eps <= 1.0 and post.epsilon() <= 1.0
    # sigma^2: the smallest any single order certifies (lam Delta^2 / (2 sigma^2) <= E(lam))
    targets = inverse_conversion(ORDERS, 1.0, 1e-6)
    ok = targets > 0
    best = float(np.min(ORDERS[ok] / (2 * targets[ok])))
    assert post.noise["sigma2"] <= best * 1.02
    rel = pb.sample(
        pb.BetaBernoulli(1, 1), x, eps=1.0, delta=1e-6, method="noise-aware", size=7, rng=6
    )
    assert rel.dp_eps <= 1.0 and rel.delta == 1e-6


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"lam": 2.0, "eps": 1.0, "delta": 1e-6}, TypeError, "not both"),
        ({"eps": 1.0}, TypeError, "pass lam"),
        ({"lam": 2.0}, TypeError, "eps is required"),
        ({"eps": 1.0, "delta": 1.0}, ValueError, r"\[0, 1\)"),
        ({"eps": 1.0, "delta": -1e-9}, ValueError, r"\[0, 1\)"),
        ({"eps": 1.0, "delta": float("nan")}, ValueError, r"\[0, 1\)"),
        ({"eps": 1.0, "delta": "1e-6"}, TypeError, "number"),
        ({"eps": 1e-9, "delta": 1e-12}, InfeasiblePrivacyError, "larger eps or delta"),
    ],
)
def test_bad_targets_refused_before_any_charge(kwargs, error, match, tmp_path):
    reset_default_accountant()
    with pytest.raises(error, match=match):
        pb.sample(pb.BetaBernoulli(1, 1), np.array([0, 1, 1]), **kwargs)
    with pytest.raises(error, match=match):
        pb.calibrate(pb.BetaBernoulli(1, 1), 3, **kwargs)
    assert default_accountant().releases == 0


def test_infeasible_says_what_is_reachable():
    # direct Beta(2, 2): orders below 1 + min(alpha) only, where (1, 1e-6) is out of reach
    with pytest.raises(InfeasiblePrivacyError) as info:
        pb.calibrate(pb.BetaBernoulli(2, 2), 1000, eps=1.0, delta=1e-6, method="direct")
    assert "delta" in info.value.reachable


def test_cli_targets(tmp_path, capsys):
    import json

    from privbayes.cli import main

    data = tmp_path / "b.csv"
    data.write_text("x\n" + "\n".join(["1", "0", "1"] * 20) + "\n")
    code = main(["calibrate", "--model", "beta-bernoulli", "--n", "60", "--eps", "1",
                 "--delta", "1e-6"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["delta"] == 1e-6 and out["dp_eps"] <= 1
    main(["sample", "--model", "beta-bernoulli", "--data", str(data), "--column", "x",
          "--eps", "1", "--delta", "1e-6", "--seed", "1"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["delta"] == 1e-6 and out["dp_eps"] <= 1
    for flags in (["--eps", "1"], ["--lam", "2", "--eps", "1", "--delta", "1e-6"]):
        code = main(["sample", "--model", "beta-bernoulli", "--data", str(data), "--column",
                     "x", *flags])  # fmt: skip
        assert code == 2
        assert "--delta" in capsys.readouterr().err


def test_budget_refusal_suggests_an_eps_delta_target_that_fits(tmp_path):
    """The issue's reproducer: budget (10, 1e-6), Beta(1, 1), n = 6, (lam, eps) = (2, 1)
    costs 10.7 and is refused; the refusal names an (eps, delta) request that then fits."""
    import re

    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("x", 10.0, 1e-6)
    x = np.array([1, 0, 1, 1, 0, 1])
    pb.sample(pb.BetaBernoulli(1, 1), x, eps=4.0, delta=1e-6, ledger=ledger, dataset="x")
    with pytest.raises(pb.BudgetExceededError) as info:
        pb.sample(pb.BetaBernoulli(1, 1), x, 2.0, 1.0, ledger=ledger, dataset="x", rng=1)
    message = str(info.value)
    assert "would spend eps=10.9" in message
    got = re.search(r"target fits with eps=([0-9.]+), delta=1e-06", message)
    assert got is not None, message
    suggested = float(got.group(1))
    assert 6.0 < suggested <= 10.0  # more than what basic composition leaves (10 - 4)
    pb.sample(pb.BetaBernoulli(1, 1), x, eps=suggested, delta=1e-6, ledger=ledger, dataset="x")
    assert ledger.spent("x") <= 10.0


def test_ledger_without_order_inf_admits_a_pure_dp_target(tmp_path):
    """The search chose order inf (OPS, pure DP) although the ledger's orders lack it, so
    a budget (eps, delta) refused the one release asked for at (eps, delta): the ledger
    converted it on [2, 4, 8] (eps = 4.6). With a ledger, only its orders are searched."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(int)
    model = pb.BayesianLogisticRegression(beta=0.1, c=1.0, backend="exact")
    ledger = pb.Ledger.create(tmp_path / "l.db", "d", 3.0, 1e-5, orders=[2, 4, 8])
    rel = pb.sample(model, (X, y), eps=3.0, delta=1e-5, method="ops", ledger=ledger,
                    dataset="d", rng=1)  # fmt: skip
    assert rel.lam in (2.0, 4.0, 8.0) and rel.dp_eps <= 3.0
    assert ledger.spent("d") <= 3.0
    # a pure-DP request (delta = 0) needs order inf: refused, naming the ledger's orders
    reset_default_accountant()
    ledger2 = pb.Ledger.create(tmp_path / "m.db", "d", 1.0, 1e-5, orders=[2, 4, 8])
    with pytest.raises(InfeasiblePrivacyError, match="orders"):
        pb.sample(model, (X, y), eps=1.0, delta=0.0, method="ops", ledger=ledger2, dataset="d")
    assert ledger2.spent("d") == 0 and default_accountant().releases == 0
