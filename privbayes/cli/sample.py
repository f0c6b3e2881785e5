"""``privbayes sample``: one private posterior draw from a CSV file."""

from __future__ import annotations

from pathlib import Path

from . import _models
from ._io import Table, UsageError, is_large_source, release_errors, source_name
from ._ledger import ledger_args, open_ledger


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sample",
        help="release one private posterior sample from a CSV file",
        description="Release one posterior draw with a certified (lam, eps)-RDP guarantee. "
        "Flags that the chosen --model does not use are refused.",
    )
    p.add_argument(
        "--data",
        required=True,
        metavar="PATH",
        help="a CSV file with a header row; or (conjugate models) a Parquet file, a directory "
        "of Parquet files or a quoted glob such as 'data/*.parquet' or 'logs/*.csv', reduced "
        "in Dask when installed (docs/data.md)",
    )
    _models.add_arguments(p, "sample")
    _models.privacy_args(p, _models.GLM_METHODS)
    ledger_args(p, charge=True)
    p.set_defaults(run=run)


def result(rel) -> dict:
    """The JSON fields every release reports: the draw and its certificate, nothing else.
    ``t`` is OPS's tempering (null otherwise); ``r`` is null for OPS; ``guarantee`` says
    what the certificate covers (exact, algorithm, approximate) and ``tv`` the
    total-variation allowance a conversion to (eps, delta) adds (README); GLMs add
    ``backend`` and, for Langevin, its public ``sampler`` (schedule, step, steps, noise,
    prec, start: enough to recompute the certificate)."""
    ops = rel.method == "ops"
    return {
        "value": rel.value,
        "method": rel.method,
        "r": None if ops else rel.r,
        "m": rel.m,
        "t": rel.t,
        "lam": rel.lam,
        "eps": rel.eps,
        "n": rel.n,
        "guarantee": rel.guarantee,
        "tv": rel.tv,
        "delta": rel.delta,
        "dp_eps": rel.dp_eps,
        # GLMs: the prior precision used (with --beta auto, the rule's value for n and d)
        **({"beta": model.beta} if hasattr(model := rel.calibration.model, "_resolve") else {}),
        # linear and Poisson regression: the public ball the release used (the default
        # radius resolved from n and d)
        **({"radius": model.radius} if hasattr(model, "_init_ball") else {}),
        # GLMs: the back-end that ran (auto resolves it from public inputs) and, for
        # Langevin, its public parameters (schedule, step, steps, ...: docs/langevin.md §5)
        **({"backend": model.backend} if hasattr(model, "_resolve") else {}),
        **(_langevin_sampler(rel.calibration.sampler)),
    }


def _langevin_sampler(sampler) -> dict:
    """{"sampler": ...} for a Langevin release (public numbers only), else {}."""
    if not sampler or sampler.get("algorithm") != "langevin":
        return {}
    return {"sampler": dict(sampler)}


def charge_args(args, ledger) -> dict:
    """ledger/dataset/note keywords for privbayes.sample from --ledger/--dataset."""
    if ledger is None:
        if args.dataset is not None:
            raise UsageError("--dataset needs --ledger PATH (or $PRIVBAYES_LEDGER)")
        return {}
    return {
        "ledger": ledger,
        "dataset": args.dataset or source_name(args.data),
        "note": f"privbayes {args.command} {Path(args.data).name}",
    }


def run(args) -> dict:
    from ..release import sample

    _models.check_target(args)
    adapter = _models.resolve(args, "sample")
    model = adapter.build(args, "sample")  # public choices first: no data read yet
    ledger = open_ledger(args.ledger, create=False) if args.ledger is not None else None
    try:
        charge = charge_args(args, ledger)
        column, details, note = None, None, None
        if is_large_source(args.data):
            data, column, note = adapter.read_source(args, args.data, model)
        else:
            data, details = adapter.read(args, Table(args.data), model)
        with release_errors(args, note):
            rel = sample(
                model,
                data,
                args.lam,
                args.eps,
                args.method,
                delta=args.delta,
                rng=args.seed,
                column=column,
                **charge,
            )
    finally:
        if ledger is not None:
            ledger.close()
    return adapter.finish(result(rel), details)
