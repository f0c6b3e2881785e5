"""privbayes budget and --ledger: errors name the path and the fix (issue 12 item 11)."""

import json
import os
import sqlite3

import pytest

import privbayes as pb


def _init(run, db, *extra):
    return run("budget", "init", "flips", "--eps", "12", "--delta", "1e-6", "--ledger", db, *extra)


def _sample(run, data, *extra):
    return run(
        "sample", "--model", "beta-bernoulli", "--data", data, "--column", "x",
        "--lam", "2", "--eps", "1", *extra,
    )  # fmt: skip


@pytest.fixture
def flips(tmp_path):
    data = tmp_path / "flips.csv"
    data.write_text("x\n" + "1\n0\n" * 20)
    return data


def test_init_charge_show(tmp_path, flips, run):
    db = tmp_path / "l.db"
    code, out, _ = _init(run, db)
    assert code == 0 and json.loads(out)["ledger"] == str(db)
    codes = [_sample(run, flips, "--ledger", db, "--eps", "0.05")[0] for _ in range(3)]
    assert codes == [0, 0, 0]
    code, out, _ = run("budget", "show", "flips", "--ledger", db)
    assert code == 0 and "3 charges" in out and "privbayes sample flips.csv" in out


@pytest.mark.parametrize(
    "extra,needle",
    [
        (("--delta", "0"), "--delta: need 0 < delta < 1"),
        (("--delta", "1"), "--delta: need 0 < delta < 1"),
        (("--delta", "nan"), "--delta"),
        (("--eps", "inf"), "--eps"),
        (("--eps", "0"), "--eps"),
        (("--orders", "2,x"), "--orders"),
        (("--orders", "0.5,2"), "--orders: every order must be > 1"),
    ],
)
def test_failed_init_leaves_no_file(tmp_path, run, extra, needle):
    db = tmp_path / "new.db"
    args = {"--eps": "12", "--delta": "1e-6"}
    args.update(dict(zip(extra[::2], extra[1::2], strict=True)))
    flat = [x for kv in args.items() for x in kv]
    code, out, err = run("budget", "init", "flips", *flat, "--ledger", db)
    assert code == 2 and needle in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())  # no ledger, no journal files


def test_missing_delta_leaves_no_file(tmp_path, run):
    db = tmp_path / "new.db"
    code, _, err = run("budget", "init", "flips", "--eps", "12", "--ledger", db)
    assert code == 2 and "--delta" in err and not db.exists()


def test_duplicate_budget_keeps_the_existing_ledger(tmp_path, run):
    db = tmp_path / "l.db"
    assert _init(run, db)[0] == 0
    code, _, err = _init(run, db)
    assert code == 2 and "already has a budget" in err and db.exists()
    assert pb.Ledger(db).status("flips")[0]["eps_budget"] == 12


def test_custom_orders(tmp_path, run):
    db = tmp_path / "o.db"
    code, out, _ = _init(run, db, "--orders", "64,2,4,8,16,32,inf")
    assert code == 0 and json.loads(out)["orders"] == 7
    assert pb.Ledger(db).orders.tolist() == [2, 4, 8, 16, 32, 64, float("inf")]
    code, _, err = run(
        "budget", "init", "other", "--eps", "1", "--delta", "1e-5", "--ledger", db,
        "--orders", "2,3",
    )  # fmt: skip
    assert code == 2 and "already stores its own orders" in err
    code, _, err = run("budget", "show", "--ledger", db, "--orders", "2,3")
    assert code == 2 and "--orders applies to budget init only" in err


def test_ledger_errors_name_the_path_and_the_fix(tmp_path, flips, run):
    typo = tmp_path / "typo.db"
    code, _, err = _sample(run, flips, "--ledger", typo)
    assert code == 2 and f"no ledger at {typo}" in err and "budget init" in err
    assert not typo.exists()
    junk = tmp_path / "junk.db"
    junk.write_text("not a database at all")
    for argv in (
        ("budget", "show", "--ledger", junk),
        ("budget", "init", "a", "--eps", "1", "--delta", "0.1", "--ledger", junk),
    ):
        code, _, err = run(*argv)
        assert code == 2 and str(junk) in err and "not an SQLite file" in err
    other = tmp_path / "other.sqlite"  # an SQLite database of something else
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    code, _, err = _sample(run, flips, "--ledger", other)
    assert code == 2 and "not a privbayes ledger" in err
    with sqlite3.connect(other) as db:  # and it was left untouched
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["t"]
    code, _, err = _init(run, tmp_path / "nodir" / "l.db")
    assert code == 2 and "no such directory" in err and "nodir" in err
    code, _, err = _init(run, tmp_path)
    assert code == 2 and "is a directory" in err
    code, _, err = _sample(run, flips, "--ledger", "")
    assert code == 2 and "--ledger: empty path" in err
    code, _, err = _sample(run, flips, "--dataset", "x")
    assert code == 2 and "--dataset needs --ledger" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_folder(tmp_path, flips, run):
    folder = tmp_path / "ro"
    folder.mkdir()
    assert _init(run, folder / "l.db")[0] == 0
    folder.chmod(0o500)
    try:
        code, _, err = _sample(run, flips, "--ledger", folder / "l.db", "--dataset", "flips")
        assert code == 2 and "cannot write in the folder" in err and str(folder) in err
        code, _, err = _init(run, folder / "new.db")
        assert code == 2 and "cannot write in the folder" in err
    finally:
        folder.chmod(0o700)


def test_empty_env_means_no_ledger(tmp_path, flips, run, monkeypatch):
    monkeypatch.setenv("PRIVBAYES_LEDGER", "  ")
    code, out, err = _sample(run, flips)
    assert code == 0, err  # was: "no ledger at ."
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("budget", "init", "flips", "--eps", "3", "--delta", "1e-6")
    assert code == 0 and json.loads(out)["ledger"] == "privbayes-ledger.sqlite"
    monkeypatch.setenv("PRIVBAYES_LEDGER", str(tmp_path / "privbayes-ledger.sqlite"))
    code, _, _ = _sample(run, flips, "--eps", "0.05")
    assert code == 0 and pb.Ledger(tmp_path / "privbayes-ledger.sqlite").spent("flips") > 0


def test_budget_exhaustion_exits_2(tmp_path, flips, run):
    db = tmp_path / "l.db"
    assert run("budget", "init", "flips", "--eps", "3", "--delta", "1e-6", "--ledger", db)[0] == 0
    codes, errs = [], []
    for _ in range(4):
        code, _, err = _sample(run, flips, "--ledger", db, "--eps", "0.05")
        codes.append(code)
        errs.append(err)
    assert codes == [0, 0, 2, 2] and "nothing was charged" in errs[2]  # 2.38, 2.77, 3.06 > 3


def test_sqlite_errors_during_a_charge_name_the_ledger(tmp_path, flips, run, monkeypatch):
    db = tmp_path / "l.db"
    assert _init(run, db)[0] == 0

    def locked(self, *args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(pb.Ledger, "charge", locked)
    code, _, err = _sample(run, flips, "--ledger", db, "--eps", "0.05")
    assert code == 2 and f"--ledger {db}: database is locked" in err


def test_refusal_says_what_fits(tmp_path, run):
    """Issue 21's reproducer: after `budget init --eps 10 --delta 1e-6`, Beta(1, 1), n = 6,
    diffused `sample --lam 2 --eps 1` costs eps = 10.7 and is refused; the message says
    what fits, and that request then passes."""
    data = tmp_path / "flips.csv"
    data.write_text("x\n0\n1\n1\n0\n1\n1\n")
    db = tmp_path / "l.db"
    assert run("budget", "init", "flips", "--eps", "10", "--delta", "1e-6", "--ledger", db)[0] == 0
    code, out, err = _sample(run, data, "--ledger", db)
    assert code == 2 and out == ""
    assert "would spend eps=10.7359 at delta=1e-06, over the budget eps=10" in err
    assert "nothing was charged" in err and "lam=2: none" in err
    assert "lam=16: eps<=9.328" in err and "lam=32: eps<=9.697" in err
    code, _, err = _sample(run, data, "--ledger", db, "--lam", "16", "--eps", "9.328")
    assert code == 0, err


def test_show_reads_an_auditors_read_only_copy(tmp_path, flips, run):
    """budget show on a 0444 file in a 0555 folder: works, and nothing is written (no
    byte, mtime or file changes; SQLite's -wal/-shm are not made)."""
    live = tmp_path / "live.db"
    assert _init(run, live)[0] == 0
    assert _sample(run, flips, "--ledger", live, "--dataset", "flips")[0] == 0
    folder = tmp_path / "audit"
    folder.mkdir()
    (folder / "copy.db").write_bytes(live.read_bytes())
    (folder / "copy.db").chmod(0o444)
    os.utime(folder / "copy.db", ns=(10**18, 10**18))
    folder.chmod(0o555)
    try:
        before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
        code, out, err = run("budget", "show", "--ledger", folder / "copy.db")
        assert code == 0, err
        assert "flips: spent eps=" in out and "1 charges; replace-one neighbours" in out
        after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
        assert after == before
    finally:
        folder.chmod(0o755)
