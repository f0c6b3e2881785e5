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
