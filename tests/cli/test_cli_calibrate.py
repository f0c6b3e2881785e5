"""privbayes calibrate: public inputs only; OPS names its knob t."""

import json

import pytest


def test_calibrate(run):
    code, out, _ = run(
        "calibrate", "--model", "beta-bernoulli", "--n", "1000", "--lam", "2", "--eps", "0.1"
    )
    res = json.loads(out)
    assert code == 0 and res["eps"] <= 0.1 and res["worst_pair"]["counts"] and res["t"] is None


def test_ops_reports_t_not_r(run):
    """Issue 12 item 13: OPS's tempering t was reported in the field named r."""
    import privbayes as pb

    code, out, _ = run(
        "calibrate", "--model", "logistic", "--n", "100", "--lam", "inf", "--eps", "1",
        "--method", "ops", "--beta", "0.1",
    )  # fmt: skip
    res = json.loads(out)
    cal = pb.calibrate(pb.BayesianLogisticRegression(beta=0.1), 100, float("inf"), 1.0, "ops")
    assert code == 0 and res["r"] is None and res["t"] == cal.t == cal.r
    assert res["lam"] is None  # inf, as strict JSON


def test_calibrate_has_no_seed(run):
    with pytest.raises(SystemExit):
        run("calibrate", "--model", "beta-bernoulli", "--n", "10", "--lam", "2", "--eps", "1",
            "--seed", "1")  # fmt: skip


def test_tiny_c_is_refused(run):
    code, _, err = run(
        "calibrate", "--model", "logistic", "--n", "100", "--lam", "2", "--eps", "1",
        "--c", "1e-300",
    )  # fmt: skip
    assert code == 2 and "c must lie in" in err


def test_logistic_without_d_leaves_the_backend_to_d(run):
    import privbayes as pb

    base = ("calibrate", "--model", "logistic", "--n", "426", "--lam", "2", "--eps", "1",
            "--beta", "1e-3")  # fmt: skip
    code, out, _ = run(*base)
    res = json.loads(out)
    exact = pb.calibrate(pb.BayesianLogisticRegression(beta=1e-3, backend="exact"), 426, 2.0, 1.0)
    assert code == 0 and res["backend"] == "auto" and "--d" in res["note"]
    assert res["guarantee"] == "undetermined (pass d)" and res["r"] == exact.r
    code, out, _ = run(*base, "--d", "30")
    res = json.loads(out)
    assert code == 0 and res["backend"] == "langevin" and "note" not in res
    assert res["guarantee"] == "algorithm"
