"""The ledger's relations, remaining(), read-only opening and refusal messages (issue 21
§1 last bullet, §3, §4). Truth: an RdpAccountant composing the same copies, converted on
the ledger's orders (grid only, as the ledger converts), and actual charges."""

import functools
import json
import math
import os
import re
import shutil
import sqlite3
import stat
import warnings

import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting import RdpAccountant, gaussian_rdp, subsampled_gaussian_rdp
from privbayes.accounting.relations import ADD_REMOVE, REPLACE_ONE

FLIPS = np.array([0, 1, 1, 0, 1, 1])  # Beta(1, 1), n = 6: the reproducer
SGD = functools.partial(subsampled_gaussian_rdp, q=0.01, sigma=1.1)


def _cal(lam, eps=1.0):
    return pb.calibrate(pb.BetaBernoulli(), 6, lam, eps, "diffused")


def _brute(ledger, spent_before, curve, eps_budget, delta):
    """k fits and k + 1 does not, by composing in an accountant."""
    k = ledger.remaining("d", curve)

    def ok(j):
        acc = RdpAccountant(orders=ledger.orders)
        for c in spent_before:
            acc.compose(c)
        if j:
            acc.compose(curve, j)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return acc.get_epsilon(delta, refine=False) <= eps_budget

    return k, ok(k), ok(k + 1)


@pytest.fixture(scope="module")
def glm_exact():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    y = (x[:, 0] > 0).astype(int)
    model = pb.BayesianLogisticRegression(beta=0.05, backend="exact")
    rel = pb.sample(model, (x, y), 4.0, 1.0, rng=1)
    assert rel.tv > 0  # the exact back-end's delta_f
    return rel


WANT = {
    "lam2": 0,
    "lam10": 94,
    "lam32": 1004,
    "lam32x3": 1135,
    "gaussian": 7,
    "glm": 35,
    "glm_tv": 5,
}


@pytest.mark.parametrize(
    "kind, eps_budget, delta",
    [
        ("lam2", 10.0, 1e-6),  # costs 10.7 alone: 0 fit
        ("lam10", 10.0, 1e-6),
        ("lam32", 10.0, 1e-6),
        ("lam32x3", 25.0, 1e-9),  # a release of 3 draws
        ("gaussian", 3.0, 1e-5),
        ("glm", 30.0, 1e-6),
        ("glm_tv", 600.0, 5.5e-12),  # the tv allowances bind: 5 x 1e-12 < 5.5e-12
    ],
)
def test_remaining_against_brute_force(tmp_path, glm_exact, kind, eps_budget, delta):
    curve = {
        "lam2": lambda: _cal(2.0),
        "lam10": lambda: _cal(10.0),
        "lam32": lambda: pb.sample(pb.BetaBernoulli(), FLIPS, 32.0, 1.0, rng=0),
        "lam32x3": lambda: pb.sample(pb.BetaBernoulli(), FLIPS, 32.0, 1.0, size=3, rng=0),
        "gaussian": lambda: functools.partial(gaussian_rdp, sigma=4.0),
        "glm": lambda: glm_exact,
        "glm_tv": lambda: glm_exact,
    }[kind]()
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", eps_budget, delta)
    before = []
    if kind in ("lam10", "glm"):  # something spent already
        ledger.charge("d", _cal(32.0))
        before.append(_cal(32.0))
    k, k_fits, next_fits = _brute(ledger, before, curve, eps_budget, delta)
    assert isinstance(k, int) and k_fits and not next_fits, (k, k_fits, next_fits)
    assert k == WANT[kind]  # measured; the brute force above is the truth
    if kind == "lam2":
        assert k == 0
    if kind == "glm_tv":
        assert k == 5  # the sixth would bring the allowances to delta
    # and k actual charges pass, the next is refused
    if k <= 40:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(k):
                ledger.charge("d", curve)
            assert ledger.remaining("d", curve) == 0
            with pytest.raises(pb.BudgetExceededError):
                ledger.charge("d", curve)
    ledger.close()


def test_remaining_is_infinite_only_when_every_count_fits(tmp_path):
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 1.0, 1e-6)
    assert ledger.remaining("d", np.zeros(ledger.orders.size)) == math.inf
    # zero at small orders only: the conversion there still holds for any count
    tiny = np.where(ledger.orders <= 1.5, 0.0, 1e-3)
    assert ledger.remaining("d", tiny) == math.inf
    one = np.full(ledger.orders.size, 1e-3)
    k = ledger.remaining("d", one)
    assert 0 < k < math.inf
    with pytest.raises(pb.LedgerError):
        ledger.remaining("nope", one)


def test_the_ledger_refuses_a_mismatched_relation_and_writes_nothing(tmp_path):
    path = tmp_path / "l.db"
    ledger = pb.Ledger(path)
    ledger.init_budget("d", 50.0, 1e-6)
    ledger.init_budget("sgd", 50.0, 1e-6, relation=ADD_REMOVE)
    ledger.charge("d", _cal(10.0))
    ledger.charge("sgd", SGD)
    before = ledger.status()
    for dataset, charge, kw in [
        ("d", SGD, {}),
        ("d", lambda o: gaussian_rdp(o, 9.0), {"relation": ADD_REMOVE}),
        ("d", np.zeros(ledger.orders.size), {"relation": ADD_REMOVE}),
        ("sgd", _cal(10.0), {}),
        ("sgd", _cal(10.0), {"relation": REPLACE_ONE}),
    ]:
        with pytest.raises(pb.NeighbourRelationError, match="nothing was composed"):
            ledger.charge(dataset, charge, **kw)
        with pytest.raises(pb.NeighbourRelationError):
            ledger.remaining(dataset, charge, **kw)
    assert ledger.status() == before  # no row written, the totals unchanged
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM charges").fetchone() == (2,)
        rows = db.execute("SELECT dataset, relation FROM charges ORDER BY id").fetchall()
    assert rows == [("d", REPLACE_ONE), ("sgd", ADD_REMOVE)]
    st = {b["dataset"]: b for b in before}
    assert st["d"]["relation"] == REPLACE_ONE and st["sgd"]["relation"] == ADD_REMOVE
    assert ledger.relation("sgd") == ADD_REMOVE
    # agnostic curves take the budget's relation
    ledger.charge("sgd", lambda o: gaussian_rdp(o, 30.0))
    ledger.charge("d", lambda o: gaussian_rdp(o, 30.0))
    with pytest.raises(ValueError, match="relation"):
        ledger.init_budget("x", 1.0, 1e-6, relation=None)
    with pytest.raises(ValueError, match="relation"):
        pb.Ledger.create(tmp_path / "new.db", "x", 1.0, 1e-6, relation="bounded")
    assert not (tmp_path / "new.db").exists()
    ledger.close()


# the first file format: no tv and no relation columns
_OLD_TABLES = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE budgets (dataset TEXT PRIMARY KEY, eps REAL NOT NULL, delta REAL NOT NULL, "
    "total TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL "
    "REFERENCES budgets(dataset), mechanism TEXT NOT NULL, curve TEXT NOT NULL, eps_after "
    "REAL NOT NULL, time REAL NOT NULL, note TEXT NOT NULL DEFAULT '')",
)


def _old_file(path):
    """A ledger as the first format wrote it, with one budget and one charge (made by a
    current ledger, then copied row by row)."""
    src = pb.Ledger(path.with_suffix(".src"))
    src.init_budget("d", 20.0, 1e-6)
    src.charge("d", _cal(10.0))
    src.close()
    with sqlite3.connect(path.with_suffix(".src")) as s:
        orders = s.execute("SELECT value FROM meta WHERE key='orders'").fetchone()[0]
        budget = s.execute("SELECT dataset, eps, delta, total, created FROM budgets").fetchone()
        charge = s.execute("SELECT mechanism, curve, eps_after, time FROM charges").fetchone()
    db = sqlite3.connect(path)
    for stmt in _OLD_TABLES:
        db.execute(stmt)
    db.execute("INSERT INTO meta VALUES ('orders', ?)", (orders,))
    db.execute("INSERT INTO meta VALUES ('format', 'privbayes-ledger-1')")
    db.execute("INSERT INTO budgets VALUES (?, ?, ?, ?, ?)", budget)
    db.execute(
        "INSERT INTO charges (dataset, mechanism, curve, eps_after, time) VALUES ('d', ?, ?, ?, ?)",
        charge,
    )
    db.commit()
    db.close()


def test_old_ledger_files_open_as_replace_one(tmp_path):
    path = tmp_path / "old.db"
    _old_file(path)
    # read only: nothing migrated, nothing written, and read as replace-one
    raw = path.read_bytes()
    ro = pb.Ledger(path, read_only=True)
    (b,) = ro.status()
    assert b["relation"] == REPLACE_ONE and b["charges"][0]["relation"] == REPLACE_ONE
    assert b["tv"] == 0 and len(b["charges"]) == 1
    assert ro.remaining("d", _cal(10.0)) >= 1
    ro.close()
    assert path.read_bytes() == raw
    # a writing open migrates: the relation columns hold replace-one
    ledger = pb.Ledger(path)
    assert ledger.relation("d") == REPLACE_ONE
    assert ledger.status() == [b]
    ledger.charge("d", _cal(32.0))
    with pytest.raises(pb.NeighbourRelationError):
        ledger.charge("d", SGD)
    assert len(ledger.status("d")[0]["charges"]) == 2
    ledger.close()
    with sqlite3.connect(path) as db:
        cols = {r[1] for r in db.execute("PRAGMA table_info(charges)")}
        assert {"tv", "relation"} <= cols
        assert db.execute("SELECT DISTINCT relation FROM charges").fetchall() == [(REPLACE_ONE,)]


def _snapshot(folder):
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode))
        for p in sorted(folder.iterdir())
    }


def _auditor_copy(tmp_path):
    live = tmp_path / "live.db"
    ledger = pb.Ledger(live)
    ledger.init_budget("d", 20.0, 1e-6)
    for lam in (10.0, 32.0):
        ledger.charge("d", _cal(lam), note=f"lam {lam:g}")
    want = ledger.status()
    ledger.close()
    folder = tmp_path / "audit"
    folder.mkdir()
    shutil.copy(live, folder / "copy.db")
    (folder / "copy.db").chmod(0o444)
    folder.chmod(0o555)
    return folder, want


def test_a_read_only_ledger_reads_and_writes_nothing(tmp_path):
    folder, want = _auditor_copy(tmp_path)
    try:
        before = _snapshot(folder)
        with open(folder / "copy.db", "rb") as fh:
            assert fh.read(20)[18:20] == b"\x02\x02"  # a WAL-mode file (its header says so)
        ledger = pb.Ledger(folder / "copy.db", read_only=True)
        assert ledger.status() == want and ledger.spent("d") == want[0]["eps_spent"]
        assert ledger.budget("d") == (20.0, 1e-6)
        assert ledger.remaining("d", _cal(10.0)) >= 1
        with pytest.raises(pb.LedgerError, match="read_only"):
            ledger.charge("d", _cal(10.0))
        with pytest.raises(pb.LedgerError, match="read_only"):
            ledger.init_budget("e", 1.0, 1e-6)
        ledger.close()
        assert _snapshot(folder) == before  # no byte, mtime or file changed or made
    finally:
        folder.chmod(0o755)


def test_read_only_sees_a_live_ledgers_latest_charge(tmp_path):
    path = tmp_path / "live.db"
    writer = pb.Ledger(path)
    writer.init_budget("d", 20.0, 1e-6)
    writer.charge("d", _cal(10.0))
    assert os.path.exists(f"{path}-wal")  # the charge may sit in the WAL
    reader = pb.Ledger(path, read_only=True)
    assert reader.status() == writer.status()
    writer.charge("d", _cal(32.0))
    assert len(reader.status("d")[0]["charges"]) == 2
    reader.close()
    writer.close()


def test_refusal_says_what_it_costs_and_what_fits(tmp_path):
    """The issue's reproducer: budget (10, 1e-6); Beta(1, 1), n = 6, diffused (2, 1)
    costs 10.7 and is refused; the message's claims are checked by charging them."""
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 10.0, 1e-6)
    with pytest.raises(pb.BudgetExceededError) as info:
        ledger.charge("d", _cal(2.0))
    msg = str(info.value)
    assert "would spend eps=10.7359 at delta=1e-06" in msg
    assert "alone costs eps=10.7359" in msg and "already spent: eps=0 of 10" in msg
    assert "lam=2: none" in msg  # an order-2 certificate alone converts to > 12.4
    table = {float(a): float(b) for a, b in re.findall(r"lam=(\d+): eps<=([\d.]+)", msg)}
    assert set(table) == {4.0, 8.0, 16.0, 32.0, 64.0, 128.0}
    assert table[32.0] == pytest.approx(9.697, abs=1e-3)
    assert ledger.status("d")[0]["charges"] == []
    # each claim holds: a curve known only at that order, at the stated eps, fits; 0.1%
    # more does not (nor with the values at lower orders known too)
    for lam, eps in table.items():
        assert ledger.remaining("d", np.where(ledger.orders == lam, eps, np.inf)) >= 1
        assert ledger.remaining("d", np.where(ledger.orders <= lam, eps * 1.001, np.inf)) == 0
    assert ledger.remaining("d", pb.calibrate(pb.BetaBernoulli(), 6, 16.0, 9.328)) >= 1
    # releases the user can ask for instead: (10, 1) costs 1.57, (32, 1) 0.42 (grid only)
    cost = {lam: RdpAccountant(ledger.orders).compose(_cal(lam)) for lam in (10.0, 32.0)}
    assert cost[10.0].get_epsilon(1e-6, refine=False) == pytest.approx(1.5728, abs=1e-3)
    assert cost[32.0].get_epsilon(1e-6, refine=False) == pytest.approx(0.4157, abs=1e-3)
    ledger.charge("d", _cal(10.0))
    # after a charge the message counts it
    with pytest.raises(pb.BudgetExceededError, match=r"already spent: eps=1\.57"):
        ledger.charge("d", _cal(2.0))
    ledger.close()


def test_refusal_with_a_failure_allowance_names_it(tmp_path, glm_exact):
    ledger = pb.Ledger(tmp_path / "l.db")
    ledger.init_budget("d", 0.5, 1e-6)
    with pytest.raises(pb.BudgetExceededError) as info:
        ledger.charge("d", glm_exact)
    msg = str(info.value)
    assert "tv=1e-12" in msg and "lam=4:" in msg
    json.dumps(msg)  # one plain string
