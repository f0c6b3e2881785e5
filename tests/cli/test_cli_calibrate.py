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


def test_beta_auto_needs_d_and_reports_the_rule(run, logistic_csv):
    """Issue 21 §5: --beta auto is the public rule c^2 d / (n M^2), from --n and --d."""
    import privbayes as pb

    base = ("calibrate", "--model", "logistic", "--n", "500", "--lam", "2", "--eps", "1")
    code, _, err = run(*base, "--beta", "auto")
    assert code != 0 and "pass d" in err
    code, out, _ = run(*base, "--beta", "auto", "--d", "7", "--margin-scale", "4")
    res = json.loads(out)
    assert code == 0 and res["beta"] == pb.auto_beta(500, 7, 1.0, 4.0)
    code, _, err = run(*base, "--beta", "0.1", "--margin-scale", "4")
    assert code != 0 and "margin_scale applies to beta='auto' only" in err
    code, _, err = run(
        "calibrate", "--model", "beta-bernoulli", "--n", "9", "--lam", "2", "--eps", "1",
        "--beta", "auto",
    )  # fmt: skip
    assert code != 0 and "logistic and multinomial only" in err
    # sample: the rule from the file's n and d (2 features, no intercept here)
    code, out, _ = run(
        "sample", "--model", "logistic", "--data", logistic_csv, "--label", "label",
        "--lam", "2", "--eps", "1", "--beta", "auto", "--seed", "1", "--clip",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["beta"] == pb.auto_beta(80, 2, 1.0)
