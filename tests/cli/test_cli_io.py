"""CSV reading, one-line errors with exit status 2, and strict JSON output."""

import json
import math

import pytest

from privbayes.cli import _io


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
def test_one_line_errors_exit_2(csv_file, run, argv, needle):
    base = {"--model": "beta-bernoulli", "--data": str(csv_file), "--lam": "2", "--eps": "1"}
    given = dict(zip(argv[::2], argv[1::2], strict=True))
    args = ["sample"]
    for key, val in {**base, **given}.items():
        args += [key, val]
    code, out, err = run(*args)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1


def test_bad_csv(tmp_path, run):
    base = ("sample", "--model", "beta-bernoulli", "--column", "x", "--lam", "2", "--eps", "1")
    empty = tmp_path / "e.csv"
    empty.write_text("")
    code, _, err = run(*base, "--data", empty)
    assert code == 2 and "empty" in err
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    code, _, err = run(*base, "--data", binary)
    assert code == 2 and err.count("\n") == 1
    nan = tmp_path / "nan.csv"
    nan.write_text("x\n0.5\nnan\n")
    code, _, err = run("query", "--data", nan, "--column", "x", "--low", "0", "--high", "1",
                       "--lam", "2", "--eps", "1")  # fmt: skip
    assert code == 2 and "line 3 is 'nan', not a finite number" in err


def test_rows_with_extra_fields_are_refused(tmp_path, run):
    extra = tmp_path / "extra.csv"
    extra.write_text("flip,x\n1,0.1\n1,0.2,9\n0,0.3\n")
    code, out, err = run("query", "--data", extra, "--column", "x", "--low", "0", "--high", "1",
                         "--lam", "2", "--eps", "1")  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "line 3" in err and "3 fields" in err and "header has 2" in err


def test_argument_errors_are_one_line(run):
    with pytest.raises(SystemExit) as exc:
        run("sample", "--model", "beta-bernoulli", "--lam", "abc")
    assert exc.value.code == 2


def test_csv_details(tmp_path, run):
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffsmoker\n1\n0\n1\n".encode())
    base = ("sample", "--model", "beta-bernoulli", "--lam", "2", "--eps", "1")
    code, out, _ = run(*base, "--data", bom, "--column", "smoker")
    assert code == 0 and json.loads(out)["n"] == 3
    dup = tmp_path / "dup.csv"
    dup.write_text("a,a\n1,0\n")
    code, _, err = run(*base, "--data", dup, "--column", "a")
    assert code == 2 and "duplicate column" in err
    code, _, err = run(
        *("sample", "--model", "dirichlet-categorical", "--data", dup, "--column", "a"),
        *("--categories", "x,x,y", "--lam", "2", "--eps", "1"),
    )
    assert code == 2 and "duplicate labels" in err


def test_json_is_strict_and_inf_is_null(run):
    """Issue 12 item 13: infinities were written as the string "inf"."""
    code, out, _ = run(
        "calibrate", "--model", "beta-bernoulli", "--n", "0", "--lam", "inf", "--eps", "1"
    )
    res = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    assert code == 0 and res["lam"] is None and "inf" not in out.lower()
    assert _io.dump_json({"a": math.inf, "b": [-math.inf, math.nan, 1.5]}) == (
        '{"a": null, "b": [null, null, 1.5]}'
    )


def test_json_converts_numpy():
    import numpy as np

    text = _io.dump_json({"v": np.array([1.0, np.inf]), "k": np.int64(3), "x": np.float64(2)})
    assert json.loads(text) == {"v": [1.0, None], "k": 3, "x": 2.0}


def test_out_of_range_n_is_one_line(run):
    code, _, err = run(
        "calibrate", "--model", "beta-bernoulli", "--n", "100000000000000000000",
        "--lam", "2", "--eps", "1",
    )  # fmt: skip
    assert code == 2 and "n must be" in err
