"""CSV reading, one-line errors with exit status 2, and strict JSON output."""

import json
import math
import os

import pytest

from privbayes.cli import _io


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--data", "missing.csv", "--column", "flag"], "no such file"),
        (["--column", "nope"], "no column 'nope'"),
        (["--column", "color"], "line 2 is 'red'"),
        (["--column", "flag", "--eps", "-1"], "eps"),
        (["--column", "flag", "--lam", "1"], "lam must be > 1"),
        (["--column", "flag", "--method", "direct", "--lam", "5"], "direct sampling"),
    ],
)
def test_one_line_errors_exit_2(csv_file, run, argv, needle):
    base = {"--model": "beta-bernoulli", "--data": str(csv_file), "--lam": "2", "--eps": "1"}
    given = dict(zip(argv[::2], argv[1::2], strict=True))
    args = ["sample"]
    for key, val in {**base, **given}.items():
        args += [key, val]
    code, out, err = run(*args)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1


def test_bad_csv(tmp_path, run):
    base = ("sample", "--model", "beta-bernoulli", "--column", "x", "--lam", "2", "--eps", "1")
    empty = tmp_path / "e.csv"
    empty.write_text("")
    code, _, err = run(*base, "--data", empty)
    assert code == 2 and "empty" in err
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    code, _, err = run(*base, "--data", binary)
    assert code == 2 and err.count("\n") == 1
    nan = tmp_path / "nan.csv"
    nan.write_text("x\n0.5\nnan\n")
    code, _, err = run("query", "--data", nan, "--column", "x", "--low", "0", "--high", "1",
                       "--lam", "2", "--eps", "1")  # fmt: skip
    assert code == 2 and "line 3 is 'nan', not a finite number" in err


def test_rows_with_extra_fields_are_refused(tmp_path, run):
    extra = tmp_path / "extra.csv"
    extra.write_text("flip,x\n1,0.1\n1,0.2,9\n0,0.3\n")
    code, out, err = run("query", "--data", extra, "--column", "x", "--low", "0", "--high", "1",
                         "--lam", "2", "--eps", "1")  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "line 3" in err and "3 fields" in err and "header has 2" in err


def test_argument_errors_are_one_line(run):
    with pytest.raises(SystemExit) as exc:
        run("sample", "--model", "beta-bernoulli", "--lam", "abc")
    assert exc.value.code == 2


def test_csv_details(tmp_path, run):
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffsmoker\n1\n0\n1\n".encode())
    base = ("sample", "--model", "beta-bernoulli", "--lam", "2", "--eps", "1")
    code, out, _ = run(*base, "--data", bom, "--column", "smoker")
    assert code == 0 and json.loads(out)["n"] == 3
    dup = tmp_path / "dup.csv"
    dup.write_text("a,a\n1,0\n")
    code, _, err = run(*base, "--data", dup, "--column", "a")
    assert code == 2 and "repeats a column name" in err and "fields 1 and 2" in err
    code, _, err = run(
        *("sample", "--model", "dirichlet-categorical", "--data", dup, "--column", "a"),
        *("--categories", "x,x,y", "--lam", "2", "--eps", "1"),
    )
    assert code == 2 and "duplicate labels" in err


def test_json_is_strict_and_inf_is_null(run):
    """Issue 12 item 13: infinities were written as the string "inf"."""
    code, out, _ = run(
        "calibrate", "--model", "beta-bernoulli", "--n", "0", "--lam", "inf", "--eps", "1"
    )
    res = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    assert code == 0 and res["lam"] is None and "inf" not in out.lower()
    assert _io.dump_json({"a": math.inf, "b": [-math.inf, math.nan, 1.5]}) == (
        '{"a": null, "b": [null, null, 1.5]}'
    )


def test_json_converts_numpy():
    import numpy as np

    text = _io.dump_json({"v": np.array([1.0, np.inf]), "k": np.int64(3), "x": np.float64(2)})
    assert json.loads(text) == {"v": [1.0, None], "k": 3, "x": 2.0}


def test_out_of_range_n_is_one_line(run):
    code, _, err = run(
        "calibrate", "--model", "beta-bernoulli", "--n", "100000000000000000000",
        "--lam", "2", "--eps", "1",
    )  # fmt: skip
    assert code == 2 and "n must be" in err


# -- blank lines, ragged rows and header-less files (the audit's "nothing about a release may
# depend on data the certificate does not cover") --------------------------------------------
PRIVACY = ("--lam", "2", "--eps", "1", "--seed", "0")
READERS = {  # every reader of a CSV column: (header, a record, the command's arguments)
    "beta-bernoulli 0/1": (
        "flag",
        "1",
        ("sample", "--model", "beta-bernoulli", "--column", "flag"),
    ),
    "beta-bernoulli labels": (
        "income",
        ">50K",
        (
            "sample",
            "--model",
            "beta-bernoulli",
            "--column",
            "income",
            "--positive",
            ">50K",
            "--negative",
            "<=50K",
        ),
    ),  # fmt: skip
    "dirichlet labels": (
        "color",
        "red",
        ("sample", "--model", "dirichlet", "--column", "color", "--categories", "red,blue"),
    ),
    "dirichlet codes": (
        "code",
        "1",
        ("sample", "--model", "dirichlet", "--column", "code", "--alpha", "1", "1"),
    ),
    "gamma-poisson": (
        "visits",
        "3",
        ("sample", "--model", "gamma-poisson", "--column", "visits", "--max-count", "9"),
    ),
    "normal": (
        "temp",
        "0.5",
        (
            "sample",
            "--model",
            "normal",
            "--column",
            "temp",
            "--mu",
            "0",
            "--sigma",
            "1",
            "--noise-sigma",
            "1",
            "--low=-1",
            "--high",
            "1",
        ),
    ),  # fmt: skip
    "query": ("age", "40", ("query", "--column", "age", "--low", "0", "--high", "100")),
}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize(
    "body,line",
    [
        ("{h}\n{v}\n\n{v}\n", 3),  # a blank line inside a one-column file
        ("{h}\n{v}\n{v}\n\n", 4),  # polars: a missing value in the last row, an empty line
        ("{h}\n{v}\n   \n{v}\n", 3),  # spaces only
        ("{h}\n\n{v}", 2),  # no final line break
        ("other,{h}\n0,{v}\n\n0,{v}\n", 3),  # a blank line in a two-column file
        ('other,{h}\n"a\nb",{v}\n\n0,{v}\n', 4),  # line numbers count a quoted cell's lines
    ],
)
def test_blank_lines_are_refused_with_their_line_number(tmp_path, run, reader, body, line):
    """A blank line in a one-column CSV was dropped silently, so n and the data changed
    (polars and pyarrow write a missing value that way)."""
    header, value, argv = READERS[reader]
    path = tmp_path / "blank.csv"
    path.write_text(body.format(h=header, v=value))
    code, out, err = run(*argv, "--data", path, *PRIVACY)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"line {line} of {path} is blank" in err
    clean = tmp_path / "clean.csv"
    clean.write_text(f"{header}\n{value}\n{value}\n")  # the final line break is fine
    code, out, _ = run(*argv, "--data", clean, *PRIVACY)
    assert code == 0 and json.loads(out)["n"] == 2


@pytest.mark.parametrize("model", ["logistic", "multinomial"])
def test_glm_readers_refuse_blank_lines(tmp_path, run, model):
    flags = ("--classes", "0,1") if model == "multinomial" else ()
    path = tmp_path / "lr.csv"
    for rows, line in (("0.1,0.2,1\n\n0.2,0.1,0\n", 3), ("0.1,0.2,1\n0.2,0.1,0\n\n", 4)):
        path.write_text("f1,f2,label\n" + rows)
        code, out, err = run(
            "sample", "--model", model, "--data", path, "--label", "label", *flags,
            "--backend", "langevin", *PRIVACY,
        )  # fmt: skip
        assert code == 2 and f"line {line} of {path} is blank" in err


def test_rows_with_missing_fields_are_refused(tmp_path, run):
    """A row shorter than the header was read for its first columns (its cells may have
    shifted); it is refused like a longer one."""
    short = tmp_path / "short.csv"
    short.write_text("flag,x,y\n1,0.1,2\n1,0.2\n0,0.3,4\n")
    code, out, err = run("sample", "--model", "beta-bernoulli", "--data", short,
                         "--column", "flag", *PRIVACY)  # fmt: skip
    assert code == 2 and out == "" and "line 3" in err and "2 fields but the header has 3" in err


HEADERLESS = "39,State-gov,77516,true\n50,Self-emp-not-inc,83311,false\n"


@pytest.mark.parametrize(
    "argv",
    [
        ("query", "--column", "age", "--low", "0", "--high", "100"),
        ("sample", "--model", "beta-bernoulli", "--column", "age"),
        ("sample", "--model", "logistic", "--label", "income"),
        ("sample", "--model", "logistic", "--label", "39", "--features", "age"),
    ],
)
def test_header_less_files_are_not_quoted(tmp_path, run, argv):
    """A header-less CSV printed its whole first record ("columns: 39, State-gov, ...")."""
    path = tmp_path / "adult.csv"
    path.write_text(HEADERLESS)
    code, out, err = run(*argv, "--data", path, *PRIVACY)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "State-gov" not in err and "77516" not in err and "true" not in err
    assert "4 fields" in err and "header row missing" in err
    repeated = tmp_path / "repeated.csv"
    repeated.write_text("7731,7731,1\n7731,0,1\n")
    code, out, err = run(*argv, "--data", repeated, *PRIVACY)
    assert code == 2 and "7731" not in err and "fields 1 and 2" in err


def test_header_less_globs_are_not_quoted(tmp_path, run):
    pytest.importorskip("pandas")
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text(HEADERLESS)
    for argv in (
        ("query", "--column", "age", "--low", "0", "--high", "100"),
        ("sample", "--model", "beta-bernoulli", "--column", "age"),
        ("sample", "--model", "beta-bernoulli", "--column", "age", "--positive", "1",
         "--negative", "0"),
    ):  # fmt: skip
        code, out, err = run(*argv, "--data", str(folder / "*.csv"), *PRIVACY)
        assert code == 2 and out == "" and "no column 'age'" in err
        assert "State-gov" not in err and "77516" not in err


def test_header_names_are_never_listed(tmp_path, run):
    """A header-less file whose first record is all text ("HIV positive,London") printed
    that record as "columns: HIV positive, London": a header cannot be told from a record by
    looking, so no message lists the header's names, on a single file or a glob."""
    path = tmp_path / "diag.csv"
    folder = tmp_path / "parts"
    folder.mkdir()
    argv = ("sample", "--model", "dirichlet-categorical", "--column", "diagnosis",
            "--categories", "a,b", *PRIVACY)  # fmt: skip
    for body in ("HIV positive,London\nnegative,Paris\n", "flag,color\n1,red\n"):
        path.write_text(body)
        (folder / "a.csv").write_text(body)
        for data in (path, str(folder / "*.csv")):
            code, out, err = run(*argv, "--data", data)
            assert code == 2 and out == "" and err.count("\n") == 1
            assert "no column 'diagnosis'" in err and "2 fields" in err and "head -1" in err
            for name in body.split("\n")[0].split(","):  # the header (or first record)
                assert name not in err.replace("--column", ""), (name, err)
    path.write_text("flag,color,flag\n1,red,0\n")
    code, _, err = run("sample", "--model", "beta-bernoulli", "--data", path,
                       "--column", "flag", *PRIVACY)  # fmt: skip
    assert code == 2 and "repeats a column name" in err and "fields 1 and 3" in err
    assert "color" not in err


def test_blank_lines_in_csv_globs_are_refused(tmp_path, run):
    pytest.importorskip("pandas")
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.csv").write_text("flag\n1\n0\n")
    (folder / "b.csv").write_text("flag\n1\n\n0\n\n")
    argv = ("sample", "--model", "beta-bernoulli", "--column", "flag")
    code, out, err = run(*argv, "--data", str(folder / "*.csv"), *PRIVACY)
    assert code == 2 and out == "" and f"line 3 of {folder / 'b.csv'} is blank" in err
    assert "Mismatched" not in err and err.count("\n") == 1
    (folder / "b.csv").write_text("flag\n1\n0\n")
    code, out, _ = run(*argv, "--data", str(folder / "*.csv"), *PRIVACY)
    assert code == 0 and json.loads(out)["n"] == 4


# -- CSV globs read by the single-file rules; other readers' details ---------------------------
def _ledger(tmp_path, run):
    db = tmp_path / "l.sqlite"
    assert run("budget", "init", "d", "--eps", "50", "--delta", "1e-6", "--ledger", db)[0] == 0
    return db


def _charges(run, db) -> str:
    return run("budget", "show", "--ledger", db)[1]


def test_csv_globs_refuse_what_a_single_file_refuses(tmp_path, run):
    """`--data 'logs/*.csv'` went through Dask's read_csv: a trailing comma on every record
    made "visits" the index and released the mean of "hours"; a longer first record shifted
    every value. Both are refused, with the file and the line, before any charge."""
    pytest.importorskip("pandas")
    db = _ledger(tmp_path, run)
    before = _charges(run, db)
    folder = tmp_path / "logs"
    folder.mkdir()
    query = ("query", "--column", "visits", "--low", "0", "--high", "20", *PRIVACY,
             "--ledger", db, "--dataset", "d")  # fmt: skip
    flips = ("sample", "--model", "beta-bernoulli", "--column", "flip", *PRIVACY,
             "--ledger", db, "--dataset", "d")  # fmt: skip
    for argv, body, line, phrase in (
        (query, "visits,hours\n3,15,\n2,18,\n4,12,\n", 2, "has 3 fields but the header has 2"),
        (flips, "flip,other\n1,0,0\n1,0\n1,0\n1,0\n", 2, "has 3 fields but the header has 2"),
        (flips, "flip,other\n1,0\n1\n", 3, "has 1 field but the header has 2"),
        (flips, "flip,flip\n1,0\n", 1, "repeats a column name"),
        (flips, 'flip,other\n1,"0\n0,1\n', 2, "never closed"),
        (flips, "flip,other\n1,0\n\n", 3, "is blank"),
    ):
        (folder / "a.csv").write_text(body)
        for data in (folder / "a.csv", str(folder / "*.csv")):  # the same message for both
            code, out, err = run(*argv, "--data", data)
            assert code == 2 and out == "" and err.count("\n") == 1, err
            assert f"--data: line {line} of {folder / 'a.csv'}" in err and phrase in err, err
    assert _charges(run, db) == before  # nothing was charged


def test_csv_globs_parse_labels_as_a_single_file(tmp_path, run):
    """A glob's 0/1 column went through pandas' type inference (`1` and `true` in one column
    was text, refused; ` TRUE` was text); declared labels and 0/1 or true/false are now
    parsed as from a single file (any case for true/false, surrounding spaces removed)."""
    pytest.importorskip("pandas")
    folder = tmp_path / "parts"
    folder.mkdir()
    cells = ["1", " true", "FALSE ", "0.0", "1.0", "0", "True", " 0 "]
    single = tmp_path / "all.csv"
    single.write_text("flip,color\n" + "".join(f"{c}, red\n" for c in cells))
    for i in range(0, len(cells), 3):
        part = "".join(f"{c},red \n" for c in cells[i : i + 3])
        (folder / f"p{i}.csv").write_text("flip,color\n" + part)
    for argv in (
        ("sample", "--model", "beta-bernoulli", "--column", "flip"),
        ("sample", "--model", "dirichlet", "--column", "color", "--categories", "red,blue"),
        ("sample", "--model", "beta-bernoulli", "--column", "color", "--positive", "red",
         "--negative", "blue"),
    ):  # fmt: skip
        outs = []
        for data in (single, str(folder / "*.csv")):
            code, out, err = run(*argv, "--data", data, *PRIVACY)
            assert code == 0, err
            outs.append(json.loads(out))
        assert outs[0]["n"] == len(cells) and outs[0]["value"] == outs[1]["value"]
    (folder / "p0.csv").write_text("flip,color\nyup,red\n")
    code, out, err = run("sample", "--model", "beta-bernoulli", "--column", "flip",
                         "--data", str(folder / "*.csv"), *PRIVACY)  # fmt: skip
    assert code == 2 and "not 0/1 or true/false" in err and "data row 0" in err
    assert "yup" not in err


def test_a_single_gzip_file_is_read_like_the_same_file_uncompressed(tmp_path, run):
    """`--data x.csv.gz` was refused as "not a UTF-8 text CSV file" while a glob read it."""
    import gzip

    body = "flip\n1\n0\n1\n1\n"
    (tmp_path / "x.csv").write_text(body)
    (tmp_path / "x.csv.gz").write_bytes(gzip.compress(body.encode()))
    argv = ("sample", "--model", "beta-bernoulli", "--column", "flip", *PRIVACY)
    plain, packed = (run(*argv, "--data", tmp_path / f) for f in ("x.csv", "x.csv.gz"))
    assert plain[0] == packed[0] == 0 and json.loads(plain[1]) == json.loads(packed[1])
    (tmp_path / "bad.csv.gz").write_text(body)  # not compressed
    code, _, err = run(*argv, "--data", tmp_path / "bad.csv.gz")
    assert code == 2 and "not a complete gzip file" in err and "flip" not in err


def test_devices_and_pipes_are_read_or_named(tmp_path, run):
    """`--data /dev/null` and `--data <(...)` said "no such file"."""
    code, _, err = run("sample", "--model", "beta-bernoulli", "--column", "flip",
                       "--data", "/dev/null", *PRIVACY)  # fmt: skip
    assert code == 2 and "/dev/null is empty (a header row is expected)" in err
    r, w = os.pipe()  # what the shell's <(...) hands over: /dev/fd/N
    os.write(w, b"flip\n1\n0\n1\n")
    os.close(w)
    try:
        code, out, err = run("sample", "--model", "beta-bernoulli", "--column", "flip",
                             "--data", f"/dev/fd/{r}", *PRIVACY)  # fmt: skip
    finally:
        os.close(r)
    assert code == 0 and json.loads(out)["n"] == 3, err


def test_query_alpha_takes_alpha_and_beta_as_help_says(tmp_path, run):
    """--help says --alpha takes "ALPHA [BETA] for beta-bernoulli and query", but `query
    --alpha 2 3` was refused."""
    path = tmp_path / "age.csv"
    path.write_text("age\n40\n50\n60\n")
    base = ("query", "--data", path, "--column", "age", "--low", "0", "--high", "100", *PRIVACY)
    both, split = run(*base, "--alpha", "2", "3"), run(*base, "--alpha", "2", "--beta", "3")
    assert both[0] == split[0] == 0 and json.loads(both[1]) == json.loads(split[1])
    assert json.loads(both[1]) != json.loads(run(*base)[1])  # the prior was used
    code, _, err = run(*base, "--alpha", "2", "3", "--beta", "1")
    assert code == 2 and "given twice" in err
    code, _, err = run(*base, "--alpha", "1", "2", "3")
    assert code == 2 and "ALPHA [BETA]" in err


def test_a_closed_stdout_ends_quietly(tmp_path, run):
    """`privbayes budget show | head -1` ended with "[Errno 32] Broken pipe"."""
    import subprocess
    import sys
    from pathlib import Path

    db = _ledger(tmp_path, run)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    calibrate = ["calibrate", "--model", "beta-bernoulli", "--n", "10", "--lam", "2", "--eps", "1"]
    for argv in (["budget", "show", "--ledger", str(db)], calibrate):
        proc = subprocess.Popen(
            [sys.executable, "-m", "privbayes", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        proc.stdout.close()  # the reader has gone before the command writes
        err = proc.stderr.read().decode()
        assert proc.wait() == 141 and err == "", err
