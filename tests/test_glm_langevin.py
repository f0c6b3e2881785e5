"""backend="langevin": the certificate of the K-step noisy gradient descent (docs/langevin.md)
against the EXACT law of its output, computed by numerical convolution on a grid.

Each step is the deterministic map w -> w - eta grad U(w) followed by a Gaussian kernel, so
the density after k + 1 steps is p_{k+1}(v) = int p_k(w) N(v; phi(w), noise^2 I) dw. The
integrand is smooth and decays like a Gaussian of width >= noise (|phi'| <= 1), so the
trapezoidal rule on a grid of spacing noise / 2 is exact to far below 1e-12; every law's
mass is checked, and the whole pipeline is checked against the closed form of a quadratic U
(where Theorem 1 is attained). D_lam of the two output laws is then a sum over the grid.
In 1-D each step is an exact log-domain sum; in 2-D the source cells are summed in bands
of log-mass (``_convolve_2d``), so no cell is dropped however light: the lam = 8 tilt reads
the tails.
"""

import math
import warnings
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logsumexp

import privbayes as pb
from privbayes import BayesianLogisticRegression
from privbayes.sampling import langevin

ORDERS = (1.5, 2.0, 8.0)
WIDTH = 14.0  # grid half-width in standard deviations of the law (lam = 8 tilts by ~7)


# -- the exact law of w_K ------------------------------------------------------------------
def logistic_grad(u: np.ndarray, r: float, prec: float):
    """grad U for U(w) = r sum_i log(1 + exp(-u_i.w)) + prec/2 |w|^2, rows u_i = y_i x_i."""

    def grad(w):
        return -r * expit(-(w @ u.T)) @ u + prec * w

    return grad


def _axes(centres, sd, h):
    lo = np.min(centres, axis=0) - WIDTH * sd
    hi = np.max(centres, axis=0) + WIDTH * sd
    return [np.arange(a, b + h, h) for a, b in zip(lo, hi, strict=True)]


BAND = 600.0  # nats: source cells are summed in bands of log-mass this wide (no underflow)


def _convolve_2d(log_mass, ph, axes, noise):
    """log sum_j exp(log_mass_j) N1(v1 - ph_j1) N1(v2 - ph_j2) (unnormalised kernels) on the
    grid axes[0] x axes[1], flattened "ij". The source cells are grouped into bands of
    log-mass [top - (i + 1) BAND, top - i BAND]; each band is one matrix product with its
    masses scaled into [e^-BAND, 1] (no cell is dropped, none underflows: e^-600 > 1e-261),
    and the bands are added in the log domain. A kernel factor underflows only beyond
    38 noise widths, where it is below 1e-300 of the nearest source cell's."""
    top = np.max(log_mass)
    rel = log_mass - top
    out = np.full(axes[0].size * axes[1].size, -np.inf)
    band = 0
    while True:
        hi, lo = -band * BAND, -(band + 1) * BAND
        sel = (rel <= hi) & (rel > lo)
        if sel.any():
            mass = np.exp(rel[sel] - hi)
            a = np.exp(-0.5 * ((axes[0][:, None] - ph[None, sel, 0]) / noise) ** 2)
            b = np.exp(-0.5 * ((axes[1][:, None] - ph[None, sel, 1]) / noise) ** 2)
            with np.errstate(divide="ignore"):
                part = np.log((a * mass) @ b.T).reshape(-1) + hi + top
            out = np.logaddexp(out, part)
        if not (rel <= lo).any():
            return out
        band += 1


def exact_laws(grads, start, eta, noise, steps, kappa):
    """Log densities of w_K under each gradient in ``grads``, on one common grid.

    Returns (log densities on the flattened grid, cell volume h^d, the grid's axes: the
    flattened grid is their product in "ij" order). ``kappa`` bounds the
    maps' Lipschitz constant (it only sizes the grids: the law's spread after k steps is at
    most noise * sqrt(sum_j kappa^(2j))).
    """
    start = np.asarray(start, dtype=float)
    d = start.size
    h = noise / 2
    log_norm = d * math.log(noise * math.sqrt(2 * math.pi))
    var = noise**2
    centres = np.array([start - eta * g(start[None])[0] for g in grads])  # step 1: Gaussian
    axes = _axes(centres, noise, h)
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
    logs = [-0.5 * ((pts - c) ** 2).sum(-1) / var - log_norm for c in centres]
    for _ in range(steps - 1):
        phis = [pts - eta * g(pts) for g in grads]
        weights = [np.exp(lp - lp.max()) for lp in logs]
        centres = np.array([w @ ph / w.sum() for w, ph in zip(weights, phis, strict=True)])
        var = kappa**2 * var + noise**2
        axes = _axes(centres, math.sqrt(var), h)
        new = []
        for lp, ph in zip(logs, phis, strict=True):
            log_mass = lp + d * math.log(h)
            if d == 1:  # exact log-domain sum
                z = (axes[0][:, None] - ph[None, :, 0]) / noise
                new.append(logsumexp(log_mass[None, :] - 0.5 * z * z, axis=1) - log_norm)
            else:  # the kernel is a product over coordinates: matrix products
                new.append(_convolve_2d(log_mass, ph, axes, noise) - log_norm)
        logs = new
        pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
    return logs, h**d, axes


def test_banded_2d_convolution_is_the_log_domain_sum():
    """_convolve_2d against the direct log-domain sum over every source cell, with source
    masses spread over 2,000 nats (the old single-scale product dropped cells below 1e-40
    of the peak; no cell is dropped now)."""
    rng = np.random.default_rng(0)
    axes = [np.linspace(-3, 3, 13), np.linspace(-2, 4, 11)]
    ph = rng.uniform(-4, 4, size=(40, 2))
    log_mass = -np.linspace(0, 2000, 40)
    got = _convolve_2d(log_mass, ph, axes, 0.7)
    v = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
    z2 = (((v[:, None, :] - ph[None]) / 0.7) ** 2).sum(-1)
    want = logsumexp(log_mass[None, :] - 0.5 * z2, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    light = log_mass - 1500.0  # every cell far below any single-scale product's range
    np.testing.assert_allclose(_convolve_2d(light, ph, axes, 0.7), want - 1500.0, rtol=1e-12)


def renyi(lp, lq, lam, cell):
    ok = np.isfinite(lp) & np.isfinite(lq)
    return float(logsumexp(lam * lp[ok] + (1 - lam) * lq[ok]) + math.log(cell)) / (lam - 1)


def mass(lp, cell):
    return math.exp(logsumexp(lp[np.isfinite(lp)]) + math.log(cell))


def sampler_for(eta, steps, prec, noise=None):
    """A Langevin schedule dict with a hand-picked step and number of steps."""
    noise = math.sqrt(2 * eta) if noise is None else noise
    return {"algorithm": "langevin", "step": eta, "steps": steps, "start": 0.0,
            "noise": noise, "prec": prec, "capped": False}  # fmt: skip


def ratios(u, u_nb, r, prec, sampler, start, c, cert_noise=None):
    """Exact D_lam (both directions) over the certificate, for each order in ORDERS."""
    n = u.shape[0]
    eta, noise, steps = sampler["step"], sampler["noise"], sampler["steps"]
    kappa = 1 - eta * prec
    # the certificate's first-step bound holds from the start 0 only: describe the start run
    fill = float(start[0]) if np.all(np.asarray(start) == start[0]) else math.nan
    cert_sampler = dict(sampler, noise=cert_noise or noise, start=fill)
    rho = langevin.certificate(cert_sampler, n, r, c)
    (lp, lq), cell, _ = exact_laws(
        [logistic_grad(u, r, prec), logistic_grad(u_nb, r, prec)], start, eta, noise, steps, kappa
    )
    assert abs(mass(lp, cell) - 1) < 1e-9 and abs(mass(lq, cell) - 1) < 1e-9
    out = []
    for lam in ORDERS:
        exact = max(renyi(lp, lq, lam, cell), renyi(lq, lp, lam, cell))
        out.append(exact / float(langevin.curve(lam, rho)))
    return out


# -- the pipeline is exact where Theorem 1 is attained ------------------------------------
@pytest.mark.parametrize("d", [1, 2])
def test_exact_law_attains_theorem_1_on_a_quadratic(d):
    """U_D = mu/2 |w|^2, U_D' = U_D - g.w with |g| = s / eta: both laws Gaussian, and
    D_lam equals the bound exactly (docs/langevin.md, Tightness)."""
    mu, eta, steps = 0.3, 1.2, 6
    g = np.zeros(d)
    g[-1] = 0.4
    grads = [lambda w: mu * w, lambda w: mu * w - g]
    kappa, noise, s = 1 - eta * mu, math.sqrt(2 * eta), eta * 0.4
    (lp, lq), cell, _ = exact_laws(grads, np.zeros(d), eta, noise, steps, kappa)
    factor = (1 + kappa) * (1 - kappa**steps) / ((1 - kappa) * (1 + kappa**steps))
    for lam in ORDERS:
        bound = lam * s * s / (2 * noise**2) * factor
        assert renyi(lp, lq, lam, cell) == pytest.approx(bound, rel=1e-9)
    # the mutant with half the noise variance has twice the divergence: over the bound
    (lp, lq), cell, _ = exact_laws(grads, np.zeros(d), eta, noise / math.sqrt(2), steps, kappa)
    assert renyi(lp, lq, 2.0, cell) == pytest.approx(2 * 2.0 * s * s / (2 * noise**2) * factor)


# -- the certificate against the exact divergence --------------------------------------------
def _pairs_1d(rng, n, c):
    """Data sets u = y x in [-c, c] and replacements of record 0 that look worst: a row of
    norm c with its label flipped, its direction reversed, a tiny margin against -c (the
    1-D supremum of the gradient difference), and a random one."""
    out = []
    for kind in ("random", "same", "tiny"):
        if kind == "random":
            u = rng.uniform(-c, c, (n, 1))
        elif kind == "same":
            u = np.full((n, 1), c)  # every record the same, at full norm
        else:
            u = np.concatenate([[[0.1 * c]], rng.uniform(-c, c, (n - 1, 1))])
        for nb in (-c, -u[0, 0], c * np.sign(u[0, 0]) * -1, rng.uniform(-c, c)):
            u_nb = u.copy()
            u_nb[0, 0] = nb
            out.append((u, u_nb))
    return out


def test_certificate_bounds_exact_divergence_1d():
    rng = np.random.default_rng(0)
    c, worst = 1.0, 0.0
    settings = [  # (n, beta, r, step scale h, K)
        (3, 0.2, 1.0, 0.5, 1),
        (3, 0.2, 1.0, 1.0, 4),
        (8, 0.05, 0.5, 0.5, 12),
        (8, 0.05, 1.0, 1.0, 40),
        (5, 0.5, 0.3, 0.5, 25),
    ]
    for n, beta, r, h, steps in settings:
        base = langevin.schedule(n, beta, c * (1 + 1e-12), r, 1.0, h)
        sampler = dict(base, steps=steps)
        for u, u_nb in _pairs_1d(rng, n, c):
            got = ratios(u, u_nb, r, base["prec"], sampler, [0.0], c * (1 + 1e-12))
            assert max(got) <= 1.0, (n, beta, r, h, steps, u[:, 0], u_nb[0, 0], got)
            worst = max(worst, *got)
    print(f"1-D: largest exact D_lam / certificate = {worst:.4f}")
    assert worst > 0.1  # the comparison is not vacuous


def test_certificate_bounds_exact_divergence_2d():
    """Start 0 (the mechanism) and a far start, where both replaced records are
    misclassified by a wide margin and the others saturated: the logistic chain is then
    almost the quadratic case, and the exact divergence reaches 99% of the bound."""
    c = 1.0 * (1 + 1e-12)
    rng = np.random.default_rng(1)
    worst = {}
    n, beta, r = 10, 0.05, 0.5
    sched = langevin.schedule(n, beta, c, r, 1.0, 0.5)
    prec = sched["prec"]
    delta = 0.1
    far_u = np.array([-delta, math.sqrt(1 - delta**2)])
    others = np.tile([1.0, 0.0], (n - 1, 1))
    far = (np.vstack([far_u, others]), np.vstack([far_u * [1, -1], others]), [400.0, 0.0])
    x = rng.normal(size=(n, 2))
    x *= (rng.uniform(0.3, 1.0, n) / np.linalg.norm(x, axis=1))[:, None]
    u = x * rng.choice([-1.0, 1.0], n)[:, None]
    flips = [u.copy() for _ in range(3)]
    flips[0][0] = -u[0] / np.linalg.norm(u[0])  # direction reversed at norm c
    flips[1][0] = u[0, ::-1] * [1, -1] / np.linalg.norm(u[0])  # orthogonal, norm c
    flips[2][0] = rng.normal(size=2) * 0.4
    cases = [("far", *far)] + [("zero", u, f, [0.0, 0.0]) for f in flips]
    for steps in (1, 4):
        sampler = dict(sched, steps=steps)
        for name, a, b, start in cases:
            got = ratios(a, b, r, prec, sampler, start, c)
            assert max(got) <= 1.0, (name, steps, got)
            worst[name] = max(worst.get(name, 0.0), *got)
    print(f"2-D: largest exact D_lam / certificate = {worst}")
    assert worst["far"] > 0.98  # nearly attained: the certificate is tight for logistic loss


def test_mutants_fail_the_check():
    """The check has power: half the noise variance, or a certificate with the gradient
    sensitivity r c instead of 2 r c, is exceeded by the exact divergence."""
    c = 1.0
    n, beta, r = 10, 0.05, 0.5
    sched = dict(langevin.schedule(n, beta, c, r, 1.0, 0.5), steps=4)
    delta = 0.1
    far_u = np.array([-delta, math.sqrt(1 - delta**2)])
    others = np.tile([1.0, 0.0], (n - 1, 1))
    a, b = np.vstack([far_u, others]), np.vstack([far_u * [1, -1], others])
    half = dict(sched, noise=sched["noise"] / math.sqrt(2))  # runs with half the variance
    got = ratios(a, b, r, sched["prec"], half, [400.0, 0.0], c, cert_noise=sched["noise"])
    assert min(got) > 1.5
    # sensitivity r c: the certificate of r/2 with 2 r c is the same number
    got = ratios(a, b, r, sched["prec"], sched, [400.0, 0.0], c / 2)
    assert min(got) > 3.0


def test_first_step_bound_is_attained_and_its_mutant_fails():
    """From the start 0 the first gradient difference is r (u' - u) / 2, at most r c
    (docs/langevin.md §4): at K = 1, u = c against u' = -c in 1-D, the exact divergence IS
    the certificate (s0 = s / 2), for the no-pull utility run (prec 0) and with a pull; a
    family that claims s0 = s / 4 is exceeded 4-fold, and one more step (K = 2) stays under."""

    class Mutant(type(langevin.BINARY_LOGISTIC)):
        def start_sensitivity_sq(self, c):
            return F(c) ** 2 / 4

    c, n, beta, r = 1.0, 3, 0.2, 1.0
    u = np.full((n, 1), c)
    u_nb = u.copy()
    u_nb[0, 0] = -c
    for kind in ("utility", "stationary"):
        base = langevin.schedule(n, beta, c, r, 1.0, kind=kind)
        for steps in (1, 2):
            s = dict(base, steps=steps)
            kappa = 1 - s["step"] * s["prec"]
            (lp, lq), cell, _ = exact_laws(
                [logistic_grad(u, r, s["prec"]), logistic_grad(u_nb, r, s["prec"])],
                [0.0], s["step"], s["noise"], steps, kappa,
            )  # fmt: skip
            rho, bad = (langevin.certificate(s, n, r, c, fam) for fam in (None, Mutant()))
            for lam in ORDERS:
                exact = renyi(lp, lq, lam, cell)
                assert exact <= lam * rho * (1 + 1e-9), (kind, steps, lam)
                if steps == 1:
                    assert exact == pytest.approx(lam * rho, rel=1e-6)  # attained
                    assert exact > 3.9 * lam * bad  # the mutant is exceeded 4-fold
    # a nonzero start gets no first-step credit: the sampler says where it starts
    s = dict(langevin.schedule(n, beta, c, r, 1.0, kind="utility"), steps=3)
    assert langevin.certificate(dict(s, start=0.5), n, r, c) > langevin.certificate(s, n, r, c)


def test_contraction_condition_is_exact_and_enforced():
    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(rng.integers(1, 10**7))
        beta, c, r, m = 10 ** rng.uniform(-6, 1), 10 ** rng.uniform(-2, 1), *rng.uniform(0.01, 1, 2)
        s = langevin.schedule(n, beta, c, r, m, float(rng.choice([0.5, 1.0])))
        lhs = F(s["step"]) * (2 * F(s["prec"]) + F(r) * n * F(c) ** 2 / 4)
        assert lhs <= 2 and s["noise"] > 0 and 1 <= s["steps"] <= langevin.MAX_STEPS
        langevin.certificate(s, n, r, c)  # accepted
    bad = dict(s, step=s["step"] * 2.01)
    with pytest.raises(ValueError, match="contraction condition"):
        langevin.certificate(bad, n, r, c)
    for broken in ({"step": -1.0}, {"steps": 0}, {"steps": 2.5}, {"noise": 0.0}):
        with pytest.raises(ValueError):
            langevin.certificate(dict(s, **broken), n, r, c)


# -- the sampler's output law ----------------------------------------------------------------
def _toy(n=6, d=1, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    y = np.where(rng.random(n) < expit(2 * x.sum(1)), 1.0, -1.0)
    return x, y


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_sampler_output_matches_the_exact_law(method):
    """Moments and the whole distribution (KS) of 40,000 released draws against the
    convolution's law; the same chains with half the noise variance are rejected.

    The law after K steps is the Gaussian mixture sum_j m_j N(phi(w_j), noise^2) over the
    grid cells w_j of the law after K - 1 steps: its CDF and moments are exact sums."""
    x, y = _toy(n=6)
    model = BayesianLogisticRegression(beta=0.2, backend="langevin", schedule="stationary")
    cal = pb.calibrate(model, 6, 2.0, 0.5, method)
    s = cal.sampler
    assert s["steps"] >= 2
    grad = logistic_grad(x * y[:, None], cal.r, s["prec"])
    kappa = 1 - s["step"] * s["prec"]
    (lp,), cell, (grid,) = exact_laws([grad], [0.0], s["step"], s["noise"], s["steps"] - 1, kappa)
    m = np.exp(lp) * cell
    assert abs(m.sum() - 1) < 1e-9
    phi = grid - s["step"] * grad(grid[:, None])[:, 0]
    sd = s["noise"]
    mean = float(m @ phi)
    var = float(m @ (phi - mean) ** 2) + sd**2
    m4 = float(m @ ((phi - mean) ** 4 + 6 * (phi - mean) ** 2 * sd**2)) + 3 * sd**4

    def cdf(v):
        return stats.norm.cdf((np.asarray(v)[:, None] - phi[None, :]) / sd) @ m

    k = 40_000
    draws = pb.sample(model, (x, y), 2.0, 0.5 * k, method, size=k, rng=3).value[:, 0]
    assert abs(draws.mean() - mean) < 4.5 * math.sqrt(var / k)
    assert abs(draws.var() - var) < 4.5 * math.sqrt((m4 - var**2) / k)
    assert stats.kstest(draws, cdf).pvalue > 1e-3
    half = dict(s, noise=s["noise"] / math.sqrt(2))
    mutant = langevin.run_chains(x, y, cal.r, half, k, np.random.default_rng(4))[:, 0]
    assert stats.kstest(mutant, cdf).pvalue < 1e-8


def test_two_dimensional_moments_match_the_exact_law():
    x, y = _toy(n=8, d=2, seed=5)
    model = BayesianLogisticRegression(beta=0.1, backend="langevin")
    cal = pb.calibrate(model, 8, 2.0, 1.0)
    s = cal.sampler
    grad = logistic_grad(x * y[:, None], cal.r, s["prec"])
    kappa = 1 - s["step"] * s["prec"]
    (lp,), cell, axes = exact_laws([grad], [0, 0], s["step"], s["noise"], s["steps"], kappa)
    prob = np.exp(lp) * cell
    assert abs(prob.sum() - 1) < 1e-9
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
    mean = prob @ pts
    cov = (pts - mean).T @ ((pts - mean) * prob[:, None])
    k = 20_000
    draws = pb.sample(model, (x, y), 2.0, k * 1.0, size=k, rng=7).value
    z = np.linalg.solve(np.linalg.cholesky(cov), draws.mean(0) - mean) * math.sqrt(k)
    assert np.all(np.abs(z) < 4.5)
    # sample covariance entries: standard error sqrt((S_ii S_jj + S_ij^2) / k) (near-Gaussian)
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / k)
    assert np.all(np.abs(np.cov(draws.T) - cov) < 4.5 * se)


def test_seeded_determinism_and_fresh_entropy():
    x, y = _toy(n=30, d=3, seed=1)
    model = BayesianLogisticRegression(beta=0.05, backend="langevin")
    a = pb.sample(model, (x, y), 2.0, 1.0, rng=42)
    b = pb.sample(model, (x, y), 2.0, 1.0, rng=42)
    np.testing.assert_array_equal(a.value, b.value)
    many = pb.sample(model, (x, y), 2.0, 8.0, size=8, rng=np.random.default_rng(42))
    assert many.value.shape == (8, 3) and len({tuple(v) for v in many.value}) == 8
    c = pb.sample(model, (x, y), 2.0, 1.0)  # OS entropy
    d = pb.sample(model, (x, y), 2.0, 1.0)
    assert not np.array_equal(c.value, d.value)


# -- calibration -------------------------------------------------------------------------
def _mp_bound(sampler, n, r, c, lam, start_sq=1):
    """The certificate at 60 digits from the doubles the sampler uses (independent of
    Fractions): the smaller of Theorem 1 and the first-step bound (docs/langevin.md §4;
    G0^2 = start_sq c^2, 1 for binary logistic), F(1, j) = j at prec = 0."""
    with mpmath.workdps(60):
        eta, noise, prec = (mpmath.mpf(sampler[k]) for k in ("step", "noise", "prec"))
        r, c = mpmath.mpf(r), mpmath.mpf(c)
        kappa = 1 - eta * prec
        steps = sampler["steps"]

        def spread(j):
            if j == 0:
                return mpmath.mpf(0)
            if kappa == 1:
                return mpmath.mpf(j)
            t = kappa**j
            return (1 + kappa) * (1 - t) / ((1 - kappa) * (1 + t))

        s2 = (2 * eta * r * c) ** 2
        s02 = start_sq * (eta * r * c) ** 2
        rho = min(s2 * spread(steps), s02 + s2 * spread(steps - 1)) / (2 * noise**2)
        return mpmath.mpf(lam) * rho


@pytest.mark.parametrize("schedule", ["utility", "stationary"])
@pytest.mark.parametrize(
    "n,beta,c,lam,eps,method",
    [
        (100, 0.01, 1.0, 2.0, 0.5, "diffused"),
        (100, 0.01, 1.0, 2.0, 0.5, "concentrated"),
        (30_162, 1e-3, 1.0, 2.0, 0.1, "diffused"),
        (10**6, 1e-4, 2.0, 8.0, 0.01, "concentrated"),
        (7, 1.0, 0.5, 1.5, 1e-6, "diffused"),
        (50, 0.1, 1.0, 1.01, 30.0, "direct"),
        (2**40, 1e-8, 1.0, 64.0, 1e-3, "diffused"),
    ],
)
def test_calibration_meets_the_target_against_mpmath(n, beta, c, lam, eps, method, schedule):
    model = BayesianLogisticRegression(beta=beta, c=c, backend="langevin", schedule=schedule)
    cal = pb.calibrate(model, n, lam, eps, method)
    assert cal.eps <= eps and cal.sampler["guarantee"] == "algorithm"
    exact = _mp_bound(cal.sampler, n, cal.r, model._c_cert(), lam)
    assert exact <= mpmath.mpf(cal.eps) <= exact * (1 + mpmath.mpf(2) ** -50)
    if schedule == "stationary":  # below the exact-posterior certificate at the same (r, m)
        post = 2 * lam * model._c_cert() ** 2 * cal.r**2 * cal.m / (n * beta)
        assert cal.eps < post
    knob = cal.m if method == "concentrated" else cal.r
    if method != "direct" and knob * (1 + 1e-9) <= 1 and cal.sampler["steps"] > 1:
        # the largest knob: a slightly larger one misses the target
        bigger = dict(diffused=(knob * (1 + 1e-9), 1.0), concentrated=(1.0, knob * (1 + 1e-9)))
        r2, m2 = bigger[method]
        assert float(model.rdp(n, lam, r2, m2, method)) > eps * (1 - 1e-8)
    np.testing.assert_array_equal(cal.rdp(lam), cal.eps)


def test_rdp_curve_of_the_algorithm():
    model = BayesianLogisticRegression(beta=0.01, backend="langevin", schedule="stationary")
    cal = pb.calibrate(model, 500, 2.0, 0.3)
    orders = np.array([1.0, 1.5, 2.0, 8.0, 64.0, np.inf])
    curve = cal.rdp(orders)
    rho = langevin.certificate(cal.sampler, 500, cal.r, model._c_cert())
    assert np.all(curve[:-1] >= orders[:-1] * rho) and np.isinf(curve[-1])
    np.testing.assert_allclose(curve[:-1], orders[:-1] * rho, rtol=1e-15)
    # the sampler parameters are what the curve is about: recomputed from the public rule
    np.testing.assert_array_equal(model.rdp(500, orders, cal.r, cal.m), curve)
    fewer = dict(cal.sampler, steps=3)
    assert model.rdp(500, 2.0, cal.r, sampler=fewer) < cal.eps  # fewer steps leak less


def test_steps_cap_and_public_schedule():
    stationary = {"backend": "langevin", "schedule": "stationary"}
    model = BayesianLogisticRegression(beta=1e-6, max_steps=50, **stationary)
    cal = pb.calibrate(model, 1000, 2.0, 1.0)
    assert cal.sampler["steps"] == 50 and cal.sampler["capped"]
    full = pb.calibrate(BayesianLogisticRegression(beta=1e-6, **stationary), 1000, 2.0, 1.0)
    assert full.r < cal.r  # fewer steps: a larger r for the same eps
    x, y = _toy(n=1000, d=2, seed=3)
    with pytest.warns(pb.StepCapWarning, match="far from the posterior") as record:
        rel = pb.sample(model, (x, y), 2.0, 1.0, rng=0)
    (cap,) = [w for w in record if w.category is pb.StepCapWarning]  # rng=0 may warn too
    assert issubclass(pb.StepCapWarning, UserWarning) and cap.filename == __file__
    text = str(cap.message)
    assert "larger beta" in text and "max_steps" in text and "certificate still holds" in text
    assert rel.diagnostics == {
        "backend": "langevin", "guarantee": "algorithm", "step": cal.sampler["step"],
        "steps": 50, "steps_capped": True, "schedule": "stationary", "chains": 1,
    }  # fmt: skip
    uncapped = BayesianLogisticRegression(beta=0.05, backend="langevin")
    assert not pb.calibrate(uncapped, 1000, 2.0, 1.0).sampler["capped"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", pb.StepCapWarning)
        pb.sample(uncapped, (x, y), 2.0, 1.0, rng=0)  # no warning when the cap is not hit


def test_infeasible_and_refused_before_anything_runs(tmp_path):
    x, y = _toy(n=40, d=2)
    model = BayesianLogisticRegression(beta=0.01, backend="langevin")
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=1e6, delta=1e-6)
    kw = dict(ledger=ledger, dataset="d")
    with pytest.raises(ValueError, match="method='ops' is not available with backend='langevin'"):
        pb.sample(model, (x, y), 2.0, 1.0, "ops", **kw)
    with pytest.raises(pb.InfeasiblePrivacyError, match="lam=inf") as err:
        pb.sample(model, (x, y), math.inf, 1.0, **kw)
    assert err.value.reachable == {"lam": "finite"}
    with pytest.raises(pb.InfeasiblePrivacyError, match="ask for eps >=") as err:
        pb.sample(model, (x, y), 2.0, 1e-3, "direct", **kw)
    assert err.value.reachable["min_eps"] > 1e-3
    with pytest.raises(pb.InfeasiblePrivacyError, match="eps=0"):
        pb.sample(model, (x, y), 2.0, 0.0, **kw)
    bad_x = x.copy()
    bad_x[3] *= 5
    with pytest.raises(ValueError, match="norm > c"):
        pb.sample(model, (bad_x, y), 2.0, 1.0, **kw)
    assert ledger.spent("d") == 0  # nothing charged
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="step_scale"):
            BayesianLogisticRegression(backend="langevin", step_scale=bad)
    for bad in (0, 2.5, True, 10**8):
        with pytest.raises(ValueError, match="max_steps"):
            BayesianLogisticRegression(backend="langevin", max_steps=bad)
    cal = pb.calibrate(model, 0, 2.0, 1.0)  # n = 0: nothing to protect
    assert cal.eps == 0 and cal.rdp(2.0) == 0


def test_release_and_ledger_charge_the_algorithm_curve(tmp_path):
    x, y = _toy(n=200, d=3, seed=2)
    model = BayesianLogisticRegression(beta=0.01, backend="langevin")
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps=100.0, delta=1e-6)
    rel = pb.sample(model, (x, y), 2.0, 2.0, size=4, rng=0, ledger=ledger, dataset="d")
    assert rel.value.shape == (4, 3) and rel.eps <= 2.0
    orders = np.array([1.5, 2.0, 8.0])
    np.testing.assert_array_equal(rel.rdp(orders), 4 * rel.calibration.rdp(orders))
    charged = ledger.status("d")[0]["charges"][0]
    assert " x4 backend=langevin [algorithm]" in charged["mechanism"]
    assert rel.calibration.sampler["steps"] >= 1 and rel.calibration.pair is None
    clf = pb.PrivateLogisticRegression(
        lam=2.0, eps=1.0, beta=0.01, backend="langevin", random_state=0
    ).fit(0.8 * x, (y > 0).astype(int))
    assert clf.calibration_.sampler["algorithm"] == "langevin"
