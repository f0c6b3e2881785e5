"""Multinomial logistic regression (docs/multinomial.md): the certificate against quadrature,
its constants against brute force, the back-ends, and refusals.

Quadrature (docs/multinomial.md §5): d = 1, K = 3. The likelihood depends on W only through
its component orthogonal to (1, 1, 1) (softmax is invariant under a common shift of the
scores), and the prior is isotropic, so the posterior is the product of the prior on the
shift direction (the same law for every data set) and a 2-D law on the orthogonal plane:
the Rényi divergence of two posteriors equals that of their 2-D factors, computed here on a
fine grid (trapezoidal rule on a smooth, Gaussian-tailed integrand).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

import privbayes as pb
from privbayes.errors import InfeasiblePrivacyError
from privbayes.glm.family import MultinomialLogistic

K = 3
# orthonormal basis of the plane orthogonal to (1, 1, 1)
BASIS = np.array([[1.0, -1.0, 0.0], [1.0, 1.0, -2.0]]) / np.array([[math.sqrt(2)], [math.sqrt(6)]])
ORDERS = (1.5, 2.0, 5.0, 20.0)


def _grid(prec: float, points: int = 241):
    """Grid over the plane: half-width covering the posterior and the tilted laws at lam = 20."""
    half = 14.0 / math.sqrt(prec) + 3.0
    t = np.linspace(-half, half, points)
    a, b = np.meshgrid(t, t, indexing="ij")
    coords = np.stack([a.ravel(), b.ravel()], axis=1)  # (G, 2)
    return coords, coords @ BASIS  # W rows (G, 3): d = 1, so W is one row of K scores


def _log_post(w, data, r, prec):
    """Normalised log posterior on the grid (the cell area cancels in divergences)."""
    lp = -0.5 * prec * (w * w).sum(axis=1)
    for x, y in data:
        z = x * w
        lp -= r * (logsumexp(z, axis=1) - z[:, y])
    return lp - logsumexp(lp)


def _renyi(lp, lq, lam):
    return float(logsumexp(lam * lp + (1 - lam) * lq) / (lam - 1))


def _pairs(n_records: int, n: int):
    """Every unordered pair of neighbouring multisets of size n over n_records records."""
    sets = list(itertools.combinations_with_replacement(range(n_records), n))
    index = {s: i for i, s in enumerate(sets)}
    out = set()
    for s in sets:
        for pos in range(n):
            for j in range(n_records):
                t = tuple(sorted(s[:pos] + (j,) + s[pos + 1 :]))
                if t != s:
                    out.add((min(index[s], index[t]), max(index[s], index[t])))
    return sets, np.array(sorted(out))


@pytest.mark.parametrize("method", ["direct", "diffused", "concentrated"])
def test_certificate_bounds_quadrature_on_every_neighbouring_pair(method):
    """All neighbouring pairs of size-2 data sets over x in {-c, -c/2, c/2, c} and labels
    {0, 1, 2} (x = 0 adds nothing), both directions: true D_lam <= the certified eps at
    lam in {1.5, 2, 5, 20}."""
    beta, c, n = 0.5, 1.0, 2
    model = pb.MultinomialLogisticRegression(beta, c, K, backend="imh")
    records = [(x, y) for x in (-c, -c / 2, c / 2, c) for y in range(K)]
    sets, pairs = _pairs(len(records), n)
    worst = 0.0
    for lam in ORDERS:
        if method == "direct":
            r, m = 1.0, 1.0
            cert = float(model.rdp(n, lam, 1.0, 1.0, "direct"))
        else:
            target = float(model.rdp(n, lam, 1.0, 1.0, "direct")) / 4
            cal = pb.calibrate(model, n, lam, target, method)
            r, m, cert = cal.r, cal.m, cal.eps
            assert cert <= target
        assert cert == float(model.rdp(n, lam, r, m, method))
        prec = n * beta / m
        _, w = _grid(prec, 121)
        prior = -0.5 * prec * (w * w).sum(axis=1)
        losses = [logsumexp(x * w, axis=1) - x * w[:, y] for x, y in records]
        logs = np.array([prior - r * sum(losses[i] for i in s) for s in sets])
        logs -= logsumexp(logs, axis=1, keepdims=True)
        for a, b in ((0, 1), (1, 0)):  # both directions of every pair
            for lo in range(0, len(pairs), 128):
                blk = pairs[lo : lo + 128]
                mix = logs[blk[:, a]] * lam
                mix += logs[blk[:, b]] * (1 - lam)
                top = mix.max(axis=1, keepdims=True)
                mix -= top
                np.exp(mix, out=mix)
                true = (np.log(mix.sum(axis=1)) + top[:, 0]) / (lam - 1)
                assert (true <= cert).all(), (method, lam, true.max(), cert)
                worst = max(worst, float(true.max()) / cert)
    assert 0.05 < worst < 1.0  # the certificate is not vacuous here, and it holds


def test_quadrature_is_exact_on_the_prior():
    """Mass 1 on the grid and the Gaussian closed form: D_lam of two Gaussians of precision
    p whose means differ by v is lam p |v|^2 / 2."""
    prec = 1.0
    coords, w = _grid(prec)
    base = -0.5 * prec * (w * w).sum(axis=1)
    v = np.array([0.3, -0.2, -0.1])  # in the plane (sums to 0)
    shifted = -0.5 * prec * ((w - v) ** 2).sum(axis=1)
    lp, lq = base - logsumexp(base), shifted - logsumexp(shifted)
    for lam in ORDERS:
        assert _renyi(lp, lq, lam) == pytest.approx(lam * prec * (v @ v) / 2, rel=1e-9)


# -- constants (docs/multinomial.md §2, §4) --------------------------------------------------
def _grad(w, x, y):
    s = softmax(x @ w)
    s[y] -= 1.0
    return np.outer(x, s)


def test_gradient_sensitivity_and_curvature_by_brute_force():
    rng = np.random.default_rng(0)
    c = 1.3
    fam = MultinomialLogistic(4)
    g_max = math.sqrt(float(fam.sensitivity_sq)) * c
    best = 0.0
    for _ in range(3000):
        d = int(rng.integers(1, 4))
        w = rng.normal(size=(d, 4)) * rng.choice([0.1, 1.0, 10.0, 100.0])
        x1, x2 = (v / max(1.0, np.linalg.norm(v) / c) for v in rng.normal(size=(2, d)) * 2)
        y1, y2 = rng.integers(0, 4, 2)
        diff = np.linalg.norm(_grad(w, x1, y1) - _grad(w, x2, y2))
        assert diff <= g_max * (1 + 1e-12)
        best = max(best, diff)
        # Hessian of the loss in vec(W): (diag s - s s^T) kron x x^T <= c^2 / 2
        s = softmax(x1 @ w)
        h = np.kron(np.outer(x1, x1), np.diag(s) - np.outer(s, s))
        assert np.linalg.eigvalsh(h).max() <= float(fam.curvature) * c * c * (1 + 1e-12)
    assert best > 0.5 * g_max
    # the supremum 2 sqrt(2) c is approached in d = 2 (docs/multinomial.md §2)
    theta = 1e-3
    x1 = c * np.array([1.0, 0.0])
    x2 = c * np.array([-math.cos(theta), math.sin(theta)])
    w = np.zeros((2, 4))
    w[0, 1], w[1, 1] = 30.0, 1e5  # x1 and x2 both score class 1 highest by >= 30
    diff = np.linalg.norm(_grad(w, x1, 0) - _grad(w, x2, 0))
    assert diff == pytest.approx(g_max, rel=1e-3)


def test_family_kernels_match_finite_differences():
    rng = np.random.default_rng(1)
    n, d, k = 40, 3, 4
    x, y = rng.normal(size=(n, d)), rng.integers(0, k, n)
    fam = MultinomialLogistic(k)
    data = fam.prepare(x, y)
    w = rng.normal(size=(5, d * k))
    ref = [
        sum(
            logsumexp(xi @ wb.reshape(d, k)) - (xi @ wb.reshape(d, k))[yi]
            for xi, yi in zip(x, y, strict=True)
        )
        for wb in w
    ]
    np.testing.assert_allclose(fam.loss_sums(data, w, 1), ref, rtol=1e-12)
    g = fam.neg_grad_sums(data, w.T.copy(), None, 1)
    ref_g = [
        -sum(_grad(wb.reshape(d, k), xi, yi) for xi, yi in zip(x, y, strict=True)).ravel()
        for wb in w
    ]
    np.testing.assert_allclose(g.T, ref_g, rtol=1e-10, atol=1e-12)
    gr, h = fam.grad_hess(data, w[0], 0.7)
    np.testing.assert_allclose(gr, -0.7 * np.asarray(ref_g[0]), rtol=1e-10, atol=1e-12)
    eps = 1e-6
    num = np.array(
        [
            (
                fam.grad_hess(data, w[0] + eps * e, 0.7)[0]
                - fam.grad_hess(data, w[0] - eps * e, 0.7)[0]
            )
            / (2 * eps)
            for e in np.eye(d * k)
        ]
    )
    np.testing.assert_allclose(h, num, rtol=1e-5, atol=1e-7)


# -- certificate values --------------------------------------------------------------------
def test_certificate_closed_forms():
    from fractions import Fraction

    model = pb.MultinomialLogisticRegression(0.37, 1.3, 5, backend="imh")
    c_cert = Fraction(1.3) * (1 + 2 * Fraction(1e-12))
    for n, lam, r, m in [(7, 2.0, 0.3, 1.0), (1000, 13.0, 1.0, 0.01)]:
        prec = n * 0.37 / m
        exact = Fraction(lam) * 4 * c_cert**2 * Fraction(r) ** 2 / Fraction(prec)
        got = float(model.rdp(n, lam, r, m, "diffused"))
        assert Fraction(got) >= exact and got == pytest.approx(float(exact), rel=1e-15)
    # twice the binary certificate at the same beta, c (G^2 = 8 c^2 instead of 4 c^2)
    binary = pb.BayesianLogisticRegression(0.37, 1.3, backend="imh")
    assert float(model.rdp(50, 2.0)) == pytest.approx(2 * float(binary.rdp(50, 2.0)), rel=1e-14)


def test_langevin_certificate_uses_the_family_constants():
    from fractions import Fraction

    from privbayes.sampling import langevin

    def spread(kappa, j):  # F(kappa, j) of docs/langevin.md §4; j at kappa = 1
        if j == 0 or kappa == 1:
            return float(j)
        kk = kappa**j
        return (1 + kappa) * (1 - kk) / ((1 - kappa) * (1 + kk))

    for schedule in ("stationary", "utility"):
        model = pb.MultinomialLogisticRegression(
            0.01, 1.0, 10, backend="langevin", schedule=schedule
        )
        cal = pb.calibrate(model, 5000, 2.0, 1.0, "diffused")
        assert cal.eps <= 1.0 and cal.guarantee == "algorithm"
        s = cal.sampler
        c = model._c_cert()
        # contraction condition with L = r n c^2 / 2 + p
        lhs = Fraction(s["step"]) * (2 * Fraction(s["prec"]) + Fraction(cal.r) * 5000 * c**2 / 2)
        assert lhs <= 2
        kappa = 1 - s["step"] * s["prec"]
        assert (kappa == 1) == (schedule == "utility")  # the utility run has no pull
        g2 = 8 * float(c) ** 2
        g02 = 4 * float(c) ** 2 * 9 / 10  # at W = 0: 2c sqrt((K - 1) / K), K = 10 classes
        unit = (s["step"] * cal.r) ** 2 / (2 * s["noise"] ** 2)
        k = s["steps"]
        rho = unit * min(g2 * spread(kappa, k), g02 + g2 * spread(kappa, k - 1))
        assert cal.eps == pytest.approx(2.0 * rho, rel=1e-9)
        cert = langevin.certificate(s, 5000, cal.r, c, model.family)
        assert cert == pytest.approx(rho, rel=1e-9)
        if schedule == "stationary":  # below the exact-posterior certificate at the knob
            post = pb.MultinomialLogisticRegression(0.01, 1.0, 10, backend="imh")
            assert cal.eps < float(post.rdp(5000, 2.0, cal.r, cal.m, "diffused"))


# -- back-ends ------------------------------------------------------------------------------
def _data(n=400, d=3, k=K, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * 0.5
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1) / 0.85)[:, None]
    w = rng.normal(size=(d, k)) * 3
    y = np.argmax(x @ w + rng.gumbel(size=(n, k)), axis=1)
    return x, y


def test_auto_is_certified_and_the_release_has_the_matrix_shape():
    x, y = _data()
    model = pb.MultinomialLogisticRegression(0.05, 1.0, K, fit_intercept=True)
    rel = pb.sample(model, (x, y), 2.0, 1.0, size=3, rng=0)
    backend = rel.calibration.model.backend  # auto's public choice
    assert rel.value.shape == (3, 4, K)
    assert rel.guarantee == {"exact": "exact", "langevin": "algorithm"}[backend]
    one = pb.sample(model, (x, y), 2.0, 1.0, rng=0)
    assert one.value.shape == (4, K)
    again = pb.sample(model, (x, y), 2.0, 1.0, rng=0)
    np.testing.assert_array_equal(one.value, again.value)


def test_langevin_and_imh_agree_on_the_posterior_mean():
    """Both back-ends near the same tempered posterior (means of the class-score
    differences, which the data identify), at eps large enough that r = 1."""
    x, y = _data(n=300, d=2)
    lang = pb.MultinomialLogisticRegression(
        0.05, 1.0, K, backend="langevin", schedule="stationary"
    )  # the posterior's chain (the utility default is an early stop, not a posterior draw)
    imh = pb.MultinomialLogisticRegression(0.05, 1.0, K, backend="imh")
    a = pb.sample(lang, (x, y), 2.0, 120.0, "diffused", size=120, rng=1)
    b = pb.sample(imh, (x, y), 2.0, 120.0, "diffused", size=120, rng=2)
    assert a.calibration.r == b.calibration.r == 1.0
    da = a.value - a.value[..., :1]
    db = b.value - b.value[..., :1]
    se = np.sqrt(da.var(axis=0) / 120 + db.var(axis=0) / 120)
    # Langevin's step (h = 1/2) inflates variances by at most 2 (docs/langevin.md §7)
    assert (np.abs(da.mean(axis=0) - db.mean(axis=0)) <= 5 * se + 0.05).all()
    # the data are informative: the posterior mean predicts better than chance
    pred = np.argmax(x @ db.mean(axis=0), axis=1)
    assert (pred == y).mean() > 0.6


def test_imh_mode_is_the_map():
    from privbayes.sampling import imh

    x, y = _data(n=200, d=2)
    target = imh.Target(x, y, 1.0, 3.0, MultinomialLogistic(K))
    w_hat, chol = target.mode()
    fam = target.family
    g = -fam.neg_grad_sums(target.data, w_hat[:, None], None, 1)[:, 0] + 3.0 * w_hat
    assert np.linalg.norm(g) < 1e-6
    assert abs(w_hat.reshape(2, K).sum(axis=1)).max() < 1e-8  # no mass on the shift direction


# -- refusals --------------------------------------------------------------------------------
def test_bad_inputs_are_refused_before_any_charge(tmp_path):
    x, y = _data(n=20)
    model = pb.MultinomialLogisticRegression(0.5, 1.0, K)
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=10.0, delta=1e-6)
    bad = [
        ((x, np.where(np.arange(20) == 4, 3, y)), r"n_classes=3.*y\[4\] = 3"),
        ((x, np.where(np.arange(20) == 2, -1, y)), r"y\[2\] = -1"),
        ((x, y + 0.5), r"y\[0\] = 0.5"),
        ((x * 3, y), "norm > c"),
    ]
    for data, match in bad:
        with pytest.raises(ValueError, match=match):
            pb.sample(model, data, 2.0, 1.0, ledger=ledger, dataset="d")
    with pytest.raises(ValueError, match="method must be one of"):
        pb.sample(model, (x, y), 2.0, 1.0, "gibbs", ledger=ledger, dataset="d")
    with pytest.raises(InfeasiblePrivacyError):
        pb.sample(model, (x, y), math.inf, 1.0, ledger=ledger, dataset="d")
    assert ledger.spent("d") == 0.0
    for kw, match in [
        ({"beta": 0.0}, "beta"),
        ({"beta": -1.0}, "beta"),
        ({"c": 0.0}, "c"),
        ({"n_classes": 1}, "n_classes"),
        ({"n_classes": True}, "n_classes"),
    ]:
        args = {"beta": 0.5, "c": 1.0, "n_classes": 3, **kw}
        with pytest.raises(ValueError, match=match):
            pb.MultinomialLogisticRegression(**args)


# -- the scikit-learn estimator with K > 2 classes ------------------------------------------
def test_estimator_multiclass_conventions_and_one_code_path():
    x, y = _data(n=300, d=3, k=4, seed=3)
    x = x * 0.9  # inside sqrt(1 - 0.5^2), the intercept's share of c
    names = np.array(["a", "b", "c", "d"])[y]
    est = pb.PrivateLogisticRegression(
        eps=4.0, n_samples=2, random_state=5, fit_intercept=True, classes=["a", "b", "c", "d"]
    ).fit(x, names)
    assert list(est.classes_) == ["a", "b", "c", "d"]
    assert est.coef_.shape == (4, 3) and est.intercept_.shape == (4,)
    assert est.samples_.shape == (2, 4, 4)
    proba = est.predict_proba(x)
    assert proba.shape == (300, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    scores = est.decision_function(x)
    assert scores.shape == (300, 4)
    np.testing.assert_array_equal(est.predict(x), est.classes_[np.argmax(proba, axis=1)])
    assert est.score(x, names) > 0.5  # chance is about 0.25
    assert est.privacy_["guarantee"] == "algorithm" and est.privacy_["backend"] == "langevin"
    assert est.privacy_["eps"] <= 4.0
    # the same draws as sample() with the softmax model and labels in classes_ order
    model = pb.MultinomialLogisticRegression(
        0.01, 1.0, 4, fit_intercept=True, intercept_scaling=0.5
    )
    seed = np.random.RandomState(5).randint(2**31 - 1)
    rel = pb.sample(model, (x, y), 2.0, 4.0, size=2, rng=np.random.default_rng(seed))
    np.testing.assert_array_equal(est.samples_, rel.value)


# -- Langevin: the certificate against the exact law of the K-step output ------------------
def _softmax_grad(x, y, r, prec):
    """grad U in plane coordinates (d = 1, K = 3): U = r sum loss + prec/2 |W|^2 restricted
    to the plane orthogonal to (1, 1, 1), where the chain's data-dependent part lives."""

    def grad(w):  # w (G, 2)
        scores = w @ BASIS  # (G, 3)
        g = prec * w
        for xi, yi in zip(x, y, strict=True):
            s = softmax(xi * scores, axis=1)
            s[:, yi] -= 1.0
            g = g + r * xi * (s @ BASIS.T)
        return g

    return grad


def test_langevin_certificate_bounds_the_exact_law_of_the_output():
    """d = 1, K = 3: the chain's component along (1, 1, 1) evolves without the data (the
    same law for both neighbours), so D_lam of the outputs is that of the 2-D component,
    computed by convolution on a grid (tests/test_glm_langevin.py's ``exact_laws``)."""
    from test_glm_langevin import exact_laws, mass, renyi  # noqa: I001  (tests/ on sys.path)

    from privbayes.sampling import langevin

    fam = MultinomialLogistic(K)
    n, beta, r, c = 4, 0.05, 0.5, 1.0 * (1 + 1e-12)
    sched = langevin.schedule(n, beta, c, r, 1.0, 0.5, family=fam)
    prec = sched["prec"]
    x = np.array([1.0, -0.4, 0.7, -1.0])
    y = np.array([0, 1, 2, 2])
    cases = [  # the replaced record: label moved, sign reversed, both; start 0 and far
        (x, y, np.r_[x[:1], x[1:]], np.r_[[1], y[1:]], [0.0, 0.0]),
        (x, y, np.r_[-x[:1], x[1:]], y, [0.0, 0.0]),
        (x, y, np.r_[-x[:1], x[1:]], np.r_[[2], y[1:]], [0.0, 0.0]),
        (x, y, np.r_[-x[:1], x[1:]], np.r_[[2], y[1:]], [30.0, -20.0]),
    ]
    worst = 0.0
    for steps in (1, 3):
        sampler = dict(sched, steps=steps)
        rho = langevin.certificate(sampler, n, r, c, fam)
        half = langevin.certificate(sampler, n, r, c)  # binary constants: G^2 = 4 c^2
        kappa = 1 - sampler["step"] * prec
        for xa, ya, xb, yb, start in cases:
            grads = [_softmax_grad(xa, ya, r, prec), _softmax_grad(xb, yb, r, prec)]
            (lp, lq), cell, _ = exact_laws(
                grads, start, sampler["step"], sampler["noise"], steps, kappa
            )
            assert abs(mass(lp, cell) - 1) < 1e-8 and abs(mass(lq, cell) - 1) < 1e-8
            for lam in (1.5, 2.0, 8.0):
                true = max(renyi(lp, lq, lam, cell), renyi(lq, lp, lam, cell))
                assert true <= lam * rho, (steps, start, lam, true, lam * rho)
                worst = max(worst, true / (lam * rho))
        assert half < rho
    print(f"multinomial Langevin: largest exact D_lam / certificate = {worst:.3f}")
    assert worst > 0.05


def test_estimator_public_classes():
    """classes= fixes K in advance: a class absent from y is fine (K stays public), a label
    outside the list is refused (by position); the default is the binary [0, 1], never
    the labels found in y."""
    x, y = _data(n=200, d=2, k=4, seed=4)
    x = x * 0.9
    y = np.where(y == 3, 2, y)  # class 3 absent from the data
    est = pb.PrivateLogisticRegression(eps=4.0, random_state=0, classes=[0, 1, 2, 3]).fit(x, y)
    assert list(est.classes_) == [0, 1, 2, 3] and est.coef_.shape == (4, 2)
    assert est.predict_proba(x).shape == (200, 4)
    with pytest.raises(pb.DataError, match=r"classes=\[0, 1\] \(the default\): y\[\d+\] is"):
        pb.PrivateLogisticRegression(eps=4.0, random_state=0).fit(x, y)  # K not read off y
    with pytest.raises(pb.DataError, match=r"y\[\d+\] is not one of them"):
        pb.PrivateLogisticRegression(classes=[0, 1]).fit(x, y)
    two = pb.PrivateLogisticRegression(eps=4.0, random_state=0, classes=[0, 1])
    assert two.fit(x[y < 2], y[y < 2]).coef_.shape == (1, 2)


def test_unknown_option_names_the_class():
    with pytest.raises(TypeError, match=r"MultinomialLogisticRegression\(\).*'bogus'"):
        pb.MultinomialLogisticRegression(n_classes=3, bogus=1)
    assert pb.MultinomialLogisticRegression(n_classes=3, tune=10, backend="imh").tune == 10
