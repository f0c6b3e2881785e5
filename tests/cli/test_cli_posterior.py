"""``privbayes posterior``: the JSON is what pb.posterior gives for the same inputs and seed;
draws go to NetCDF or CSV; bad files, flags, ranges and options exit 2 in one line with
nothing charged to the ledger."""

import json

import numpy as np
import pytest

import privbayes as pb


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "t.csv"
    rows = ["flag,color,visits,temp,score"]
    for i in range(120):
        rows.append(
            f"{int(rng.random() < 0.3)},{['red', 'green', 'blue'][i % 3]},{rng.poisson(2)},"
            f"{rng.uniform(34, 41):.2f},{rng.uniform(0, 100):.1f}"
        )
    path.write_text("\n".join(rows) + "\n")
    return path


def _column(path, name):
    import csv

    with open(path) as f:
        return [row[name] for row in csv.DictReader(f)]


CASES = {
    "beta-bernoulli": (("--column", "flag"), lambda t: (pb.BetaBernoulli(), np.array(
        [float(v) for v in _column(t, "flag")]))),
    "dirichlet-categorical": (
        ("--column", "color", "--categories", "red,green,blue"),
        lambda t: (pb.DirichletCategorical([1, 1, 1]), np.array(
            [["red", "green", "blue"].index(v) for v in _column(t, "color")])),
    ),
    "gamma-poisson": (("--column", "visits", "--max-count", "9"), lambda t: (
        pb.GammaPoisson(1, 1, 9), np.array([float(v) for v in _column(t, "visits")]))),
    "normal": (
        ("--column", "temp", "--mu", "37", "--sigma", "2", "--noise-sigma", "1", "--low", "30",
         "--high", "45"),
        lambda t: (pb.NormalKnownVariance(37, 2, 1, 30, 45), np.array(
            [float(v) for v in _column(t, "temp")])),
    ),
    "query": (("--column", "score", "--low", "0", "--high", "100"), lambda t: (
        pb.models.MeanQuery(), np.array([float(v) / 100 for v in _column(t, "score")]))),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_is_the_python_release(name, table, run):
    flags, build = CASES[name]
    code, out, err = run("posterior", "--model", name, "--data", table, *flags, "--lam", "2",
                         "--eps", "1", "--seed", "5", "--interval", "0.8")  # fmt: skip
    assert code == 0, err
    got = json.loads(out)
    model, data = build(table)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pb.SharedRandomnessWarning)  # the same seed twice
        post = pb.posterior(model, data, 2.0, 1.0, rng=5)
    assert got["statistic"] == np.asarray(post.statistic).tolist()
    assert got["noise"] == post.noise and got["eps"] == post.eps and got["n"] == 120
    assert got["guarantee"] == "exact" and got["method"] == "noise-aware" and got["prob"] == 0.8
    if name != "dirichlet-categorical":  # (its interval is Rao-Blackwellised Gibbs output)
        np.testing.assert_allclose(got["interval"], post.interval(0.8), rtol=1e-12)
        np.testing.assert_allclose(got["mean"], post.mean(), rtol=1e-12)
    else:
        assert got["diagnostics"]["ok"] and got["diagnostics"]["public"]
    if name == "query":
        lo, hi = post.confidence_interval(0.8)
        assert got["confidence_interval"] == [lo, hi]
        assert got["confidence_interval_in_range"] == [100 * lo, 100 * hi]


def test_query_reads_a_parquet_source(table, run, tmp_path):
    """Audit: `posterior --model query` passed the --data path where the query's reader
    expected the opened table, and refused every Parquet file, folder or glob."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.parquet"
    pd.read_csv(table).to_parquet(path)
    flags = ("--model", "query", "--column", "score", "--low", "0", "--high", "100", "--lam",
             "2", "--eps", "1")  # fmt: skip
    code, out, err = run("posterior", "--data", path, *flags, "--seed", "8")
    assert code == 0, err
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pb.SharedRandomnessWarning)  # the same seed twice
        code2, out2, err2 = run("posterior", "--data", table, *flags, "--seed", "8")
    assert code2 == 0, err2
    assert json.loads(out)["statistic"] == json.loads(out2)["statistic"]


def test_draws_to_netcdf_and_csv(table, run, tmp_path):
    az = pytest.importorskip("arviz")
    nc, csv_path = tmp_path / "d.nc", tmp_path / "d.csv"
    code, out, err = run("posterior", "--model", "dirichlet", "--data", table, "--column", "color",
                         "--categories", "red,green,blue", "--lam", "2", "--eps", "1", "--out", nc,
                         "--draws", "400", "--seed", "1")  # fmt: skip
    assert code == 0, err and json.loads(out)["draws"] == 400
    idata = az.from_netcdf(str(nc))
    assert list(idata.groups()) == ["posterior"] and idata.posterior["p"].shape == (4, 100, 3)
    assert idata.posterior.attrs["privbayes_eps"] == 1.0
    code, out, err = run("posterior", "--model", "gamma-poisson", "--data", table, "--column",
                         "visits", "--max-count", "9", "--lam", "2", "--eps", "1", "--out",
                         csv_path, "--draws", "50")  # fmt: skip
    assert code == 0, err
    lines = csv_path.read_text().splitlines()
    assert lines[0] == "theta" and len(lines) == 51 and all(float(v) > 0 for v in lines[1:])


@pytest.mark.parametrize(
    "argv,message",
    [
        (("--model", "beta-bernoulli", "--column", "flag", "--max-count", "3"),
         "--max-count does not apply to --model beta-bernoulli"),
        (("--model", "beta-bernoulli", "--column", "flag", "--draws", "5"), "--draws needs --out"),
        (("--model", "beta-bernoulli", "--column", "flag", "--out", "x.txt"), "--out"),
        (("--model", "beta-bernoulli", "--column", "flag", "--interval", "1.5"), "--interval"),
        (("--model", "gamma-poisson", "--column", "visits", "--max-count", "1"),
         "above --max-count"),
        (("--model", "query", "--column", "score", "--low", "0", "--high", "50"),
         "outside [--low, --high]"),
        (("--model", "query", "--column", "score"), "needs --low and --high"),
        (("--model", "normal", "--column", "temp", "--mu", "0", "--sigma", "1", "--noise-sigma",
          "1", "--low", "35", "--high", "36"), "outside [--low, --high]"),
        (("--model", "beta-bernoulli", "--column", "color"), "color"),
        (("--model", "beta-bernoulli", "--column", "nope"), "nope"),
    ],
)  # fmt: skip
def test_errors_exit_2_in_one_line_and_charge_nothing(argv, message, table, run, tmp_path):
    ledger_path = tmp_path / "l.sqlite"
    pb.Ledger(ledger_path).init_budget("t", eps=10.0, delta=1e-6)
    code, out, err = run("posterior", "--data", table, *argv, "--lam", "2", "--eps", "1",
                         "--ledger", ledger_path)  # fmt: skip
    assert code == 2 and out == "" and message in err and err.count("\n") == 1
    assert pb.Ledger(ledger_path).spent("t") == 0.0


def test_the_release_is_charged_to_the_ledger(table, run, tmp_path):
    ledger_path = tmp_path / "l.sqlite"
    pb.Ledger(ledger_path).init_budget("t", eps=10.0, delta=1e-6)
    code, out, err = run("posterior", "--model", "beta-bernoulli", "--data", table, "--column",
                         "flag", "--lam", "2", "--eps", "1", "--ledger", ledger_path, "--out",
                         tmp_path / "x.csv", "--draws", "1000")  # fmt: skip
    assert code == 0, err
    (charge,) = pb.Ledger(ledger_path).status("t")[0]["charges"]
    assert "noise-aware" in charge["mechanism"]  # one charge for 1000 draws
    code, out, err = run("posterior", "--model", "beta-bernoulli", "--data", table, "--column",
                         "flag", "--lam", "2", "--eps", "100", "--ledger", ledger_path)  # fmt: skip
    assert code == 2 and "budget" in err


@pytest.mark.parametrize(
    "flags",
    [("--model", "query", "--column", "score", "--low", "0", "--high", "100"),
     ("--model", "beta-bernoulli", "--column", "flag")],
)  # fmt: skip
def test_parquet_and_csv_glob_give_the_single_file_release(flags, table, run, tmp_path):
    # the large-source path (privbayes.data, Dask when installed): it once called an
    # open_source/read_source API that does not exist, and the CLI failed to import at all
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    df = pd.read_csv(table)
    df.to_parquet(tmp_path / "t.parquet")
    df.iloc[:60].to_csv(tmp_path / "g1.csv", index=False)
    df.iloc[60:].to_csv(tmp_path / "g2.csv", index=False)
    outs = []
    for data in (table, tmp_path / "t.parquet", str(tmp_path / "g*.csv")):
        code, out, err = run("posterior", "--data", data, *flags, "--lam", "2", "--eps", "1",
                             "--seed", "4")  # fmt: skip
        assert code == 0, err
        got = json.loads(out)
        outs.append((got["statistic"], got["interval"], got["n"]))
    assert outs[0] == outs[1] == outs[2]


def test_an_unwritable_out_is_refused_before_the_charge(table, run, tmp_path, monkeypatch):
    # the draws are written after the release: an --out that cannot be written used to fail
    # there, with the budget spent and the release's JSON lost
    import os
    import tempfile

    ledger_path = tmp_path / "l.sqlite"
    pb.Ledger(ledger_path).init_budget("t", eps=100.0, delta=1e-6)
    base = ("posterior", "--model", "beta-bernoulli", "--data", table, "--column", "flag",
            "--lam", "2", "--eps", "1", "--ledger", ledger_path)  # fmt: skip
    (tmp_path / "folder.csv").mkdir()
    code, out, err = run(*base, "--out", tmp_path / "folder.csv")
    assert code == 2 and "is a folder" in err and err.count("\n") == 1

    def refuse(*a, **k):  # an unwritable folder (chmod does not stop root: simulate it)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    for name in ("x.csv", "x.nc"):
        code, out, err = run(*base, "--out", tmp_path / name)
        assert code == 2 and out == "" and "cannot write" in err and "Permission denied" in err
        assert not os.path.exists(tmp_path / name)
    assert pb.Ledger(ledger_path).spent("t") == 0.0


def test_failed_gibbs_diagnostics_keep_the_paid_release(tmp_path, monkeypatch, capsys):
    """A Dirichlet posterior whose (public) Gibbs diagnostics fail after the charge: the
    JSON still carries the released statistic and the noise, with the error, exit 0."""
    import json

    from privbayes.cli import main
    from privbayes.errors import ConvergenceError
    from privbayes.posterior.release import PrivatePosterior

    def failing(self, prob=0.9):
        raise ConvergenceError("R-hat 1.2 > 1.01 (public: the chains read only the statistic)")

    monkeypatch.setattr(PrivatePosterior, "interval", failing)
    data = tmp_path / "c.csv"
    data.write_text("c\n" + "\n".join(["a", "b", "c", "a"] * 10) + "\n")
    code = main(["posterior", "--model", "dirichlet", "--data", str(data), "--column", "c",
                 "--categories", "a,b,c", "--lam", "2", "--eps", "1", "--seed", "3",
                 "--out", str(tmp_path / "d.csv")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0 and "R-hat" in captured.err
    res = json.loads(captured.out)
    assert res["interval"] is None and "R-hat" in res["convergence_error"]
    assert len(res["statistic"]) == 3 and res["noise"]["mechanism"] == "discrete_gaussian"
    assert not (tmp_path / "d.csv").exists()


def test_linear_regression_json_is_the_python_release(tmp_path, run):
    rng = np.random.default_rng(4)
    x = rng.uniform(-0.5, 0.5, (400, 2))
    y = np.clip(x @ [1.0, -2.0] + 0.3 + rng.normal(0, 0.2, 400), -3, 3)
    path = tmp_path / "lin.csv"
    rows = ["a,b,y"] + [f"{r[0]:.17g},{r[1]:.17g},{t:.17g}" for r, t in zip(x, y, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    flags = ("--model", "linear", "--data", path, "--target", "y", "--features", "a,b",
             "--y-bound", "3", "--noise-sd", "0.2", "--intercept", "--beta", "0.1")  # fmt: skip
    code, out, err = run("posterior", *flags, "--lam", "2", "--eps", "1", "--seed", "5")
    assert code == 0, err
    got = json.loads(out)
    model = pb.BayesianLinearRegression(0.1, 1.0, 3.0, 0.2, fit_intercept=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pb.SharedRandomnessWarning)
        post = pb.posterior(model, (x, y), 2.0, 1.0, rng=5)
    assert got["statistic"] == post.statistic.tolist() and got["noise"] == post.noise
    assert len(got["interval"][0]) == 3 and got["diagnostics"]["ok"]
    code, out, err = run("posterior", *flags[:-2], "--alpha", "1", "--lam", "2", "--eps", "1")
    assert code == 2 and "--alpha does not apply to --model linear" in err
    narrow = ("--model", "linear", "--data", path, "--target", "y", "--y-bound", "0.5",
              "--noise-sd", "0.2")  # fmt: skip
    code, out, err = run("posterior", *narrow, "--lam", "2", "--eps", "1")
    assert code == 2 and "y_bound" in err
