"""Opening a ledger file for reading only, writing nothing beside it (an auditor's copy:
a read-only file in a read-only folder; docs/accounting.md §10).

SQLite's ``mode=ro`` still creates the ``-wal`` and ``-shm`` files of a WAL database, and
fails where it cannot. So: when a ``-wal`` file exists (a live ledger, whose last
charges may sit in it), ``mode=ro`` reads it under SQLite's locks; otherwise everything
committed is in the main file, which is read with ``immutable=1`` (no locks, no files
made) and checked unchanged afterwards (size, mtime, still no ``-wal``): a writer that
appeared meanwhile makes the read start again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_ATTEMPTS = 20


def _stamp(path: Path) -> tuple:
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, os.path.exists(f"{path}-wal"))


def connect(path: Path, timeout: float) -> tuple[sqlite3.Connection, tuple | None]:
    """A read-only connection to ``path`` and the file's stamp when it was opened
    immutable (None when opened ``mode=ro``)."""
    uri = path.resolve().as_uri()
    if os.path.exists(f"{path}-wal"):
        return sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout), None
    stamp = _stamp(path)
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=timeout), stamp


def consistent(path: Path, timeout: float, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read(connection)`` on a read-only connection, repeated until the file did not
    change while it ran (immutable reads); raises sqlite3.Error as SQLite does."""
    for _ in range(_ATTEMPTS):
        db, stamp = connect(path, timeout)
        try:
            out = read(db)
        except sqlite3.Error:
            if stamp is None or _stamp(path) == stamp:
                raise
            continue  # a writer changed the file under the immutable read: read again
        finally:
            db.close()
        if stamp is None or _stamp(path) == stamp:
            return out
    raise sqlite3.OperationalError(f"database is locked: {path} kept changing while it was read")
