"""privbayes sample --model linear / poisson: the JSON is the Python release, bad inputs
are refused (exit status 2) before any charge."""

import json
import warnings

import numpy as np
import pytest

import privbayes as pb
from privbayes.cli import _models


def _write(path, X, y, target="y"):
    rows = [f"a,b,{target}"] + [
        f"{r[0]:.17g},{r[1]:.17g},{t:.17g}" for r, t in zip(X, y, strict=True)
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def linear_csv(tmp_path):
    rng = np.random.default_rng(4)
    X = rng.uniform(-0.5, 0.5, (300, 2))
    y = np.clip(X @ [1.0, -2.0] + 0.3 + rng.normal(0, 0.2, 300), -3, 3)
    return _write(tmp_path / "lin.csv", X, y), X, y


@pytest.fixture
def poisson_csv(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.uniform(-0.5, 0.5, (200, 2))
    k = rng.poisson(np.exp(X @ [0.5, -0.5] + 0.5)).astype(float)
    return _write(tmp_path / "pois.csv", X, k, target="k"), X, k


def _python(model, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pb.SharedRandomnessWarning)
        return pb.sample(model, data, **kw)


LIN = ("--model", "linear", "--target", "y", "--features", "a,b", "--y-bound", "3",
       "--noise-sd", "0.2")  # fmt: skip


def test_linear_sample_json_is_the_python_release(linear_csv, run):
    path, X, y = linear_csv
    code, out, err = run("sample", *LIN, "--data", path, "--intercept", "--lam", "2", "--eps",
                         "1", "--seed", "5")  # fmt: skip
    assert code == 0, err
    got = json.loads(out)
    model = pb.BayesianLinearRegression(0.01, 1.0, 3.0, 0.2, fit_intercept=True)
    rel = _python(model, (X, y), lam=2.0, eps=1.0, rng=5)
    assert got["value"] == rel.value.tolist() and len(got["value"]) == 3
    assert got["eps"] == rel.eps <= 1.0 and got["r"] == rel.r and got["n"] == 300
    assert got["guarantee"] == "exact" and got["method"] == "diffused"
    assert got["radius"] == rel.calibration.model.radius > 0  # the default ball, resolved
    assert got["features"] == ["a", "b"] and got["target"] == "y" and got["intercept"] is True
    # the posterior-sampling options
    code, out, err = run("sample", *LIN, "--data", path, "--radius", "6", "--backend",
                         "langevin", "--max-steps", "300", "--method", "concentrated",
                         "--eps", "1", "--delta", "1e-5", "--seed", "2")  # fmt: skip
    assert code == 0, err
    got = json.loads(out)
    model = pb.BayesianLinearRegression(0.01, 1.0, 3.0, 0.2, 6.0, backend="langevin",
                                        max_steps=300)  # fmt: skip
    rel = _python(model, (X, y), eps=1.0, delta=1e-5, method="concentrated", rng=2)
    assert got["value"] == rel.value.tolist() and got["guarantee"] == "algorithm"
    assert got["radius"] == 6.0 and got["dp_eps"] <= 1.0 and got["method"] == "concentrated"
    code, out, err = run("sample", *LIN, "--data", path, "--backend", "langevin", "--schedule",
                         "stationary", "--lam", "2", "--eps", "1", "--seed", "3")  # fmt: skip
    assert code == 0, err
    model = pb.BayesianLinearRegression(0.01, 1.0, 3.0, 0.2, backend="langevin",
                                        schedule="stationary")  # fmt: skip
    rel = _python(model, (X, y), lam=2.0, eps=1.0, rng=3)
    assert json.loads(out)["value"] == rel.value.tolist()
    assert rel.calibration.sampler["schedule"] == "stationary"
    code, out, err = run("sample", *LIN, "--data", path, "--backend", "exact", "--schedule",
                         "utility", "--lam", "2", "--eps", "1")  # fmt: skip
    assert code == 2 and "schedule does not apply to backend='exact'" in err


def test_poisson_sample_json_is_the_python_release(poisson_csv, run):
    path, X, k = poisson_csv
    flags = ("--model", "poisson", "--data", path, "--target", "k", "--max-count", "20",
             "--radius", "3")  # fmt: skip
    code, out, err = run("sample", *flags, "--lam", "2", "--eps", "1", "--seed", "7")
    assert code == 0, err
    got = json.loads(out)
    model = pb.BayesianPoissonRegression(0.01, 1.0, 20, 3.0)
    rel = _python(model, (X, k), lam=2.0, eps=1.0, rng=7)
    assert got["value"] == rel.value.tolist() and got["guarantee"] == "algorithm"
    assert got["radius"] == 3.0 and got["target"] == "k" and got["intercept"] is False
    # --schedule picks Langevin's rule (utility by default): the JSON is that release
    code, out, err = run("sample", *flags, "--lam", "2", "--eps", "1", "--seed", "7",
                         "--schedule", "stationary")  # fmt: skip
    assert code == 0, err
    stat = pb.BayesianPoissonRegression(0.01, 1.0, 20, 3.0, schedule="stationary")
    srel = _python(stat, (X, k), lam=2.0, eps=1.0, rng=7)
    assert json.loads(out)["value"] == srel.value.tolist() != rel.value.tolist()
    assert rel.calibration.sampler["schedule"] == "utility"
    assert srel.calibration.sampler["steps"] > rel.calibration.sampler["steps"]
    code, out, err = run("sample", *flags, "--method", "ops", "--lam", "2", "--eps", "1")
    assert code == 2 and "--method ops does not apply to --model poisson" in err
    code, out, err = run("sample", *flags[:-2], "--lam", "2", "--eps", "1")
    assert code == 2 and "needs --max-count M" in err and "--radius R" in err


@pytest.mark.parametrize("model", ["linear", "poisson"])
def test_bad_inputs_are_refused_before_any_charge(tmp_path, run, model):
    """Responses outside the domain, rows over the bound, NaN and options the model does
    not take: exit status 2, one line, nothing on stdout, the ledger untouched."""
    ledger = tmp_path / "l.db"
    pb.Ledger(ledger).init_budget("d", eps=10.0, delta=1e-6)
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (50, 2))
    y = np.round(rng.uniform(0, 3, 50))  # counts, also valid responses
    if model == "linear":
        flags = ("--model", "linear", "--target", "y", "--y-bound", "3", "--noise-sd", "0.5")
        out_of_domain = (4.5, "y_bound")
        other = ("--max-count", "3")
    else:
        flags = ("--model", "poisson", "--target", "y", "--max-count", "3", "--radius", "2")
        out_of_domain = (4.0, "max_count")
        other = ("--y-bound", "3")
    charge = ("--ledger", ledger, "--dataset", "d", "--lam", "2", "--eps", "1")
    bad_y = y.copy()
    bad_y[9] = out_of_domain[0]
    long_row = X.copy()
    long_row[4] = [0.9, 0.9]
    cases = [
        (_write(tmp_path / "y.csv", X, bad_y), (), out_of_domain[1]),
        (_write(tmp_path / "x.csv", long_row, y), (), "norm > c"),
        (_write(tmp_path / "ok.csv", X, y), ("--c", "0.1"), "norm > c"),
        (_write(tmp_path / "ok.csv", X, y), other, "does not apply to --model"),
        (_write(tmp_path / "ok.csv", X, y), ("--label", "y"), "does not apply to --model"),
        (_write(tmp_path / "ok.csv", X, y), ("--backend", "pymc"), "backend must be one of"),
        (_write(tmp_path / "ok.csv", X, y), ("--intercept-scaling", "0.3"), "needs --intercept"),
    ]
    nan = tmp_path / "nan.csv"
    nan.write_text("a,b,y\n0.1,0.2,1\n0.1,,2\n")
    cases.append((nan, (), "line 3"))
    for path, extra, needle in cases:
        code, out, err = run("sample", *flags, "--data", path, *extra, *charge)
        assert code == 2 and out == "" and needle in err and err.count("\n") == 1, err
    assert pb.Ledger(ledger).status("d")[0]["charges"] == []
    code, out, err = run("sample", *flags, "--data", tmp_path / "ok.csv", *charge)
    assert code == 0, err
    assert len(pb.Ledger(ledger).status("d")[0]["charges"]) == 1


def test_regression_flags_are_listed():
    assert "poisson" in _models.names("sample") and "linear" in _models.names("sample")
    assert "poisson" not in _models.names("posterior")
    lin = next(a for a in _models.ADAPTERS if a.name == "linear")
    assert {"radius", "backend", "intercept"} <= lin.flags["sample"]
    assert set(lin.methods) == set(pb.BayesianLinearRegression.methods)
    pois = next(a for a in _models.ADAPTERS if a.name == "poisson")
    assert set(pois.methods) == set(pb.BayesianPoissonRegression.methods)
