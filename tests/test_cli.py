"""The command line: JSON out, one-line errors with exit status 2, the demo."""

import json

import numpy as np
import pytest

from privbayes.cli import main


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "d.csv"
    rows = ["flag,color,income,age"]
    rng = np.random.default_rng(0)
    for i in range(60):
        rows.append(
            f"{i % 3 == 0:d},{['red', 'green', 'blue'][i % 3]},"
            f"{'>50K' if i % 4 == 0 else '<=50K'},{rng.uniform(18, 90):.1f}"
        )
    path.write_text("\n".join(rows) + "\n")
    return path


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sample_beta_bernoulli(csv_file, capsys):
    code, out, err = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(csv_file),
        "--column",
        "flag",
        "--lam",
        "2",
        "--eps",
        "0.5",
        "--seed",
        "3",
    )
    assert code == 0 and err == ""
    res = json.loads(out)
    assert set(res) == {"value", "method", "r", "m", "lam", "eps", "n"}
    assert res["n"] == 60 and res["eps"] <= 0.5 and 0 < res["value"] < 1
    code2, out2, _ = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(csv_file),
        "--column",
        "flag",
        "--lam",
        "2",
        "--eps",
        "0.5",
        "--seed",
        "3",
    )
    assert out2 == out  # seeded


def test_sample_positive_label_and_dirichlet(csv_file, capsys):
    code, out, _ = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(csv_file),
        "--column",
        "income",
        "--positive",
        ">50K",
        "--lam",
        "3",
        "--eps",
        "1",
        "--method",
        "concentrated",
        "--alpha",
        "2",
        "5",
    )
    assert code == 0 and json.loads(out)["method"] == "concentrated"
    code, out, _ = run(
        capsys,
        "sample",
        "--model",
        "dirichlet-categorical",
        "--data",
        str(csv_file),
        "--column",
        "color",
        "--categories",
        "red,green,blue",
        "--lam",
        "2",
        "--eps",
        "1",
    )
    res = json.loads(out)
    assert code == 0 and len(res["value"]) == 3 and sum(res["value"]) == pytest.approx(1)


def test_query_and_calibrate(csv_file, capsys):
    code, out, _ = run(
        capsys,
        "query",
        "--data",
        str(csv_file),
        "--column",
        "age",
        "--range",
        "0",
        "120",
        "--lam",
        "2",
        "--eps",
        "1",
        "--seed",
        "1",
    )
    res = json.loads(out)
    assert code == 0 and 0 <= res["value_in_range"] <= 120
    code, out, _ = run(
        capsys,
        "calibrate",
        "--model",
        "beta-bernoulli",
        "--n",
        "1000",
        "--lam",
        "2",
        "--eps",
        "0.1",
    )
    res = json.loads(out)
    assert code == 0 and res["eps"] <= 0.1 and res["worst_pair"]["counts"]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--data", "missing.csv", "--column", "flag"], "no such file"),
        (["--column", "nope"], "no column 'nope'"),
        (["--column", "color"], "row 0 is 'red'"),
        (["--column", "flag", "--eps", "-1"], "eps"),
        (["--column", "flag", "--lam", "1"], "lam must be > 1"),
        (["--column", "flag", "--method", "direct", "--lam", "5"], "direct sampling"),
    ],
)
def test_one_line_errors_exit_2(csv_file, capsys, argv, needle):
    base = {"--model": "beta-bernoulli", "--data": str(csv_file), "--lam": "2", "--eps": "1"}
    args = ["sample"]
    given = dict(zip(argv[::2], argv[1::2], strict=True))
    for key, val in {**base, **given}.items():
        args += [key, val]
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1


def test_query_out_of_range_is_refused_unless_clipped(csv_file, capsys):
    args = [
        "query",
        "--data",
        str(csv_file),
        "--column",
        "age",
        "--range",
        "20",
        "60",
        "--lam",
        "2",
        "--eps",
        "1",
    ]
    code, _, err = run(capsys, *args)
    assert code == 2 and "outside --range" in err
    code, out, _ = run(capsys, *args, "--clip")
    assert code == 0 and json.loads(out)["n"] == 60


def test_bad_csv(tmp_path, capsys):
    empty = tmp_path / "e.csv"
    empty.write_text("")
    code, _, err = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(empty),
        "--column",
        "x",
        "--lam",
        "2",
        "--eps",
        "1",
    )
    assert code == 2 and "empty" in err
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    code, _, err = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(binary),
        "--column",
        "x",
        "--lam",
        "2",
        "--eps",
        "1",
    )
    assert code == 2 and err.count("\n") == 1


def test_demo_runs_on_real_data(capsys):
    code, out, _ = run(capsys, "demo", "--seed", "0")
    assert code == 0
    assert "breast cancer" in out and "wine" in out and "digits" in out and "query" in out
    assert "NOT private" in out
