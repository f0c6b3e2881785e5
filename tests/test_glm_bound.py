"""The GLM certificates (docs/glm.md) against exact divergences by quadrature, 1-D and 2-D."""

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import logsumexp

from privbayes import BayesianLogisticRegression, calibrate

ORDERS = [1.5, 2.0, 5.0, 20.0]
METHODS = ["direct", "diffused", "concentrated", "ops"]


def _neg_log_post(w, X, y, model, r, m, n):
    """U(w) for weights w of shape (..., d): tempered loss + prior (+inf outside the OPS ball)."""
    z = np.tensordot(w, X.T, axes=1) * y  # (..., n)
    return r * np.logaddexp(0.0, -z).sum(-1) + 0.5 * (n * model.beta / m) * (w**2).sum(-1)


def _renyi_1d(D, Dp, model, cal, lam):
    X, y = D
    Xp, yp = Dp
    n = len(y)
    lim = model.radius if cal.method == "ops" else 40.0 / math.sqrt(n * model.beta / cal.m)

    def logp(w, data):
        return -_neg_log_post(np.array([[w]]), *data, model, cal.r, cal.m, n)[0]

    def logz(data):
        mode = integrate.quad(
            lambda w: math.exp(logp(w, data) - logp(0.0, data)), -lim, lim, limit=400, epsrel=1e-12
        )[0]
        return math.log(mode) + logp(0.0, data)

    lzp, lzq = logz(D), logz(Dp)
    shift = lam * (logp(0.0, D) - lzp) + (1 - lam) * (logp(0.0, Dp) - lzq)

    def integrand(w):
        a = lam * (logp(w, D) - lzp) + (1 - lam) * (logp(w, Dp) - lzq)
        return math.exp(a - shift)

    val = integrate.quad(integrand, -lim, lim, limit=400, epsrel=1e-11)[0]
    return (math.log(val) + shift) / (lam - 1)


def _renyi_2d(D, Dp, model, cal, lam, grid=601):
    n = len(D[1])
    sd = 1.0 / math.sqrt(n * model.beta / cal.m)
    lim = min(model.radius, 12.0 * sd) if cal.method == "ops" else 12.0 * sd
    t = np.linspace(-lim, lim, grid)
    w = np.stack(np.meshgrid(t, t, indexing="ij"), -1)
    lp = -_neg_log_post(w, *D, model, cal.r, cal.m, n)
    lq = -_neg_log_post(w, *Dp, model, cal.r, cal.m, n)
    if cal.method == "ops":
        outside = (w**2).sum(-1) > model.radius**2
        lp, lq = np.where(outside, -np.inf, lp), np.where(outside, -np.inf, lq)
    lp -= logsumexp(lp)
    lq -= logsumexp(lq)
    inside = np.isfinite(lp)
    mix = lam * lp[inside] + (1 - lam) * lq[inside]
    return float(logsumexp(mix)) / (lam - 1)


def _data(rng, n, d, c):
    X = rng.normal(size=(n, d))
    X *= (c * rng.uniform(0.3, 1.0, n) / np.linalg.norm(X, axis=1))[:, None]
    y = rng.choice([-1.0, 1.0], n)
    return X, y


def _neighbours(D, rng, c):
    """Worst-looking replacements of record 0: reversed and flipped at full norm, and random."""
    X, y = D
    cands = []
    for k in range(4):
        Xp, yp = X.copy(), y.copy()
        if k == 0:
            Xp[0] = -X[0] * c / np.linalg.norm(X[0])
            yp[0] = -y[0]
        else:
            v = rng.normal(size=X.shape[1])
            Xp[0] = v * c / np.linalg.norm(v)
            yp[0] = rng.choice([-1.0, 1.0])
        cands.append((Xp, yp))
    return cands


def _max_ratio(d, renyi, rng, trials):
    worst = 0.0
    for _ in range(trials):
        n = int(rng.integers(3, 9))
        c = float(rng.uniform(0.5, 2.0))
        model = BayesianLogisticRegression(beta=float(rng.uniform(0.2, 1.0)), c=c)
        D = _data(rng, n, d, c)
        for method in METHODS:
            for lam in ORDERS:
                eps = float(rng.uniform(0.2, 2.0))
                if method == "direct":
                    eps = 2 * lam * c**2 / (n * model.beta) * 1.01
                cal = calibrate(model, n, lam, eps, method)
                for Dp in _neighbours(D, rng, c):
                    exact = renyi(D, Dp, model, cal, lam)
                    assert exact <= cal.eps * (1 + 1e-6), (method, lam, exact, cal.eps)
                    worst = max(worst, exact / cal.eps)
    return worst


def test_bound_holds_in_one_dimension():
    assert _max_ratio(1, _renyi_1d, np.random.default_rng(0), trials=4) < 1


def test_bound_holds_in_two_dimensions():
    assert _max_ratio(2, _renyi_2d, np.random.default_rng(1), trials=2) < 1


def test_quadrature_helper_is_right_on_a_gaussian_case():
    """Independent check of the helper: prior only (r -> tiny) is two equal Gaussians."""
    model = BayesianLogisticRegression(beta=0.5, c=1.0)
    X = np.array([[0.5]]), np.array([1.0])
    Xp = np.array([[-0.5]]), np.array([-1.0])  # same likelihood: identical posteriors
    cal = calibrate(model, 1, 2.0, 1e-6, "diffused")
    assert _renyi_1d(X, Xp, model, cal, 2.0) == pytest.approx(0.0, abs=1e-9)


def test_bound_ratio_report(capsys):
    ratio = _max_ratio(1, _renyi_1d, np.random.default_rng(7), trials=2)
    with capsys.disabled():
        print(f"\n[glm bound] largest exact D / certified eps in 1-D: {ratio:.3f}")
    assert 0 < ratio < 1
