"""--model multinomial on sample, calibrate and audit (issue 13 §2): the CLI gives what the
Python API gives for the same public inputs and seed, the class order is the declared
--classes, and undeclared labels, a missing --classes, rows above c and flags that do not
apply exit 2 with one line, with nothing charged to the ledger."""

import json

import numpy as np
import pytest

import privbayes as pb
from privbayes.audit import audit_model

CLASSES = ("cat", "dog", "fish")
LABELS = ("--label", "animal", "--classes", ",".join(CLASSES))


@pytest.fixture
def table(tmp_path):
    """(path, X, y) with X, y as the CLI parses them; every row inside the unit ball."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(90, 3)) * 0.3
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) / 0.99)
    y = np.argmax(X @ rng.normal(size=(3, 3)), axis=1)
    path = tmp_path / "zoo.csv"
    path.write_text(
        "f1,f2,f3,animal\n"
        + "".join(
            f"{float(a)!r},{float(b)!r},{float(c)!r},{CLASSES[k]}\n"
            for (a, b, c), k in zip(X, y, strict=True)
        )
    )
    return path, X, y.astype(float)


def _ledger(run, path, db):
    code, _, err = run(
        "budget", "init", path.stem, "--eps", "100", "--delta", "1e-6", "--ledger", db
    )
    assert code == 0, err


def _charges(run, path, db) -> str:
    code, out, _ = run("budget", "show", path.stem, "--ledger", db)
    assert code == 0
    return out


@pytest.mark.parametrize(
    "method,lam,eps", [("direct", 1.5, 40.0), ("diffused", 2.0, 0.5), ("concentrated", 5.0, 1.0)]
)
def test_sample_matches_the_python_api(table, run, tmp_path, method, lam, eps):
    path, X, y = table
    db = tmp_path / "l.db"
    _ledger(run, path, db)
    argv = (
        *("sample", "--model", "multinomial", "--data", path, *LABELS, "--beta", "0.05"),
        *("--lam", lam, "--eps", eps, "--method", method, "--seed", "7", "--ledger", db),
    )
    code, out, err = run(*argv)
    assert code == 0 and err == "", err
    res = json.loads(out)
    assert set(res) == {
        *("value", "method", "r", "m", "t", "lam", "eps", "n", "guarantee", "tv", "delta"),
        "dp_eps",
        *("features", "intercept", "classes", "beta", "backend", "sampler"),
    }
    assert res["beta"] == 0.05  # the prior precision used (--beta auto: the rule's value)
    model = pb.MultinomialLogisticRegression(0.05, 1.0, 3)
    rel = pb.sample(model, (X, y), lam, eps, method, rng=7)
    # the back-end auto chose and Langevin's public parameters, as in the Python release
    assert res["backend"] == rel.calibration.model.backend == "langevin"
    assert res["sampler"] == rel.calibration.sampler and res["sampler"]["schedule"] == "utility"
    assert np.shape(res["value"]) == (3, 3) == rel.value.shape  # (d, K)
    np.testing.assert_array_equal(res["value"], rel.value)  # same seed, same draw
    assert (res["r"], res["m"], res["eps"], res["n"]) == (rel.r, rel.m, rel.eps, 90)
    assert res["eps"] <= eps and res["guarantee"] == "algorithm" == rel.guarantee
    assert res["classes"] == list(CLASSES) and res["features"] == ["f1", "f2", "f3"]
    assert res["intercept"] is False and res["t"] is None
    assert "(1 charges;" in _charges(run, path, db)
    assert run(*argv[:-2])[1] == out  # seeded: the same draw again (no ledger)
    assert run(*argv[:-4], "--seed", "8")[1] != out


def test_class_order_is_the_declared_one(table, run):
    """Declaring the classes in another order permutes the labels' codes, so the columns
    of the release follow --classes (the same seed gives the draw for the permuted y)."""
    path, X, y = table
    order = ("fish", "cat", "dog")
    argv = ("sample", "--model", "multinomial", "--data", path, "--label", "animal")
    code, out, err = run(*argv, "--classes", ",".join(order), "--lam", "2", "--eps", "1")
    assert code == 0, err
    res = json.loads(out)
    assert res["classes"] == list(order)
    code, out, _ = run(*argv, "--classes", ",".join(order), "--lam", "2", "--eps", "1", "--seed", 3)
    recode = np.array([order.index(CLASSES[int(k)]) for k in y], float)
    rel = pb.sample(pb.MultinomialLogisticRegression(0.01, 1.0, 3), (X, recode), 2.0, 1.0, rng=3)
    np.testing.assert_array_equal(json.loads(out)["value"], rel.value)


def test_backends_intercept_and_public_scaling(tmp_path, run):
    """--backend imh is approximate; --intercept adds a row of intercepts (d + 1, K);
    --scale reports the weights for the raw columns, as the library's release rescaled."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-20, 20, size=(100, 2))
    y = (X[:, 0] > -5).astype(int) + (X[:, 1] > 5).astype(int)
    path = tmp_path / "raw.csv"
    path.write_text(
        "a,b,y\n"
        + "".join(f"{float(a)!r},{float(b)!r},{k}\n" for (a, b), k in zip(X, y, strict=True))
    )
    base = (
        *("sample", "--model", "multinomial", "--data", path, "--label", "y"),
        *("--classes", "0,1,2", "--lam", "2", "--eps", "5", "--seed", "1", "--beta", "0.05"),
    )
    code, out, err = run(*base)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "norm > c = 1, e.g. line 2" in err and "--scale" in err and "--clip" in err
    bound = 20 * np.sqrt(2)  # public: each feature lies in [-20, 20]
    code, out, err = run(*base, "--scale", bound, "--intercept")
    assert code == 0, err
    res = json.loads(out)
    model = pb.MultinomialLogisticRegression(0.05, 1.0, 3, fit_intercept=True)
    fb = model.feature_bound
    assert res["intercept"] is True and np.shape(res["value"]) == (3, 3)
    assert res["feature_scale"] == pytest.approx(fb / bound)
    rel = pb.sample(model, (X * (fb / bound), y.astype(float)), 2.0, 5.0, rng=1)
    want = np.array(rel.value)
    want[:2] *= fb / bound
    np.testing.assert_allclose(res["value"], want, rtol=1e-12)
    code, out, err = run(*base, "--scale", bound, "--backend", "imh")
    assert code == 0, err
    res = json.loads(out)
    assert res["guarantee"] == "approximate" and np.shape(res["value"]) == (2, 3)
    imh = pb.MultinomialLogisticRegression(0.05, 1.0, 3, backend="imh")
    rel = pb.sample(imh, (X * (1 / bound), y.astype(float)), 2.0, 5.0, rng=1)
    np.testing.assert_allclose(np.array(res["value"]) * bound, rel.value, rtol=1e-12)
    code, out, err = run(*base, "--clip")  # clipped rows: the guarantee covers them
    rel = pb.sample(
        pb.MultinomialLogisticRegression(0.05, 1.0, 3),
        (pb.preprocessing.clip_rows(X, 1.0), y.astype(float)),
        2.0,
        5.0,
        rng=1,
    )
    assert code == 0 and json.loads(out)["value"] == rel.value.tolist()


@pytest.mark.parametrize("backend", [None, "langevin", "imh"])
@pytest.mark.parametrize("method", ["diffused", "concentrated"])
def test_calibrate_matches_the_python_api(run, backend, method):
    # auto chooses between exact and langevin from public inputs: it needs --d
    extra = ("--d", "3") if backend is None else ("--backend", backend)
    code, out, err = run(
        "calibrate", "--model", "multinomial", "--classes", "a,b,c,d", "--n", "500",
        "--lam", "3", "--eps", "0.2", "--method", method, "--c", "2", *extra,
    )  # fmt: skip
    assert code == 0, err
    res = json.loads(out)
    model = pb.MultinomialLogisticRegression(0.01, 2.0, 4, backend=backend or "auto")
    cal = pb.calibrate(model, 500, 3.0, 0.2, method, d=3 if backend is None else None)
    assert (res["r"], res["m"], res["eps"]) == (cal.r, cal.m, cal.eps) and res["eps"] <= 0.2
    want = {"imh": "approximate", "langevin": "algorithm", None: cal.guarantee}[backend]
    assert res["guarantee"] == cal.guarantee == want
    assert want in ("exact", "algorithm", "approximate")
    assert res["backend"] == cal.model.backend == (backend or cal.model.backend)
    assert res.get("sampler") == json.loads(json.dumps(cal.sampler))


def test_calibrate_flags_that_apply_are_used(run):
    base = ("calibrate", "--model", "multinomial", "--classes", "a,b", "--n", "50")
    outs = [run(*base, "--lam", "2", "--eps", "0.3", "--beta", b)[1] for b in ("0.01", "0.02")]
    assert json.loads(outs[0])["r"] != json.loads(outs[1])["r"]


def test_audit_runs_at_the_worst_pair(run):
    code, out, err = run(
        "audit", "--model", "multinomial", "--classes", "a,b,c", "--n", "20", "--lam", "2",
        "--eps", "2", "--beta", "0.1", "--trials", "2000", "--seed", "1",
    )  # fmt: skip
    assert code == 0, err
    res = json.loads(out)
    model = pb.MultinomialLogisticRegression(0.1, 1.0, 3)
    cal = pb.calibrate(model, 20, 2.0, 2.0, d=1)  # auto resolves as the audit does
    want = audit_model(model, 20, 2.0, 2.0, "diffused", 2000, rng=1, d=1)
    assert res["model"] == "multinomial" and res["eps_rdp"] == cal.eps
    assert (res["eps_lower"], res["eps_certified"]) == (want.eps_lower, want.eps_certified)
    assert 0 < res["eps_lower"] <= res["eps_certified"] and not res["violation"]
    assert "class 0 in D, class 1 in D'" in res["worst_pair"]


BAD_LABELS = [
    ("bird", "column 'animal': line 3 is 'bird', not one of --classes cat,dog,fish"),
    ("Cat", "line 3 is 'Cat', not one of --classes"),
    ("", "line 3 is '', not one of --classes"),
]


@pytest.mark.parametrize("cell,needle", BAD_LABELS)
def test_undeclared_labels_are_refused_and_nothing_is_charged(tmp_path, run, cell, needle):
    path = tmp_path / "bad.csv"
    path.write_text(f"f1,animal\n0.1,cat\n0.2,{cell}\n-0.3,fish\n")
    db = tmp_path / "l.db"
    _ledger(run, path, db)
    code, out, err = run(
        "sample", "--model", "multinomial", "--data", path, *LABELS, "--lam", "2", "--eps",
        "1", "--ledger", db,
    )  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err
    assert "(0 charges;" in _charges(run, path, db)


@pytest.mark.parametrize(
    "change,needle",
    [
        (("--classes", None), "--model multinomial needs --classes A,B,..."),
        (("--classes", "cat"), "--classes: need at least two non-empty labels"),
        (("--classes", "cat,dog,cat"), "--classes: duplicate labels"),
        (("--classes", "cat,,dog"), "--classes: need at least two"),
        (("--label", None), "--model multinomial needs --label COL"),
        (("--label", "nope"), "--label: no column 'nope'"),
        (("--features", "f1,nope"), "--features: no column 'nope'"),
        (("--features", "f1,animal"), "--label column among them"),
        (("--c", "0.3"), "norm > c = 0.3, e.g. line"),
        (("--c", "-1"), "c"),
        (("--beta", "0"), "beta"),
        (("--scale", "0"), "--scale: need a finite public bound > 0"),
        (("--intercept-scaling", "0.3"), "--intercept-scaling needs --intercept"),
        (("--positive", "cat"), "--positive does not apply to --model multinomial"),
        (("--column", "animal"), "--column does not apply to --model multinomial"),
        (("--categories", "a,b"), "--categories does not apply to --model multinomial"),
        (("--max-count", "3"), "--max-count does not apply to --model multinomial"),
        (("--alpha", "1"), "--alpha does not apply to --model multinomial"),
    ],
)
def test_bad_options_are_refused_and_nothing_is_charged(table, tmp_path, run, change, needle):
    path, _, _ = table
    argv = list(LABELS)
    flag, value = change
    if flag in argv:  # replace (or drop) the flag's value
        i = argv.index(flag)
        del argv[i : i + 2]
    if value is not None:
        argv += [flag, value]
    db = tmp_path / "l.db"
    _ledger(run, path, db)
    code, out, err = run(
        "sample", "--model", "multinomial", "--data", path, *argv, "--lam", "2", "--eps", "1",
        "--ledger", db,
    )  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err
    assert "(0 charges;" in _charges(run, path, db)


@pytest.mark.parametrize("cell", ["nan", "inf", "x"])
def test_non_finite_features_are_refused(tmp_path, run, cell):
    path = tmp_path / "nan.csv"
    path.write_text(f"f1,animal\n0.1,cat\n{cell},dog\n")
    code, out, err = run(
        "sample", "--model", "multinomial", "--data", path, *LABELS, "--lam", "2", "--eps", "1"
    )
    assert code == 2 and out == "" and err.count("\n") == 1 and "column 'f1': line 3" in err


@pytest.mark.parametrize(
    "command,extra",
    [("calibrate", ("--n", "10")), ("audit", ("--trials", "100"))],
)
def test_calibrate_and_audit_need_the_classes(run, command, extra):
    code, out, err = run(command, "--model", "multinomial", *extra, "--lam", "2", "--eps", "1")
    assert code == 2 and out == "" and err.count("\n") == 1 and "needs --classes" in err
    code, out, err = run(
        command, "--model", "multinomial", "--classes", "a,b", *extra, "--lam", "2", "--eps", "1",
        "--backend", "exact",
    )  # fmt: skip
    assert code == 0, err  # the exact back-end serves K classes too (docs/multinomial.md §6)
    res = json.loads(out)
    if command == "calibrate":
        assert res["guarantee"] == "exact" and res["backend"] == "exact"
    else:
        assert 0 <= res["eps_lower"] <= res["eps_certified"] and not res["violation"]


def test_parquet_sources_are_refused(tmp_path, run):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame({"f1": [0.1, 0.2], "animal": ["cat", "dog"]}).to_parquet(tmp_path / "x.parquet")
    code, out, err = run(
        "sample", "--model", "multinomial", "--data", tmp_path / "x.parquet", *LABELS,
        "--lam", "2", "--eps", "1",
    )  # fmt: skip
    assert code == 2 and out == "" and "reads one CSV file" in err


def test_ops_with_a_radius(run):
    base = (
        "calibrate", "--model", "multinomial", "--classes", "a,b,c", "--n", "5000", "--lam", "2",
        "--eps", "1", "--method", "ops", "--beta", "0.1", "--d", "2",
    )  # fmt: skip
    outs = []
    for radius in ("20", "40"):
        code, out, err = run(*base, "--radius", radius)
        assert code == 0, err
        outs.append(json.loads(out))
    want = pb.calibrate(
        pb.MultinomialLogisticRegression(0.1, 1.0, 3, 20.0), 5000, 2.0, 1.0, "ops", d=2
    )
    assert outs[0]["t"] == want.t and outs[0]["guarantee"] == "exact"
    assert outs[1]["t"] < outs[0]["t"]  # a larger ball costs tempering
    i = base.index("--method")
    code, _, err = run(*base[:i], *base[i + 2 :], "--radius", "20")  # --method ops dropped
    assert code == 2 and "--radius applies to --method ops only" in err
