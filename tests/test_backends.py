"""GLM back-ends as users meet them: the automatic choice, the guarantee every release
carries, options that do not apply, and the accounting of the exact back-end's
failure allowance (docs/accounting.md §8)."""

import math

import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting import RdpAccountant, gaussian_rdp
from privbayes.errors import InfeasiblePrivacyError


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x *= 0.8 / np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]  # room for an intercept
    y = (x @ np.ones(d) + rng.normal(size=n) > 0).astype(float)
    return x, y


# -- the automatic choice uses public inputs only --------------------------------------------
def test_auto_picks_the_same_certified_backend_for_any_data_of_one_shape():
    model = pb.BayesianLogisticRegression(beta=1e-3)
    assert model.backend == "auto"
    chosen = set()
    for seed in range(3):  # different data, same (n, d): the same choice
        x, y = _data(3000, 4, seed)
        if seed == 2:
            y = np.ones_like(y)  # even all one label
        rel = pb.sample(model, (x, y), 2.0, 1.0, rng=seed)
        chosen.add((rel.calibration.model.backend, rel.guarantee))
    assert len(chosen) == 1
    backend, guarantee = chosen.pop()
    assert backend in ("exact", "langevin") and guarantee in ("exact", "algorithm")
    # calibrate(d=...) makes the choice sample() makes, without data
    cal = pb.calibrate(model, 3000, 2.0, 1.0, d=4)
    assert cal.model.backend == backend and cal.guarantee == guarantee


def test_auto_prefers_langevin_where_exact_needs_too_many_proposals():
    # weak prior, many features: the exact back-end's public budget explodes
    model = pb.BayesianLogisticRegression(beta=1e-4)
    cal = pb.calibrate(model, 2000, 2.0, 1.0, d=200)
    assert cal.model.backend == "langevin" and cal.guarantee == "algorithm"
    assert cal.sampler["steps"] >= 1
    # large n, small d: exact is cheap (a handful of proposals)
    assert pb.calibrate(model, 10**6, 2.0, 1.0, d=5).model.backend == "exact"


def test_auto_without_d_calibrates_for_exact_draws_and_bounds_langevin():
    model = pb.BayesianLogisticRegression(beta=1e-2)
    cal = pb.calibrate(model, 500, 2.0, 0.3)
    # the back-end depends on d: left undetermined, with the exact posterior's knob
    assert cal.model.backend == "auto" and cal.guarantee == "undetermined (pass d)"
    assert cal.eps <= 0.3 and cal.sampler is None
    exact = pb.calibrate(model.with_backend("exact"), 500, 2.0, 0.3)
    assert (cal.r, cal.m, cal.eps) == (exact.r, exact.m, exact.eps)
    orders = np.array([1.5, 2.0, 8.0, np.inf])
    np.testing.assert_array_equal(cal.rdp(orders), exact.rdp(orders))
    lang = pb.BayesianLogisticRegression(beta=1e-2, backend="langevin")
    # Langevin's certificate at the same knob never exceeds the posterior's (Theorem 1)
    orders = np.array([1.5, 2.0, 8.0])
    assert (lang.rdp(500, orders, r=cal.r) <= cal.rdp(orders)).all()
    # which back-end d picks, and its own knob (Langevin's may differ from exact's)
    small = pb.BayesianLogisticRegression(beta=1e-3)
    assert pb.calibrate(small, 426, 2.0, 1.0, d=1).model.backend == "exact"
    wide = pb.calibrate(small, 426, 2.0, 1.0, d=30)
    assert wide.model.backend == "langevin" and wide.guarantee == "algorithm"
    assert pb.calibrate(small, 426, 2.0, 1.0).model.backend == "auto"
    # OPS runs on exact only, whose public budget depends on d: left open too
    ops = pb.calibrate(model, 500, 2.0, 0.3, "ops")
    assert ops.model.backend == "auto" and ops.guarantee == "undetermined (pass d)"
    assert pb.calibrate(model, 500, 2.0, 0.3, "ops", d=3).guarantee == "exact"
    with pytest.raises(ValueError, match="improper"):
        pb.calibrate(model, 0, 2.0, 0.3, d=3)
    with pytest.raises(ValueError, match="d must be an integer"):
        pb.calibrate(model, 500, 2.0, 0.3, d=3.0)


def test_ops_under_auto_needs_the_exact_backend():
    x, y = _data(400, 2)
    ok = pb.sample(pb.BayesianLogisticRegression(beta=0.5), (x, y), 2.0, 1.0, "ops", rng=0)
    assert ok.guarantee == "exact" and ok.calibration.model.backend == "exact"
    tight = pb.BayesianLogisticRegression(beta=0.01, radius=0.01)
    with pytest.raises(InfeasiblePrivacyError, match="imh"):
        pb.sample(tight, (x, y), 2.0, 1.0, "ops")


# -- every release says which guarantee it carries -----------------------------------------
@pytest.mark.parametrize(
    "backend, guarantee",
    [("exact", "exact"), ("langevin", "algorithm"), ("imh", "approximate")],
)
def test_guarantee_label_everywhere(backend, guarantee, tmp_path):
    x, y = _data(300, 2)
    model = pb.BayesianLogisticRegression(beta=0.1, backend=backend)
    ledger = pb.Ledger.create(tmp_path / "l.db", "d", 50.0, 1e-6)
    rel = pb.sample(model, (x, y), 2.0, 1.0, rng=0, ledger=ledger, dataset="d")
    assert rel.guarantee == guarantee == rel.calibration.guarantee == model.guarantee
    assert ledger.status("d")[0]["charges"][0]["mechanism"].endswith(f"[{guarantee}]")
    clf = pb.PrivateLogisticRegression(eps=1.0, beta=0.1, backend=backend, random_state=0)
    assert clf.fit(x, y).privacy_["guarantee"] == guarantee
    assert (rel.tv > 0) == (backend == "exact")


def test_conjugate_releases_are_exact():
    rel = pb.sample(pb.BetaBernoulli(), [0, 1, 1], 2.0, 1.0, rng=0)
    assert rel.guarantee == "exact" and rel.tv == 0.0


# -- options that do not apply are refused ---------------------------------------------------
@pytest.mark.parametrize(
    "backend, option",
    [
        ("exact", {"tune": 10}),
        ("langevin", {"chains": 4}),
        ("imh", {"delta_f": 1e-9}),
        ("pymc", {"step_scale": 0.5}),
        ("auto", {"proposal_scale": 2.0}),
        ("langevin", {"max_proposals": 10}),
        ("exact", {"target_accept": 0.8}),
    ],
)
def test_options_of_other_backends_are_refused(backend, option):
    (name,) = option
    with pytest.raises(ValueError, match=f"{name} does not apply to backend='{backend}'"):
        pb.BayesianLogisticRegression(backend=backend, **option)


def test_with_backend_keeps_the_prior_and_drops_foreign_options():
    model = pb.BayesianLogisticRegression(beta=0.2, c=2.0, delta_f=1e-9, step_scale=0.25)
    ex, la = model.with_backend("exact"), model.with_backend("langevin")
    assert (ex.beta, ex.c, ex.radius, ex.delta_f) == (0.2, 2.0, 10.0, 1e-9)
    assert la.step_scale == 0.25 and la.backend == "langevin"


# -- the failure allowance in the accountant and the ledger --------------------------
def _eps_brute(rho: float, tau: float, delta: float) -> float:
    """Smallest eps (to 1e-4) with min over lam of the improved conversion's delta for the
    curve rho*lam at eps - log(1/(1 - tau)), plus tau, at most delta: a grid in eps,
    refined (numpy)."""
    lam = np.geomspace(1.0 + 1e-4, 1e5, 20_001)[None, :]

    def total(e):
        e = np.asarray(e, float)[:, None]
        e = e + np.log1p(-tau)  # eps of the mechanism that never fails
        log_d = (lam - 1) * (rho * lam - e + np.log1p(-1 / lam)) - np.log(lam)
        return np.exp(np.minimum(0.0, log_d.min(axis=1))) + tau

    lo, hi = 0.0, 20.0
    for _ in range(3):  # the first grid point that meets delta, on finer grids
        grid = np.linspace(lo, hi, 401)
        ok = np.flatnonzero(total(grid) <= delta)
        if ok.size == 0:
            return math.inf
        i = int(ok[0])
        lo, hi = grid[max(i - 1, 0)], grid[i]
    return float(hi)


@pytest.mark.parametrize("tau", [1e-12, 1e-7, 3e-6])
def test_tv_allowance_converts_by_the_tv_lemma(tau):
    rho, delta = 0.05, 1e-5

    class Release:  # a Gaussian-like curve with an allowance, as a release would carry
        tv = tau

        @staticmethod
        def rdp(orders):
            return gaussian_rdp(orders, sigma=math.sqrt(1 / (2 * rho)))

    acc = RdpAccountant().compose(Release)
    assert acc.tv == tau
    eps = acc.get_epsilon(delta)
    # the answer is valid by the lemma (both conversions round outward on their own: the
    # round trip may differ in the last bits)
    assert acc.get_delta(eps) <= delta * (1 + 1e-12)
    plain = RdpAccountant().compose(Release.rdp).get_epsilon(delta)
    assert eps >= plain
    brute = _eps_brute(rho, tau, delta)
    assert brute - 2e-3 <= eps <= brute + 1e-3
    # more allowance than delta leaves room for: no finite eps
    assert RdpAccountant().compose(Release, 10**6).get_epsilon(1e-6) == math.inf


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    """sup_S P(S) - e^eps Q(S) for two discrete laws."""
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


@pytest.mark.parametrize("tau", [1e-3, 0.05, 0.3])
def test_failure_allowance_lemma_against_exact_discrete_laws(tau):
    """docs/accounting.md §8 on every failure pattern of a small mechanism, exactly: two
    releases of randomized response (each (eps0, 0)-DP), each failing with a probability
    <= tau/2 that may depend on the data and the past but not on its own output; outputs
    in {0, 1, fail}^2. The lemma's (eps0 * 2 + log(1/(1-tau)), tau) must cover the exact
    hockey-stick divergence for every pattern (and a pattern attains more than the plain
    (2 eps0, 0), so the allowance is needed)."""
    eps0 = 0.7
    keep = math.exp(eps0) / (1 + math.exp(eps0))
    rr = {0: np.array([keep, 1 - keep]), 1: np.array([1 - keep, keep])}
    bound_eps = 2 * eps0 + float(-np.log1p(-tau))
    worst = 0.0
    rng = np.random.default_rng(3)
    for _ in range(400):
        laws = []
        for bit in (0, 1):  # neighbours: the record is 0 or 1
            p1 = rng.uniform(0, tau / 2)
            p2 = rng.uniform(0, tau / 2, size=3)  # the second failure may depend on the first
            law = np.zeros((3, 3))  # (first output, second output), index 2 = fail
            for o1 in (0, 1, 2):
                w1 = p1 if o1 == 2 else (1 - p1) * rr[bit][o1]
                for o2 in (0, 1, 2):
                    q = p2[o1]
                    law[o1, o2] = w1 * (q if o2 == 2 else (1 - q) * rr[bit][o2])
            laws.append(law.ravel())
        for a, b in ((0, 1), (1, 0)):
            d = _hockey(laws[a], laws[b], bound_eps)
            assert d <= tau + 1e-15
            worst = max(worst, _hockey(laws[a], laws[b], 2 * eps0))
    assert worst > 0  # failures do cost something beyond the plain (2 eps0, 0)


def test_ledger_adds_the_allowance_and_survives_reopening(tmp_path):
    x, y = _data(2000, 3)
    path = tmp_path / "l.db"
    ledger = pb.Ledger.create(path, "d", 20.0, 1e-6)
    model = pb.BayesianLogisticRegression(beta=0.01, backend="exact", delta_f=1e-9)
    for k in range(3):
        pb.sample(model, (x, y), 2.0, 0.5, rng=k, ledger=ledger, dataset="d")
    st = ledger.status("d")[0]
    assert st["tv"] == pytest.approx(3e-9, rel=1e-12)
    assert [c["mechanism"].endswith("[exact]") for c in st["charges"]] == [True] * 3
    ledger.close()
    again = pb.Ledger(path, create=False).status("d")[0]
    assert again["tv"] == st["tv"] and again["eps_spent"] == st["eps_spent"]
    # the spent eps accounts for the allowance: at least the plain curve's conversion
    acc = RdpAccountant(pb.Ledger(path, create=False).orders)
    cal = pb.calibrate(model, 2000, 2.0, 0.5)
    acc.compose(cal, 3)
    assert st["eps_spent"] >= acc.get_epsilon(1e-6, refine=False)


def test_an_old_ledger_without_tv_columns_is_migrated(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    pb.Ledger.create(path, "d", 5.0, 1e-6).close()
    db = sqlite3.connect(path)
    db.executescript(  # the budgets table as it was before the tv column
        "PRAGMA foreign_keys=OFF;"
        "CREATE TABLE b2 (dataset TEXT PRIMARY KEY, eps REAL NOT NULL, delta REAL NOT NULL,"
        " total TEXT NOT NULL, created REAL NOT NULL);"
        "INSERT INTO b2 SELECT dataset, eps, delta, total, created FROM budgets;"
        "DROP TABLE budgets; ALTER TABLE b2 RENAME TO budgets;"
    )
    db.close()
    ledger = pb.Ledger(path, create=False)
    assert ledger.status("d")[0]["tv"] == 0.0
    ledger.charge("d", lambda o: gaussian_rdp(o, sigma=10.0))
    assert ledger.spent("d") > 0


def test_default_accountant_sees_every_release_with_its_allowance():
    from privbayes.accounting import default_accountant, reset_default_accountant

    reset_default_accountant()
    x, y = _data(500, 2)
    pb.sample(pb.BetaBernoulli(), [0, 1, 1, 0], 2.0, 0.5, rng=0)
    pb.sample(pb.BayesianLogisticRegression(beta=0.1, backend="exact"), (x, y), 2.0, 0.5)
    acc = default_accountant()
    assert acc.releases == 2 and acc.tv == 1e-12
    assert acc.get_epsilon(1e-6) > 0
    reset_default_accountant()
    assert default_accountant().releases == 0


def test_default_accountant_defers_evaluation_and_matches_an_eager_one():
    """Releases are kept as (calibration, size, tv) and evaluated when the accountant is
    read, once per distinct mechanism; the result equals an eager accountant's."""
    from privbayes.accounting import default_accountant, reset_default_accountant

    reset_default_accountant()
    model = pb.BetaBernoulli(2, 1)
    rels = [pb.sample(model, [0, 1, 1], 2.0, 0.3, rng=i) for i in range(30)]
    rels.append(pb.sample(model, [0, 1, 1], 2.0, 0.9, size=3, rng=0))
    acc = default_accountant()
    assert acc.releases == 31 and len(acc._pending) == 2  # two distinct mechanisms
    eager = RdpAccountant()
    for rel in rels:
        eager.compose(rel)
    assert acc.get_epsilon(1e-6) == eager.get_epsilon(1e-6)
    np.testing.assert_array_equal(acc.rdp, eager.rdp)
    assert not any(rel in v for v in acc._parts.values() for rel in rels)  # no draws kept
    reset_default_accountant()
