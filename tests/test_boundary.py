"""The boundary reduction (docs/boundary.md) against brute force over every data set."""

import itertools
import math

import numpy as np
import pytest

from privbayes import BetaBernoulli, DirichletCategorical
from privbayes.divergence import _dirichlet_shift
from privbayes.models import MeanQuery


def _exact(model, n, r, m):
    """(prior a, weight r') the mechanism really uses: alpha/m and r on the exact grid."""
    a, r_t = model._grid(n, r, m)
    return a, r_t


def _brute_sup(alpha, r, counts_list, n, lam, m=1.0, step=1.0):
    """sup of D over every count vector and every one-record move, via full K-vectors.

    ``step`` < 1 moves a fraction of a record (statistical queries). The shift h is
    passed exactly, so nothing here shares the boundary code's short-cuts.
    """
    alpha = np.asarray(alpha, float)
    k = alpha.size
    best = 0.0
    counts = np.asarray(counts_list, float)
    for i, j in itertools.permutations(range(k), 2):
        ok = counts[:, i] >= step  # the record to move must exist
        c = counts[ok]
        move = np.zeros(k)
        move[i], move[j] = -step, step
        x = alpha / m + r * (c + move)  # Q, the neighbour
        h = np.broadcast_to(-r * move, x.shape)  # P - Q
        d = _dirichlet_shift(x, h, np.full(len(c), lam))
        best = max(best, float(d.max()))
    return best


def _compositions(n, k):
    for cut in itertools.combinations(range(n + k - 1), k - 1):
        parts = np.diff((-1,) + cut + (n + k - 1,)) - 1
        yield parts


def _rel(a, b):
    if math.isinf(a) or math.isinf(b):
        return 0.0 if a == b else math.inf
    return abs(a - b) / max(abs(b), 1e-300)


def _random_setting(rng):
    lam = 1 + 59 * rng.random() ** 2  # (1, 60], more mass near 1
    method = rng.choice(["diffused", "concentrated"])
    knob = float(10 ** rng.uniform(-3, 0))
    r, m = (knob, 1.0) if method == "diffused" else (1.0, knob)
    return lam, r, m


def test_beta_bernoulli_boundary_equals_brute_force(rng):
    for _ in range(150):
        a, b = 10 ** rng.uniform(-1.5, 1.5, 2)
        n = int(rng.integers(1, 41))
        lam, r, m = _random_setting(rng)
        model = BetaBernoulli(a, b)
        counts = [(kk, n - kk) for kk in range(n + 1)]
        brute = _brute_sup(*_exact(model, n, r, m), counts, n, lam)
        # certified (an upper bound) vs a float brute force (good to ~1e-12 at large lam)
        assert _rel(float(model.rdp(n, lam, r=r, m=m)), brute) < 1e-11, (a, b, n, lam, r, m)
        # the calibrator's scalar twin: same formulas, math.lgamma instead of scipy's
        assert _rel(model._eps_at(n, lam, r, m)[0], brute) < 1e-10


@pytest.mark.parametrize("k", [3, 4])
def test_dirichlet_boundary_equals_brute_force(rng, k):
    for _ in range(25):
        alpha = 10 ** rng.uniform(-1, 1, k)
        n = int(rng.integers(1, 13))
        lam, r, m = _random_setting(rng)
        model = DirichletCategorical(alpha)
        brute = _brute_sup(*_exact(model, n, r, m), list(_compositions(n, k)), n, lam)
        got = float(model.rdp(n, lam, r=r, m=m))
        assert _rel(got, brute) < 1e-11, (alpha, n, lam, r, m, got, brute)
        # the calibrator's scalar twin: same formulas, math.lgamma instead of scipy's
        assert _rel(model._eps_at(n, lam, r, m)[0], brute) < 1e-10


def test_worst_pair_attains_the_sup():
    model = DirichletCategorical([0.5, 2.0, 4.0])
    n, lam, r = 9, 3.0, 0.2
    sup, index = model._eps_at(n, lam, r, 1.0)
    pair = model._pair_from_index(n, index)
    p = np.array(pair["counts"], float)
    q = np.array(pair["neighbour_counts"], float)
    assert p.sum() == q.sum() == n and np.abs(p - q).sum() == 2
    x = model.alpha + r * q
    d = _dirichlet_shift(x, r * (p - q), np.array(lam))
    assert float(d) == pytest.approx(sup, rel=1e-13)


def test_statistical_query_fractional_sums_dense_grid(rng):
    """Sums S in [0, n] and moves |t| <= 1: the four boundary pairs still give the sup."""
    for _ in range(12):
        a, b = 10 ** rng.uniform(-1, 1, 2)
        n = int(rng.integers(1, 30))
        lam, r, m = _random_setting(rng)
        query = MeanQuery(a, b)
        (a_t, b_t), r_t = query._grid(n, r, m)  # the query's exact parameters
        s_grid = np.linspace(0, n, 401)
        best = 0.0
        for t in np.linspace(-1, 1, 41):
            s_p = s_grid[(s_grid + t >= 0) & (s_grid + t <= n)]  # P's sum; Q's is s_p + t
            if s_p.size == 0 or t == 0:
                continue
            x = np.stack([a_t + r_t * (s_p + t), b_t + r_t * (n - s_p - t)], -1)
            h = np.broadcast_to(np.array([-r_t * t, r_t * t]), x.shape)
            best = max(best, float(_dirichlet_shift(x, h, np.full(s_p.size, lam)).max()))
        cert = float(query.rdp(n, lam, r=r, m=m))
        assert best <= cert * (1 + 1e-11)
        assert _rel(best, cert) < 1e-11  # the grid contains the boundary pairs


def test_curve_is_data_free_and_increasing_in_the_order():
    model = BetaBernoulli(2.0, 3.0)
    orders = np.array([1.0, 1.5, 2.0, 2.9, 3.5, np.inf])
    curve = model.rdp(50, orders)
    assert curve.shape == orders.shape
    assert np.isfinite(curve[:4]).all() and np.isinf(curve[4:]).all()  # lam < 1 + min(alpha)
    assert (np.diff(curve[:4]) > 0).all()
    assert model.rdp(0, orders).tolist() == [0.0] * 6


def test_order_limits_follow_corollary_one():
    """Finite iff lam < 1 + min(alpha) / (r / m)... i.e. alpha_min / m > r (lam - 1)."""
    model = BetaBernoulli(0.5, 4.0)
    for r, m in [(1.0, 1.0), (0.25, 1.0), (1.0, 0.25)]:
        edge = 1 + 0.5 / (r * m) if m == 1.0 else 1 + 0.5 / m
        assert np.isfinite(model.rdp(10, edge * (1 - 1e-9), r=r, m=m))
        assert np.isinf(model.rdp(10, edge * (1 + 1e-9), r=r, m=m))
