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
