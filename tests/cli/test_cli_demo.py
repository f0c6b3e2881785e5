"""privbayes demo, as `make demo` runs it (the logistic rows included: a few seconds)."""


def test_demo_runs_on_real_data(run):
    code, out, err = run("demo", "--seed", "0")
    assert code == 0, err
    assert "breast cancer" in out and "wine" in out and "digits" in out and "query" in out
    assert "NOT private" in out
    assert "t=" in out and "logistic regression" in out  # OPS reports its knob as t


def test_demo_without_logistic(run):
    code, out, _ = run("demo", "--seed", "0", "--no-logistic")
    assert code == 0 and "logistic regression" not in out
