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
        "--low",
        "0",
        "--high",
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
        (["--column", "color"], "line 2 is 'red'"),
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
        "--low=-5e0",
        "--high",
        "60",
        "--lam",
        "2",
        "--eps",
        "1",
    ]
    code, _, err = run(capsys, *args)
    assert code == 2 and "outside [-5, 60]" in err
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


def test_argument_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sample", "--model", "beta-bernoulli", "--lam", "abc"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "--lam" in err


def test_csv_details(tmp_path, capsys):
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffsmoker\n1\n0\n1\n".encode())
    code, out, _ = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(bom),
        "--column",
        "smoker",
        "--lam",
        "2",
        "--eps",
        "1",
    )
    assert code == 0 and json.loads(out)["n"] == 3
    dup = tmp_path / "dup.csv"
    dup.write_text("a,a\n1,0\n")
    code, _, err = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(dup),
        "--column",
        "a",
        "--lam",
        "2",
        "--eps",
        "1",
    )
    assert code == 2 and "duplicate column" in err
    code, _, err = run(
        capsys,
        "sample",
        "--model",
        "dirichlet-categorical",
        "--data",
        str(dup),
        "--column",
        "a",
        "--categories",
        "x,x,y",
        "--lam",
        "2",
        "--eps",
        "1",
    )
    assert code == 2 and "duplicate labels" in err
    code, out, _ = run(
        capsys, "calibrate", "--model", "beta-bernoulli", "--n", "0", "--lam", "inf", "--eps", "1"
    )
    assert code == 0 and json.loads(out)["lam"] == "inf"  # strict JSON
    code, _, err = run(
        capsys,
        "calibrate",
        "--model",
        "beta-bernoulli",
        "--n",
        "100000000000000000000",
        "--lam",
        "2",
        "--eps",
        "1",
    )
    assert code == 2 and "n must be" in err


def test_sample_logistic(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2)) * 0.4
    y = (X[:, 0] > 0).astype(int)
    path = tmp_path / "lr.csv"
    path.write_text(
        "f1,f2,label\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y, strict=True))
    )
    args = [
        "sample",
        "--model",
        "logistic",
        "--data",
        str(path),
        "--label",
        "label",
        "--lam",
        "2",
        "--eps",
        "1",
        "--seed",
        "0",
        "--clip",
    ]
    code, out, err = run(capsys, *args)
    res = json.loads(out)
    assert code == 0 and len(res["value"]) == 2 and res["features"] == ["f1", "f2"]
    code, out, err = run(capsys, *args, "--method", "ops", "--beta", "0.5")
    assert code == 0 and json.loads(out)["method"] == "ops"
    code, out, err = run(capsys, *args, "--backend", "pymc")
    assert code == 0 and len(json.loads(out)["value"]) == 2
    code, _, err = run(
        capsys,
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(path),
        "--column",
        "label",
        "--lam",
        "2",
        "--eps",
        "1",
        "--backend",
        "pymc",
    )
    assert code == 2 and "--backend applies to --model logistic only" in err
    path.write_text("f1,label\n5.0,1\n0.1,0\n")
    code, _, err = run(capsys, *args[:-1])
    assert code == 2 and "norm > c" in err


def test_demo_runs_on_real_data(capsys):
    code, out, _ = run(capsys, "demo", "--seed", "0", "--no-logistic")
    assert code == 0
    assert "breast cancer" in out and "wine" in out and "digits" in out and "query" in out
    assert "NOT private" in out


def test_logistic_signed_labels_and_flag_checks(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2)) * 0.3
    lines = "".join(f"{a},{b},{'+1' if a > 0 else '-1'}\n" for a, b in X)
    path = tmp_path / "pm.csv"
    path.write_text("f1,f2,y\n" + lines)
    base = [
        "sample",
        "--model",
        "logistic",
        "--data",
        str(path),
        "--label",
        "y",
        "--lam",
        "2",
        "--eps",
        "1",
        "--seed",
        "0",
        "--clip",
    ]
    assert main(base) == 0 and len(json.loads(capsys.readouterr().out)["value"]) == 2
    assert main([*base, "--features", "f1,y"]) == 2
    assert "--label" in capsys.readouterr().err
    assert main([*base, "--column", "f1"]) == 2
    assert (
        main(
            [
                "calibrate",
                "--model",
                "logistic",
                "--n",
                "100",
                "--lam",
                "2",
                "--eps",
                "1",
                "--c",
                "1e-300",
            ]
        )
        == 2
    )
