"""The experiment scripts: --quick end to end into a tmp dir, plus their building blocks."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privbayes as pb
from privbayes import datasets

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
sys.path.insert(0, str(EXPERIMENTS))
import _common as C  # noqa: E402
import beta_bernoulli  # noqa: E402


def _have(*files: tuple[str, str]) -> bool:
    try:
        for dataset, name in files:
            datasets.find_data_file(dataset, name)
    except FileNotFoundError:
        return False
    return True


ADULT = _have(("adult", "adult.data"), ("adult", "adult.test"))
ALL_DATA = ADULT and _have(
    ("abalone", "abalone.data"),
    *[
        ("mnist", f"{p}-{k}-idx{i}-ubyte.gz")
        for p in ("train", "t10k")
        for k, i in (("images", 3), ("labels", 1))
    ],
)


def _run(script: str, out: Path, *extra: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXPERIMENTS / script), "--quick", "--out", str(out), "--no-progress"]
        + list(extra),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _check_outputs(out: Path, name: str, columns: list[str], methods: set[str]) -> list[dict]:
    with (out / f"{name}.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == columns
        rows = list(reader)
    assert rows and {r["method"] for r in rows} == methods
    pngs = sorted(out.glob(f"{name}_*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    report = (out / "REPORT.md").read_text()
    assert report.count(f"<!-- BEGIN {name} -->") == 1 and report.count(f"<!-- END {name} -->") == 1
    for p in pngs:
        assert f"]({p.name})" in report
    assert "Discussion" in report or name == "logistic_regression"
    return rows


def test_beta_bernoulli_quick(tmp_path):
    _run("beta_bernoulli.py", tmp_path)
    rows = _check_outputs(
        tmp_path,
        "beta_bernoulli",
        "method p n lam eps trial k estimate knob".split(),
        {"diffused", "concentrated", "noisy-stats", "non-private"},
    )
    est = np.array([float(r["estimate"]) for r in rows])
    assert ((est >= 0) & (est <= 1)).all()


def test_gamma_poisson_quick(tmp_path):
    _run("gamma_poisson.py", tmp_path)
    rows = _check_outputs(
        tmp_path,
        "gamma_poisson",
        "method rate n lam eps trial sum estimate knob".split(),
        {"diffused", "concentrated", "noisy-stats", "non-private"},
    )
    est = np.array([float(r["estimate"]) for r in rows])
    assert (est >= 0).all() and np.isfinite(est).all()
    assert all(0 <= int(r["sum"]) <= 10 * int(r["n"]) for r in rows)


def test_normal_mean_quick(tmp_path):
    _run("normal_mean.py", tmp_path)
    rows = _check_outputs(
        tmp_path,
        "normal_mean",
        "method mean n lam eps trial xbar estimate knob".split(),
        {"diffused", "concentrated", "noisy-stats", "non-private"},
    )
    assert np.isfinite([float(r["estimate"]) for r in rows]).all()


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_vectorised_gamma_and_normal_releases_are_the_library_release(method):
    gamma = pb.GammaPoisson(1.0, 2.0, 5)
    counts = np.array([0, 3, 5, 1, 2, 0, 4])
    normal = pb.NormalKnownVariance(0.5, 2.0, 1.0, -3.0, 3.0)
    x = np.linspace(-3, 3, 7) ** 3 / 9
    for seed in range(5):
        ours, cal = C.gamma_release(gamma, 7, 3.0, 0.2, method, [15.0], np.random.default_rng(seed))
        lib = pb.sample(gamma, counts, 3.0, 0.2, method, rng=np.random.default_rng(seed))
        assert ours[0] == lib.value and cal.eps == lib.eps
        s_c = normal._statistics(x)[0]
        ours, cal = C.normal_release(
            normal, 7, 3.0, 0.2, method, [s_c], np.random.default_rng(seed)
        )
        lib = pb.sample(normal, x, 3.0, 0.2, method, rng=np.random.default_rng(seed))
        assert ours[0] == lib.value and cal.eps == lib.eps


def test_noise_aware_quick(tmp_path):
    """The noise-aware study end to end (its Adult design only where the files are)."""
    stdout = _run("noise_aware.py", tmp_path)
    rows = _check_outputs(
        tmp_path,
        "noise_aware",
        "design model quantity truth n lam eps method k trials coverage width error".split(),
        {"noise-aware", "naive", "diffused", "concentrated", "non-private"},
    )
    designs = {r["design"] for r in rows}
    assert {"grid", "calibration"} <= designs and (("adult" in designs) == ADULT)
    if not ADULT:
        assert "Adult files not found" in stdout
    for r in rows:
        if r["coverage"] not in ("", "nan"):
            assert 0 <= float(r["coverage"]) <= 1
        assert float(r["error"]) >= 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "**Width**" in report and "**Calibration**" in report and "Discussion" in report


@pytest.mark.skipif(not ADULT, reason="Adult files not available (see data/README.md)")
def test_statistical_query_quick(tmp_path):
    _run("statistical_query.py", tmp_path)
    _check_outputs(
        tmp_path,
        "statistical_query",
        "query method n lam eps trial answer estimate knob".split(),
        {"diffused", "concentrated", "gaussian", "non-private"},
    )


@pytest.mark.skipif(not ALL_DATA, reason="Abalone/Adult/MNIST files not available (data/README.md)")
def test_logistic_regression_quick(tmp_path):
    _run("logistic_regression.py", tmp_path)
    rows = _check_outputs(
        tmp_path,
        "logistic_regression",
        (
            "dataset method requested backend guarantee n d lam eps trial accuracy knob "
            "eps_certified seconds status"
        ).split(),
        {"diffused", "concentrated", "ops", "non-private", "map", "majority-class"},
    )
    assert {r["dataset"] for r in rows} == {"abalone", "adult", "mnist"}
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok, "every release failed"
    for r in ok:
        assert 0 <= float(r["accuracy"]) <= 1
        if r["eps_certified"]:
            assert float(r["eps_certified"]) <= float(r["eps"])
    # every release names its back-end and guarantee; auto uses the certified ones, and OPS
    # leaves the exact back-end only where the public feasibility check refuses it
    guarantee = {"exact": "exact", "langevin": "algorithm", "imh": "approximate"}
    model = pb.BayesianLogisticRegression(1e-3, 1.0)
    for r in rows:
        if r["method"] in ("map", "majority-class"):
            assert r["backend"] == r["guarantee"] == ""
            continue
        assert r["requested"] == "auto" and r["guarantee"] == guarantee[r["backend"]]
        if r["method"] == "ops":
            n, d, lam, eps = int(r["n"]), int(r["d"]), float(r["lam"]), float(r["eps"])
            try:
                pb.calibrate(model, n, lam, eps, "ops", d=d)
            except pb.InfeasiblePrivacyError:
                assert r["backend"] == "imh"
            else:
                assert r["backend"] == "exact"
        elif r["method"] != "non-private":
            assert r["backend"] in ("exact", "langevin")
    report = (tmp_path / "REPORT.md").read_text()
    section = report[report.index("<!-- BEGIN logistic_regression") :]
    table = [  # the accuracy table's release rows (the timing table has no "±")
        ln
        for ln in section.splitlines()
        if "±" in ln and any(f" | {m} | " in ln for m in ("diffused", "ops"))
    ]
    assert len(table) == 6 and all(
        any(f"[{g}]" in ln for g in ("exact", "algorithm", "approximate")) for ln in table
    )


MNIST = _have(
    *[
        ("mnist", f"{p}-{k}-idx{i}-ubyte.gz")
        for p in ("train", "t10k")
        for k, i in (("images", 3), ("labels", 1))
    ]
)


@pytest.mark.skipif(not MNIST, reason="MNIST files not available (data/README.md)")
def test_mnist_multiclass_quick(tmp_path):
    _run("mnist_multiclass.py", tmp_path)
    rows = _check_outputs(
        tmp_path,
        "mnist_multiclass",
        "trial method lam eps certified_eps r m steps accuracy seconds".split(),
        {"diffused", "concentrated", "nonprivate", "map"},
    )
    for r in rows:
        assert 0.1 < float(r["accuracy"]) <= 1  # ten classes: chance is 0.1
        if r["method"] in ("diffused", "concentrated"):
            assert float(r["certified_eps"]) <= float(r["eps"])


def test_report_sections_are_replaced(tmp_path):
    report = tmp_path / "REPORT.md"
    C.replace_report_section(report, "a", "## A\nfirst")
    C.replace_report_section(report, "b", "## B\nonly")
    C.replace_report_section(report, "a", "## A\nsecond")
    text = report.read_text()
    assert text.startswith(C.REPORT_TITLE)
    assert text.count("<!-- BEGIN a -->") == 1 and "second" in text and "first" not in text
    assert text.index("## A") < text.index("## B")  # kept in place


def test_results_do_not_depend_on_jobs():
    grid = np.array([0.1, 1.0])
    tasks = [(i, 7, 0.3, n, 2.0, grid, 20, (1.0, 1.0)) for i, n in enumerate((10, 100, 1000))]
    one = C.run_tasks(beta_bernoulli.run_task, tasks, 1, "t", progress=False)
    two = C.run_tasks(beta_bernoulli.run_task, tasks, 2, "t", progress=False)
    for a, b in zip(one, two, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_vectorised_release_is_the_library_release(method):
    """The scripts calibrate once and draw per trial; each draw equals pb.sample's."""
    model = pb.BetaBernoulli(1.0, 2.0)
    data = np.r_[np.ones(7), np.zeros(43)]
    for seed in range(5):
        ours, cal = C.beta_release(model, 50, 3.0, 0.2, method, [7.0], np.random.default_rng(seed))
        lib = pb.sample(model, data, 3.0, 0.2, method, rng=np.random.default_rng(seed))
        assert ours[0] == pytest.approx(lib.value, rel=1e-12) and cal.eps == lib.eps
        values = np.linspace(0, 1, 50) ** 2  # a statistical query with a fractional sum
        ours, _ = C.beta_release(
            pb.models.MeanQuery(), 50, 3.0, 0.2, method, [values.sum()], np.random.default_rng(seed)
        )
        lib = pb.release_query(values, 3.0, 0.2, method=method, rng=np.random.default_rng(seed))
        assert ours[0] == pytest.approx(lib.value, rel=1e-12)


def test_gaussian_sigma_meets_eps():
    from privbayes.accounting.curves import gaussian_rdp

    for lam, eps, sens in [(2.0, 0.01, 1.0), (8.0, 10.0, 1e-4), (1.5, 0.3, 0.5)]:
        s = C.gaussian_sigma(lam, eps, sens)
        assert float(gaussian_rdp(lam, s, sens)) <= eps
        assert s == pytest.approx(sens * np.sqrt(lam / (2 * eps)), rel=1e-12)


def test_seeding_is_per_task():
    a = C.task_rng(1, 3).random(4)
    np.testing.assert_array_equal(a, C.task_rng(1, 3).random(4))
    assert not np.array_equal(a, C.task_rng(1, 4).random(4))
    assert not np.array_equal(a, C.task_rng(2, 3).random(4))


@pytest.mark.skipif(not ALL_DATA, reason="Abalone/Adult/MNIST files not available (data/README.md)")
def test_peers_quick(tmp_path):
    """The peers study end to end (diffprivlib's rows only where an interpreter has it)."""
    from _peers import bridge

    stdout = _run("peers.py", tmp_path)
    dpl = bridge.find_python()[0] is not None
    if not dpl:
        assert "diffprivlib unavailable" in stdout
    peers_ = {"dpgd", "objpert"} | ({"diffprivlib", "diffprivlib-default"} if dpl else set())
    with (tmp_path / "peers_logistic.csv").open() as f:
        reader = csv.DictReader(f)
        assert (
            reader.fieldnames
            == (
                "dataset method backend guarantee n d eps delta trial accuracy knob lam eps_rdp "
                "eps_dp seconds status detail"
            ).split()
        )
        rows = list(reader)
    expected = {"diffused", "concentrated", "ops", "map", "majority-class"} | peers_
    assert {r["method"] for r in rows} == expected
    pngs = sorted(tmp_path.glob("peers_*.png"))
    assert len(pngs) == 3 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    report = (tmp_path / "REPORT.md").read_text()
    assert report.count("<!-- BEGIN peers -->") == 1 and report.count("<!-- END peers -->") == 1
    assert all(f"]({p.name})" in report for p in pngs)
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(0 <= float(r["accuracy"]) <= 1 for r in ok)
    for r in rows:
        if r["eps_dp"]:  # every certified (eps, delta) within its target
            assert float(r["eps_dp"]) <= float(r["eps"])
        if r["method"] in ("diffused", "concentrated", "ops"):
            assert r["guarantee"] == "approximate" and r["backend"] == "imh"
    with (tmp_path / "peers_counts.csv").open() as f:
        counts = list(csv.DictReader(f))
    methods = {r["method"] for r in counts}
    assert {"diffused", "concentrated", "laplace", "gaussian", "noisy-stats"} <= methods
    assert ("diffprivlib" in methods) == dpl
    assert all(float(r["error"]) >= 0 for r in counts)
    assert "minus each peer" in report and "Winner per cell" in report and "Discussion" in report
    # --report-only redraws the same section from the saved results
    before = report
    _run("peers.py", tmp_path, "--report-only")
    assert (tmp_path / "REPORT.md").read_text() == before


def test_langevin_family_certificate_and_noise():
    """experiments/langevin_family.py: its b = 0 charge is the K-fold Gaussian composition
    (DP-GD's, experiments/_peers/dpgd.py) with the first step charged a quarter, the b > 0
    charge is the product's certificate and approaches it from below as b -> 0, and the
    noise it solves for meets the budget, 1e-9 less does not."""
    import langevin_family as F
    from _peers import dpgd

    n, steps, eta_d, rho = 2924, 40, 4.0, 2e-4
    sigma = F.noise_for(n, steps, eta_d, 0.0, rho)
    assert F.certified_rho(n, steps, eta_d, sigma, 0.0) <= rho
    assert F.certified_rho(n, steps, eta_d, sigma * (1 - 1e-9), 0.0) > rho
    sd = dpgd.noise_sigma(rho, steps, n, 1.0)  # DP-GD's noise on the mean gradient
    shrink = math.sqrt((steps - 0.75) / steps)  # the first step's quarter charge
    assert sigma / eta_d == pytest.approx(sd * shrink, rel=1e-9)  # c slack 1e-12
    composed = F.certified_rho(n, steps, eta_d, sigma, 0.0)
    shrunk = [F.certified_rho(n, steps, eta_d, sigma, b) for b in (1e-2, 1e-4, 1e-7)]
    assert shrunk[0] < shrunk[1] < shrunk[2] <= composed * (1 + 1e-9)
    assert shrunk[2] == pytest.approx(composed, rel=1e-5)
    sigma_b = F.noise_for(n, steps, eta_d, 1e-2, rho)
    assert (
        F.certified_rho(n, steps, eta_d, sigma_b, 1e-2)
        <= rho
        < F.certified_rho(n, steps, eta_d, sigma_b * (1 - 1e-9), 1e-2)
    )
    assert sigma_b < sigma  # the shrink's contraction buys less noise
    # the b = 0 charge is rounded up from the exact rational of the doubles the run uses
    from fractions import Fraction

    sampler, r = F.sampler_of(n, steps, eta_d, sigma, 0.0)
    s = Fraction(sampler["step"]) * Fraction(r) * 2 * Fraction(F.C_BOUND * F.SLACK)
    exact = (steps - Fraction(3, 4)) * s * s / (2 * Fraction(sigma) ** 2)
    assert exact <= Fraction(F.certified_rho(n, steps, eta_d, sigma, 0.0)) <= exact * (1 + 2**-50)
    with pytest.raises(ValueError, match="no noise"):
        F.noise_for(n, steps, eta_d, 0.0, 1e-40)  # beyond the bracket: refused, not returned
    # the run is the product's sampler: seeded, deterministic, shape (d,)
    x = np.random.default_rng(0).normal(size=(50, 3)) / 4
    y = (x[:, 0] > 0).astype(float)
    w = F.run(x, y, 5, eta_d, 0.1, 1e-3, np.random.default_rng(1))
    assert w.shape == (3,)
    np.testing.assert_array_equal(w, F.run(x, y, 5, eta_d, 0.1, 1e-3, np.random.default_rng(1)))
    u, rng, v = x * np.where(y > 0.5, 1.0, -1.0)[:, None], np.random.default_rng(1), np.zeros(3)
    for _ in range(5):  # the iteration in DP-GD's units, written out
        grad = -(u.T @ (1.0 / (1.0 + np.exp(u @ v)))) / len(y)
        v = (1 - 1e-3) * v - eta_d * grad + 0.1 * rng.standard_normal(3)
    np.testing.assert_allclose(w, v, rtol=1e-10, atol=1e-12)
    # --momenta: at beta = 0 the heavy-ball run is the product's run at b = 0; at beta > 0
    # it is the heavy-ball iteration, written out; k(beta) is the bound's step factor
    plain = F.run(x, y, 7, eta_d, 0.1, 0.0, np.random.default_rng(2))
    hb0 = F.run_momentum(x, y, 7, eta_d, 0.1, 0.0, np.random.default_rng(2))
    np.testing.assert_allclose(hb0, plain, rtol=1e-10, atol=1e-12)
    hb = F.run_momentum(x, y, 7, eta_d, 0.1, 0.8, np.random.default_rng(2))
    rng, w_, prev = np.random.default_rng(2), np.zeros(3), np.zeros(3)
    for _ in range(7):
        p = w_ + 0.8 * (w_ - prev)
        grad = -(u.T @ (1.0 / (1.0 + np.exp(u @ p)))) / len(y)
        prev, w_ = w_, p - eta_d * grad + 0.1 * rng.standard_normal(3)
    np.testing.assert_allclose(hb, w_, rtol=1e-10, atol=1e-12)
    assert not np.allclose(hb, plain)
    assert F.k_factor(0.0) == 1.0
    assert F.k_factor(0.8) == pytest.approx(0.2 * math.sqrt(2.6 / 1.8), rel=1e-12)


@pytest.mark.skipif(not ALL_DATA, reason="Abalone/Adult/MNIST files not available (data/README.md)")
def test_langevin_vs_dpgd_pairs_independent_noise(capsys):
    """experiments/langevin_vs_dpgd.py: paired runs on fresh splits, the Langevin release
    certified at the target (checked inside), the DP-GD run of the study's rule, and the
    printed difference is the mean of the paired differences."""
    import langevin_vs_dpgd as V

    study = V.peers.parse_args([])
    mine, theirs, diff = V.paired("abalone", 1.0, 3, study)
    assert diff.shape == (3,) and 0.5 < mine < 1 and 0.5 < theirs < 1
    assert np.mean(diff) == pytest.approx(mine - theirs, abs=1e-12)
    V.main(["--eps", "1", "--trials", "2"])
    assert "2 paired runs" in capsys.readouterr().out
