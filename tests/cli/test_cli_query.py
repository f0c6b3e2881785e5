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


def test_query_range_whose_width_overflows_is_refused(tmp_path, csv_file, run):
    """--low=-1e308 --high 1e308: HIGH - LOW overflowed to inf and every value was rescaled
    to 0, exit 0. Refused before the data are read or anything is charged."""
    import privbayes as pb

    db = tmp_path / "ledger.sqlite"
    code, _, _ = run("budget", "init", "d", "--eps", "5", "--delta", "1e-6", "--ledger", db)
    assert code == 0
    sources = [csv_file]
    try:
        import pandas as pd

        pd.DataFrame({"age": [30.0, 40.0]}).to_parquet(tmp_path / "d.parquet")
        sources.append(tmp_path / "d.parquet")  # the lazy path (privbayes.data.read)
    except ImportError:  # pragma: no cover - without the scale extras
        pass
    for source in sources:
        for low, high in (("-1e308", "1e308"), ("-1.7e308", "0.2e308"), ("-9e307", "9e307")):
            code, out, err = run(
                *("query", "--data", source, "--column", "age", f"--low={low}", "--high", high),
                *("--lam", "2", "--eps", "1", "--ledger", db, "--dataset", "d"),
            )
            assert code == 2 and out == "" and "--low/--high" in err and "overflows" in err
    status = pb.Ledger(db).status("d")[0]
    assert status["eps_spent"] == 0 and status["charges"] == []
    code, out, _ = run(
        *("query", "--data", csv_file, "--column", "age", "--low=-8e307", "--high", "8e307"),
        *("--lam", "2", "--eps", "1", "--seed", "0"),
    )  # the widest ranges stay: 1.6e308 is finite
    assert code == 0 and json.loads(out)["n"] == 60
