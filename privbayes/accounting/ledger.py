"""A durable privacy budget in SQLite: every charge is recorded, none is ever lost.

Per data set name, a budget (eps, delta) and every charge (mechanism, its RDP curve on the
ledger's orders, time, a note). A charge composes the new curve with the running total and
converts to (eps, delta)-DP; if that exceeds the budget it raises BudgetExceededError and
writes nothing. Correct under concurrency, crashes and rounding:

* each charge is one ``BEGIN IMMEDIATE`` transaction (the write lock is taken before the
  running total is read, so two processes can never both spend the last of a budget);
* WAL journal and ``synchronous=FULL``: a committed charge survives a crash or power loss,
  an interrupted one leaves no trace (SQLite rolls it back on the next open);
* the running total is the exact sum of the charged curves (stored as short lists of
  doubles that add up exactly) and is converted rounded up (docs/accounting.md §3): a
  charge, however small, is either refused or counted.

Every budget has a neighbour relation (replace-one by default, as every privbayes release;
or add/remove), stored with it and with each charge; a charge of the other relation is
refused before anything is written (docs/accounting.md §9). ``remaining`` counts how many
more copies of a charge fit, a refusal says what would fit, and ``read_only=True`` reads
a file without writing anything, e.g. an auditor's read-only copy (docs/accounting.md §10).

The orders every curve is stored on are fixed when the file is created; the default,
:data:`WIDE_ORDERS`, reaches order 1.08e6 so that the conversion stays accurate down to
delta = 5e-324 (docs/accounting.md §5). Pass ``orders=`` to :meth:`Ledger.create` (or to
the constructor of a new file) for another grid.
"""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import time
import uuid
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..errors import BudgetExceededError, LedgerError, UnknownDatasetError
from . import _readonly, planning
from .accountant import (
    WIDE_ORDERS,
    OrdersWarning,
    _grid_conversion,
    eps_with_tv,
    sorted_orders,
)
from .exact import ExactSum
from .relations import REPLACE_ONE, check_relation, merge

_FORMAT = "privbayes-ledger-1"
_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS budgets (
    dataset TEXT PRIMARY KEY,
    eps REAL NOT NULL,
    delta REAL NOT NULL,
    total TEXT NOT NULL,          -- exact running sum of the charged curves (JSON partials)
    created REAL NOT NULL,
    tv TEXT NOT NULL DEFAULT '0', -- exact sum of the charges' tv allowances ("p/q")
    relation TEXT NOT NULL DEFAULT 'replace-one'  -- neighbour relation of every charge
)""",
    """CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL REFERENCES budgets(dataset),
    mechanism TEXT NOT NULL,
    curve TEXT NOT NULL,          -- eps at each order (JSON)
    eps_after REAL NOT NULL,      -- (eps, delta)-DP spent once this charge is in
    time REAL NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    tv REAL NOT NULL DEFAULT 0,   -- the charge's total-variation allowance
    relation TEXT NOT NULL DEFAULT 'replace-one'
)""",
)


def _dumps(values) -> str:
    return json.dumps([float(v) for v in values])  # repr round-trips; inf as Infinity


def _describe(charge) -> str:
    cal = getattr(charge, "calibration", charge)
    describe = getattr(getattr(cal, "model", None), "_describe_charge", None)
    if describe is not None and hasattr(cal, "method"):  # e.g. a noise-aware release
        target = getattr(charge, "target", None)
        label = describe(cal, getattr(charge, "size", None))
        return label + (f" target {target}" if target else "")
    if hasattr(cal, "method") and hasattr(cal, "model"):
        size = getattr(charge, "size", None)
        backend = getattr(cal.model, "backend", None)
        guarantee = getattr(cal, "guarantee", "exact")
        knobs = f"t={cal.r:.6g}" if cal.method == "ops" else f"r={cal.r:.6g} m={cal.m:.6g}"
        return (
            f"{type(cal.model).__name__}/{cal.method} {knobs} lam={cal.lam:g}"
            + (f" x{size}" if size else "")
            + (f" backend={backend}" if backend else "")
            + f" [{guarantee}]"
            + (f" target {charge.target}" if getattr(charge, "target", None) else "")
        )
    return getattr(charge, "__name__", type(charge).__name__)


def _check_budget(eps, delta) -> tuple[float, float]:
    """A budget's (eps, delta): eps finite >= 0, delta strictly inside (0, 1)."""
    for name, v in (("eps", eps), ("delta", delta)):
        if isinstance(v, str | bool) or not isinstance(v, int | float | np.number):
            raise TypeError(f"{name} must be a number; got {v!r}")
    e, d = float(eps), float(delta)
    if not (e >= 0 and math.isfinite(e)):
        raise ValueError(f"eps must be finite and >= 0; got {eps!r}")
    if not 0 < d < 1:
        raise ValueError(
            f"delta must lie strictly between 0 and 1; got {delta!r} (delta = 1 would charge "
            "every release eps = 0, so the budget would never bind; delta = 0 would refuse "
            "every release that is not pure DP). Use a small delta, well below 1/n, e.g. 1e-6"
        )
    return e, d


def _check_path(path, must_exist: bool) -> Path:
    if isinstance(path, bool) or not isinstance(path, str | os.PathLike):
        raise TypeError(f"the ledger path must be a file path; got {path!r}")
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise LedgerError("the ledger path is empty; pass a file path such as budget.sqlite")
    p = Path(text)
    if p.is_dir():
        raise LedgerError(
            f"the ledger path {p} is a folder, not a file; pass a file path such as "
            f"{p / 'budget.sqlite'}"
        )
    if must_exist and not p.is_file():
        raise LedgerError(
            f"no ledger at {p}; create it with `privbayes budget init` (Ledger.create)"
        )
    parent = p.parent
    if not parent.is_dir():
        raise LedgerError(
            f"cannot open the ledger {p}: the folder {parent} does not exist; create it "
            "first or choose another path"
        )
    return p


def _ledger_error(exc: sqlite3.Error, path: Path, timeout: float) -> LedgerError:
    """A one-line LedgerError naming the path and the fix for an SQLite failure."""
    msg = str(exc)
    low = msg.lower()
    if "not a database" in low or "malformed" in low or "not a privbayes" in low:
        text = (
            f"{path} is not a privbayes ledger (not an SQLite ledger file: {msg}); pass "
            "the file made by `privbayes budget init`, or a new file name"
        )
    elif "readonly" in low or "read-only" in low or "unable to open" in low:
        text = (
            f"cannot open the ledger {path} for writing ({msg}); the ledger needs write "
            f"access to the file and its folder {path.parent}: fix the permissions or "
            "choose a writable path"
        )
    elif "locked" in low or "busy" in low:
        text = (
            f"the ledger {path} stayed locked by another process for {timeout:g} s; retry, "
            "or pass a longer timeout"
        )
    else:
        text = f"the ledger {path} cannot be used ({msg}); check the file and its folder"
    return LedgerError(text)


def _stored_orders(db: sqlite3.Connection):
    """The stored orders row of a set-up ledger (a read, no lock), else None."""
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"meta", "budgets", "charges"} <= names:
        return None
    return db.execute("SELECT value FROM meta WHERE key='orders'").fetchone()


# columns added after the first format, with the value every older row gets: no tv
# allowance, and replace-one (every charge a ledger could hold then was a privbayes release
# or a curve charged against replace-one budgets)
_ADDED = (
    ("budgets", "tv", "TEXT NOT NULL DEFAULT '0'"),
    ("charges", "tv", "REAL NOT NULL DEFAULT 0"),
    ("budgets", "relation", f"TEXT NOT NULL DEFAULT '{REPLACE_ONE}'"),
    ("charges", "relation", f"TEXT NOT NULL DEFAULT '{REPLACE_ONE}'"),
)
_OLD_VALUE = {"tv": "'0'", "relation": f"'{REPLACE_ONE}'"}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _col(cols: set[str], name: str) -> str:
    """``name`` if the table has it, else the value an older file's rows have (reads of a
    file that cannot be migrated: read-only)."""
    return name if name in cols else _OLD_VALUE[name]


def _migrate(db: sqlite3.Connection) -> None:
    """Add the columns a ledger written before them lacks (under the write lock; a no-op
    read for a current ledger)."""
    missing = [a for a in _ADDED if a[1] not in _columns(db, a[0])]
    if not missing:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for table, column, ddl in missing:
            if column not in _columns(db, table):
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _setup(db: sqlite3.Connection, orders: np.ndarray) -> None:
    """Create the tables (idempotent) and store the orders if this is a new ledger."""
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    names.discard("sqlite_sequence")
    if names and not {"meta", "budgets", "charges"} <= names:
        raise sqlite3.DatabaseError("not a privbayes ledger: other tables are present")
    for stmt in _TABLES:
        db.execute(stmt)
    db.execute("INSERT OR IGNORE INTO meta VALUES ('orders', ?)", (_dumps(orders),))
    db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (_FORMAT,))


class Ledger:
    """An SQLite privacy ledger at ``path``.

    Parameters
    ----------
    path : file path of the database (its folder must exist).
    orders : the orders every curve is stored on, fixed when the file is created (default
        :data:`WIDE_ORDERS`, up to order 1.08e6); read back from an existing file (a
        different ``orders`` is then ignored with a warning).
    timeout : seconds to wait for another process's charge to finish.
    create : create the file if missing (default); False raises LedgerError instead.
    read_only : open an existing file for reading only (``status``, ``spent``, ``budget``,
        ``remaining``): nothing is written, not even SQLite's journal files, so a
        read-only file in a read-only folder works (an auditor's copy; docs/accounting.md
        §10). Writing methods then raise LedgerError; ``orders`` and ``create`` are ignored.

    To create a ledger together with its first budget, with nothing written when the
    budget is invalid, use :meth:`Ledger.create`.

    Raises LedgerError (a PrivBayesError and an OSError) with a one-line message naming
    the path and the fix: empty path, missing folder, a folder given as path, no write
    permission, a file that is not a privbayes ledger, a lock held too long.
    """

    def __init__(
        self,
        path,
        orders=None,
        timeout: float = 60.0,
        create: bool = True,
        *,
        read_only: bool = False,
    ) -> None:
        self.read_only = bool(read_only)
        self.path = _check_path(path, must_exist=not create or self.read_only)
        self.timeout = float(timeout)
        if self.read_only:
            self._db = None
            row = self._read(_stored_orders)
            if row is None:
                raise LedgerError(
                    f"{self.path} is not a privbayes ledger (no budgets table); pass the file "
                    "made by `privbayes budget init`"
                )
            self.orders = np.array(json.loads(row[0]), dtype=float)
            return
        lam = WIDE_ORDERS if orders is None else sorted_orders(orders)
        try:
            self._db = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise _ledger_error(exc, self.path, self.timeout) from None
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                row = self._open(lam)
                break
            except sqlite3.OperationalError as exc:
                # SQLite answers "locked" at once, without waiting, where waiting could
                # deadlock (e.g. two connections switching a new file to WAL together):
                # retry with a short random pause until the timeout
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    self._db.close()
                    raise _ledger_error(exc, self.path, self.timeout) from None
                time.sleep(0.01 + 0.04 * random.random())
            except sqlite3.Error as exc:
                self._db.close()
                raise _ledger_error(exc, self.path, self.timeout) from None
        self.orders = np.array(json.loads(row[0]), dtype=float)
        if orders is not None and not np.array_equal(self.orders, lam):
            warnings.warn(
                f"{self.path} already stores its own orders; the `orders` given are ignored",
                UserWarning,
                stacklevel=2,
            )

    def _open(self, lam):
        """WAL mode, the schema of a new file (under the write lock: others may set it up
        too) and migrations; returns the stored orders row."""
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        row = _stored_orders(self._db)
        if row is None:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                _setup(self._db, lam)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            row = _stored_orders(self._db)
        _migrate(self._db)
        return row

    @classmethod
    def create(
        cls,
        path,
        dataset: str,
        eps: float,
        delta: float,
        orders=None,
        timeout: float = 60.0,
        relation: str = REPLACE_ONE,
    ) -> Ledger:
        """Create the budget (eps, delta) of ``dataset`` in the ledger at ``path``, creating
        the file if needed; returns the open Ledger.

        Everything is checked before any file is touched, and a new file is built aside
        and moved into place only once it holds the budget: a failed ``budget init``
        leaves no file behind. ``orders`` (default :data:`WIDE_ORDERS`) applies to a new
        file; for an existing one it must equal the file's orders (ValueError otherwise).

        ``relation``: the budget's neighbour relation (see :meth:`init_budget`).

        Raises ValueError (bad eps, delta, name, orders or relation; the budget exists),
        LedgerError (the path cannot be used).
        """
        dataset = _name(dataset)
        eps, delta = _check_budget(eps, delta)
        relation = _budget_relation(relation)
        lam = WIDE_ORDERS if orders is None else sorted_orders(orders)
        p = _check_path(path, must_exist=False)
        if not p.exists() and _create_file(p, dataset, eps, delta, relation, lam, float(timeout)):
            return cls(p, timeout=timeout, create=False)
        ledger = cls(p, timeout=timeout, create=False)
        try:
            if orders is not None and not np.array_equal(ledger.orders, lam):
                raise ValueError(
                    f"orders: the ledger {p} already exists with its own {ledger.orders.size} "
                    "orders (fixed when it was created); omit `orders` or use a new file"
                )
            ledger.init_budget(dataset, eps, delta, relation)
        except BaseException:
            ledger.close()
            raise
        return ledger

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sql(self, *args):
        if self._db is None:
            raise LedgerError(
                f"the ledger {self.path} was opened read_only: open it without read_only "
                "(write access to the file and its folder) to change it"
            )
        try:
            return self._db.execute(*args)
        except sqlite3.Error as exc:
            raise _ledger_error(exc, self.path, self.timeout) from None

    def _read(self, fn):
        """``fn(connection)``: on this ledger's connection, or on a fresh read-only one
        (retried until the file was stable meanwhile) when opened read_only."""
        try:
            if self._db is None:
                return _readonly.consistent(self.path, self.timeout, fn)
            return fn(self._db)
        except sqlite3.Error as exc:
            raise _ledger_error(exc, self.path, self.timeout) from None

    # -- budgets --------------------------------------------------------------------
    def init_budget(
        self, dataset: str, eps: float, delta: float, relation: str = REPLACE_ONE
    ) -> None:
        """Create the budget (eps, delta) of ``dataset``: eps finite >= 0, delta strictly
        between 0 and 1 (ValueError naming the argument otherwise, or if it exists).

        ``relation``: the neighbour relation every charge must be for, "replace-one"
        (default: privbayes releases) or "add/remove" (e.g. subsampled Gaussians);
        :meth:`charge` refuses a curve of the other (docs/accounting.md §9)."""
        dataset = _name(dataset)
        eps, delta = _check_budget(eps, delta)
        relation = _budget_relation(relation)
        self._sql("SELECT 1")  # LedgerError when read_only
        try:
            self._db.execute(
                "INSERT INTO budgets (dataset, eps, delta, total, created, relation) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (dataset, eps, delta, _zero_total(self.orders.size), time.time(), relation),
            )
        except sqlite3.IntegrityError:
            raise ValueError(f"dataset {dataset!r} already has a budget") from None
        except sqlite3.Error as exc:
            raise _ledger_error(exc, self.path, self.timeout) from None

    def _budget(self, dataset: str):
        """(eps, delta, total, tv, relation) of ``dataset``'s budget."""

        def read(db):
            cols = _columns(db, "budgets")
            return db.execute(
                f"SELECT eps, delta, total, {_col(cols, 'tv')}, {_col(cols, 'relation')} "
                "FROM budgets WHERE dataset=?",
                (dataset,),
            ).fetchone()

        row = self._read(read)
        if row is None:
            raise self._unknown(dataset)
        total = ExactSum.from_partials(json.loads(row[2]))
        return row[0], row[1], total, Fraction(row[3]), row[4]

    def _unknown(self, dataset: str) -> UnknownDatasetError:
        return UnknownDatasetError(
            f"the ledger {self.path} has no budget for dataset {dataset!r}; create it with "
            f"`privbayes budget init {dataset} --eps E --delta D --ledger {self.path}` "
            "(Ledger.init_budget)",
            dataset=dataset,
        )

    def budget(self, dataset: str) -> tuple[float, float]:
        """The budget (eps, delta) of ``dataset``; LedgerError (UnknownDatasetError) when it
        has none. A read without the write lock: :meth:`charge` checks again."""
        eps, delta, _, _, _ = self._budget(_name(dataset))
        return float(eps), float(delta)

    def relation(self, dataset: str) -> str:
        """The neighbour relation of ``dataset``'s budget ("replace-one" for files written
        before relations were stored); LedgerError (UnknownDatasetError) when it has none."""
        return self._budget(_name(dataset))[4]

    def _spent(
        self, total: ExactSum, delta: float, tv: Fraction = Fraction(0)
    ) -> tuple[float, float, bool]:
        """(eps spent, its order, whether that order is an end of the grid), rounded up;
        with the charges' total-variation allowance ``tv`` (docs/accounting.md §8)."""
        upper = total.upper()

        def conv(d: float):
            eps, lam, _, at_edge = _grid_conversion(self.orders, upper, d, "improved")
            return eps, lam, at_edge

        if tv > 0:
            got = eps_with_tv(conv, delta, tv)
            return got if len(got) == 3 else (math.inf, math.nan, False)
        return conv(delta)

    # -- charges --------------------------------------------------------------------
    def _curve_of(self, charge) -> tuple[np.ndarray, float, str]:
        """(curve on ``self.orders``, tv, mechanism label) of a charge, checked."""
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
        tv = 0.0 if isinstance(charge, np.ndarray | list | tuple) else getattr(charge, "tv", 0.0)
        if isinstance(tv, bool) or not isinstance(tv, int | float) or not 0 <= tv <= 1:
            raise ValueError(f"a charge's tv must be a number in [0, 1]; got {tv!r}")
        return curve, float(tv), _describe(charge)

    def _conversion(self, delta: float):
        """The ledger's conversion at ``delta`` as planning uses it: (total, tv) -> eps."""
        return lambda total, tv: self._spent(total, delta, tv)[0]

    def charge(self, dataset: str, charge, note: str = "", relation: str | None = None) -> int:
        """Record ``charge`` (a release, a Calibration, a function of orders or an array on
        ``self.orders``) against ``dataset``; returns the charge id.

        ``relation``: the charge's neighbour relation when it carries none (a function or
        an array: default, the budget's); privbayes releases are replace-one.

        Raises BudgetExceededError (writing nothing) when the composed (eps, delta) would
        exceed the budget — also when the charges' total-variation allowances (the exact
        back-end's delta_f per call) reach the budget's delta, which no eps can pay for —;
        its message gives the charge's own cost, what was spent, and what still fits (how
        many copies of the charge; the largest eps a release may ask for at a few orders,
        docs/accounting.md §10). NeighbourRelationError (a ValueError; nothing written)
        when the charge's relation is not the budget's. LedgerError when the data set has
        no budget (UnknownDatasetError, also a KeyError) or the file cannot be written.
        Warns (OrdersWarning) when the best order of the conversion is an end of the
        ledger's grid (the spent eps may then be overstated).
        """
        dataset = _name(dataset)
        curve, tv, mechanism = self._curve_of(charge)
        self._sql("BEGIN IMMEDIATE")  # the write lock, before reading the total
        try:
            eps_budget, delta, total, tv_total, budget_rel = self._budget(dataset)
            rel = merge(budget_rel, charge, relation, where=f"the budget of {dataset!r}")
            before, tv_before = total.copy(), tv_total
            total.add(curve)
            tv_total += Fraction(tv)
            if tv_total > 0 and not tv_total < Fraction(delta):
                raise BudgetExceededError(self._tv_message(mechanism, dataset, tv, tv_total, delta))
            spent, order, at_edge = self._spent(total, delta, tv_total)
            if not spent <= eps_budget:
                raise _Refused(spent, before, tv_before, eps_budget, delta)
            cur = self._sql(
                "INSERT INTO charges (dataset, mechanism, curve, eps_after, time, note, tv, "
                "relation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (dataset, mechanism, _dumps(curve), spent, time.time(), str(note), tv, rel),
            )
            self._sql(
                "UPDATE budgets SET total=?, tv=? WHERE dataset=?",
                (json.dumps(total.partials()), str(tv_total), dataset),
            )
            self._before_commit()
            self._sql("COMMIT")
        except BaseException as exc:
            self._db.execute("ROLLBACK")
            if not isinstance(exc, _Refused):
                raise
            refused = exc  # the advice is computed after the write lock is released
        else:
            if at_edge:
                self._warn_edge(order)
            return int(cur.lastrowid)
        spent, before, tv_before, eps_budget, delta = refused.args
        raise BudgetExceededError(
            f"charging {mechanism} to {dataset!r} would spend eps={spent:.6g} at "
            f"delta={delta:g}, over the budget eps={eps_budget:g}; nothing was charged. "
            + self._what_fits(charge, curve, tv, before, tv_before, eps_budget, delta)
        ) from None

    def remaining(self, dataset: str, charge, relation: str | None = None) -> int | float:
        """How many more copies of ``charge`` (a release, a Calibration, a function of
        orders or an array on ``self.orders``, as for :meth:`charge`) the budget of
        ``dataset`` takes: the largest k such that k further charges of it would all pass,
        by the ledger's own conversion (grid orders, rounded up; tv allowances included).
        An int >= 0; ``math.inf`` when every k fits (a curve that is 0 where it matters).

        A read without the write lock (others may charge meanwhile). Raises
        NeighbourRelationError when the charge's relation is not the budget's, LedgerError
        (UnknownDatasetError) when the data set has no budget; ValueError or TypeError for
        a charge that :meth:`charge` would refuse as malformed.
        """
        dataset = _name(dataset)
        curve, tv, _ = self._curve_of(charge)
        eps_budget, delta, total, tv_total, budget_rel = self._budget(dataset)
        merge(budget_rel, charge, relation, where=f"the budget of {dataset!r}")
        return planning.copies_that_fit(
            self._conversion(delta), total, tv_total, curve, tv, eps_budget, delta
        )

    def _what_fits(self, charge, curve, tv, total, tv_total, eps_budget, delta) -> str:
        """The refusal's second half: the charge's own cost, what was spent, and the largest
        eps a release (with this charge's tv) may still ask for at a few orders."""
        conv = self._conversion(delta)
        alone = ExactSum(curve.size)
        alone.add(curve)
        cost = conv(alone, Fraction(tv))
        spent = conv(total, tv_total)
        lam = getattr(getattr(charge, "calibration", charge), "lam", None)
        lam = float(lam) if isinstance(lam, int | float) and not isinstance(lam, bool) else None
        top = float(self.orders[np.isfinite(self.orders)].max())
        table = sorted({*(o for o in planning.TABLE_ORDERS if o <= top), *([lam] if lam else [])})
        parts = []
        for o in table:
            e = planning.largest_eps_at(
                conv, total, tv_total, self.orders, o, tv, eps_budget, delta
            )
            if math.isnan(e):
                continue
            parts.append(f"lam={o:g}: " + ("none" if e == 0 else f"eps<={planning.fmt_down(e)}"))
        fits = (
            "A release fits now if its eps at one of these orders is at most (whatever its "
            "curve elsewhere"
            + (f"; with this charge's tv={tv:g}" if tv else "")
            + "): "
            + "; ".join(parts)
            if parts
            else ""
        )
        target = self._dp_target_that_fits(charge, total, tv_total, eps_budget, delta)
        return (
            f"This charge alone costs eps={cost:.6g} at delta={delta:g}; already spent: "
            f"eps={spent:.6g} of {eps_budget:g}. {fits}"
            + (
                f"; or: the same model and method asked as an (eps, delta) target fits with "
                f"eps={planning.fmt_down(target)}, delta={delta:g} (sample(..., eps=, delta=) "
                "or --eps --delta without --lam: the order is then chosen for you)"
                if target
                else ""
            )
        ).rstrip()

    def _dp_target_that_fits(self, charge, total, tv_total, eps_budget, delta) -> float | None:
        """For a one-draw release of a conjugate model: the largest eps (to 1%) such that
        the same model and method calibrated to (eps, the budget's delta) would fit now, by
        bisection with the ledger's own conversion; None when it does not apply or nothing
        fits. Public inputs only (the calibration's model, n and method)."""
        cal = getattr(charge, "calibration", charge)
        model = getattr(cal, "model", None)
        if (
            getattr(charge, "size", None) is not None
            or not hasattr(model, "_calibrate")
            or hasattr(model, "_resolve")  # GLMs: d is not on the charge
            or getattr(cal, "method", None) not in ("direct", "diffused", "concentrated")
            or not math.isfinite(eps_budget)
        ):
            return None
        from ..calibration import calibrate
        from ..capping import quiet
        from ..errors import InfeasiblePrivacyError

        conv = self._conversion(delta)

        def fits(e: float) -> bool:
            try:
                with quiet():
                    trial = calibrate(model, cal.n, eps=e, delta=delta, method=cal.method)
            except InfeasiblePrivacyError:
                return False
            t = total.copy()
            t.add(np.asarray(trial.rdp(self.orders), float))
            return conv(t, tv_total) <= eps_budget

        # composing can only add: a fitting target is at most the budget; what is left by
        # basic accounting is a first guess (RDP composition often admits more)
        lo, hi = 0.0, float(eps_budget)
        if fits(hi):
            return hi
        guess = eps_budget - conv(total, tv_total)
        if guess > 0 and fits(guess):
            lo = guess
        for _ in range(12):
            if lo > 0 and hi - lo <= 0.01 * lo:
                break
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo if lo > 0 else None

    @staticmethod
    def _tv_message(mechanism: str, dataset: str, tv: float, tv_total: Fraction, delta) -> str:
        """Why a charge with a failure allowance cannot fit: its tv is added to delta
        (docs/accounting.md §8), so the allowances must stay below the budget's delta."""
        what = (
            f"charging {mechanism} to {dataset!r} would spend no finite eps: its failure "
            f"allowance tv={tv:g} (the exact back-end's delta_f: the probability that the call "
            "releases nothing, added to delta)"
        )
        if Fraction(tv) >= Fraction(delta):
            return (
                f"{what} is not below the budget's delta={delta:g}; delta_f must be below the "
                f"budget's delta (the default is 1e-12); nothing was charged"
            )
        return (
            f"{what} brings the charges' allowances to {float(tv_total):.6g}, not below the "
            f"budget's delta={delta:g}: the budget's delta is spent; nothing was charged"
        )

    def _warn_edge(self, order: float) -> None:
        fin = self.orders[np.isfinite(self.orders) & (self.orders > 1)]
        warnings.warn(
            f"the best order {order:g} is at an end of the ledger's orders "
            f"[{fin[0]:g}, {fin[-1]:g}], so the eps spent may be overstated; create the "
            "ledger with a wider `orders` grid (Ledger.create(..., orders=...))",
            OrdersWarning,
            stacklevel=3,
        )

    def _before_commit(self) -> None:
        """Nothing; the crash test replaces it to be killed inside a transaction."""

    # -- reading --------------------------------------------------------------------
    def status(self, dataset: str | None = None) -> list[dict]:
        """Budgets with spent eps and their charges (oldest first), one dict per data set.

        Keys: dataset, eps_budget, delta, eps_spent (rounded up), order (the order the
        conversion used), at_grid_edge (True when that
        order is an end of the ledger's orders: eps_spent may be overstated), tv, relation
        (the budget's neighbour relation), charges (id, mechanism, eps_after, time, note,
        relation). A ``dataset`` without a budget raises LedgerError (UnknownDatasetError).
        Works on a ledger opened read_only.
        """
        args = () if dataset is None else (_name(dataset),)

        def read(db):
            cols = _columns(db, "budgets")
            rows = db.execute(
                f"SELECT dataset, eps, delta, total, {_col(cols, 'tv')}, "
                f"{_col(cols, 'relation')} FROM budgets"
                + (" WHERE dataset=?" if dataset is not None else "")
                + " ORDER BY dataset",
                args,
            ).fetchall()
            ccols = _columns(db, "charges")
            charges = {
                r[0]: db.execute(
                    f"SELECT id, mechanism, eps_after, time, note, {_col(ccols, 'relation')} "
                    "FROM charges WHERE dataset=? ORDER BY id",
                    (r[0],),
                ).fetchall()
                for r in rows
            }
            return rows, charges

        rows, charges_of = self._read(read)
        if dataset is not None and not rows:
            raise self._unknown(_name(dataset))
        out = []
        for name, eps, delta, total, tv, relation in rows:
            charges = charges_of[name]
            spent, order, at_edge = self._spent(
                ExactSum.from_partials(json.loads(total)), delta, Fraction(tv)
            )
            out.append(
                {
                    "dataset": name,
                    "eps_budget": eps,
                    "delta": delta,
                    "eps_spent": spent,
                    "order": order,
                    "at_grid_edge": at_edge,
                    "tv": float(Fraction(tv)),
                    "relation": relation,
                    "charges": [
                        {
                            "id": i,
                            "mechanism": m,
                            "eps_after": e,
                            "time": t,
                            "note": note,
                            "relation": r,
                        }
                        for i, m, e, t, note, r in charges
                    ],
                }
            )
        return out

    def spent(self, dataset: str) -> float:
        """eps spent so far on ``dataset`` at its budget's delta (rounded up); LedgerError
        when it has no budget."""
        return self.status(dataset)[0]["eps_spent"]


def _create_file(
    p: Path, dataset: str, eps: float, delta: float, relation: str, lam, timeout: float
) -> bool:
    """Build a ledger holding one budget in a temporary file next to ``p`` and move it into
    place only if ``p`` still does not exist (False then: another process made it)."""
    # SQLite creates the file with the usual permissions (umask), as for any ledger
    tmp = p.parent / f".{p.name}.{uuid.uuid4().hex}.new"
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            db.execute("BEGIN")
            _setup(db, lam)
            db.execute(
                "INSERT INTO budgets (dataset, eps, delta, total, created, relation) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (dataset, eps, delta, _zero_total(lam.size), time.time(), relation),
            )
            db.execute("COMMIT")
        finally:
            db.close()
        try:
            os.link(tmp, p)  # atomic, and never replaces a file made meanwhile
        except FileExistsError:
            return False
        except OSError:  # no hard links on this file system: exclusive create, then copy
            try:
                with open(p, "xb") as out:
                    out.write(Path(tmp).read_bytes())
            except FileExistsError:
                return False
        return True
    except sqlite3.Error as exc:
        raise _ledger_error(exc, p, timeout) from None
    except OSError as exc:
        raise LedgerError(
            f"cannot create the ledger {p}: {exc.strerror or exc}; choose another path"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def _zero_total(size: int) -> str:
    return json.dumps(ExactSum(size).partials())


def _name(dataset) -> str:
    if not isinstance(dataset, str) or not dataset.strip():
        raise ValueError(f"dataset must be a non-empty name; got {dataset!r}")
    return dataset.strip()


class _Refused(Exception):
    """A charge over budget, raised inside the transaction (args: spent, the total and tv
    before it, the budget's eps and delta); turned into BudgetExceededError outside."""


def _budget_relation(relation) -> str:
    """A budget's relation: "replace-one" or "add/remove" (None is not one)."""
    if relation is None:
        raise ValueError(f"a budget's relation must be {REPLACE_ONE!r} or 'add/remove'; got None")
    return check_relation(relation)
