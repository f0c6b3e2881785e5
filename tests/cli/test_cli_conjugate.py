"""--model gamma-poisson and --model normal on sample, calibrate and audit (issue 13 §3):
the CLI gives what the Python API gives for the same public inputs and seed; records outside
the public domain, NaN, negative or fractional counts, missing columns and flags that do not
apply exit 2 with one line naming the problem, and nothing is charged to the ledger."""

import json

import numpy as np
import pytest

import privbayes as pb

GP_PRIOR = ("--alpha", "5", "--beta", "2", "--max-count", "6")
NORMAL_PRIOR = (
    "--mu",
    "37",
    "--sigma",
    "1.5",
    "--noise-sigma",
    "0.8",
    "--low",
    "35",
    "--high",
    "40",
)


def _gp(clip=False):
    return pb.GammaPoisson(5.0, 2.0, 6, clip=clip)


def _normal(clip=False):
    return pb.NormalKnownVariance(37.0, 1.5, 0.8, 35.0, 40.0, clip=clip)


MODELS = {
    "gamma-poisson": ("visits", GP_PRIOR, _gp),
    "normal": ("temp", NORMAL_PRIOR, _normal),
}


@pytest.fixture
def table(tmp_path):
    """(path, {column: values as the CLI parses them}); every record inside its domain."""
    rng = np.random.default_rng(1)
    visits = np.minimum(rng.poisson(2.0, 40), 6)
    temp = np.clip(rng.normal(37.0, 0.8, 40), 35.0, 40.0).round(2)
    path = tmp_path / "clinic.csv"
    path.write_text(
        "visits,temp\n" + "".join(f"{v},{t:.2f}\n" for v, t in zip(visits, temp, strict=True))
    )
    return path, {
        "visits": visits.astype(float),
        "temp": np.array([f"{t:.2f}" for t in temp], float),
    }


def _ledger(run, path, db):
    code, _, err = run(
        "budget", "init", path.stem, "--eps", "50", "--delta", "1e-6", "--ledger", db
    )
    assert code == 0, err


def _charges(run, path, db) -> str:
    code, out, _ = run("budget", "show", path.stem, "--ledger", db)
    assert code == 0
    return out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(
    "method,lam,eps", [("direct", 1.5, 40.0), ("diffused", 2.0, 0.5), ("concentrated", 5.0, 1.0)]
)
def test_sample_matches_the_python_api(table, run, tmp_path, model, method, lam, eps):
    path, columns = table
    column, prior, make = MODELS[model]
    db = tmp_path / "l.db"
    _ledger(run, path, db)
    argv = (
        *("sample", "--model", model, "--data", path, "--column", column, *prior),
        *("--lam", lam, "--eps", eps, "--method", method, "--seed", "7", "--ledger", db),
    )
    code, out, err = run(*argv)
    assert code == 0 and err == ""
    res = json.loads(out)
    assert set(res) == {
        "value",
        "method",
        "r",
        "m",
        "t",
        "lam",
        "eps",
        "n",
        "guarantee",
        "tv",
        "delta",
        "dp_eps",
    }
    rel = pb.sample(make(), columns[column], lam, eps, method, rng=7)
    assert res["value"] == rel.value and np.isfinite(res["value"])  # same seed, same draw
    assert (res["r"], res["m"], res["eps"], res["n"]) == (rel.r, rel.m, rel.eps, 40)
    assert res["eps"] <= eps and res["guarantee"] == "exact" and res["t"] is None
    assert "(1 charges;" in _charges(run, path, db)
    assert run(*argv[:-2])[1] == out  # seeded: the same draw again (no ledger)
    assert run(*argv[:-4], "--seed", "8")[1] != out


@pytest.mark.parametrize("model", MODELS)
def test_clip_is_explicit(tmp_path, run, model):
    column, prior, make = MODELS[model]
    raw = [0, 9, 2, 4, 30] if model == "gamma-poisson" else [36.0, 41.5, 34.0, 38.25, 39.0]
    path = tmp_path / "wide.csv"
    path.write_text(f"{column}\n" + "".join(f"{v}\n" for v in raw))
    base = ("sample", "--model", model, "--data", path, "--column", column, *prior)
    base = (*base, "--lam", "2", "--eps", "1", "--seed", "3")
    code, out, err = run(*base)
    assert code == 2 and out == "" and f"column {column!r}: 2 row(s)" in err
    assert "line 3 is" in err and "--clip" in err and err.count("\n") == 1
    code, out, err = run(*base, "--clip")
    assert code == 0, err
    rel = pb.sample(make(clip=True), np.array(raw, float), 2.0, 1.0, rng=3)
    assert json.loads(out)["value"] == rel.value


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_calibrate_matches_the_python_api(run, model, method):
    _, prior, make = MODELS[model]
    code, out, err = run(
        "calibrate", "--model", model, *prior, "--n", "500", "--lam", "3", "--eps", "0.2",
        "--method", method,
    )  # fmt: skip
    assert code == 0, err
    res = json.loads(out)
    cal = pb.calibrate(make(), 500, 3.0, 0.2, method)
    assert (res["r"], res["m"], res["eps"]) == (cal.r, cal.m, cal.eps) and res["eps"] <= 0.2
    assert res["worst_pair"] == json.loads(json.dumps(cal.pair)) and res["guarantee"] == "exact"


@pytest.mark.parametrize(
    "model,flag,a,b",
    [
        ("gamma-poisson", "--alpha", "5", "50"),
        ("gamma-poisson", "--max-count", "6", "12"),
        ("normal", "--noise-sigma", "0.8", "2"),
        ("normal", "--high", "40", "45"),
    ],
)
def test_calibrate_flags_that_apply_are_used(run, model, flag, a, b):
    _, prior, _ = MODELS[model]
    i = prior.index(flag)
    outs = [
        run(
            "calibrate", "--model", model, *prior[:i], flag, v, *prior[i + 2 :], "--n", "50",
            "--lam", "2", "--eps", "0.3",
        )[1]
        for v in (a, b)
    ]  # fmt: skip
    assert json.loads(outs[0])["r"] != json.loads(outs[1])["r"]


@pytest.mark.parametrize("model", MODELS)
def test_audit_runs_at_the_worst_pair(run, model):
    _, prior, make = MODELS[model]
    code, out, err = run(
        "audit", "--model", model, *prior, "--n", "30", "--lam", "2", "--eps", "1",
        "--trials", "2000", "--seed", "2",
    )  # fmt: skip
    assert code == 0, err
    res = json.loads(out)
    cal = pb.calibrate(make(), 30, 2.0, 1.0)
    assert res["model"] == model and res["eps_rdp"] == cal.eps
    assert res["worst_pair"] == json.loads(json.dumps(cal.pair))
    assert 0 <= res["eps_lower"] <= res["eps_certified"] and not res["violation"]
    ren = res["renyi_binned"]
    assert ren["certified"] == cal.eps and ren["interval"][0] <= cal.eps


GP_BAD = [
    ("7", "1 row(s) are above --max-count 6, e.g. line 3 is '7'"),
    ("-1", "1 row(s) are not counts (integers >= 0), e.g. line 3 is '-1'"),
    ("2.5", "1 row(s) are not counts (integers >= 0), e.g. line 3 is '2.5'"),
    ("nan", "line 3 is 'nan', not a finite number"),
    ("inf", "line 3 is 'inf', not a finite number"),
    ("two", "line 3 is 'two', not a number"),
]
NORMAL_BAD = [
    ("40.01", "1 row(s) are outside [--low, --high] = [35, 40], e.g. line 3 is '40.01'"),
    ("-37", "1 row(s) are outside [--low, --high] = [35, 40], e.g. line 3 is '-37'"),
    ("NaN", "line 3 is 'NaN', not a finite number"),
    ("-inf", "line 3 is '-inf', not a finite number"),
]


@pytest.mark.parametrize(
    "model,cell,needle",
    [("gamma-poisson", c, n) for c, n in GP_BAD] + [("normal", c, n) for c, n in NORMAL_BAD],
)
def test_bad_records_are_refused_and_nothing_is_charged(tmp_path, run, model, cell, needle):
    column, prior, _ = MODELS[model]
    good = "3" if model == "gamma-poisson" else "37.5"
    path = tmp_path / "bad.csv"
    path.write_text(f"{column},other\n{good},x\n{cell},x\n{good},x\n")
    db = tmp_path / "l.db"
    _ledger(run, path, db)
    before = _charges(run, path, db)
    code, out, err = run(
        "sample", "--model", model, "--data", path, "--column", column, *prior,
        "--lam", "2", "--eps", "1", "--ledger", db,
    )  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"column {column!r}" in err and needle in err
    assert _charges(run, path, db) == before and "(0 charges;" in before


@pytest.mark.parametrize(
    "model,change,needle",
    [
        ("gamma-poisson", ("--column", "nope"), "--column: no column 'nope'"),
        ("gamma-poisson", ("--low", "0"), "--low does not apply to --model gamma-poisson"),
        ("gamma-poisson", ("--c", "1"), "--c does not apply to --model gamma-poisson"),
        ("gamma-poisson", ("--categories", "a,b"), "--categories does not apply"),
        ("gamma-poisson", ("--method", "ops"), "--method ops does not apply"),
        ("gamma-poisson", ("--alpha", "1", "2"), "--alpha: gamma-poisson takes one value"),
        ("gamma-poisson", ("--max-count", "0"), "max_count must be an integer in [1, 2**53 - 1]"),
        ("gamma-poisson", ("--beta", "0"), "beta"),
        ("normal", ("--column", "nope"), "--column: no column 'nope'"),
        ("normal", ("--alpha", "1"), "--alpha does not apply to --model normal"),
        ("normal", ("--max-count", "5"), "--max-count does not apply to --model normal"),
        ("normal", ("--intercept",), "--intercept does not apply to --model normal"),
        ("normal", ("--sigma", "-1"), "sigma"),
        ("normal", ("--noise-sigma", "nan"), "noise_sigma"),
        ("normal", ("--low", "41"), "low must be < high"),
    ],
)
def test_bad_options_are_refused_and_nothing_is_charged(
    table, tmp_path, run, model, change, needle
):
    path, _ = table
    column, prior, _ = MODELS[model]
    argv = ["--column", column, *prior]
    flag = change[0]
    if flag in argv:  # replace the flag's value(s)
        i = argv.index(flag)
        del argv[i : i + 2]
    db = tmp_path / "l.db"
    _ledger(run, path, db)
    code, out, err = run(
        "sample", "--model", model, "--data", path, *argv, *change, "--lam", "2", "--eps", "1",
        "--ledger", db,
    )  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err
    assert "(0 charges;" in _charges(run, path, db)


@pytest.mark.parametrize(
    "command,model,drop,needle",
    [
        ("sample", "gamma-poisson", "--column", "--model gamma-poisson needs --column COL"),
        ("sample", "gamma-poisson", "--max-count", "needs --max-count M"),
        ("calibrate", "gamma-poisson", "--max-count", "needs --max-count M"),
        ("audit", "gamma-poisson", "--max-count", "needs --max-count M"),
        ("sample", "normal", "--column", "--model normal needs --column COL"),
        ("sample", "normal", "--low", "--model normal needs --low"),
        ("calibrate", "normal", "--noise-sigma", "--model normal needs --noise-sigma"),
        ("audit", "normal", "--mu", "--model normal needs --mu"),
    ],
)
def test_missing_public_choices_are_named(table, run, command, model, drop, needle):
    path, _ = table
    column, prior, _ = MODELS[model]
    argv = ["--column", column, *prior] if command == "sample" else list(prior)
    i = argv.index(drop)
    del argv[i : i + 2]
    extra = {
        "sample": ("--data", path),
        "calibrate": ("--n", "10"),
        "audit": ("--trials", "100"),
    }[command]
    code, out, err = run(command, "--model", model, *extra, *argv, "--lam", "2", "--eps", "1")
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err


def test_flags_are_checked_before_the_data_are_read(tmp_path, run):
    """A bad public choice is reported before the data file is opened."""
    code, _, err = run(
        "sample", "--model", "normal", "--data", tmp_path / "missing.csv", "--column", "x",
        *NORMAL_PRIOR[:-2], "--high", "30", "--lam", "2", "--eps", "1",
    )  # fmt: skip
    assert code == 2 and "low must be < high" in err
