"""``privbayes budget init|show``: privacy budgets in an SQLite ledger."""

from __future__ import annotations

import math
from pathlib import Path

from ._io import UsageError
from ._ledger import ledger_args, open_ledger


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "budget",
        help="privacy budgets in an SQLite ledger: init, show",
        description="init NAME --eps E --delta D makes a budget (and the ledger file if "
        "missing); show [NAME] lists budgets and their charges.",
    )
    p.add_argument("action", choices=("init", "show"), help="init: make a budget; show: list")
    p.add_argument("name", nargs="?", default=None, help="the data set's budget name")
    p.add_argument(
        "--eps",
        type=float,
        default=None,
        metavar="E",
        help="init: the budget's eps of (eps, delta)-DP, in nats (finite, > 0)",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        metavar="D",
        help="init: the budget's delta, in (0, 1); e.g. well below 1/n",
    )
    p.add_argument(
        "--orders",
        default=None,
        metavar="L1,L2,...",
        help="init of a new ledger file: the RDP orders it stores every charge on (> 1, "
        "'inf' allowed; default: a dense grid over (1, 1024] plus inf). Very small delta "
        "favours large orders",
    )
    ledger_args(p, charge=False)
    p.set_defaults(run=run)


def _orders(text: str) -> list[float]:
    out = []
    for item in text.split(","):
        try:
            lam = float(item.strip())
        except ValueError:
            raise UsageError(f"--orders: {item.strip()!r} is not a number") from None
        if math.isnan(lam) or lam <= 1:
            raise UsageError(f"--orders: every order must be > 1 (or inf); got {item.strip()}")
        out.append(lam)
    return out


def _check_init(args) -> list[float] | None:
    """Every argument of init, checked before the ledger file is touched."""
    if args.name is None or args.eps is None or args.delta is None:
        raise UsageError("budget init needs NAME --eps E --delta D")
    if not args.name.strip():
        raise UsageError("budget init: NAME must not be empty")
    if not (math.isfinite(args.eps) and args.eps > 0):
        raise UsageError(f"--eps: the budget must be finite and > 0; got {args.eps}")
    if not 0 < args.delta < 1:
        raise UsageError(f"--delta: need 0 < delta < 1; got {args.delta}")
    return _orders(args.orders) if args.orders is not None else None


def _init(args) -> dict:
    import numpy as np

    orders = _check_init(args)
    path = Path(args.ledger)
    existed = path.exists()
    ledger = open_ledger(args.ledger, create=True, orders=orders)
    try:
        if orders is not None and not np.array_equal(ledger.orders, np.unique(orders)):
            raise UsageError(
                f"--orders: {args.ledger} already stores its own orders (fixed when it was "
                "created); drop --orders or use a new ledger file"
            )
        ledger.init_budget(args.name, args.eps, args.delta)
    except BaseException:
        ledger.close()
        if not existed:  # a failed init leaves no file behind
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        raise
    out = {
        "dataset": args.name.strip(),
        "eps_budget": args.eps,
        "delta": args.delta,
        "orders": len(ledger.orders),
        "ledger": str(ledger.path),
    }
    ledger.close()
    return out


def _show(args) -> None:
    import datetime

    for flag in ("eps", "delta", "orders"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag} applies to budget init only")
    ledger = open_ledger(args.ledger, create=False, read_only=True)  # writes nothing
    try:
        status = ledger.status(args.name)
    except KeyError as exc:
        raise UsageError(f"--ledger {args.ledger}: {exc.args[0]}") from None
    finally:
        ledger.close()
    if not status:
        print(f"no budgets in {args.ledger}")
    for b in status:
        print(
            f"{b['dataset']}: spent eps={b['eps_spent']:.6g} of {b['eps_budget']:g} "
            f"at delta={b['delta']:g} ({len(b['charges'])} charges; {b['relation']} "
            "neighbours)"
        )
        if b["charges"]:
            print(f"  {'id':>4}  {'time (UTC)':<19}  {'eps after':>10}  mechanism / note")
        for c in b["charges"]:
            when = datetime.datetime.fromtimestamp(c["time"], datetime.UTC)
            print(
                f"  {c['id']:>4}  {when:%Y-%m-%d %H:%M:%S}  {c['eps_after']:>10.6g}  "
                f"{c['mechanism']}" + (f" / {c['note']}" if c["note"] else "")
            )
    return None


def run(args):
    return _init(args) if args.action == "init" else _show(args)
