"""``privbayes posterior``: one noise-aware release, then the posterior given it.

The sufficient statistic is released once with discrete Gaussian noise
(docs/noise_aware.md); the JSON holds the noisy statistic, the noise, the certificate, the
central interval and the mean. ``--out FILE`` writes ``--draws`` posterior draws (NetCDF
through ArviZ for ``.nc``, else CSV): free post-processing of the released statistic.
"""

from __future__ import annotations

import math
from pathlib import Path

from . import _models
from ._io import Table, UsageError, is_large_source, release_errors
from ._ledger import ledger_args, open_ledger
from .sample import charge_args

OUT_FORMATS = (".nc", ".csv")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "posterior",
        help="release a noisy sufficient statistic once; print the posterior given it",
        description="Release the model's sufficient statistic once with discrete Gaussian "
        "noise (a certified (lam, eps)-RDP release) and report the noise-aware posterior: "
        "its central interval, mean and certificate; --out writes draws (post-processing, "
        "no further charge). Flags that the chosen --model does not use are refused.",
    )
    p.add_argument(
        "--data",
        required=True,
        metavar="PATH",
        help="a CSV file with a header row, a Parquet file, a directory of Parquet files or a "
        "quoted glob ('data/*.parquet'), reduced in Dask when installed (docs/data.md)",
    )
    _models.add_arguments(p, "posterior")
    _models.privacy_args(p, None, seed=False, finite=True)  # --lam, --eps, --delta
    p.add_argument(
        "--interval",
        type=float,
        default=0.9,
        metavar="P",
        help="mass of the central credible interval, in (0, 1) (default 0.9)",
    )
    p.add_argument(
        "--draws",
        type=int,
        default=None,
        metavar="N",
        help="posterior draws written to --out (default 4000; needs --out)",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="write the draws: FILE.nc (NetCDF through ArviZ: posterior group and the "
        "certificate in its attrs) or FILE.csv (one row per draw)",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default: fresh OS entropy)")
    ledger_args(p, charge=True)
    p.set_defaults(run=run)


def _check_public(args) -> tuple[int, str | None]:
    """The output options, checked before any data are read or anything is charged."""
    if not 0 < args.interval < 1:
        raise UsageError(f"--interval: need a mass in (0, 1); got {args.interval}")
    _models.check_target(args)
    if args.lam is not None and not math.isfinite(args.lam):
        raise UsageError("--lam: the discrete Gaussian needs a finite order (no pure DP)")
    if args.draws is not None and args.out is None:
        raise UsageError("--draws needs --out FILE (draws are written to a file)")
    draws = 4000 if args.draws is None else args.draws
    if not 1 <= draws <= 10**7:
        raise UsageError(f"--draws: need an integer in [1, 10**7]; got {draws}")
    out = args.out
    if out is not None:
        suffix = Path(out).suffix.lower()
        if suffix not in OUT_FORMATS:
            raise UsageError(f"--out: write .nc (NetCDF) or .csv; got {out!r}")
        folder = Path(out).resolve().parent
        if not folder.is_dir():
            raise UsageError(f"--out: no such folder: {folder}")
        _check_writable(Path(out), folder)
    return draws, out


def _check_writable(path: Path, folder: Path) -> None:
    """--out can be written: checked before anything is charged, since the draws are
    written after the release (a file that cannot be written would waste its budget)."""
    import os
    import tempfile

    if path.is_dir():
        raise UsageError(f"--out: {str(path)!r} is a folder; name a file in it")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"--out: {str(path)!r} exists and cannot be written")
    try:  # a file created (and removed) in the folder: permissions, read-only mounts...
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".privbayes-out-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"--out: cannot write in the folder {folder} ({reason})") from None


def _summary(post, prob: float, model_name: str, args) -> dict:
    import sys

    import numpy as np

    from ..errors import ConvergenceError

    try:
        lo, hi = post.interval(prob)
        mean = post.mean()
    except ConvergenceError as exc:
        # the release is made and paid for: report its public statistic and noise (from
        # which the posterior can be recomputed) rather than lose them with the error
        print(f"privbayes posterior: warning: {exc}", file=sys.stderr)
        lo = hi = mean = None
        failed = str(exc)
    else:
        failed = None
    out = {
        "model": model_name,
        "method": "noise-aware",
        "statistic": post.statistic,
        "noise": post.noise,
        "interval": None if failed else [lo, hi],
        "prob": prob,
        "mean": mean,
        "lam": post.lam,
        "eps": post.eps,
        "delta": post.delta,
        "dp_eps": post.dp_eps,
        "n": post.n,
        "guarantee": post.guarantee,
        "truncation": post.truncation,
    }
    if post.diagnostics is not None:
        out["diagnostics"] = post.diagnostics  # public: the chains read only the statistic
    if failed:
        out["convergence_error"] = failed
    if model_name == "query":
        clo, chi = post.confidence_interval(prob)
        width = args.high - args.low
        out["confidence_interval"] = [clo, chi]
        out["mean_in_range"] = args.low + width * out["mean"]
        out["interval_in_range"] = [args.low + width * lo, args.low + width * hi]
        out["confidence_interval_in_range"] = [args.low + width * clo, args.low + width * chi]
    return {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items()}


def _write(post, path: str, draws: int, seed) -> None:
    import numpy as np

    rng = None if seed is None else np.random.default_rng([seed, 1])
    if path.lower().endswith(".nc"):
        try:
            import arviz  # noqa: F401
        except ImportError:
            raise UsageError(
                "--out FILE.nc needs ArviZ (pip install arviz); or write .csv"
            ) from None
        chains = min(4, draws)
        idata = post.to_inference_data(draws=draws, rng=rng, chains=chains)
        idata.to_netcdf(path)
        return
    values = np.asarray(post.sample(draws, rng), dtype=float)
    name = post._family.var_name
    if values.ndim == 1:
        header, rows = name, values[:, None]
    else:
        header = ",".join(f"{name}_{k}" for k in range(values.shape[1]))
        rows = values
    np.savetxt(path, rows, delimiter=",", header=header, comments="", fmt="%.17g")


def run(args) -> dict:
    from ..posterior import posterior

    adapter = _models.resolve(args, "posterior")
    draws, out = _check_public(args)
    model = adapter.build(args, "posterior")  # public choices first: no data read yet
    ledger = open_ledger(args.ledger, create=False) if args.ledger is not None else None
    try:
        charge = charge_args(args, ledger)
        column, note = None, None
        if is_large_source(args.data):
            data, column, note = adapter.read_source(args, args.data, model)
        else:
            data, _ = adapter.read(args, Table(args.data), model)
        with release_errors(args, note):
            post = posterior(model, data, args.lam, args.eps, delta=args.delta, rng=args.seed,
                             column=column, **charge)  # fmt: skip
    finally:
        if ledger is not None:
            ledger.close()
    result = _summary(post, args.interval, adapter.name, args)
    if out is not None and "convergence_error" not in result:  # no draws to write
        try:
            _write(post, out, draws, args.seed)
        except OSError as exc:  # after the release: keep its (public) result in the message
            from ._io import dump_json

            reason = exc.strerror or str(exc)
            raise UsageError(
                f"--out {out}: the draws could not be written ({reason}); the release was "
                f"made and charged, its result: {dump_json(result)}"
            ) from None
        result["out"] = out
        result["draws"] = draws
    return result
