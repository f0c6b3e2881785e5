"""Shared plumbing of the experiment scripts: options, seeding, parallel tasks, outputs.

Results never depend on ``--jobs``: task i draws from ``SeedSequence(seed, spawn_key=(i,))``
and results are put back in task order.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("MPLBACKEND", "Agg")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tqdm import tqdm  # noqa: E402

import privbayes as pb  # noqa: E402
from privbayes.accounting.curves import gaussian_rdp  # noqa: E402
from privbayes.sampling.conjugate import (  # noqa: E402
    log_gamma_variates,
    sample_dirichlet_log,
    simplex_from_log,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPORT_TITLE = "# privbayes: re-running the experiments of Geumlek, Song & Chaudhuri (2017)"

# one colour per method across every figure
COLORS = {
    "diffused": "C0",
    "concentrated": "C1",
    "noisy-stats": "C2",
    "gaussian": "C2",
    "ops": "C2",
    "non-private": "0.45",
    "map": "k",
    "majority-class": "0.6",
}
LABELS = {
    "diffused": "diffused (Alg. 2)",
    "concentrated": "concentrated (Alg. 3)",
    "noisy-stats": "noisy sufficient statistics (Gaussian)",
    "gaussian": "Gaussian mechanism on the mean",
    "ops": "OPS (truncated prior)",
    "non-private": "non-private posterior sample",
    "map": "non-private MAP (scikit-learn)",
    "majority-class": "majority class of the test set",
}


def floats(text: str) -> list[float]:
    """Comma-separated floats, for list options such as ``--lams 2,8``."""
    return [float(v) for v in text.split(",") if v.strip()]


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def log_grid(text: str) -> np.ndarray:
    """``LOW:HIGH:COUNT`` -> COUNT log-spaced values (``0.01:10:10``), or a comma list."""
    if ":" in text:
        low, high, count = text.split(":")
        return np.geomspace(float(low), float(high), int(count))
    return np.array(floats(text))


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small settings, for tests and smoke runs")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (results do not change)")
    p.add_argument("--seed", type=int, default=20170, help="base seed of every task")
    p.add_argument(
        "--data-dir", default=None, help="data root (then $PRIVBAYES_DATA, ../shared/data)"
    )
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="output directory")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return p


def parse_quick(
    p: argparse.ArgumentParser, argv: list[str] | None, quick: dict
) -> argparse.Namespace:
    """Parse ``argv``; with ``--quick`` the ``quick`` settings replace the defaults (explicit
    options still win)."""
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(**quick)
        args = p.parse_args(argv)
    return args


def task_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of task ``index``: independent of how tasks are spread over workers."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def run_tasks(
    fn: Callable[..., Any],
    tasks: Sequence[tuple],
    jobs: int,
    desc: str,
    progress: bool = True,
    initializer: Callable[..., None] | None = None,
    initargs: tuple = (),
) -> list:
    """``[fn(*t) for t in tasks]`` over ``jobs`` processes, in task order, with a progress bar."""
    bar = tqdm(total=len(tasks), desc=desc, disable=not progress, unit="task", smoothing=0)
    out: list = [None] * len(tasks)
    if jobs <= 1:
        if initializer is not None:
            initializer(*initargs)
        for i, t in enumerate(tasks):
            out[i] = fn(*t)
            bar.update()
    else:
        with ProcessPoolExecutor(jobs, initializer=initializer, initargs=initargs) as pool:
            futures = {pool.submit(fn, *t): i for i, t in enumerate(tasks)}
            for fut in as_completed(futures):
                out[futures[fut]] = fut.result()
                bar.update()
    bar.close()
    return out


# -- the mechanisms, vectorised over trials -------------------------------------------------


def release(
    draws: Callable, model, n: int, lam: float, eps: float, method: str, s, rng
) -> tuple[np.ndarray, pb.Calibration]:
    """``draws(model, n, s, rng, r, m)`` at the (r, m) of ``pb.calibrate``: one release per
    entry of ``s``. The calibration depends on public inputs only, so one serves every trial.
    """
    cal = pb.calibrate(model, n, lam, eps, method)
    return draws(model, n, s, rng, r=cal.r, m=cal.m), cal


def beta_release(
    model: pb.BetaBernoulli, n: int, lam: float, eps: float, method: str, s, rng
) -> tuple[np.ndarray, pb.Calibration]:
    """Draws of what ``pb.sample`` / ``pb.release_query`` release, one per entry of ``s``.

    The calibration depends on public inputs only, so it is done once (``pb.calibrate``)
    and reused for every trial; each draw is then the library's exact sampler at
    Beta(alpha/m + r s, beta/m + r (n - s)) - the same computation as ``pb.sample`` (pass a
    ``pb.models.MeanQuery`` for ``pb.release_query``; tests/test_experiments.py checks
    they agree draw for draw).
    """
    return release(beta_draws, model, n, lam, eps, method, s, rng)


def beta_draws(model, n: int, s, rng, r: float = 1.0, m: float = 1.0) -> np.ndarray:
    """theta ~ Beta(a + r' s, b + r' (n - s)), one draw per entry of ``s``.

    (a, b, r') are the library's exact parameters for (alpha/m, beta/m, r)
    (``model.posterior_params``, docs/numerics.md §1); a statistical query
    (``pb.models.MeanQuery``) floors each sum to its ``count_step`` (2^-8) as
    ``pb.release_query`` does.
    """
    step = model.count_step  # a power of two: the division and product are exact
    s = np.floor(np.asarray(s, dtype=float) / step) * step
    params = model.posterior_params(n, np.stack([s, n - s], axis=-1), r, m)
    return simplex_from_log(sample_dirichlet_log(params, rng))[..., 0]


def gamma_release(
    model: pb.GammaPoisson, n: int, lam: float, eps: float, method: str, s, rng
) -> tuple[np.ndarray, pb.Calibration]:
    """Draws of what ``pb.sample`` releases for Gamma-Poisson, one per sum in ``s``.

    Calibrated once (public inputs), then theta ~ Gamma(alpha/m + r S, beta/m + r n) with
    the model's own shape and rate arithmetic (``model.posterior_params``) and log-space
    sampler, as ``pb.sample`` (tests/test_experiments.py checks they agree draw for draw).
    """
    return release(gamma_draws, model, n, lam, eps, method, s, rng)


def gamma_draws(model, n: int, s, rng, r: float = 1.0, m: float = 1.0) -> np.ndarray:
    """theta ~ Gamma(alpha/m + r s, beta/m + r n), one draw per entry of ``s`` (reals ok)."""
    shape, log_rate = model.posterior_params(n, np.asarray(s, dtype=float), r, m)
    return np.exp(log_gamma_variates(shape, rng) - log_rate)


def normal_release(
    model: pb.NormalKnownVariance, n: int, lam: float, eps: float, method: str, s_c, rng
) -> tuple[np.ndarray, pb.Calibration]:
    """Draws of what ``pb.sample`` releases for the Normal model, one per centred sum.

    ``s_c`` are the model's statistics (``privbayes.data.statistics(model, x)[0]``:
    correctly rounded sums of x - c); each draw is offset + (w S_c + sd Z), as
    ``pb.sample`` (``model.posterior_params``).
    """
    return release(normal_draws, model, n, lam, eps, method, s_c, rng)


def normal_draws(model, n: int, s_c, rng, r: float = 1.0, m: float = 1.0) -> np.ndarray:
    """theta ~ N(mean(S_c), 1/tau) of prior^(1/m) likelihood^r, one per entry of ``s_c``."""
    loc, offset, sd = model.posterior_params(n, np.asarray(s_c, dtype=float), r, m)
    return offset + (loc + sd * rng.standard_normal(np.shape(loc)))


def gaussian_sigma(lam: float, eps: float, sensitivity: float) -> float:
    """Smallest sigma (up to rounding, on the safe side) with Gaussian RDP <= eps at lam."""
    sigma = sensitivity * np.sqrt(lam / (2.0 * eps))
    while float(gaussian_rdp(lam, sigma, sensitivity)) > eps:
        sigma = float(np.nextafter(sigma, np.inf))
    return float(sigma)


# -- outputs ---------------------------------------------------------------------------------


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Sequence]) -> int:
    """Write rows (sequences in ``columns`` order); floats with 7 significant digits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for row in rows:
            w.writerow([f"{v:.7g}" if isinstance(v, float) else v for v in row])
            count += 1
    return count


def replace_report_section(report: Path, name: str, body: str) -> None:
    """Put ``body`` between this script's markers in REPORT.md, replacing an earlier run's."""
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = report.read_text() if report.exists() else REPORT_TITLE + "\n\n" + _REPORT_INTRO
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip() + "\n\n" + block
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)


_REPORT_INTRO = (
    "Generated by the scripts in `experiments/` (see `experiments/README.md` for every\n"
    "choice and its reason). Each script rewrites its own section below; errors and\n"
    "accuracies are means over trials, ± one standard deviation across trials. All privacy\n"
    "levels are (λ, ε)-RDP in nats under replace-one neighbours with n public.\n"
)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def mean_std(x: np.ndarray, digits: int = 3) -> str:
    x = np.asarray(x, dtype=float)
    return f"{np.mean(x):.{digits}g} ± {np.std(x):.{digits - 1}g}"


def leaders(errors: np.ndarray, methods: Sequence[str]) -> list[str | None]:
    """Per column, the method with the lowest mean error, or None when its lead over the
    runner-up is under two paired standard errors. ``errors``: (methods, columns, trials),
    the same trials (data sets) for every method."""
    out: list[str | None] = []
    mean = errors.mean(axis=-1)
    for j in range(errors.shape[1]):
        best, second = np.argsort(mean[:, j])[:2]
        diff = errors[second, j] - errors[best, j]
        se = diff.std(ddof=1) / np.sqrt(diff.size)
        out.append(methods[int(best)] if diff.mean() > 2 * se else None)
    return out


def nearest(grid: Sequence[float], value: float) -> int:
    """Index of the grid point closest to ``value`` in log scale."""
    return int(np.argmin(np.abs(np.log(np.asarray(grid)) - np.log(value))))


def new_figure(ncols: int, nrows: int = 1, width: float = 3.6, height: float = 3.0):
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained"
    )
    return fig, axes


def save_figure(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_band(ax, x, stats: np.ndarray, method: str, quantiles=(0.25, 0.75), log_y=True) -> None:
    """Mean line and a quantile band of ``stats`` (shape (len(x), trials)) for one method."""
    mean = stats.mean(axis=-1)
    lo, hi = np.quantile(stats, quantiles, axis=-1)
    ax.plot(x, mean, marker="o", ms=3, color=COLORS[method], label=LABELS[method])
    ax.fill_between(x, lo, hi, color=COLORS[method], alpha=0.18, lw=0)
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")


def plot_hline(ax, values: np.ndarray, method: str, log_y=True) -> None:
    """A method that does not depend on eps: its mean as a dashed line."""
    ax.axhline(np.mean(values), color=COLORS[method], ls="--", lw=1.2, label=LABELS[method])


class Timer:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __str__(self) -> str:
        return f"{time.perf_counter() - self.start:.1f} s"
