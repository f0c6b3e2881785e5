"""The ``privbayes`` command line: sample, query, calibrate, audit, budget, demo.

One module per command, each with ``register(subparsers)`` and ``run(args)``; the model
adapters in ``_models`` decide which flags apply to which model. Every error a user can
fix (bad files, columns, arguments, ledgers, infeasible targets) prints one line to
stderr and exits with status 2. Outputs are one strict-JSON object on stdout (null where a
number is infinite). Heavy libraries load inside ``run``, so ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys

from .. import __version__
from ..errors import PrivBayesError
from ._io import Parser, UsageError, dump_json

COMMANDS = ("sample", "query", "calibrate", "audit", "budget", "demo")

# What a command may raise that the user can act on: one line, exit status 2.
_USER_ERRORS = (
    UsageError,
    PrivBayesError,  # infeasible targets, budgets, convergence, sampling, audits, ledgers
    ValueError,
    TypeError,
    ArithmeticError,
    KeyError,
    OSError,
    sqlite3.Error,
)


def build_parser() -> Parser:
    parser = Parser(
        prog="privbayes",
        description="Posterior samples with a certified Rényi differential privacy guarantee.",
    )
    parser.add_argument("--version", action="version", version=f"privbayes {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=Parser, metavar="COMMAND"
    )
    for name in COMMANDS:
        importlib.import_module(f".{name}", __name__).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        out = args.run(args)
    except _USER_ERRORS as exc:
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        message = " ".join(str(text).split())  # one line
        if isinstance(exc, sqlite3.Error) and getattr(args, "ledger", None):
            message = f"--ledger {args.ledger}: {message} (SQLite)"  # e.g. a lock timeout
        print(f"privbayes {args.command}: error: {message}", file=sys.stderr)
        return 2
    if out is not None:
        print(dump_json(out))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
