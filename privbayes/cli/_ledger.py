"""The privacy ledger on the command line: its default path and opening it with one-line
errors that name the path and the fix (instead of raw sqlite3 messages)."""

from __future__ import annotations

import os
import sqlite3
import warnings
from pathlib import Path

from ..errors import PrivBayesError
from ._io import UsageError

ENV = "PRIVBAYES_LEDGER"
DEFAULT_FILE = "privbayes-ledger.sqlite"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def env_ledger() -> str | None:
    """$PRIVBAYES_LEDGER, or None when it is unset or blank (blank is not a path)."""
    value = os.environ.get(ENV, "").strip()
    return value or None


def ledger_args(parser, *, charge: bool) -> None:
    """--ledger (and, on commands that charge, --dataset) with their defaults in the help."""
    env = env_ledger()
    if charge:
        parser.add_argument(
            "--ledger",
            default=env,
            metavar="PATH",
            help=f"SQLite privacy ledger charged before the draw, made by `privbayes budget "
            f"init` (default: ${ENV} if set, else no ledger; now: {env or 'none'})",
        )
        parser.add_argument(
            "--dataset",
            default=None,
            metavar="NAME",
            help="the budget's name in the ledger (default: the data file's stem)",
        )
    else:
        parser.add_argument(
            "--ledger",
            default=env or DEFAULT_FILE,
            metavar="PATH",
            help=f"SQLite privacy ledger file (default: ${ENV} if set, else ./{DEFAULT_FILE}; "
            "now: %(default)s)",
        )


def _is_ledger(path: Path) -> bool | None:
    """True/False whether an SQLite file has the ledger's tables; None if it has no tables
    yet or cannot be read here (the real open then reports the problem)."""
    from ..accounting import _readonly

    try:
        db, _ = _readonly.connect(path, 5.0)  # writes nothing, not even journal files
        try:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            db.close()
    except sqlite3.Error:
        return None
    if not names:
        return None
    return "budgets" in names and "charges" in names


def open_ledger(path: str, *, create: bool, orders=None, read_only: bool = False):
    """A :class:`privbayes.Ledger` at ``path``; UsageError naming the path and the fix.

    ``create=False`` (sample, query) needs an existing ledger; ``create=True`` (budget
    init) makes the file if missing, with ``orders`` if given; ``read_only`` (budget show)
    opens an existing file without writing anything, so a read-only file in a read-only
    folder (an auditor's copy) works.
    """
    from ..accounting.ledger import Ledger

    init = f"`privbayes budget init NAME --eps E --delta D --ledger {path}`"
    if not path or not path.strip():
        raise UsageError("--ledger: empty path; give a file name, e.g. --ledger budget.sqlite")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--ledger {path}: is a directory; give a file name inside it")
    parent = p.parent if str(p.parent) else Path(".")
    if p.exists():
        try:
            with p.open("rb") as fh:
                head = fh.read(len(_SQLITE_MAGIC))
        except OSError as exc:
            raise UsageError(f"--ledger {path}: cannot read it ({exc.strerror})") from None
        if head and head != _SQLITE_MAGIC:
            raise UsageError(
                f"--ledger {path}: not a privbayes ledger (not an SQLite file); give the "
                "path of a ledger made by `privbayes budget init`"
            )
        if not head and not create:
            raise UsageError(
                f"--ledger {path}: the file is empty, not a ledger; create it with {init}"
            )
        if head and _is_ledger(p) is False:
            raise UsageError(
                f"--ledger {path}: an SQLite database but not a privbayes ledger (no budgets "
                "table); give the path of a ledger made by `privbayes budget init`"
            )
    elif not create or read_only:
        raise UsageError(f"--ledger {path}: no ledger at {path}; create it with {init}")
    if read_only:
        try:
            return Ledger(p, read_only=True)
        except (sqlite3.Error, OSError, PrivBayesError) as exc:
            reason = " ".join(str(exc).split())
            raise UsageError(f"--ledger {path}: cannot read the ledger ({reason})") from None
    if not p.exists() and not parent.is_dir():
        raise UsageError(
            f"--ledger {path}: no such directory {parent}; create it first or choose another path"
        )
    # SQLite writes its journal (-wal, -shm) beside the ledger, so the folder must be
    # writable even to charge an existing file.
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(
            f"--ledger {path}: cannot write in the folder {parent} (SQLite keeps its journal "
            "files beside the ledger); choose a writable folder or fix its permissions"
        )
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"--ledger {path}: the file is read-only; fix its permissions")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # differing orders: checked by init
            return Ledger(p, orders=orders, create=create)
    except (sqlite3.Error, OSError, PrivBayesError) as exc:
        reason = " ".join(str(exc).split())
        raise UsageError(f"--ledger {path}: cannot open the ledger ({reason})") from None
