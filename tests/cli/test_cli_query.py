"""privbayes query: a private mean over a public range."""

import json


def test_query(csv_file, run):
    code, out, _ = run(
        *("query", "--data", csv_file, "--column", "age", "--low", "0", "--high", "120"),
        *("--lam", "2", "--eps", "1", "--seed", "1"),
    )
    res = json.loads(out)
    assert code == 0 and 0 <= res["value_in_range"] <= 120 and res["t"] is None


def test_query_out_of_range_is_refused_unless_clipped(csv_file, run):
    args = (
        *("query", "--data", csv_file, "--column", "age", "--low=-5e0", "--high", "60"),
        *("--lam", "2", "--eps", "1"),
    )
    code, _, err = run(*args)
    assert code == 2 and "outside [-5, 60]" in err
    code, out, _ = run(*args, "--clip")
    assert code == 0 and json.loads(out)["n"] == 60


def test_query_range_checks(csv_file, run):
    code, _, err = run(
        *("query", "--data", csv_file, "--column", "age", "--low", "5", "--high", "5"),
        *("--lam", "2", "--eps", "1"),
    )
    assert code == 2 and "LOW < HIGH" in err


def test_query_errors_name_the_line_and_the_column(tmp_path, run):
    import pytest

    data = tmp_path / "t.csv"
    data.write_text("temp\n36.5\n35.55\n37\n")
    base = ("--column", "temp", "--lam", "2", "--eps", "1")
    code, _, err = run("query", "--data", data, "--low", "36", "--high", "40", *base)
    assert code == 2 and "line 3 is '35.55', outside [36, 40] (1 row(s))" in err
    assert "np.float64" not in err and "data row" not in err
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"temp": [36.5, None, 37.0]}), nulls)
    code, _, err = run("query", "--data", nulls, "--low", "36", "--high", "40", *base)
    assert code == 2 and "column 'temp' must be finite; row 1 = nan" in err
    wide = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"temp": [36.5, 45.0, 37.0]}), wide)
    code, _, err = run("query", "--data", wide, "--low", "36", "--high", "40", *base)
    assert code == 2 and "column 'temp' (rescaled" in err and "row 1 = " in err
    assert "clip=True" not in err and "--clip" in err


def test_query_help_does_not_mention_ops(run, capsys):
    import pytest

    with pytest.raises(SystemExit):
        run("query", "--help")
    out = capsys.readouterr().out
    assert "--method" in out and "ops" not in out
