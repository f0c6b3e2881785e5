"""Input and output of the command line: the CSV table, cells as numbers or labels, JSON.

Light on purpose (no numpy at import): ``privbayes --help`` loads this module.
"""

from __future__ import annotations

import argparse
import contextlib
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
    """A CSV file with a header row, read once (docs/data.md §6); cells are strings without
    their surrounding spaces.

    The rules are :func:`privbayes.data.read`'s (one implementation, privbayes.data): UTF-8
    text (a byte-order mark dropped; gunzipped when the name ends in .gz), a header row of
    distinct names, every record as many fields as the header, quotes closed. A blank line
    (empty, or spaces only) is refused with its line number when a column is read, at the
    end of the file too: it is how polars and pyarrow write a missing value in a one-column
    CSV, so skipping it would change n and the data. The line terminator of the last record
    is not a blank line. Error messages name lines, fields and the column asked for, never
    the header's names (a file without its header row would show its first record there).
    Reads pipes and devices too (``--data <(zcat x.csv.gz)``).
    """

    def __init__(self, path: str) -> None:
        from ..data import CSVError, _csv_bytes, _csv_header, _csv_rows, _csv_text

        p = Path(path)
        if not p.exists():
            raise UsageError(f"--data: no such file: {path}")
        if p.is_dir():
            raise UsageError(
                f"--data: {path} is a directory with no Parquet files; give a CSV file, or a "
                "quoted glob such as 'logs/*.csv'"
            )
        try:
            rows = list(_csv_rows(_csv_text(_csv_bytes(path), path), path))
            header = _csv_header(rows[0][1] if rows else None, path)
        except CSVError as exc:
            raise UsageError(f"--data: {exc}") from None
        except OSError as exc:
            raise UsageError(f"--data: cannot read {path}: {exc.strerror or exc}") from None
        self.rows = rows[1:]  # (the record's first line in the file, its fields)
        self.header = header
        self.path = path

    def column(self, name: str, flag: str = "--column") -> list[tuple[int, str]]:
        """(file line number, stripped cell) for every data row."""
        from ..data import CSVError, _csv_record

        if name not in self.header:
            raise UsageError(f"{flag}: {missing_column(name, self.path, len(self.header))}")
        idx = self.header.index(name)
        out = []
        width = len(self.header)
        for line, row in self.rows:
            try:
                _csv_record(line, row, width, self.path, blank_ok=False)
            except CSVError as exc:
                raise UsageError(f"--data: {exc}") from None
            out.append((line, row[idx].strip()))
        return out


def missing_column(name: str, path: str, width: int) -> str:
    """The error for a column the header lacks: the header's number of fields and how to see
    them, never its names (a file without its header row has its first record there, and a
    record of words cannot be told from a header)."""
    from ..data import _fields, _head_command

    return (
        f"no column {name!r} in {path}; its header (line 1) has {_fields(width)}, not "
        f"listed here (see them with: {_head_command(path)}): is the header row missing? (a "
        "header row of column names is expected)"
    )


# -- Parquet files, directories and globs (privbayes.data) -----------------------------------
def is_large_source(path: str) -> bool:
    """True for a Parquet file, a directory of them or a glob (CSV or Parquet): these are
    read lazily by privbayes.data (a Dask DataFrame when Dask is installed) and reduced in
    the engine. A single CSV file (.csv.gz too) keeps the line-numbered :class:`Table`."""
    if any(ch in path for ch in "*?["):
        return True
    return Path(path).is_dir() or path.lower().endswith((".parquet", ".pq"))


def open_source(path: str, column: str, *, text: bool = False):
    """(the table behind ``--data``, whether it is CSV) with ``column`` only (lazy: nothing
    but the first file's header and first records is read until the release runs).

    CSV files are read by the single-file rules, blank lines refused with their file and
    line; ``text``: the column as the text of its cells (for declared labels and 0/1 or
    true/false, parsed as from a single file). A column the header lacks is named with the
    header's number of fields."""
    from .. import data

    try:
        paths = data._expand(path)
        if data._format(paths) != "csv":
            table = data.read(paths)
            if column not in data._columns(table):
                width = len(data._columns(table))
                raise UsageError(
                    f"--column: no column {column!r} in {path}; it has {width} column(s), not "
                    "listed here"
                )
            return table, False
        header = data._csv_header_of(paths[0])
        if column not in header:
            raise UsageError(f"--column: {missing_column(column, paths[0], len(header))}")
        return data._read_csv(paths, [column], "auto", text=text, blank_ok=False), True
    except ImportError as exc:
        raise UsageError(f"--data: {exc}") from None
    except FileNotFoundError as exc:
        raise UsageError(f"--data: {exc.args[0] if exc.args else exc}") from None
    except data.CSVError as exc:
        raise UsageError(f"--data: {exc}") from None


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
    exactly, case included, after surrounding spaces are removed (from the cells and from the
    declared labels alike: ``' red'`` is ``red``); a record with any other label is refused,
    so a misspelt label cannot silently count as 0. Without them the column must hold 0/1
    or true/false (or, for ``signed`` logistic labels, -1/+1), one convention per column.
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
                    "matched exactly, case included, after surrounding spaces are removed; "
                    "declare every label the column holds)"
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
                f"{','.join(categories)} (labels are matched exactly, case included, after "
                "surrounding spaces are removed)"
            )
        out[i] = index[v]
    return out


@contextlib.contextmanager
def release_errors(args, note: str | None):
    """Around a release from a file: a glob's CSV error (checked when the release reads
    that file) and a label the adapter mapped to a missing value (``note`` says which
    kind; None when none was mapped) become usage errors naming the column and first row."""
    from ..data import CSVError
    from ..errors import DataError

    try:
        yield
    except CSVError as exc:
        raise UsageError(f"--data: {exc}") from None
    except DataError as exc:
        if note is None or exc.rule != "finite":
            raise
        raise UsageError(
            f"column {args.column!r}: {exc.count} row(s) hold a label that is {note} "
            "(labels are matched exactly, case included), or no value; the first is data "
            f"row {exc.index} (0-based, across files)"
        ) from None
