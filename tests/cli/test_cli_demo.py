"""privbayes demo (the logistic rows run in `make demo`; skipped here for time)."""


def test_demo_runs_on_real_data(run):
    code, out, _ = run("demo", "--seed", "0", "--no-logistic")
    assert code == 0
    assert "breast cancer" in out and "wine" in out and "digits" in out and "query" in out
    assert "NOT private" in out
