"""Input and output of the command line: the CSV table, cells as numbers or labels, JSON.

Light on purpose (no numpy at import): ``privbayes --help`` loads this module.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path


class UsageError(Exception):
    """An error the user can fix; printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage text stays behind --help)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# -- JSON -----------------------------------------------------------------------------------
def jsonable(value):
    """``value`` with numpy scalars/arrays as Python numbers/lists and every non-finite float
    as None (JSON has no inf or NaN; the README says null stands for them)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays and scalars
        return jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dump_json(value) -> str:
    """Strict JSON (RFC 8259) that any standard parser reads: inf and NaN become null."""
    return json.dumps(jsonable(value), allow_nan=False)


# -- CSV ------------------------------------------------------------------------------------
class Table:
    """A CSV file with a header row, read once; cells are stripped strings."""

    def __init__(self, path: str) -> None:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"--data: no such file: {path}")
        try:
            with p.open(newline="", encoding="utf-8-sig") as fh:  # -sig: Excel's BOM
                reader = csv.reader(fh)
                header = next(reader, None)
                self.rows = [(n, row) for n, row in enumerate(reader, start=2) if row]
        except UnicodeDecodeError:
            raise UsageError(f"--data: {path} is not a UTF-8 text CSV file") from None
        except csv.Error as exc:
            raise UsageError(f"--data: {path} is not valid CSV: {exc}") from None
        except OSError as exc:
            raise UsageError(f"--data: cannot read {path}: {exc.strerror or exc}") from None
        if not header:
            raise UsageError(f"--data: {path} is empty (a header row is expected)")
        self.header = [h.strip() for h in header]
        dupes = sorted({h for h in self.header if self.header.count(h) > 1})
        if dupes:
            raise UsageError(f"--data: {path} has duplicate column name(s): {', '.join(dupes)}")
        self.path = path

    def column(self, name: str, flag: str = "--column") -> list[tuple[int, str]]:
        """(file line number, stripped cell) for every data row."""
        if name not in self.header:
            shown = ", ".join(self.header[:20]) + (" ..." if len(self.header) > 20 else "")
            raise UsageError(f"{flag}: no column {name!r} in {self.path}; columns: {shown}")
        idx = self.header.index(name)
        out = []
        width = len(self.header)
        for line, row in self.rows:
            if idx >= len(row):
                raise UsageError(f"{flag} {name!r}: line {line} has no value")
            if len(row) > width:  # the cells may have shifted: refuse rather than guess
                raise UsageError(
                    f"--data: line {line} of {self.path} has {len(row)} fields but the header "
                    f"has {width}; fix the row (quote cells that contain commas)"
                )
            out.append((line, row[idx].strip()))
        return out


# -- Parquet files, directories and globs (privbayes.data) -----------------------------------
def is_large_source(path: str) -> bool:
    """True for a Parquet file, a directory of them or a glob (CSV or Parquet): these are
    read lazily by :func:`privbayes.data.read` (a Dask DataFrame when Dask is installed)
    and reduced in the engine. A single CSV file keeps the line-numbered :class:`Table`."""
    if any(ch in path for ch in "*?["):
        return True
    return Path(path).is_dir() or path.lower().endswith((".parquet", ".pq"))


def open_source(path: str):
    """The table behind ``--data`` (lazy: nothing is read until the release runs)."""
    from ..data import read

    try:
        return read(path)
    except ImportError as exc:
        raise UsageError(f"--data: {exc}") from None
    except FileNotFoundError as exc:
        raise UsageError(f"--data: {exc.args[0] if exc.args else exc}") from None


def source_name(path: str) -> str:
    """A default ledger dataset name: the file's stem, or the folder of a glob/directory."""
    p = Path(path)
    if any(ch in path for ch in "*?["):
        p = p.parent
    return p.stem or p.resolve().name


# -- cells ----------------------------------------------------------------------------------
def floats(cells: list[tuple[int, str]], name: str):
    """Numbers of a column as a float array; refuses text, NaN and infinities."""
    import numpy as np

    out = np.empty(len(cells))
    for i, (line, v) in enumerate(cells):
        try:
            out[i] = float(v)
        except ValueError:
            raise UsageError(f"column {name!r}: line {line} is {v!r}, not a number") from None
        if not math.isfinite(out[i]):
            raise UsageError(f"column {name!r}: line {line} is {v!r}, not a finite number")
    return out


def labels(text: str | None, flag: str, minimum: int = 1) -> list[str] | None:
    """A public comma-separated list of labels (no empty or repeated label)."""
    if text is None:
        return None
    items = [c.strip() for c in text.split(",")]
    if len(items) < minimum or any(not c for c in items):
        need = "at least two non-empty labels" if minimum > 1 else "non-empty labels"
        raise UsageError(f"{flag}: need {need}; got {text!r}")
    if len(set(items)) != len(items):
        raise UsageError(f"{flag}: duplicate labels in {text!r}")
    return items


_ZERO_ONE = {"0": 0.0, "1": 1.0, "0.0": 0.0, "1.0": 1.0, "false": 0.0, "true": 1.0}
_SIGNED = {**_ZERO_ONE, "-1": 0.0, "+1": 1.0, "-1.0": 0.0, "+1.0": 1.0}


def binary(
    cells,
    name: str,
    positive: list[str] | None,
    negative: list[str] | None,
    signed: bool = False,
):
    """0/1 values of a two-class column; every record must carry a declared label.

    With ``--positive``/``--negative`` the labels are the declared (public) ones, matched
    exactly, case included; a record with any other label is refused, so a misspelt label
    cannot silently count as 0. Without them the column must hold 0/1 or true/false (or,
    for ``signed`` logistic labels, -1/+1), one convention per column.
    """
    import numpy as np

    if (positive is None) != (negative is None):
        raise UsageError(
            "--positive and --negative go together: declare every label of the column "
            "(public choices), e.g. --positive '>50K' --negative '<=50K'; a record with any "
            "other label is then refused instead of counted as 0"
        )
    out = np.empty(len(cells))
    if positive is not None:
        both = sorted(set(positive) & set(negative))
        if both:
            raise UsageError(f"--positive and --negative both list {', '.join(both)}")
        value = {**{v: 0.0 for v in negative}, **{v: 1.0 for v in positive}}
        for i, (line, v) in enumerate(cells):
            if v not in value:
                raise UsageError(
                    f"column {name!r}: line {line} is {v!r}, neither --positive "
                    f"{','.join(positive)} nor --negative {','.join(negative)} (labels are "
                    "matched exactly, case included; declare every label the column holds)"
                )
            out[i] = value[v]
        return out
    known = _SIGNED if signed else _ZERO_ONE
    for i, (line, v) in enumerate(cells):
        if v.lower() not in known:
            expected = "0/1, -1/+1 or true/false" if signed else "0/1 or true/false"
            raise UsageError(
                f"column {name!r}: line {line} is {v!r}; expected {expected} (or declare the "
                "labels with --positive LABEL --negative LABEL)"
            )
        out[i] = known[v.lower()]
    # "1" is positive under both 0/1 and -1/+1; a column holding both 0 and -1 mixes the
    # two conventions, and one of them may be a typo: refuse rather than guess.
    if signed:
        seen = {v.lower() for _, v in cells}
        if seen & {"0", "0.0", "false"} and seen & {"-1", "-1.0"}:
            raise UsageError(
                f"column {name!r} holds both 0 and -1: two label conventions at once; declare "
                "the labels with --positive LABEL --negative LABEL"
            )
    return out


def codes(cells, name: str, categories: list[str] | None, flag: str = "--categories"):
    """Category codes 0..K-1 of a column, from declared labels (or integer codes); a
    record with an undeclared label is refused, naming its line and ``flag``."""
    import numpy as np

    if categories is None:
        return floats(cells, name)
    index = {c: k for k, c in enumerate(categories)}
    out = np.empty(len(cells))
    for i, (line, v) in enumerate(cells):
        if v not in index:
            raise UsageError(
                f"column {name!r}: line {line} is {v!r}, not one of {flag} "
                f"{','.join(categories)} (labels are matched exactly, case included)"
            )
        out[i] = index[v]
    return out
