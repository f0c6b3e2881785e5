"""``privbayes calibrate``: the mechanism's knob for (lam, eps) at a public n; no data."""

from __future__ import annotations

from . import _models


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="the knob (r, m or t) for (lam, eps); no data needed",
        description="Calibrate a mechanism from public inputs only (prior, n, lam, eps).",
    )
    p.add_argument("--n", type=int, required=True, help="the public number of records (>= 0)")
    _models.add_arguments(p, "calibrate")
    _models.privacy_args(p, _models.GLM_METHODS, seed=False)  # deterministic: no --seed
    p.set_defaults(run=run)


def run(args) -> dict:
    from ..calibration import calibrate

    _models.check_target(args)
    adapter = _models.resolve(args, "calibrate")
    model = adapter.build(args, "calibrate")
    extra = {"d": args.d} if getattr(args, "d", None) is not None else {}
    cal = calibrate(model, args.n, args.lam, args.eps, args.method, delta=args.delta, **extra)
    ops = cal.method == "ops"
    return {
        "method": cal.method,
        "r": None if ops else cal.r,
        "m": cal.m,
        "t": cal.t,
        "lam": cal.lam,
        "eps": cal.eps,
        "target_eps": cal.target_eps,
        "delta": cal.delta,
        "dp_eps": cal.dp_eps,
        "n": cal.n,
        "worst_pair": cal.pair,
        "iterations": cal.iterations,
        "guarantee": cal.guarantee,
        **({"backend": cal.model.backend} if hasattr(cal.model, "backend") else {}),
        **({"beta": cal.model.beta} if hasattr(cal.model, "_resolve") else {}),  # GLM prior
        **({"sampler": cal.sampler} if cal.sampler is not None else {}),
        **({"note": AUTO_NOTE} if getattr(cal.model, "backend", None) == "auto" else {}),
    }


AUTO_NOTE = (
    "backend auto: the back-end (exact or langevin), hence the guarantee, depends on the "
    "number of features; pass --d to see the choice. r/m above are the exact posterior's "
    "knob; langevin calibrates its own (about 2x larger under its default utility "
    "schedule, which stops early: docs/langevin.md §6)"
)
