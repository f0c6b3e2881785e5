"""privbayes demo, as `make demo` runs it (the logistic rows included: a few seconds)."""

import time

import numpy as np


def test_demo_runs_on_real_data(run):
    start = time.perf_counter()
    code, out, err = run("demo", "--seed", "0")
    assert code == 0, err
    assert time.perf_counter() - start < 30  # ~3 s here; the README promises seconds
    assert "breast cancer" in out and "wine" in out and "digits" in out and "query" in out
    assert "NOT private" in out
    assert "r=" in out and "m=" in out and "logistic regression" in out
    assert "\nops " not in out  # OPS cannot beat the majority class here: not shown
    assert "(gamma)" in out and "(normal)" in out  # issue 13 §3: the new conjugate models
    # their public choices are stated, not read off the data
    assert "counts in 0..1024" in out and "BMI in [10, 60]" in out


def test_demo_without_logistic(run):
    code, out, _ = run("demo", "--seed", "0", "--no-logistic")
    assert code == 0 and "logistic regression" not in out


def test_demo_gamma_poisson_and_normal_rows():
    """The new rows: eps certified at most the target, truth = the data's own mean."""
    from sklearn import datasets

    from privbayes.demo import run_demo

    rows = run_demo(seed=1, out=lambda *_: None, logistic=False)
    ink = datasets.load_digits().data.sum(axis=1)
    raw = datasets.load_diabetes(scaled=False)
    bmi = raw.data[:, list(raw.feature_names).index("bmi")]
    assert ink.max() <= 32 * 32 and bmi.min() >= 10 and bmi.max() <= 60  # inside the domain
    for tag, truth in (("(gamma)", ink.mean()), ("(normal)", bmi.mean())):
        mine = [r for r in rows if tag in r["quantity"]]
        assert len(mine) == 6
        for r in mine:
            assert r["eps"] <= r["target_eps"]
            assert np.isfinite(r["abs_error"]) and r["abs_error"] < truth  # a sane release
