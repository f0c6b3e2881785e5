"""A durable privacy budget in SQLite: every charge is recorded, none is ever lost.

Per data set name, a budget (eps, delta) and every charge (mechanism, its RDP curve on the
ledger's orders, time, a note). A charge composes the new curve with the running total and
converts to (eps, delta)-DP; if that exceeds the budget it raises BudgetExceededError and
writes nothing. Correct under concurrency and crashes:

* each charge is one ``BEGIN IMMEDIATE`` transaction (the write lock is taken before the
  running total is read, so two processes can never both spend the last of a budget);
* WAL journal and ``synchronous=FULL``: a committed charge survives a crash or power loss,
  an interrupted one leaves no trace (SQLite rolls it back on the next open).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import warnings
from pathlib import Path

import numpy as np

from ..errors import BudgetExceededError
from .accountant import DEFAULT_ORDERS, RdpAccountant, _check_delta, sorted_orders

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS budgets (
    dataset TEXT PRIMARY KEY,
    eps REAL NOT NULL,
    delta REAL NOT NULL,
    total TEXT NOT NULL,          -- running sum of the charged curves (JSON, on the orders)
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL REFERENCES budgets(dataset),
    mechanism TEXT NOT NULL,
    curve TEXT NOT NULL,          -- eps at each order (JSON)
    eps_after REAL NOT NULL,      -- (eps, delta)-DP spent once this charge is in
    time REAL NOT NULL,
    note TEXT NOT NULL DEFAULT ''
);
"""


def _dumps(values) -> str:
    return json.dumps([float(v) for v in values])  # inf as Infinity: Python reads it back


def _describe(charge) -> str:
    cal = getattr(charge, "calibration", charge)
    if hasattr(cal, "method") and hasattr(cal, "model"):
        size = getattr(charge, "size", None)
        return (
            f"{type(cal.model).__name__}/{cal.method} r={cal.r:.6g} m={cal.m:.6g} lam={cal.lam:g}"
            + (f" x{size}" if size else "")
        )
    return getattr(charge, "__name__", type(charge).__name__)


class Ledger:
    """An SQLite privacy ledger at ``path`` (created if missing).

    Parameters
    ----------
    path : file path of the database.
    orders : the orders every curve is stored on (default :data:`DEFAULT_ORDERS`); fixed
        when the file is created, read back afterwards.
    timeout : seconds to wait for another process's charge to finish.
    """

    def __init__(self, path, orders=None, timeout: float = 60.0, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise FileNotFoundError(f"no ledger at {self.path}; create it with `budget init`")
        self._db = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)  # idempotent; safe when several processes open at once
        lam = DEFAULT_ORDERS if orders is None else sorted_orders(orders)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('orders', ?)", (_dumps(lam),))
        row = self._db.execute("SELECT value FROM meta WHERE key='orders'").fetchone()
        self.orders = np.array(json.loads(row[0]), dtype=float)
        if orders is not None and not np.array_equal(self.orders, lam):
            warnings.warn(
                f"{self.path} already stores its own orders; the `orders` given are ignored",
                UserWarning,
                stacklevel=2,
            )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- budgets --------------------------------------------------------------------
    def init_budget(self, dataset: str, eps: float, delta: float) -> None:
        """Create the budget (eps, delta) of ``dataset``; ValueError if it exists."""
        dataset = _name(dataset)
        eps = float(eps)
        if not (eps >= 0 and math.isfinite(eps)):
            raise ValueError(f"eps must be finite and >= 0; got {eps!r}")
        delta = _check_delta(delta)
        try:
            self._db.execute(
                "INSERT INTO budgets VALUES (?, ?, ?, ?, ?)",
                (dataset, eps, delta, _dumps(np.zeros(self.orders.size)), time.time()),
            )
        except sqlite3.IntegrityError:
            raise ValueError(f"dataset {dataset!r} already has a budget") from None

    def _budget(self, dataset: str):
        row = self._db.execute(
            "SELECT eps, delta, total FROM budgets WHERE dataset=?", (dataset,)
        ).fetchone()
        if row is None:
            raise KeyError(
                f"no budget for dataset {dataset!r}; create it with Ledger.init_budget "
                "or `privbayes budget init`"
            )
        return row[0], row[1], np.array(json.loads(row[2]), dtype=float)

    def _spent(self, total: np.ndarray, delta: float) -> float:
        acc = RdpAccountant(self.orders).compose(total)
        acc._warn = False  # the ledger's grid is fixed; a grid-end warning is not actionable
        return acc.get_epsilon(delta, refine=False)

    # -- charges --------------------------------------------------------------------
    def charge(self, dataset: str, charge, note: str = "") -> int:
        """Record ``charge`` (a release, a Calibration, a function of orders or an array on
        ``self.orders``) against ``dataset``; returns the charge id.

        Raises BudgetExceededError (writing nothing) when the composed (eps, delta) would
        exceed the budget, KeyError when the data set has no budget.
        """
        dataset = _name(dataset)
        if isinstance(charge, np.ndarray | list | tuple):
            curve = np.asarray(charge, float)
        elif hasattr(charge, "rdp"):
            curve = np.asarray(charge.rdp(self.orders), float)
        elif callable(charge):
            curve = np.asarray(charge(self.orders), float)
        else:
            raise TypeError("charge must be a release, a Calibration, a function or an array")
        if curve.shape != self.orders.shape or np.isnan(curve).any() or (curve < 0).any():
            raise ValueError(
                f"a charge must give eps >= 0 at each of the {self.orders.size} orders"
            )
        mechanism = _describe(charge)
        self._db.execute("BEGIN IMMEDIATE")  # the write lock, before reading the total
        try:
            eps_budget, delta, total = self._budget(dataset)
            new_total = total + curve
            spent = self._spent(new_total, delta)
            if not spent <= eps_budget:
                raise BudgetExceededError(
                    f"charging {mechanism} to {dataset!r} would spend eps={spent:.6g} at "
                    f"delta={delta:g}, over the budget eps={eps_budget:g}; nothing was charged"
                )
            cur = self._db.execute(
                "INSERT INTO charges (dataset, mechanism, curve, eps_after, time, note) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (dataset, mechanism, _dumps(curve), spent, time.time(), str(note)),
            )
            self._db.execute(
                "UPDATE budgets SET total=? WHERE dataset=?", (_dumps(new_total), dataset)
            )
            self._before_commit()
            self._db.execute("COMMIT")
            return int(cur.lastrowid)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _before_commit(self) -> None:
        """Nothing; the crash test replaces it to be killed inside a transaction."""

    # -- reading --------------------------------------------------------------------
    def status(self, dataset: str | None = None) -> list[dict]:
        """Budgets with spent eps and their charges (oldest first), one dict per data set."""
        rows = self._db.execute(
            "SELECT dataset, eps, delta, total FROM budgets"
            + (" WHERE dataset=?" if dataset is not None else "")
            + " ORDER BY dataset",
            (() if dataset is None else (_name(dataset),)),
        ).fetchall()
        if dataset is not None and not rows:
            raise KeyError(f"no budget for dataset {dataset!r}")
        out = []
        for name, eps, delta, total in rows:
            charges = self._db.execute(
                "SELECT id, mechanism, eps_after, time, note FROM charges WHERE dataset=? "
                "ORDER BY id",
                (name,),
            ).fetchall()
            out.append(
                {
                    "dataset": name,
                    "eps_budget": eps,
                    "delta": delta,
                    "eps_spent": self._spent(np.array(json.loads(total)), delta),
                    "charges": [
                        {"id": i, "mechanism": m, "eps_after": e, "time": t, "note": note}
                        for i, m, e, t, note in charges
                    ],
                }
            )
        return out

    def spent(self, dataset: str) -> float:
        """eps spent so far on ``dataset`` at its budget's delta."""
        return self.status(dataset)[0]["eps_spent"]


def _name(dataset) -> str:
    if not isinstance(dataset, str) or not dataset.strip():
        raise ValueError(f"dataset must be a non-empty name; got {dataset!r}")
    return dataset.strip()
