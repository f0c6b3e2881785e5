"""The accountant accounts for what was composed (docs/accounting.md §5): a composed curve
is fixed at compose time (never called again), parts are kept by content (copies and
pickles convert like the original; a new curve is never merged into another one), and
order grids are never shared writeable arrays.

Independent truth: the closed forms of the composed curves in mpmath, minimised over
continuous orders."""

import copy
import dataclasses
import functools
import gc
import math
import pickle
import warnings

import mpmath as mp
import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting import (
    DEFAULT_ORDERS,
    WIDE_ORDERS,
    OrdersWarning,
    RdpAccountant,
    SharedAccountant,
    default_accountant,
    gaussian_rdp,
    laplace_rdp,
    pure_dp_rdp,
    randomized_response_rdp,
    rdp_to_dp,
    reset_default_accountant,
    subsampled_gaussian_rdp,
    zcdp_rdp,
)

# The chord of (lam - 1) eps(lam) over [a, b], b - 1 = r (a - 1), r = 2^(1/16) (the fine grid),
# exceeds a Gaussian curve (g quadratic) by at most (r - 1)^2 / 4 < 4.9e-4 of eps at lam: so
# the refined eps exceeds the exact optimum by at most that fraction of the curve there.
CHORD = (2 ** (1 / 16) - 1) ** 2 / 4
CHORD_RTOL = 2.5e-4  # measured on the Gaussian cases below, relative to the converted eps


def _mp_best(curve, delta, hi=1e8, at_inf=mp.inf):
    """min over continuous orders of the improved conversion of ``curve`` (an mpmath
    function of the order), and of ``at_inf`` (its value at order inf: pure DP): on a log
    grid of lam - 1, then by golden-section search between the best point's neighbours."""
    with mp.workdps(30):
        d = mp.mpf(delta)

        def f(lam):
            lam = mp.mpf(lam)
            return curve(lam) + mp.log1p(-1 / lam) - (mp.log(d) + mp.log(lam)) / (lam - 1)

        top = math.log10(hi - 1)
        xs = [1 + mp.mpf(10) ** (-6 + (top + 6) * mp.mpf(k) / 2000) for k in range(2001)]
        vals = [f(x) for x in xs]
        k = min(range(len(vals)), key=vals.__getitem__)
        a, b = xs[max(k - 1, 0)], xs[min(k + 1, len(xs) - 1)]
        g = (mp.sqrt(5) - 1) / 2
        for _ in range(150):
            c, e = b - g * (b - a), a + g * (b - a)
            if f(c) < f(e):
                b = e
            else:
                a = c
        lam = (a + b) / 2
        best, lam = min((f(lam), lam), (vals[k], xs[k]), (at_inf, mp.inf))
        return max(best, 0), lam


def _mp_gauss(rho):
    return lambda lam: rho * lam


def _mp_laplace(b):
    s = 1 / mp.mpf(b)
    return lambda lam: (
        mp.log(
            lam / (2 * lam - 1) * mp.exp((lam - 1) * s)
            + (lam - 1) / (2 * lam - 1) * mp.exp(-lam * s)
        )
        / (lam - 1)
    )


def _mp_rr(p):
    p = mp.mpf(p)
    return lambda lam: (
        mp.log(p**lam * (1 - p) ** (1 - lam) + (1 - p) ** lam * p ** (1 - lam)) / (lam - 1)
    )


# -- 1. a composed curve is fixed at compose time -----------------------------------------


def test_late_binding_loop_composes_both_curves():
    """The audit's reproducer: both lambdas see sigma = 50 when called later; the
    accountant reported 2.196 where everything composed gives 5.2227."""
    acc = RdpAccountant()
    for s in [1, 50]:
        acc.compose(lambda o: gaussian_rdp(o, sigma=s))  # noqa: B023 (the point of the test)
    truth = float(_mp_best(_mp_gauss(mp.mpf(1) / 2 + mp.mpf(1) / 5000), 1e-6)[0])
    assert truth == pytest.approx(5.2227, abs=1e-4)
    eps = acc.get_epsilon(1e-6)
    assert truth <= eps <= truth * (1 + CHORD_RTOL)
    assert eps <= acc.get_epsilon(1e-6, refine=False)  # never worse than the grid
    # a partial of a privbayes curve is kept with its parameters: exact at every order
    exact = RdpAccountant()
    for s in [1, 50]:
        exact.compose(functools.partial(gaussian_rdp, sigma=s))
    assert exact.get_epsilon(1e-6) == pytest.approx(truth, rel=1e-9)
    assert exact.get_epsilon(1e-6) >= truth


class _Once:
    """A curve that must not be evaluated once composition is over (and that changes
    between calls: what it gives later is not what was composed)."""

    def __init__(self, curve) -> None:
        self.curve, self.closed = curve, False

    def __call__(self, orders):
        if self.closed:
            raise AssertionError("a composed curve was called after compose() returned")
        return self.curve(orders)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize(
    "curve",
    [
        lambda o: gaussian_rdp(o, 3.0),
        lambda o: laplace_rdp(o, 2.0),
        lambda o: randomized_response_rdp(o, 0.7),
        lambda o: pure_dp_rdp(o, 0.4),
        lambda o: subsampled_gaussian_rdp(o, 0.5, 2.0),
    ],
)
def test_a_composed_curve_is_never_called_again(curve, shared):
    acc = SharedAccountant() if shared else RdpAccountant()
    f = _Once(curve)
    acc.compose(f, count=3)
    f.closed = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        for delta in (1e-3, 1e-6, 1e-12, 1e-300):
            assert math.isfinite(acc.get_epsilon(delta))
        assert 0 <= acc.get_delta(1.0) <= 1


def test_editing_a_composed_object_changes_nothing():
    """Objects with ``rdp``, partials (their keywords dict is mutable) and functions of
    mutable state: what was composed is what is converted."""

    class Curve:
        def __init__(self, sigma) -> None:
            self.sigma = sigma

        def rdp(self, orders):
            return gaussian_rdp(orders, self.sigma)

    state = {"sigma": 1.0}
    obj, part = Curve(1.0), functools.partial(gaussian_rdp, sigma=1.0)
    accs = [
        RdpAccountant().compose(obj),
        RdpAccountant().compose(part),
        RdpAccountant().compose(lambda o: gaussian_rdp(o, state["sigma"])),
    ]
    before = [acc.get_epsilon(1e-6) for acc in accs]
    obj.sigma, state["sigma"] = 50.0, 50.0
    part.keywords["sigma"] = 50.0
    assert part(2.0) == gaussian_rdp(2.0, 50.0)  # the partial really changed
    assert [acc.get_epsilon(1e-6) for acc in accs] == before
    truth = float(_mp_best(_mp_gauss(mp.mpf(1) / 2), 1e-6)[0])
    assert all(truth <= b <= truth * (1 + CHORD_RTOL) for b in before)


def test_partials_of_a_model_rdp_are_exact():
    """``partial(model.rdp, n, r=..., method=...)`` is kept with its (immutable) model and
    a copy of its parameters: exact at every order, equal ones counted together."""
    model = pb.BetaBernoulli()
    part = functools.partial(model.rdp, 100, r=0.5, method="diffused")
    acc = (
        RdpAccountant()
        .compose(part, 2)
        .compose(functools.partial(pb.BetaBernoulli().rdp, 100, r=0.5, method="diffused"))
    )
    assert [c for _, c in acc._parts.values()] == [3]
    eps, lam = acc.get_epsilon_and_order(1e-6)
    part.keywords["r"] = 1.0  # edited after composition: changes nothing
    assert acc.get_epsilon_and_order(1e-6) == (eps, lam)
    at = float(rdp_to_dp(lam, 3 * model.rdp(100, np.array([lam]), r=0.5)[0], 1e-6))
    assert eps == pytest.approx(at, rel=1e-12) and eps <= acc.get_epsilon(1e-6, refine=False)


CURVES = [
    ("gauss", lambda o: gaussian_rdp(o, 2.0), _mp_gauss(mp.mpf(1) / 8), mp.inf),
    ("gauss small", lambda o: gaussian_rdp(o, 300.0), _mp_gauss(mp.mpf(1) / 180000), mp.inf),
    ("laplace", lambda o: laplace_rdp(o, 1.5), _mp_laplace(1.5), 1 / mp.mpf(1.5)),
    ("rr", lambda o: randomized_response_rdp(o, 0.8), _mp_rr(0.8), mp.log(4)),
]


@pytest.mark.parametrize("name,curve,exact,at_inf", CURVES, ids=[c[0] for c in CURVES])
@pytest.mark.parametrize("delta", [1e-3, 1e-8, 1e-300])
def test_frozen_functions_are_bounded_by_the_chord_never_below(name, curve, exact, at_inf, delta):
    """The refined eps of a function frozen on the fine grid is never below the exact
    continuous optimum of its closed form, and within the chord's allowance of it; the
    curve it uses between grid orders is never below the closed form."""
    acc = RdpAccountant().compose(curve, count=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrdersWarning)
        eps = acc.get_epsilon(delta)
    truth, lam_best = _mp_best(lambda lam: 7 * exact(lam), delta, at_inf=7 * at_inf)
    curve_there = 7 * (at_inf if lam_best == mp.inf else exact(lam_best))
    assert mp.mpf(eps) >= truth
    assert eps <= float(truth + CHORD * curve_there) + 1e-12
    rng = np.random.default_rng(7)
    for lam in 1 + 10 ** rng.uniform(-3.5, 6.5, 60):
        with mp.workdps(30):
            assert mp.mpf(acc._total(float(lam))) >= 7 * exact(mp.mpf(float(lam))), (name, lam)


def test_frozen_get_delta_is_never_below_the_exact_one():
    acc = RdpAccountant().compose(lambda o: zcdp_rdp(o, 0.05))
    exact = RdpAccountant().compose(functools.partial(zcdp_rdp, rho=0.05))
    for eps in (0.25, 1.0, 3.0):  # log delta moves by about (lam - 1) times the chord's excess
        want = exact.get_delta(eps)
        assert want <= acc.get_delta(eps) <= want * math.exp(CHORD * (1 + abs(math.log(want))))


def test_frozen_functions_stop_at_the_fine_grid_and_warn():
    """A function is known up to order 1 + 2^20 only (pure-DP-like curves, with a finite
    eps(inf), everywhere); a partial is refined past it."""
    rho = 5e-11  # sigma = 1e5: the optimum at delta = 1e-300 is at order ~3.7e6
    truth = _mp_best(_mp_gauss(mp.mpf(rho)), 1e-300, hi=1e9)[0]
    frozen = RdpAccountant().compose(lambda o: zcdp_rdp(o, rho))
    with pytest.warns(OrdersWarning, match="refinement reaches"):
        eps, lam = frozen.get_epsilon_and_order(1e-300)
    assert mp.mpf(eps) >= truth and lam == pytest.approx(2.0**20 + 1)
    exact = RdpAccountant().compose(functools.partial(zcdp_rdp, rho=rho))
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrdersWarning)
        assert exact.get_epsilon(1e-300) == pytest.approx(float(truth), rel=1e-7)
    pure = RdpAccountant().compose(lambda o: pure_dp_rdp(o, 1e-4))
    assert pure._reach() == 1e12  # its eps(inf) bounds every order
    assert pure._total(1e9) == pure_dp_rdp(np.inf, 1e-4) >= pure_dp_rdp(1e9, 1e-4)


def test_functions_of_the_accountants_orders_only_fall_back_to_the_grid():
    """A function that cannot be evaluated on other orders counts as an array: grid
    values only, no refinement, no error."""
    acc = RdpAccountant()
    fixed = gaussian_rdp(acc.orders, 3.0)
    acc.compose(lambda o: fixed)  # wrong shape on the fine grid
    assert acc.get_epsilon(1e-6) == acc.get_epsilon(1e-6, refine=False)

    def strict(o):
        if o.shape != acc.orders.shape:
            raise ValueError("only my orders")
        return fixed

    two = RdpAccountant().compose(strict)
    assert two.get_epsilon(1e-6) == acc.get_epsilon(1e-6)


# -- 2. parts by content, copies, pickles --------------------------------------------------


class _Curve:
    """An object curve (module level: picklable)."""

    def __init__(self, sigma) -> None:
        self.sigma = sigma

    def rdp(self, orders):
        return gaussian_rdp(orders, self.sigma)


def _gauss_truth(sigmas, delta):
    rho = mp.fsum(1 / (2 * mp.mpf(s) ** 2) for s in sigmas)
    return _mp_best(_mp_gauss(rho), delta)[0]


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_new_curves_after_freed_ones_are_all_counted(how):
    """The audit's reproducer: parts keyed by id(); after a copy the keys are stale and a
    new curve allocated at a freed address was merged into another entry (4 of 200)."""
    acc = RdpAccountant()
    old = [_Curve(10.0 + i) for i in range(200)]
    for c in old:
        acc.compose(c)
    twin = copy.deepcopy(acc) if how == "deepcopy" else pickle.loads(pickle.dumps(acc))
    freed = {id(c) for c in old}
    del acc, old, c
    gc.collect()
    # new curves, as many as possible at freed addresses (CPython reuses them)
    made, hits = [], []
    for i in range(20_000):
        made.append(_Curve(3.0 + 0.001 * i))
        if id(made[-1]) in freed:
            hits.append(made[-1])
        if len(hits) >= 100 and len(made) >= 200:
            break
    new = (hits + [c for c in made if id(c) not in freed])[:200]
    for c in new:
        twin.compose(c)
    fresh = RdpAccountant()
    for i in range(200):
        fresh.compose(_Curve(10.0 + i))
    for c in new:
        fresh.compose(c)
    del made
    assert twin.releases == fresh.releases == 400
    np.testing.assert_array_equal(twin.rdp, fresh.rdp)
    assert twin.get_epsilon(1e-6) == fresh.get_epsilon(1e-6)
    truth = _gauss_truth([10.0 + i for i in range(200)] + [c.sigma for c in new], 1e-6)
    assert mp.mpf(twin.get_epsilon(1e-6)) >= truth
    assert twin.get_epsilon(1e-6) <= float(truth) * (1 + CHORD_RTOL)


def _releases(k, start):
    x = np.r_[np.ones(30), np.zeros(70)]
    return [pb.sample(pb.BetaBernoulli(), x, 2.0, start + 0.01 * i, rng=i) for i in range(k)]


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copies_convert_like_the_original(how):
    """Releases, partials and frozen functions (a lambda: the accountant keeps no callable,
    so it pickles) and arrays; the shared accountant too (a fresh lock)."""
    dup = copy.deepcopy if how == "deepcopy" else (lambda a: pickle.loads(pickle.dumps(a)))
    rels = _releases(3, 0.3)
    for cls in (RdpAccountant, SharedAccountant):
        acc = cls()
        for rel in rels:
            acc.compose(rel, count=2)
        # an exact partial of this package (relation-agnostic: releases fix replace-one)
        acc.compose(functools.partial(laplace_rdp, b=40.0), 100)
        acc.compose(lambda o: gaussian_rdp(o, 30.0), 5)
        twin = dup(acc)
        for delta in (1e-6, 1e-12):
            assert twin.get_epsilon_and_order(delta) == acc.get_epsilon_and_order(delta)
        assert twin.get_delta(1.0) == acc.get_delta(1.0)
        assert twin.releases == acc.releases == 111
        # and they go on independently, by content
        for a in (acc, twin):
            a.compose(rels[0])
        assert twin.get_epsilon(1e-6) == acc.get_epsilon(1e-6)
        twin.compose(np.zeros(twin.orders.size))  # an array: twin only
        assert acc._can_refine() and not twin._can_refine()
    reset_default_accountant()


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_new_calibrations_after_freed_ones_are_all_counted(how):
    """As above with privbayes calibrations (parts were keyed by id of the calibration)."""
    base = pb.calibrate(pb.BetaBernoulli(), 100, 2.0, 0.5)

    def cal(i):  # distinct mechanisms of one model: smaller knobs r
        return dataclasses.replace(base, r=base.r * (1 - 1e-3 * i))

    acc = RdpAccountant()
    old = [cal(i) for i in range(30)]
    for c in old:
        acc.compose(c)
    twin = copy.deepcopy(acc) if how == "deepcopy" else pickle.loads(pickle.dumps(acc))
    freed = {id(c) for c in old}
    del acc, old, c
    gc.collect()
    made, hits = [], []
    for i in range(30, 20_000):
        made.append(cal(i))
        if id(made[-1]) in freed:
            hits.append(made[-1])
        if len(hits) >= 15 and len(made) >= 30:
            break
    new = (hits + [c for c in made if id(c) not in freed])[:30]
    for c in new:
        twin.compose(c)
    fresh = RdpAccountant()
    for c in [cal(i) for i in range(30)] + new:
        fresh.compose(c)
    del made
    assert len(twin._parts) == len(fresh._parts) == 60
    np.testing.assert_array_equal(twin.rdp, fresh.rdp)
    for delta in (1e-6, 1e-10):
        assert twin.get_epsilon(delta) == fresh.get_epsilon(delta)


def test_repeated_content_is_counted_once_per_copy():
    """The same mechanism composed many times is one part with its count; equal partials
    too; different parameters are different parts."""
    acc = RdpAccountant()
    for _ in range(300):
        acc.compose(functools.partial(gaussian_rdp, sigma=4.0))
    acc.compose(functools.partial(gaussian_rdp, sigma=4.0), count=700)
    acc.compose(functools.partial(gaussian_rdp, sigma=5.0))
    assert sorted(c for _, c in acc._parts.values()) == [1, 1000]
    truth = _gauss_truth([4.0] * 1000 + [5.0], 1e-6)
    assert acc.get_epsilon(1e-6) == pytest.approx(float(truth), rel=1e-9)
    assert mp.mpf(acc.get_epsilon(1e-6)) >= truth


def test_default_accountant_keeps_releases_by_content():
    """Many releases of one mechanism (equal models built apart too): one pending entry;
    another prior or knob is another entry; a copy converts alike."""
    reset_default_accountant()
    rels = [pb.sample(pb.BetaBernoulli(), [0, 1, 1, 0], 2.0, 0.5, rng=i) for i in range(20)]
    rels.append(pb.sample(pb.BetaBernoulli(2, 1), [0, 1, 1, 0], 2.0, 0.5, rng=0))
    rels.append(pb.sample(pb.BetaBernoulli(), [0, 1, 1, 0], 2.0, 0.6, rng=0))
    acc = default_accountant()
    assert acc.releases == 22 and len(acc._pending) == 3
    eager = RdpAccountant()
    for rel in rels:
        eager.compose(rel)
    twin = copy.deepcopy(acc)
    assert acc.get_epsilon(1e-6) == eager.get_epsilon(1e-6) == twin.get_epsilon(1e-6)
    reset_default_accountant()


# -- 3. order grids are not shared writeable arrays ----------------------------------------


def test_orders_cannot_be_edited_in_place():
    """The audit's reproducer: one accountant's ``orders`` was the module-level
    DEFAULT_ORDERS, so an in-place edit changed every accountant's eps (11.094 -> 4.550)."""
    reset_default_accountant()
    a, b = RdpAccountant(), RdpAccountant()
    for acc in (a, b, default_accountant()):
        acc.compose(functools.partial(gaussian_rdp, sigma=0.5), 3)
    before = [acc.get_epsilon(1e-6) for acc in (a, b, default_accountant())]
    for arr in (a.orders, DEFAULT_ORDERS, WIDE_ORDERS, default_accountant().orders):
        with pytest.raises(ValueError, match="read-only"):
            arr[1:] = arr[1:].copy()  # (the same values: harmless where it is allowed)
        with pytest.raises(ValueError, match="read-only"):
            arr *= 1.0
        with pytest.raises(ValueError):
            arr.setflags(write=True)
    assert not np.shares_memory(a.orders, b.orders)
    assert not np.shares_memory(a.orders, DEFAULT_ORDERS)
    assert [acc.get_epsilon(1e-6) for acc in (a, b, default_accountant())] == before
    np.testing.assert_array_equal(a.orders, DEFAULT_ORDERS)
    with pytest.raises(AttributeError):
        a.orders = np.array([2.0])
    for twin in (copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        with pytest.raises(ValueError, match="read-only"):
            twin.orders[0] = twin.orders[0]
    reset_default_accountant()
