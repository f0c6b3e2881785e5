"""The SQLite ledger: never overspends under concurrency, survives a kill mid-charge."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import privbayes as pb
from privbayes import BudgetExceededError, Ledger
from privbayes.accounting import RdpAccountant, pure_dp_rdp
from privbayes.accounting.exact import ExactSum, to_units
from privbayes.cli import main

E0, DELTA = 0.05, 1e-6


def _budget_admitting(k: int, orders) -> float:
    """A budget strictly between the eps of k and of k + 1 pure-E0 charges."""

    def spent(count):
        acc = RdpAccountant(orders).compose(pure_dp_rdp(orders, E0), count)
        return acc.get_epsilon(DELTA, refine=False)

    return 0.5 * (spent(k) + spent(k + 1))


def test_charge_refuses_over_budget_and_writes_nothing(tmp_path):
    ledger = Ledger(tmp_path / "l.db")
    ledger.init_budget("adult", _budget_admitting(3, ledger.orders), DELTA)
    for _ in range(3):
        ledger.charge("adult", lambda o: pure_dp_rdp(o, E0), note="ok")
    before = ledger.status("adult")[0]
    with pytest.raises(BudgetExceededError, match="nothing was charged"):
        ledger.charge("adult", lambda o: pure_dp_rdp(o, E0))
    after = ledger.status("adult")[0]
    assert len(after["charges"]) == 3 and after["eps_spent"] == before["eps_spent"]
    with pytest.raises(KeyError, match="no budget"):
        ledger.charge("mnist", lambda o: pure_dp_rdp(o, E0))
    with pytest.raises(ValueError, match="already"):
        ledger.init_budget("adult", 1.0, DELTA)


def test_sample_charges_before_it_releases(tmp_path):
    ledger = Ledger(tmp_path / "l.db")
    data = np.r_[np.ones(40), np.zeros(60)]
    cal = pb.calibrate(pb.BetaBernoulli(), 100, 2.0, 0.5)
    one = RdpAccountant(ledger.orders).compose(cal).get_epsilon(DELTA, refine=False)
    two = RdpAccountant(ledger.orders).compose(cal, 2).get_epsilon(DELTA, refine=False)
    ledger.init_budget("coins", 0.5 * (one + two), DELTA)
    rel = pb.sample(pb.BetaBernoulli(), data, 2.0, 0.5, rng=0, ledger=ledger, dataset="coins")
    assert 0 < rel.value < 1
    with pytest.raises(BudgetExceededError):
        pb.sample(pb.BetaBernoulli(), data, 2.0, 0.5, rng=0, ledger=ledger, dataset="coins")
    assert len(ledger.status("coins")[0]["charges"]) == 1
    with pytest.raises(ValueError, match="dataset"):
        pb.sample(pb.BetaBernoulli(), data, 2.0, 0.5, ledger=ledger)
    with pytest.raises(BudgetExceededError):
        pb.release_query(data, 2.0, 0.5, ledger=ledger, dataset="coins")


CHILD = textwrap.dedent("""
    import sys
    from privbayes import BudgetExceededError, Ledger
    from privbayes.accounting import pure_dp_rdp
    ledger = Ledger(sys.argv[1])
    ok = 0
    for _ in range(int(sys.argv[2])):
        try:
            ledger.charge("shared", lambda o: pure_dp_rdp(o, float(sys.argv[3])))
            ok += 1
        except BudgetExceededError:
            pass
    print(ok)
""")


def test_eight_processes_never_overspend(tmp_path):
    path = tmp_path / "l.db"
    k = 137
    ledger = Ledger(path)
    ledger.init_budget("shared", _budget_admitting(k, ledger.orders), DELTA)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), "50", str(E0)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    successes = sum(int(p.communicate(timeout=600)[0]) for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert successes == k
    status = ledger.status("shared")[0]
    assert len(status["charges"]) == k and status["eps_spent"] <= status["eps_budget"]


KILLED = textwrap.dedent("""
    import sys, time
    from privbayes import Ledger
    from privbayes.accounting import pure_dp_rdp
    ledger = Ledger(sys.argv[1])
    def stall():
        print("inside", flush=True)
        time.sleep(120)
    ledger._before_commit = stall  # a crash between the writes and the commit
    ledger.charge("shared", lambda o: pure_dp_rdp(o, 0.05))
""")


def test_a_killed_charge_leaves_the_ledger_consistent(tmp_path):
    path = tmp_path / "l.db"
    ledger = Ledger(path)
    ledger.init_budget("shared", 100.0, DELTA)
    ledger.charge("shared", lambda o: pure_dp_rdp(o, E0))
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "inside"  # the transaction is open
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    fresh = Ledger(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    curves = [json.loads(c) for (c,) in db.execute("SELECT curve FROM charges")]
    total = json.loads(db.execute("SELECT total FROM budgets").fetchone()[0])
    assert len(curves) == 1  # the killed charge left no trace
    exact = [sum(to_units(c[i]) for c in curves) for i in range(len(total))]
    assert ExactSum.from_partials(total)._units == exact  # the stored total is exact
    fresh.charge("shared", lambda o: pure_dp_rdp(o, E0))  # and the lock was released
    assert len(fresh.status("shared")[0]["charges"]) == 2


def test_budget_cli(tmp_path, capsys):
    db = str(tmp_path / "l.db")
    data = tmp_path / "flips.csv"
    data.write_text("x\n" + "1\n0\n" * 20)
    assert main(["budget", "init", "flips", "--eps", "12", "--delta", "1e-6", "--ledger", db]) == 0
    args = [
        "sample",
        "--model",
        "beta-bernoulli",
        "--data",
        str(data),
        "--column",
        "x",
        "--lam",
        "2",
        "--eps",
        "1",
        "--ledger",
        db,
    ]
    codes = [main(args) for _ in range(4)]
    out = capsys.readouterr()
    assert codes[0] == 0 and 2 in codes  # the budget runs out; refusals exit 2
    assert "nothing was charged" in out.err
    assert main(["budget", "show", "flips", "--ledger", db]) == 0
    shown = capsys.readouterr().out
    assert "flips: spent eps=" in shown and "privbayes sample flips.csv" in shown
    assert main(["budget", "show", "nope", "--ledger", db]) == 2


def test_unsorted_orders_and_missing_ledgers(tmp_path, capsys):
    ledger = Ledger(tmp_path / "u.db", orders=[64, 32, 16, 8, 4, 2])
    assert ledger.orders.tolist() == [2, 4, 8, 16, 32, 64]
    ledger.init_budget("d", 5.0, 1e-6)
    charged = 0
    with pytest.raises(BudgetExceededError):
        while True:
            ledger.charge("d", lambda o: pb.accounting.gaussian_rdp(o, 3.0))
            charged += 1
    acc = RdpAccountant([2, 4, 8, 16, 32, 64]).compose(
        lambda o: pb.accounting.gaussian_rdp(o, 3.0), charged
    )
    assert acc.get_epsilon(1e-6, refine=False) <= 5.0  # what the ledger let through is in budget
    with pytest.raises(ValueError, match="orders"):
        Ledger(tmp_path / "bad.db", orders=[])
    data = tmp_path / "x.csv"
    data.write_text("x\n1\n0\n")
    code = main(
        [
            "sample",
            "--model",
            "beta-bernoulli",
            "--data",
            str(data),
            "--column",
            "x",
            "--lam",
            "2",
            "--eps",
            "1",
            "--ledger",
            str(tmp_path / "typo.db"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no ledger" in err and not (tmp_path / "typo.db").exists()
    junk = tmp_path / "junk.db"
    junk.write_text("not a database at all")
    assert main(["budget", "show", "--ledger", str(junk)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# -- issue 12: budgets, errors, the last bit, extreme delta ---------------------------------

import math  # noqa: E402
import threading  # noqa: E402
import warnings  # noqa: E402

import mpmath as mp  # noqa: E402

from privbayes.accounting import DEFAULT_ORDERS, OrdersWarning, gaussian_rdp  # noqa: E402
from privbayes.errors import LedgerError, PrivBayesError  # noqa: E402


def _leftovers(folder):
    """Files in ``folder`` besides the WAL companions of open ledgers."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


@pytest.mark.parametrize("bad", [0, 0.0, 1, 1.0, -1e-9, 1.5, float("nan"), float("inf")])
def test_budget_delta_must_lie_strictly_between_0_and_1(tmp_path, bad):
    """Issue 12.3: delta = 1 charged every release eps = 0; delta = 0 refused them all."""
    ledger = Ledger(tmp_path / "l.db")
    with pytest.raises(ValueError, match=r"delta must lie strictly between 0 and 1.*e\.g\."):
        ledger.init_budget("d", 1.0, bad)
    assert ledger.status() == []
    with pytest.raises(ValueError, match="delta"):
        Ledger.create(tmp_path / "new.db", "d", 1.0, bad)
    assert _leftovers(tmp_path) == ["l.db"]  # nothing written by the failed create


def test_create_writes_nothing_unless_the_budget_is_valid(tmp_path):
    for args in [("d", -1.0, 1e-6), ("d", math.inf, 1e-6), (" ", 1.0, 1e-6), ("d", "1", 1e-6)]:
        with pytest.raises((ValueError, TypeError)):
            Ledger.create(tmp_path / "l.db", *args)
    with pytest.raises(ValueError, match="orders"):
        Ledger.create(tmp_path / "l.db", "d", 1.0, 1e-6, orders=[0.5])
    assert _leftovers(tmp_path) == []
    ledger = Ledger.create(tmp_path / "l.db", "d", 5.0, 1e-6, orders=[8, 2, 4])
    assert ledger.orders.tolist() == [2.0, 4.0, 8.0]  # the documented way to set orders
    ledger.charge("d", lambda o: gaussian_rdp(o, 10.0))
    with pytest.raises(ValueError, match="already has a budget"):
        Ledger.create(tmp_path / "l.db", "d", 2.0, 1e-6)
    with pytest.raises(ValueError, match="orders"):  # fixed when the file was created
        Ledger.create(tmp_path / "l.db", "e", 2.0, 1e-6, orders=[2, 3])
    again = Ledger.create(tmp_path / "l.db", "e", 2.0, 1e-6)
    assert [b["dataset"] for b in again.status()] == ["d", "e"]
    assert len(again.status("d")[0]["charges"]) == 1
    assert sorted(_leftovers(tmp_path))[0] == "l.db"  # no temporary file left


def test_concurrent_creates_of_one_new_ledger_keep_every_budget(tmp_path):
    path = tmp_path / "l.db"
    errors = []

    def make(i):
        try:
            Ledger.create(path, f"d{i}", 1.0, 1e-6).close()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [b["dataset"] for b in Ledger(path).status()] == [f"d{i}" for i in range(6)]


def _ledger_error(path, **kw):
    with pytest.raises(LedgerError) as info:
        Ledger(path, **kw)
    msg = str(info.value)
    assert isinstance(info.value, PrivBayesError) and isinstance(info.value, OSError)
    assert "\n" not in msg
    return msg


def test_ledger_errors_name_the_path_and_the_fix(tmp_path):
    """Issue 12.6: these surfaced as raw sqlite3 errors without the path."""
    assert "empty" in _ledger_error("")
    missing = tmp_path / "no" / "such" / "l.db"
    msg = _ledger_error(missing)
    assert str(missing.parent) in msg and "create it" in msg and not missing.parent.exists()
    msg = _ledger_error(tmp_path)
    assert "folder" in msg and str(tmp_path / "budget.sqlite") in msg
    junk = tmp_path / "junk.db"
    junk.write_text("not a database at all " * 100)
    msg = _ledger_error(junk)
    assert str(junk) in msg and "not a privbayes ledger" in msg
    assert junk.read_text().startswith("not a database")  # untouched
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    assert "not a privbayes ledger" in _ledger_error(other)
    with sqlite3.connect(other) as db:  # no privbayes tables were added to it
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert names == {"users"}
    msg = _ledger_error(tmp_path / "typo.db", create=False)
    assert "no ledger at" in msg and "budget init" in msg and not (tmp_path / "typo.db").exists()


def test_read_only_and_locked_ledgers(tmp_path, monkeypatch):
    path = tmp_path / "l.db"
    Ledger.create(path, "d", 1.0, 1e-6).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a charge
    ledger = Ledger(path, timeout=0.05)
    with pytest.raises(LedgerError, match="locked.*retry"):
        ledger.charge("d", lambda o: gaussian_rdp(o, 10.0))
    holder.execute("ROLLBACK")
    ledger.charge("d", lambda o: gaussian_rdp(o, 10.0))  # and the ledger still works
    if os.geteuid() != 0:  # root ignores permissions: simulate SQLite's refusal below
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        try:
            with pytest.raises(LedgerError, match="writ"):
                Ledger.create(folder / "l.db", "d", 1.0, 1e-6)
        finally:
            folder.chmod(0o755)

    def readonly(*args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(sqlite3, "connect", readonly)
    msg = _ledger_error(tmp_path / "x.db")
    assert str(tmp_path / "x.db") in msg and "permissions" in msg


def test_the_last_bit_of_a_budget_is_never_lost(tmp_path):
    """Issue 12.2: once a budget was exactly spent, tiny charges were accepted, written,
    and lost to rounding in the running total. Now each is refused or counted exactly."""
    ledger = Ledger(tmp_path / "l.db")
    curve = pure_dp_rdp(ledger.orders, E0)
    ledger.init_budget("probe", 100.0, DELTA)
    for _ in range(3):
        ledger.charge("probe", curve)
    exact = ledger.spent("probe")  # what 3 charges spend: the next budget, exactly
    ledger.init_budget("d", exact, DELTA)
    for _ in range(3):
        ledger.charge("d", curve)
    assert ledger.spent("d") == exact
    db = sqlite3.connect(ledger.path)

    def units():
        return ExactSum.from_partials(
            json.loads(db.execute("SELECT total FROM budgets WHERE dataset='d'").fetchone()[0])
        )._units

    accepted = refused = 0
    for tiny in [1e-17 * curve] * 100 + [np.full(curve.shape, 5e-324)] * 60:
        before = units()
        try:
            ledger.charge("d", tiny)
            accepted += 1
            assert all(a > b for a, b in zip(units(), before, strict=True))  # counted
        except BudgetExceededError:
            refused += 1
            assert units() == before
        assert ledger.spent("d") <= exact  # never over the budget
    assert accepted > 0 and refused > 0
    curves = [json.loads(c) for (c,) in db.execute("SELECT curve FROM charges WHERE dataset='d'")]
    assert units() == [sum(to_units(c[i]) for c in curves) for i in range(curve.size)]


def test_extreme_delta_is_converted_on_the_wide_grid(tmp_path):
    """Issue 12.4: delta = 1e-300 and a Gaussian with sigma = 100 recorded 0.7187 (the grid
    ended at order 1024) with no warning; the optimum is 0.369 at order ~3700."""
    with mp.workdps(40):
        rho, delta = mp.mpf(1) / 20000, mp.mpf("1e-300")

        def f(lam):
            return lam * rho + mp.log1p(-1 / lam) - (mp.log(delta) + mp.log(lam)) / (lam - 1)

        lam_best = mp.findroot(lambda x: mp.diff(f, x), 3700)
        best = f(lam_best)
    ledger = Ledger.create(tmp_path / "l.db", "d", 5.0, 1e-300)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrdersWarning)
        ledger.charge("d", lambda o: gaussian_rdp(o, 100.0))
    st = ledger.status("d")[0]
    assert mp.mpf(st["eps_spent"]) >= best and st["eps_spent"] <= float(best) * 1.003
    assert st["at_grid_edge"] is False and 1024 < st["order"] < 1e6
    assert st["charges"][0]["eps_after"] == st["eps_spent"]
    narrow = Ledger.create(tmp_path / "n.db", "d", 5.0, 1e-300, orders=DEFAULT_ORDERS)
    with pytest.warns(OrdersWarning, match="wider `orders`"):
        narrow.charge("d", lambda o: gaussian_rdp(o, 100.0))
    st = narrow.status("d")[0]
    assert st["at_grid_edge"] is True and st["order"] == 1024
    assert st["eps_spent"] == pytest.approx(0.7187, abs=1e-4)


def test_sample_and_release_query_take_a_ledger_path(tmp_path):
    path = tmp_path / "p.sqlite"
    Ledger(path).init_budget("d", 100.0, 1e-6)
    flips = np.array([1.0, 0.0, 1.0, 1.0])
    for ledger in (path, str(path)):
        pb.sample(pb.BetaBernoulli(), flips, 2.0, 1.0, ledger=ledger, dataset="d", rng=0)
        pb.release_query(flips * 0.5, 2.0, 1.0, ledger=ledger, dataset="d", rng=0)
    assert len(Ledger(path).status("d")[0]["charges"]) == 4
    for call in (
        lambda led: pb.sample(pb.BetaBernoulli(), flips, 2.0, 1.0, ledger=led, dataset="d"),
        lambda led: pb.release_query(flips, 2.0, 1.0, ledger=led, dataset="d"),
    ):
        with pytest.raises(pb.errors.LedgerError, match="typo.sqlite") as missing:
            call(tmp_path / "typo.sqlite")
        with pytest.raises(pb.errors.LedgerError) as direct:
            Ledger(tmp_path / "typo.sqlite", create=False)
        assert str(missing.value) == str(direct.value)  # the same clear error as elsewhere
        assert not (tmp_path / "typo.sqlite").exists()
        with pytest.raises(TypeError, match="path"):
            call(3)
