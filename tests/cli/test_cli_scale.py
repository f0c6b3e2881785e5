"""privbayes sample/query on Parquet files, directories and globs (docs/data.md): the same
release as from the same rows in one CSV file; errors stay one line, exit status 2."""

import json

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


@pytest.fixture
def parts(tmp_path):
    """The same 90 rows as one CSV file and as three Parquet files in a folder."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "flag": (rng.random(90) < 0.3).astype(int),
            "code": rng.integers(0, 3, 90),
            "color": np.array(["red", "green", "blue"])[rng.integers(0, 3, 90)],
            "income": np.where(rng.random(90) < 0.3, ">50K", "<=50K"),
            "age": rng.uniform(18, 90, 90).round(1),
            "visits": rng.poisson(3.0, 90),
        }
    )
    frame.to_csv(tmp_path / "all.csv", index=False)
    folder = tmp_path / "pq"
    folder.mkdir()
    for i in range(3):
        frame.iloc[30 * i : 30 * (i + 1)].to_parquet(folder / f"part{i}.parquet", index=False)
    return tmp_path


PRIVACY = ("--lam", "2", "--eps", "1", "--seed", "3")


@pytest.mark.parametrize(
    "model",
    [
        ("--model", "beta-bernoulli", "--column", "flag"),
        ("--model", "dirichlet-categorical", "--column", "code", "--alpha", "1", "1", "1"),
        (
            "--model",
            "beta-bernoulli",
            "--column",
            "income",
            "--positive",
            ">50K",
            "--negative",
            "<=50K",
        ),
        ("--model", "dirichlet-categorical", "--column", "color", "--categories", "red,green,blue"),
        ("--model", "gamma-poisson", "--column", "visits", "--max-count", "20"),
        (
            "--model",
            "normal",
            "--column",
            "age",
            "--mu",
            "50",
            "--sigma",
            "20",
            "--noise-sigma",
            "15",
            "--low",
            "0",
            "--high",
            "120",
        ),
    ],  # fmt: skip
)
def test_sample_from_parquet_glob_and_folder_is_the_csv_release(parts, run, model):
    code, out, err = run("sample", "--data", parts / "all.csv", *model, *PRIVACY)
    assert code == 0, err
    want = json.loads(out)
    for source in (parts / "pq", str(parts / "pq" / "*.parquet"), parts / "pq" / "part0.parquet"):
        code, out, err = run("sample", "--data", source, *model, *PRIVACY)
        assert code == 0, err
        got = json.loads(out)
        if str(source).endswith("part0.parquet"):
            assert got["n"] == 30
        else:
            assert got == want


def test_query_from_parquet_is_the_csv_release(parts, run):
    args = ("--column", "age", "--low", "0", "--high", "120", *PRIVACY)
    code, out, _ = run("query", "--data", parts / "all.csv", *args)
    code2, out2, err = run("query", "--data", str(parts / "pq" / "*.parquet"), *args)
    assert code == code2 == 0, err
    assert json.loads(out) == json.loads(out2)
    code, _, err = run(
        "query", "--data", parts / "pq", "--column", "age", "--low", "0", "--high", "50", *PRIVACY
    )
    assert code == 2 and "rescaled from [0, 50]" in err and "--clip" in err
    code, out, _ = run(
        *("query", "--data", parts / "pq", "--column", "age", "--low", "0", "--high", "50"),
        *("--clip", *PRIVACY),
    )
    assert code == 0 and json.loads(out)["n"] == 90


def test_parquet_errors_are_one_line(parts, run):
    code, _, err = run(
        "sample", "--data", parts / "pq", "--model", "beta-bernoulli", "--column", "code", *PRIVACY
    )
    assert code == 2 and "data['code']" in err and "must hold only 0 or 1" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(
        "sample", "--data", parts / "pq", "--model", "beta-bernoulli", "--column", "nope", *PRIVACY
    )
    assert code == 2 and "no column 'nope'" in err
    code, _, err = run(
        *("sample", "--data", parts / "pq", "--model", "dirichlet-categorical"),
        *("--column", "color", "--categories", "red,green", *PRIVACY),
    )
    first = int(np.flatnonzero(pd.read_csv(parts / "all.csv")["color"] == "blue")[0])
    count = int((pd.read_csv(parts / "all.csv")["color"] == "blue").sum())
    assert code == 2 and f"{count} row(s) hold a label that is not one of --categories" in err
    assert f"the first is data row {first} " in err
    code, _, err = run(
        *("sample", "--data", parts / "pq", "--model", "beta-bernoulli", "--column", "income"),
        *("--positive", ">50K", *PRIVACY),
    )
    assert code == 2 and "--positive and --negative go together" in err
    code, _, err = run(
        "sample", "--data", str(parts / "none*.parquet"), "--model", "beta-bernoulli",
        "--column", "flag", *PRIVACY,
    )  # fmt: skip
    assert code == 2 and "no files match" in err
    code, _, err = run(
        "sample", "--data", parts / "pq", "--model", "logistic", "--label", "flag", *PRIVACY
    )
    assert code == 2 and "conjugate models only" in err
