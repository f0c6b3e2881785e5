"""The ``privbayes`` command line: sample, posterior, query, calibrate, audit, budget, demo.

One module per command, each with ``register(subparsers)`` and ``run(args)``; the model
adapters in ``_models`` decide which flags apply to which model. Every error a user can
fix (bad files, columns, arguments, ledgers, infeasible targets) prints one line to
stderr and exits with status 2; an interrupt (Ctrl-C, SIGINT) prints one line and exits
with status 130 (128 + SIGINT), printing no result (a release interrupted while it
sampled released nothing; its ledger charge stays); a closed stdout (``| head -1``) ends
the command quietly with status 141 (128 + SIGPIPE). Outputs are one strict-JSON object on
stdout (null where a number is infinite). Heavy libraries load inside ``run``, so
``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys

from .. import __version__
from ..errors import PrivBayesError
from ._io import Parser, UsageError, dump_json

COMMANDS = ("sample", "posterior", "query", "calibrate", "audit", "budget", "demo")
EXIT_USAGE = 2  # an error the user can fix
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shells' status for Ctrl-C
EXIT_CLOSED_STDOUT = 141  # 128 + SIGPIPE: what the shell reports for a writer a pipe stopped

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
        if out is not None:
            print(dump_json(out))
        sys.stdout.flush()
    except BrokenPipeError:  # stdout closed early (`| head -1`): stop quietly
        return _stdout_closed()
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, no traceback, no result
        detail = " ".join(str(exc).split())
        message = "interrupted (Ctrl-C)" + (f": {detail}" if detail else "")
        print(f"privbayes {args.command}: error: {message}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _USER_ERRORS as exc:
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        message = " ".join(str(text).split())  # one line
        if isinstance(exc, sqlite3.Error) and getattr(args, "ledger", None):
            message = f"--ledger {args.ledger}: {message} (SQLite)"  # e.g. a lock timeout
        print(f"privbayes {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _stdout_closed() -> int:
    """The reader of stdout has gone: no message (the pipe's reader asked for no more), and
    stdout pointed at /dev/null so that Python's flush at exit does not print a traceback."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (e.g. a test's StringIO)
        pass
    return EXIT_CLOSED_STDOUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
