"""The peers of experiments/linear_regression.py (AdaSSP, naive SSP) against independent
truth, and the script end to end (--quick).

* sensitivities: brute force over adversarial and random neighbouring pairs (and that the
  add/remove values are too small under replace-one);
* calibration: delta(eps) of the composed Gaussian releases by quadrature of the privacy
  loss N(mu^2/2, mu^2) (not the closed form the code uses) meets the target, tightly;
* the noise actually added has the calibrated sd (sample sd over many releases);
* at large eps AdaSSP and naive SSP converge to OLS; the plug-in posterior with no noise is
  the exact conjugate posterior; data outside the bounds are refused.
"""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "experiments"))
from _linreg import data, ssp  # noqa: E402

DELTA = 1e-5


def _rows(rng, n, d, c=1.0):
    z = rng.standard_normal((n, d))
    return c * z / np.linalg.norm(z, axis=1, keepdims=True) * rng.uniform(0, 1, (n, 1))


def _upper(a):
    return a[np.triu_indices(a.shape[0])]


# -- sensitivities -----------------------------------------------------------------------------


@pytest.mark.parametrize("c, y_bound", [(1.0, 1.0), (0.5, 3.0), (2.0, 0.25)])
def test_sensitivities_by_brute_force(c, y_bound):
    rng = np.random.default_rng(0)
    d = 3
    sens = ssp.sensitivities(c, y_bound)
    # adversarial pairs: orthogonal axis rows (the upper-triangle maximum), opposite rows
    e = np.eye(d) * c
    xx_pair = _upper(np.outer(e[0], e[0]) - np.outer(e[1], e[1]))
    assert np.linalg.norm(xx_pair) == pytest.approx(sens["xx"], rel=1e-12)
    # (x, y) = (c e_0, y_bound) replaced by (-c e_0, y_bound)
    assert np.linalg.norm(e[0] * y_bound - (-e[0]) * y_bound) == pytest.approx(
        sens["xy"], rel=1e-12
    )
    worst = {"xx": 0.0, "xy": 0.0, "lam_min": 0.0}
    base = _rows(rng, 6, d, c)
    yb = rng.uniform(-y_bound, y_bound, 6)
    a0 = base.T @ base
    for _ in range(3000):
        x1, x2 = _rows(rng, 2, d, c)
        if rng.random() < 0.5:  # push to the sphere
            x1, x2 = c * x1 / np.linalg.norm(x1), c * x2 / np.linalg.norm(x2)
        y1, y2 = rng.choice([-y_bound, y_bound, rng.uniform(-y_bound, y_bound)], 2)
        worst["xx"] = max(worst["xx"], np.linalg.norm(_upper(np.outer(x1, x1) - np.outer(x2, x2))))
        worst["xy"] = max(worst["xy"], np.linalg.norm(x1 * y1 - x2 * y2))
        # replace record 0 of the data set by (x2, y2): lambda_min moves by <= c^2
        a1 = a0 - np.outer(base[0], base[0]) + np.outer(x2, x2)
        lam = abs(np.linalg.eigvalsh(a1)[0] - np.linalg.eigvalsh(a0)[0])
        worst["lam_min"] = max(worst["lam_min"], lam)
        base[0], yb[0], a0 = x2, y2, a1
    for key in worst:
        assert worst[key] <= sens[key] * (1 + 1e-12), key
    # the bounds are nearly attained by random search, and add/remove's values are exceeded
    assert worst["xx"] > 0.95 * sens["xx"] and worst["xx"] > c * c
    assert worst["xy"] > 0.95 * sens["xy"] and worst["xy"] > c * y_bound


# -- calibration -------------------------------------------------------------------------------


def _delta_by_quadrature(eps: float, mu: float) -> float:
    """delta(eps) = E[(1 - e^(eps - L))_+] with L ~ N(mu^2/2, mu^2), the privacy loss of
    mu-GDP (any composition of Gaussian mechanisms with sum of (Delta/sigma)^2 = mu^2)."""
    m, s = mu * mu / 2.0, mu

    def f(t):
        return (1.0 - math.exp(eps - t)) * math.exp(-((t - m) ** 2) / (2 * s * s))

    val, _ = integrate.quad(f, eps, m + 40 * s, limit=400, epsabs=1e-16, epsrel=1e-12)
    return val / (s * math.sqrt(2 * math.pi))


@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("which", ["adassp", "naive"])
def test_calibration_meets_eps_delta_by_quadrature(eps, which):
    sens = ssp.sensitivities(1.0, 3.0)
    parts = sens if which == "adassp" else {"xx": sens["xx"], "xy": sens["xy"]}
    sig = ssp.calibrate(eps, DELTA, parts)
    mu = math.sqrt(sum((parts[k] / sig[k]) ** 2 for k in parts))
    got = _delta_by_quadrature(eps, mu)
    assert got <= DELTA * (1 + 1e-6)
    assert got >= 0.999 * DELTA  # tight: no budget left on the table
    # each release gets the same share
    shares = [parts[k] / sig[k] for k in parts]
    assert max(shares) == pytest.approx(min(shares), rel=1e-9)
    assert ssp.verify(eps, DELTA, parts, sig) <= eps
    # 10% less noise would break the target
    mu_less = mu / 0.9
    assert _delta_by_quadrature(eps, mu_less) > DELTA


def test_noise_has_the_calibrated_sd():
    rng = np.random.default_rng(3)
    n, d, yb = 200, 3, 2.0
    x = _rows(rng, n, d)
    y = rng.uniform(-yb, yb, n)
    xx, xy = x.T @ x, x.T @ y
    dx, dy, lam = [], [], []
    for _ in range(4000):
        _, rel = ssp.naive_ssp(x, y, 1.0, DELTA, 1.0, yb, rng)
        dx.append(_upper(rel.xx - xx))
        dy.append(rel.xy - xy)
        _, rel_a = ssp.adassp(x, y, 1.0, DELTA, 1.0, yb, rng)
        lam.append(rel_a.lam_min)
    sig = rel.sigmas
    dx, dy = np.array(dx), np.array(dy)
    assert np.allclose(dx.std(axis=0), sig["xx"], rtol=0.06)
    assert np.allclose(dy.std(axis=0), sig["xy"], rtol=0.06)
    assert np.allclose(dx.mean(axis=0), 0, atol=4 * sig["xx"] / np.sqrt(len(dx)))
    # symmetric: the lower triangle mirrors the upper one
    assert np.allclose(rel.xx, rel.xx.T)
    # AdaSSP's released eigenvalue bound: max(lambda_min + N(0, s^2) - s sqrt(log(6/delta)), 0)
    s = rel_a.sigmas["lam_min"]
    lam_min = np.linalg.eigvalsh(xx)[0]
    shift = s * math.sqrt(math.log(6 / DELTA))
    expected_zero = stats.norm.cdf((shift - lam_min) / s)
    assert np.mean(np.array(lam) == 0.0) == pytest.approx(expected_zero, abs=0.03)


# -- limits ------------------------------------------------------------------------------------


def test_large_eps_gives_ols():
    rng = np.random.default_rng(5)
    n, d, yb = 3000, 4, 3.0
    x = _rows(rng, n, d)
    w = np.array([1.0, -2.0, 0.5, 0.0])
    y = np.clip(x @ w + 0.3 * rng.standard_normal(n), -yb, yb)
    ols = np.linalg.lstsq(x, y, rcond=None)[0]
    for eps, tol in ((1e3, 5e-2), (1e5, 1e-3)):
        wa, rel = ssp.adassp(x, y, eps, DELTA, 1.0, yb, rng)
        wn, _ = ssp.naive_ssp(x, y, eps, DELTA, 1.0, yb, rng)
        assert rel.ridge == 0.0  # lambda_min of this design exceeds the noise's reach
        assert np.abs(wa - ols).max() < tol and np.abs(wn - ols).max() < tol
    # at small eps AdaSSP regularises (ridge > 0) and does not blow up like naive SSP can
    wa, rel = ssp.adassp(x, y, 0.1, DELTA, 1.0, yb, rng)
    assert rel.ridge > 0 and np.all(np.isfinite(wa))


def test_plugin_posterior_without_noise_is_the_conjugate_one():
    rng = np.random.default_rng(7)
    x = _rows(rng, 100, 3)
    y = x @ np.array([1.0, 0.0, -1.0]) + 0.2 * rng.standard_normal(100)
    rel = ssp.Released(x.T @ x, x.T @ y, {}, 0.0)
    m1, c1 = ssp.plugin_posterior(rel, 2.0, 0.2)
    m2, c2 = ssp.conjugate_posterior(x, y, 2.0, 0.2)
    np.testing.assert_allclose(m1, m2, rtol=1e-9)
    np.testing.assert_allclose(c1, c2, rtol=1e-9)
    lo, hi = ssp.normal_interval(m2, c2, 0.9)
    np.testing.assert_allclose((hi - lo) / 2, 1.6448536269514722 * np.sqrt(np.diag(c2)))


def test_out_of_bounds_data_are_refused():
    rng = np.random.default_rng(0)
    x = np.array([[0.8, 0.8]])  # norm 1.13 > c = 1
    with pytest.raises(ValueError, match="norm"):
        ssp.adassp(x, np.array([0.0]), 1.0, DELTA, 1.0, 1.0, rng)
    with pytest.raises(ValueError, match="y_bound"):
        ssp.naive_ssp(np.array([[0.5, 0.0]]), np.array([2.0]), 1.0, DELTA, 1.0, 1.0, rng)
    with pytest.raises(ValueError, match="finite"):
        ssp.naive_ssp(np.array([[np.nan, 0.0]]), np.array([0.0]), 1.0, DELTA, 1.0, 1.0, rng)


def test_synthetic_design_respects_its_bounds():
    rng = np.random.default_rng(2)
    des = data.synthetic(rng, 500, 5, 1.0, 0.5, math.sqrt(5) + 3, n_test=100)
    assert np.linalg.norm(des.xtr, axis=1).max() <= 1.0
    assert np.abs(np.concatenate([des.ytr, des.yte])).max() <= des.y_bound
    assert des.w.shape == (5,) and des.xte.shape == (100, 5)


# -- the script end to end ---------------------------------------------------------------------


def test_linear_regression_quick(tmp_path):
    """The script end to end on its synthetic design (no data files, no diffprivlib: the
    peers study's smoke test covers that bridge), then --report-only from the saved CSVs."""
    cmd = [
        sys.executable, str(ROOT / "experiments" / "linear_regression.py"), "--quick",
        "--out", str(tmp_path), "--no-progress", "--jobs", "1", "--datasets", "synthetic",
        "--methods", "noise-aware,diffused,adassp,naive-ssp", "--coverage-trials", "4",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with (tmp_path / "linear_regression.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["method"] for r in rows} == {"ols", "bayes", "noise-aware", "diffused", "adassp",
                                           "naive-ssp"}  # fmt: skip
    for r in rows:
        if r["eps_dp"]:
            assert float(r["eps_dp"]) <= float(r["eps"])
    ols = [float(r["r2"]) for r in rows if r["method"] == "ols"]
    assert all(0.0 < v < 1.0 for v in ols)
    with (tmp_path / "linear_regression_coverage.csv").open() as f:
        cov = list(csv.DictReader(f))
    assert {r["method"] for r in cov} == {"noise-aware", "diffused", "naive-plugin", "non-private"}
    assert all(r["covered"] in ("0", "1") for r in cov if r["status"] == "ok")
    report = (tmp_path / "REPORT.md").read_text()
    assert report.count("<!-- BEGIN linear_regression -->") == 1
    assert "Bayesian linear regression against its peers" in report
    assert "Coverage of 90% intervals" in report and "Discussion" in report
    pngs = sorted(tmp_path.glob("linear_regression_*.png"))
    assert len(pngs) == 2 and all(f"]({p.name})" in report for p in pngs)
    before = report
    proc = subprocess.run(cmd + ["--report-only"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = (tmp_path / "REPORT.md").read_text()
    strip = [line for line in before.splitlines() if "wall with" not in line]
    assert strip == [line for line in after.splitlines() if "wall with" not in line]
