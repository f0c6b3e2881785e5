"""privbayes sample: conjugate and logistic releases, labels, intercept and scaling."""

import json

import numpy as np
import pytest

import privbayes as pb

BB = ("sample", "--model", "beta-bernoulli", "--lam", "2", "--eps", "0.5")


def test_sample_beta_bernoulli(csv_file, run):
    code, out, err = run(*BB, "--data", csv_file, "--column", "flag", "--seed", "3")
    assert code == 0 and err == ""
    res = json.loads(out)
    assert set(res) == {
        "value",
        "method",
        "r",
        "m",
        "t",
        "lam",
        "eps",
        "n",
        "guarantee",
        "tv",
        "delta",
        "dp_eps",
    }
    assert res["guarantee"] == "exact" and res["tv"] == 0.0
    assert res["n"] == 60 and res["eps"] <= 0.5 and 0 < res["value"] < 1 and res["t"] is None
    assert run(*BB, "--data", csv_file, "--column", "flag", "--seed", "3")[1] == out  # seeded


def test_declared_labels_and_dirichlet(csv_file, run):
    code, out, _ = run(
        *("sample", "--model", "beta-bernoulli", "--data", csv_file, "--column", "income"),
        *("--positive", ">50K", "--negative", "<=50K", "--lam", "3", "--eps", "1"),
        *("--method", "concentrated", "--alpha", "2", "5"),
    )
    assert code == 0 and json.loads(out)["method"] == "concentrated"
    code, out, _ = run(
        *("sample", "--model", "dirichlet-categorical", "--data", csv_file, "--column"),
        *("color", "--categories", "red,green,blue", "--lam", "2", "--eps", "1"),
    )
    res = json.loads(out)
    assert code == 0 and len(res["value"]) == 3 and sum(res["value"]) == pytest.approx(1)


@pytest.mark.parametrize(
    "labels,needle",
    [
        # issue 12 item 9: a misspelt label used to count every record as 0, exit status 0
        (("--positive", ">50k"), "--positive and --negative go together"),
        (("--positive", ">50k", "--negative", "<=50K"), "line 2 is '>50K', neither"),
        (("--positive", ">50K", "--negative", "<=50k"), "neither --positive >50K"),
        (("--negative", "<=50K"), "go together"),
        (("--positive", ">50K", "--negative", ">50K"), "both list >50K"),
        (("--positive", ">50K,", "--negative", "<=50K"), "--positive: need non-empty"),
        ((), "expected 0/1 or true/false"),
    ],
)
def test_labels_outside_the_declared_set_are_refused(csv_file, run, labels, needle):
    code, out, err = run(*BB, "--data", csv_file, "--column", "income", *labels)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1
    assert "60" not in err  # no count of the private data in the message


def test_several_labels_per_class(tmp_path, run):
    path = tmp_path / "adult.csv"  # Adult's test file writes '>50K.' for '>50K'
    path.write_text("income\n>50K\n<=50K.\n<=50K\n>50K.\n")
    code, out, err = run(
        *BB, "--data", path, "--column", "income",
        *("--positive", ">50K,>50K.", "--negative", "<=50K,<=50K."),
    )  # fmt: skip
    assert code == 0 and json.loads(out)["n"] == 4


def test_sample_logistic(logistic_csv, run):
    args = (
        *("sample", "--model", "logistic", "--data", logistic_csv, "--label", "label"),
        *("--lam", "2", "--eps", "1", "--seed", "0", "--clip"),
    )
    code, out, err = run(*args)
    res = json.loads(out)
    assert code == 0 and len(res["value"]) == 2 and res["features"] == ["f1", "f2"]
    assert res["intercept"] is False
    code, out, err = run(*args, "--method", "ops", "--beta", "0.5")
    res = json.loads(out)
    assert code == 0 and res["method"] == "ops" and res["r"] is None and 0 < res["t"] <= 1
    code, out, err = run(*args, "--backend", "pymc")
    assert code == 0 and len(json.loads(out)["value"]) == 2
    logistic_csv.write_text("f1,label\n0.1,0\n5.0,1\n")
    code, _, err = run(*args[:-1])
    assert code == 2 and "norm > c" in err
    assert "line 3" in err and "--scale" in err and "--clip" in err  # the CLI's remedies
    assert "privbayes.preprocessing" not in err and err.count("\n") == 1


def test_logistic_intercept_and_public_scaling(tmp_path, run):
    """--intercept appends the column s inside the release (as the estimator does);
    --scale multiplies rows by (feature bound) / BOUND and reports raw-column weights."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-30, 30, size=(120, 2))
    y = (X[:, 0] + 10 > 0).astype(int)
    path = tmp_path / "raw.csv"
    path.write_text("a,b,y\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y, strict=True)))
    base = (
        *("sample", "--model", "logistic", "--data", path, "--label", "y", "--lam", "2"),
        *("--eps", "5", "--seed", "1", "--beta", "0.05"),
    )
    code, _, err = run(*base)
    assert code == 2 and "norm > c" in err  # raw rows are far over c = 1
    bound = 30 * np.sqrt(2)  # public: each feature lies in [-30, 30]
    code, out, err = run(*base, "--scale", bound, "--intercept")
    res = json.loads(out)
    assert code == 0, err
    assert res["intercept"] is True and len(res["value"]) == 3
    s, fb = 0.5, np.sqrt(1 - 0.25)  # defaults: s = c/2, rows bounded by sqrt(c^2 - s^2)
    assert res["feature_scale"] == pytest.approx(fb / bound)
    # the same release through the library: identical draw (seeded), weights rescaled
    model = pb.BayesianLogisticRegression(beta=0.05, fit_intercept=True)
    rel = pb.sample(model, (X * (fb / bound), y), 2.0, 5.0, rng=1)
    want = np.array(rel.value)
    want[:2] *= fb / bound
    np.testing.assert_allclose(res["value"], want, rtol=1e-12)
    assert model.intercept_scaling == s and model.feature_bound == pytest.approx(fb)
    code, _, err = run(*base, "--scale", bound, "--intercept-scaling", "0.3")
    assert code == 2 and "--intercept-scaling needs --intercept" in err
    code, _, err = run(*base, "--scale", "0", "--intercept")
    assert code == 2 and "--scale" in err
    code, _, err = run(*base, "--scale", bound, "--intercept", "--intercept-scaling", "1")
    assert code == 2 and "intercept_scaling must be in (0, c=1)" in err


def test_logistic_labels(tmp_path, run):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2)) * 0.3
    path = tmp_path / "pm.csv"
    path.write_text("f1,f2,y\n" + "".join(f"{a},{b},{'+1' if a > 0 else '-1'}\n" for a, b in X))
    base = (
        *("sample", "--model", "logistic", "--data", path, "--label", "y"),
        *("--lam", "2", "--eps", "1", "--seed", "0", "--clip"),
    )
    code, out, _ = run(*base)
    assert code == 0 and len(json.loads(out)["value"]) == 2
    code, _, err = run(*base, "--features", "f1,y")
    assert code == 2 and "--label" in err
    code, _, err = run(*base, "--positive", "+1")
    assert code == 2 and "go together" in err
    code, out, _ = run(*base, "--positive", "+1", "--negative", "-1")
    assert code == 0
    code, _, err = run(*base, "--positive", "1", "--negative", "-1")
    assert code == 2 and "line 2 is" in err
    # a column mixing the 0/1 and -1/+1 conventions is ambiguous
    text = path.read_text().splitlines()
    text[1] = text[1].rsplit(",", 1)[0] + ",0"
    path.write_text("\n".join(text) + "\n")
    code, _, err = run(*base)
    assert code == 2 and "both 0 and -1" in err


def test_data_are_read_after_public_choices(csv_file, run, tmp_path):
    """A bad model argument is reported before the data file is opened."""
    code, _, err = run(
        *BB, "--data", tmp_path / "missing.csv", "--column", "flag", "--alpha", "1", "2", "3"
    )
    assert code == 2 and "ALPHA [BETA]" in err


def test_exact_backend_diagnostics_are_labelled_and_left_out(logistic_csv, run):
    """The exact back-end's data-dependent diagnostics are named as such in PrivateSample's
    docstring, and the CLI's JSON carries none of them."""
    import numpy as np

    import privbayes as pb

    args = (
        *("sample", "--model", "logistic", "--data", logistic_csv, "--label", "label"),
        *("--lam", "2", "--eps", "1", "--seed", "0", "--clip", "--backend", "exact"),
    )
    code, out, _ = run(*args)
    res = json.loads(out)
    assert code == 0 and res["guarantee"] == "exact"
    for key in ("diagnostics", "accepted", "acceptance", "public", "seconds_fit"):
        assert key not in out
    x = pb.preprocessing.clip_rows(np.random.default_rng(0).normal(size=(200, 2)), 0.9)
    y = (x[:, 0] > 0).astype(float)
    for backend in ("exact", "langevin"):
        model = pb.BayesianLogisticRegression(beta=0.1, backend=backend)
        rel = pb.sample(
            model, (x, y), 2.0, 1.0, rng=0, method="ops" if backend == "exact" else "diffused"
        )
        for key in rel.diagnostics:  # every key is labelled public or data-dependent
            assert f"``{key}``" in pb.PrivateSample.__doc__ or key.startswith("seconds_")


@pytest.mark.parametrize("model", ["logistic", "multinomial"])
def test_scale_whose_factor_is_not_a_finite_normal_number_is_refused(logistic_csv, run, model):
    """--scale 1e300 with --c 1e-100 made the factor (feature bound) / BOUND 0: every row
    became 0 and the release went ahead (exit 0); --scale 1e-320 made it inf. Refused
    before any cell is read, naming --scale."""
    base = (
        *("sample", "--model", model, "--data", logistic_csv, "--label", "label"),
        *("--lam", "2", "--eps", "1", "--seed", "0", "--clip", "--backend", "langevin"),
        *(("--classes", "0,1") if model == "multinomial" else ()),
    )
    for c, bound in (("1e-100", "1e300"), ("1", "1e-320"), ("1e-10", "1e299")):
        code, out, err = run(*base, "--c", c, "--scale", bound)
        assert code == 2 and out == "" and "--scale" in err and "finite normal" in err
    code, out, err = run(*base, "--c", "1e-100", "--scale", "1e100")  # factor 1e-200: fine
    assert code == 0, err
    assert json.loads(out)["feature_scale"] == pytest.approx(1e-200)
    # rows scaled up by a huge factor and clipped: --clip keeps every row within c (c / ||x||
    # was subnormal, and the clipped rows came out above c, refused)
    code, out, err = run(*base, "--c", "1e-100", "--scale", "1e-320")  # factor 1e220
    assert code == 0, err


def test_max_steps_caps_langevin_and_is_what_the_warning_advises(logistic_csv, run):
    """Issue 14 item 5: StepCapWarning advised max_steps, which the CLI did not take."""
    args = (
        *("sample", "--model", "logistic", "--data", logistic_csv, "--label", "label"),
        *("--lam", "2", "--eps", "1", "--seed", "0", "--clip", "--backend", "langevin"),
    )
    with pytest.warns(pb.StepCapWarning, match="--max-steps on the command line"):
        code, out, err = run(*args, "--max-steps", "3")
    assert code == 0, err
    assert len(json.loads(out)["value"]) == 2
    code, out, err = run(
        *("calibrate", "--model", "logistic", "--n", "80", "--d", "2", "--lam", "2"),
        *("--eps", "1", "--backend", "langevin", "--max-steps", "3"),
    )
    assert code == 0 and json.loads(out)["sampler"]["steps"] == 3
    with pytest.warns(pb.StepCapWarning, match="--max-steps"):
        code, out, err = run(
            *("sample", "--model", "multinomial", "--classes", "0,1", "--data", logistic_csv),
            *("--label", "label", "--lam", "2", "--eps", "1", "--clip", "--max-steps", "3"),
        )
    assert code == 0 and np.shape(json.loads(out)["value"]) == (2, 2)
    code, out, err = run(*args[:-1], "imh", "--max-steps", "50")
    assert code == 2 and "max_steps does not apply to backend='imh'" in err
    code, out, err = run(*args, "--max-steps", "0")
    assert code == 2 and "max_steps must be an integer in [1, 10**7]" in err


def test_schedule_flag_picks_langevins_step_rule(run):
    """--schedule: utility (the default) or stationary, shown in calibrate's sampler; refused
    with a back-end that runs no Langevin."""
    base = ("calibrate", "--model", "logistic", "--n", "400", "--d", "2", "--lam", "2")
    code, out, err = run(*base, "--eps", "0.1", "--backend", "langevin")
    assert code == 0, err
    default = json.loads(out)["sampler"]
    code, out, err = run(*base, "--eps", "0.1", "--backend", "langevin", "--schedule", "stationary")
    assert code == 0, err
    stationary = json.loads(out)["sampler"]
    assert (default["schedule"], stationary["schedule"]) == ("utility", "stationary")
    assert default["steps"] < stationary["steps"]
    code, out, err = run(*base, "--eps", "0.1", "--backend", "imh", "--schedule", "utility")
    assert code == 2 and "schedule does not apply to backend='imh'" in err
