"""What the conjugate-model studies share: beta_bernoulli.py, gamma_poisson.py, normal_mean.py.

Each study runs one task per setting (truth, n, lam): ``trials`` data sets drawn once, then
for every eps the diffused and concentrated releases and a Gaussian-mechanism baseline on
the sufficient statistic, and one non-private posterior draw per data set (:func:`releases`).
A script states what differs in a :class:`Study` (names, labels, the options its task
takes) and writes its own task, options and discussion; :func:`main` does the rest: the CSV
(one row per method, setting, eps and trial), one figure per (truth, lam) and the
REPORT.md section. statistical_query.py uses the pieces that fit it: :func:`releases`,
:func:`release_rows`, the panels and the win tables.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import _common as C
import numpy as np

METHODS = ("diffused", "concentrated", "noisy-stats")
LETTERS = {"diffused": "D", "concentrated": "C", "noisy-stats": "N", "gaussian": "G"}
QUICK = dict(ns=[10, 1000], eps_grid=C.log_grid("0.01:10:4"), trials=40)


# -- one setting: every eps and method on the same data sets --------------------------------


def releases(
    model,
    n: int,
    lam: float,
    eps_grid: np.ndarray,
    stat: np.ndarray,
    rng: np.random.Generator,
    draws: Callable,
    sensitivity: float,
    bounds: tuple[float, float],
    total: np.ndarray | None = None,
    baseline: Callable[[np.ndarray], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Every eps and method on the data sets whose statistics are ``stat`` (one per trial).

    Per eps, in this order (it fixes what ``rng`` draws): the diffused and concentrated
    releases, ``draws(model, n, stat, rng, r, m)`` (e.g. ``C.beta_draws``) at the calibrated
    r and m (``C.release``); then the Gaussian mechanism on ``total`` (default ``stat``) with
    the sigma that makes it (lam, eps)-RDP at ``sensitivity``, clipped to ``bounds`` and
    mapped by ``baseline`` (default: a posterior draw ``draws(model, n, noisy, rng)``, which
    is post-processing). Last, one non-private draw ``draws(model, n, stat, rng)`` per data
    set.

    Returns ``est`` (3, eps, trials) in the order diffused, concentrated, baseline; ``knob``
    (3, eps): the calibrated r, m and sigma; ``nonpriv`` (trials,).
    """
    trials = len(stat)
    total = stat if total is None else total
    if baseline is None:
        baseline = lambda noisy: draws(model, n, noisy, rng)
    est = np.empty((3, len(eps_grid), trials))
    knob = np.empty((3, len(eps_grid)))
    for j, eps in enumerate(eps_grid):
        for i, method in enumerate(("diffused", "concentrated")):
            est[i, j], cal = C.release(draws, model, n, lam, eps, method, stat, rng)
            knob[i, j] = cal.r if method == "diffused" else cal.m
        sigma = C.gaussian_sigma(lam, eps, sensitivity)
        noisy = np.clip(total + sigma * rng.standard_normal(trials), *bounds)
        est[2, j] = baseline(noisy)
        knob[2, j] = sigma
    return {"est": est, "knob": knob, "nonpriv": draws(model, n, stat, rng)}


def release_rows(
    settings: Sequence[tuple],
    results: Sequence[dict],
    eps_grid: np.ndarray,
    methods: Sequence[str],
    stat: str,
    cast: Callable = float,
) -> Iterator[tuple]:
    """(setting, method, eps, trial, statistic, estimate, knob) for every trial of every
    setting: each method at every eps, then the non-private draw (eps and knob "").
    ``stat`` names the per-trial statistic in the results, written as ``cast`` of it."""
    for setting, res in zip(settings, results, strict=True):
        values, knob = res[stat], res["knob"].tolist()
        for t in range(len(values)):
            value = cast(values[t])
            for i, method in enumerate(methods):
                for j, eps in enumerate(eps_grid):
                    est = float(res["est"][i, j, t])
                    yield setting, method, float(eps), t, value, est, knob[i][j]
            yield setting, "non-private", "", t, value, float(res["nonpriv"][t]), ""


# -- figures and tables ----------------------------------------------------------------------


def error_panel(ax, eps_grid, err, nperr, methods, ylabel: str, title: str) -> None:
    """One panel: each method's error (``err``: (methods, eps, trials)) against eps, and the
    non-private draw's mean error ``nperr`` (trials,) as a dashed line."""
    for i, method in enumerate(methods):
        C.plot_band(ax, eps_grid, err[i], method)
    C.plot_hline(ax, nperr, "non-private")
    ax.set_xlabel("ε (nats, RDP at λ)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both", lw=0.4)


def finish_figure(fig, axes, title: str, path: Path) -> str:
    """The legend in the first panel, the title, saved to ``path``; returns its file name."""
    axes[0, 0].legend(fontsize=7, loc="lower left")
    fig.suptitle(title, fontsize=10)
    C.save_figure(fig, path)
    return path.name


def wins(errs: dict, methods: Sequence[str], lams: Sequence[float]) -> tuple[dict, dict]:
    """Per setting (key, n, lam) the winner of each eps (``C.leaders``: None when no lead of
    two paired standard errors), and per lam the winners of all its cells."""
    winner = {key: C.leaders(e, methods) for key, e in errs.items()}
    counts = {lam: [w for k, ws in winner.items() if k[2] == lam for w in ws] for lam in lams}
    return winner, counts


def win_tables(winner, counts, methods, lams, eps_grid, head: str, keys) -> tuple[str, str]:
    """Markdown: wins per lam and method, and the winner's letter per cell.

    ``keys``: ((key, n), [row labels]) in table order; ``head`` names the key's column.
    """
    cells = len(keys) * len(eps_grid)
    table = C.markdown_table(
        ["λ"] + [C.LABELS[m] for m in methods] + ["no clear winner"],
        [
            [f"{lam:g}"] + [f"{counts[lam].count(m)} / {cells}" for m in (*methods, None)]
            for lam in lams
        ],
    )
    cell_map = C.markdown_table(
        [head, "n"] + [f"λ={lam:g} ε={e:.2g}" for lam in lams for e in eps_grid],
        [
            labels + [LETTERS.get(m, "·") for lam in lams for m in winner[(*key, lam)]]
            for key, labels in keys
        ],
    )
    return table, cell_map


def detail_table(errs, nperr, methods, lam: float, eps_grid, head: str, keys) -> str:
    """Markdown: mean ± std error of each method at the eps nearest 0.1 and 1 (at ``lam``),
    and of the non-private draw; ``keys`` as in :func:`win_tables`."""
    pick = [C.nearest(eps_grid, e) for e in (0.1, 1.0)]
    header = [head, "n"] + [f"{m} ε={eps_grid[j]:.3g}" for j in pick for m in methods]
    body = [
        labels
        + [C.mean_std(errs[(*key, lam)][i, j]) for j in pick for i in range(len(methods))]
        + [C.mean_std(nperr[(*key, lam)])]
        for key, labels in keys
    ]
    return C.markdown_table(header + ["non-private"], body)


# -- a conjugate study ------------------------------------------------------------------------


@dataclass(frozen=True)
class Study:
    """What differs between the conjugate studies (the rest is this module's)."""

    name: str  # script, CSV, figures and REPORT.md section
    title: str  # the model, in figure titles
    option: str  # the option listing the true values (``ps`` for ``--ps``)
    column: str  # CSV column of the true value
    symbol: str  # the true value in labels and tables
    slug: str  # the true value in figure file names
    stat_column: str  # CSV column of each data set's statistic
    empirical: str  # the data's own estimate of the truth, in labels
    units: str  # of the errors
    prior: Callable[[argparse.Namespace], str]  # the prior, in figure titles
    fixed: Callable[[argparse.Namespace], str] = lambda args: ""  # other public inputs
    task_options: tuple[str, ...] = ("prior",)  # passed to run_task after ``trials``
    stat_type: type = int  # of the statistic in the CSV
    cell_note: str = ""  # after "no clear winner" in the report's winner map


def parser(doc: str, study: Study, truths: list[float], truth_help: str) -> argparse.ArgumentParser:
    """The options every study has; the script adds ``--prior`` and its model's own."""
    p = C.base_parser(doc.split("\n\n")[0])
    p.add_argument(f"--{study.option}", type=C.floats, default=truths, help=truth_help)
    p.add_argument("--ns", type=C.ints, default=[10, 100, 1000, 10000], help="data set sizes")
    p.add_argument("--lams", type=C.floats, default=[2.0, 8.0], help="Renyi orders")
    p.add_argument(
        "--eps-grid", type=C.log_grid, default="0.01:10:7", help="LOW:HIGH:COUNT (log) or list"
    )
    p.add_argument("--trials", type=int, default=200, help="data sets per setting")
    return p


def errors(res: dict, truth: float) -> tuple[np.ndarray, ...]:
    """(errors vs the truth, errors vs the data's estimate ``emp``): arrays (methods, eps,
    trials); then the non-private draw's two (trials,)."""
    return (
        np.abs(res["est"] - truth),
        np.abs(res["est"] - res["emp"]),
        np.abs(res["nonpriv"] - truth),
        np.abs(res["nonpriv"] - res["emp"]),
    )


def figures(study: Study, args, by_setting, eps_grid, out: Path) -> list[str]:
    """One figure per (truth, lam): a column per n, errors vs the truth and vs the data."""
    names = []
    for lam in args.lams:
        for truth in getattr(args, study.option):
            fig, axes = C.new_figure(len(args.ns), 2)
            for col, n in enumerate(args.ns):
                err_t, err_e, np_t, np_e = errors(by_setting[truth, n, lam], truth)
                for row, (err, nperr, what) in enumerate(
                    ((err_t, np_t, study.symbol), (err_e, np_e, study.empirical))
                ):
                    ylabel = f"|θ − {what}| ({study.units})"
                    error_panel(axes[row, col], eps_grid, err, nperr, METHODS, ylabel, f"n = {n}")
            title = (
                f"{study.title}, {study.symbol} = {truth:g}, {study.fixed(args)}λ = {lam:g}, "
                f"prior {study.prior(args)}: mean error over {args.trials} trials, band 25–75%"
            )
            path = out / f"{study.name}_{study.slug}{truth:g}_lam{lam:g}.png"
            names.append(finish_figure(fig, axes, title, path))
    return names


@dataclass(frozen=True)
class Summary:
    """What the reports of every study use, computed once from the results."""

    by_setting: dict  # (truth, n, lam) -> run_task's result
    eps_grid: np.ndarray
    elapsed: str  # wall time
    rows: int  # in the CSV
    figures: str  # markdown images
    tables: str  # markdown: win counts, winner per cell, mean errors at lams[0]
    winner: dict  # (truth, n, lam) -> winner per eps (None: no clear winner)
    cells: int  # (truth, n, eps) cells per lam
    wins_text: str  # "method wins, ..." over all lams, most wins first
    r_small: np.ndarray  # baseline / better sampler mean error, at the smallest n
    r_large: np.ndarray  # the same at the largest n
    floor: dict  # at the largest n: mean errors at the largest eps / the non-private one's

    def share(self, method: str, truth: float) -> str:
        """ "K of N": the cells ``method`` wins among the N at one truth (every n, lam, eps)."""
        w = [m for k, ws in self.winner.items() if k[0] == truth for m in ws]
        return f"{w.count(method)} of {len(w)}"

    def worst(self) -> tuple[tuple, float, str]:
        """The setting, ratio and method farthest from the non-private floor."""
        key = max(self.floor, key=lambda k: self.floor[k].max())
        return key, float(self.floor[key].max()), METHODS[int(np.argmax(self.floor[key]))]


def summarise(study: Study, args, by_setting, eps_grid, figures, elapsed, rows) -> Summary:
    """The win counts and tables, the baseline-to-sampler ratios and the distances to the
    non-private floor (errors against the truth)."""
    lam0, sym = args.lams[0], study.symbol
    err = {key: errors(res, key[0]) for key, res in by_setting.items()}
    errs = {key: e[0] for key, e in err.items()}
    nperr = {key: e[2] for key, e in err.items()}
    winner, counts = wins(errs, METHODS, args.lams)
    keys = [((t, n), [f"{t:g}", str(n)]) for t in getattr(args, study.option) for n in args.ns]
    win_table, win_map = win_tables(winner, counts, METHODS, args.lams, eps_grid, sym, keys)
    detail = detail_table(errs, nperr, METHODS, lam0, eps_grid, sym, keys)
    what = f"|θ − {sym}|"
    letters = f"D diffused, C concentrated, N noisy statistics; · no clear winner{study.cell_note}"
    title = f"**Which method has the lowest mean {what}**, counted over the ({sym}, n, ε) cells"
    tables = f"""{title} (a win
needs a lead of two paired standard errors over the runner-up):

{win_table}

Winner per cell ({letters}):

{win_map}

**Mean {what} ± std over trials at λ = {lam0:g}:**

{detail}"""
    total_wins = {m: sum(c.count(m) for c in counts.values()) for m in METHODS}
    ranking = sorted(METHODS, key=lambda m: -total_wins[m])
    mean_err = {key: e.mean(axis=-1) for key, e in errs.items()}
    ratio = {k: m[2] / np.minimum(m[0], m[1]) for k, m in mean_err.items()}
    return Summary(
        by_setting=by_setting,
        eps_grid=eps_grid,
        elapsed=elapsed,
        rows=rows,
        figures="\n".join(f"![{f}]({f})" for f in figures),
        tables=tables,
        winner=winner,
        cells=len(keys) * len(eps_grid),
        wins_text=", ".join(f"{m} {total_wins[m]}" for m in ranking),
        r_small=np.concatenate([v for k, v in ratio.items() if k[1] == min(args.ns)]),
        r_large=np.concatenate([v for k, v in ratio.items() if k[1] == max(args.ns)]),
        floor={k: m[:, -1] / nperr[k].mean() for k, m in mean_err.items() if k[1] == max(args.ns)},
    )


def main(
    study: Study,
    args: argparse.Namespace,
    run_task: Callable[..., dict],
    report: Callable[[argparse.Namespace, Summary], str],
) -> None:
    """Run every setting, then write the CSV, the figures and the REPORT.md section.

    ``run_task(index, seed, truth, n, lam, eps_grid, trials, *task_options)`` returns
    :func:`releases`' arrays and ``stat`` (the CSV's statistic) and ``emp`` (the data's own
    estimate of the truth), one per trial.
    """
    timer = C.Timer()
    eps_grid = np.asarray(args.eps_grid, dtype=float)
    truths = getattr(args, study.option)
    settings = [(t, n, lam) for t in truths for n in args.ns for lam in args.lams]
    extra = [getattr(args, o) for o in study.task_options]
    extra = tuple(tuple(v) if isinstance(v, list) else v for v in extra)
    tasks = [
        (i, args.seed, t, n, lam, eps_grid, args.trials, *extra)
        for i, (t, n, lam) in enumerate(settings)
    ]
    results = C.run_tasks(run_task, tasks, args.jobs, study.name, not args.no_progress)
    by_setting = dict(zip(settings, results, strict=True))
    out = Path(args.out)
    columns = ["method", study.column, "n", "lam", "eps", "trial", study.stat_column]
    found = release_rows(settings, results, eps_grid, METHODS, "stat", study.stat_type)
    rows = C.write_csv(
        out / f"{study.name}.csv",
        columns + ["estimate", "knob"],
        ((method, *setting, *rest) for setting, method, *rest in found),
    )
    names = figures(study, args, by_setting, eps_grid, out)
    summary = summarise(study, args, by_setting, eps_grid, names, str(timer), rows)
    C.replace_report_section(out / "REPORT.md", study.name, report(args, summary))
    print(f"{study.name}: {rows} rows, {len(names)} figures, REPORT.md section in {out} ({timer})")
