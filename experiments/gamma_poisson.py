"""Gamma-Poisson: diffused vs concentrated vs noisy sufficient statistics on bounded counts.

Synthetic counts x_i = min(Poisson(theta0), M) with a public bound M (the model's
``clip=True``). For every (theta0, n, lambda, eps) and trial, one data set (shared by all
methods) and one release per method:

* diffused / concentrated: ``pb.calibrate`` then the library's log-space Gamma draw at
  Gamma(alpha/m + r S, beta/m + r n) (what ``pb.sample`` releases);
* noisy-stats: S + N(0, sigma^2), sigma = M sqrt(lam / (2 eps)) (the Gaussian mechanism on
  the sum, sensitivity M under replace-one, is (lam, eps)-RDP); clipped to [0, n M]; then a
  draw from the posterior at the noisy sum (post-processing);
* non-private: a draw from the exact posterior Gamma(alpha + S, beta + n).

Metric: |theta - theta0| and |theta - S/n|. Run ``python experiments/gamma_poisson.py --help``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

import privbayes as pb  # noqa: E402

NAME = "gamma_poisson"
METHODS = ("diffused", "concentrated", "noisy-stats")
QUICK = dict(rates=[0.5, 3.0], ns=[10, 1000], eps_grid=C.log_grid("0.01:10:4"), trials=40)


def parse_args(argv: list[str] | None = None):
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--rates", type=C.floats, default=[0.5, 3.0], help="true Poisson rates")
    p.add_argument("--ns", type=C.ints, default=[10, 100, 1000, 10000], help="data set sizes")
    p.add_argument("--lams", type=C.floats, default=[2.0, 8.0], help="Renyi orders")
    p.add_argument(
        "--eps-grid", type=C.log_grid, default="0.01:10:7", help="LOW:HIGH:COUNT (log) or list"
    )
    p.add_argument("--trials", type=int, default=200, help="data sets per setting")
    p.add_argument("--prior", type=C.floats, default=[1.0, 1.0], help="Gamma prior shape,rate")
    p.add_argument("--max-count", type=int, default=10, help="public bound M on every count")
    args = p.parse_args(argv)
    if args.quick:  # quick settings replace the defaults; explicit options still win
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    return args


def run_task(
    index: int, seed: int, rate: float, n: int, lam: float, eps_grid, trials: int, prior, big
):
    """One (theta0, n, lam): every eps and method on the same ``trials`` data sets."""
    rng = C.task_rng(seed, index)
    model = pb.GammaPoisson(*prior, big, clip=True)
    s = np.minimum(rng.poisson(rate, size=(trials, n)), big).sum(axis=1).astype(float)
    est = np.empty((len(METHODS), len(eps_grid), trials))
    knob = np.empty((len(METHODS), len(eps_grid)))
    for j, eps in enumerate(eps_grid):
        for i, method in enumerate(METHODS[:2]):
            est[i, j], cal = C.gamma_release(model, n, lam, eps, method, s, rng)
            knob[i, j] = cal.r if method == "diffused" else cal.m
        sigma = C.gaussian_sigma(lam, eps, float(big))
        noisy = np.clip(s + sigma * rng.standard_normal(trials), 0.0, n * big)
        est[2, j] = C.gamma_draws(model, n, noisy, rng)
        knob[2, j] = sigma
    nonpriv = C.gamma_draws(model, n, s, rng)
    return {"s": s, "est": est, "knob": knob, "nonpriv": nonpriv}


def _rows(settings, results, eps_grid):
    for (rate, n, lam), res in zip(settings, results, strict=True):
        s, knob = res["s"], res["knob"].tolist()
        for t in range(len(s)):
            for i, method in enumerate(METHODS):
                for j, eps in enumerate(eps_grid):
                    th = res["est"][i, j, t]
                    yield (method, rate, n, lam, float(eps), t, int(s[t]), float(th), knob[i][j])
            yield ("non-private", rate, n, lam, "", t, int(s[t]), float(res["nonpriv"][t]), "")


def _errors(res, rate, n):
    """(errors vs theta0, errors vs S/n): arrays (methods, eps, trials); non-private (trials,)."""
    emp = res["s"] / n
    return (
        np.abs(res["est"] - rate),
        np.abs(res["est"] - emp),
        np.abs(res["nonpriv"] - rate),
        np.abs(res["nonpriv"] - emp),
    )


def _figures(args, by_setting, eps_grid, out: Path) -> list[str]:
    names = []
    for lam in args.lams:
        for rate in args.rates:
            fig, axes = C.new_figure(len(args.ns), 2)
            for col, n in enumerate(args.ns):
                err_p, err_e, np_p, np_e = _errors(by_setting[rate, n, lam], rate, n)
                for row, (err, nperr, what) in enumerate(
                    ((err_p, np_p, "|θ − θ₀|"), (err_e, np_e, "|θ − S/n|"))
                ):
                    ax = axes[row, col]
                    for i, method in enumerate(METHODS):
                        C.plot_band(ax, eps_grid, err[i], method)
                    C.plot_hline(ax, nperr, "non-private")
                    ax.set_xlabel("ε (nats, RDP at λ)")
                    ax.set_ylabel(f"{what} (events per record)")
                    ax.set_title(f"n = {n}", fontsize=10)
                    ax.grid(alpha=0.3, which="both", lw=0.4)
            axes[0, 0].legend(fontsize=7, loc="lower left")
            fig.suptitle(
                f"Gamma-Poisson, θ₀ = {rate:g}, M = {args.max_count}, λ = {lam:g}, prior "
                f"Gamma({args.prior[0]:g}, {args.prior[1]:g}): mean error over {args.trials} "
                "trials, band 25–75%",
                fontsize=10,
            )
            name = f"{NAME}_rate{rate:g}_lam{lam:g}.png"
            C.save_figure(fig, out / name)
            names.append(name)
    return names


def _report(args, by_setting, eps_grid, figures, elapsed: str, rows: int) -> str:
    lam0 = args.lams[0]
    letters = {"diffused": "D", "concentrated": "C", "noisy-stats": "N"}
    errs = {key: _errors(res, key[0], key[1])[0] for key, res in by_setting.items()}
    mean_err = {key: e.mean(axis=-1) for key, e in errs.items()}
    winner = {key: C.leaders(e, METHODS) for key, e in errs.items()}
    counts = {lam: [w for k, ws in winner.items() if k[2] == lam for w in ws] for lam in args.lams}
    cells = len(args.rates) * len(args.ns) * len(eps_grid)
    win_table = C.markdown_table(
        ["λ"] + [C.LABELS[m] for m in METHODS] + ["no clear winner"],
        [
            [f"{lam:g}"]
            + [f"{counts[lam].count(m)} / {cells}" for m in METHODS]
            + [f"{counts[lam].count(None)} / {cells}"]
            for lam in args.lams
        ],
    )
    win_map = C.markdown_table(
        ["θ₀", "n"] + [f"λ={lam:g} ε={e:.2g}" for lam in args.lams for e in eps_grid],
        [
            [f"{rate:g}", str(n)]
            + [letters.get(m, "·") for lam in args.lams for m in winner[rate, n, lam]]
            for rate in args.rates
            for n in args.ns
        ],
    )
    total_wins = {m: sum(c.count(m) for c in counts.values()) for m in METHODS}
    ranking = sorted(METHODS, key=lambda m: -total_wins[m])
    wins_text = ", ".join(f"{m} {total_wins[m]}" for m in ranking)
    pick = [C.nearest(eps_grid, e) for e in (0.1, 1.0)]
    header = ["θ₀", "n"]
    for j in pick:
        header += [f"{m} ε={eps_grid[j]:.3g}" for m in METHODS]
    header.append("non-private")
    body = []
    for rate in args.rates:
        for n in args.ns:
            err_p, _, np_p, _ = _errors(by_setting[rate, n, lam0], rate, n)
            row = [f"{rate:g}", str(n)]
            for j in pick:
                row += [C.mean_std(err_p[i, j]) for i in range(len(METHODS))]
            body.append(row + [C.mean_std(np_p)])
    detail = C.markdown_table(header, body)
    # baseline error / best sampler error, at the smallest and the largest n
    ratio = {k: m[2] / np.minimum(m[0], m[1]) for k, m in mean_err.items()}
    r_small = np.concatenate([v for k, v in ratio.items() if k[1] == min(args.ns)])
    r_large = np.concatenate([v for k, v in ratio.items() if k[1] == max(args.ns)])
    floor = {
        k: m[:, -1] / _errors(by_setting[k], k[0], k[1])[2].mean()
        for k, m in mean_err.items()
        if k[1] == max(args.ns)
    }
    worst_key = max(floor, key=lambda k: floor[k].max())
    worst_floor = float(floor[worst_key].max())
    worst_method = METHODS[int(np.argmax(floor[worst_key]))]
    best_floor = {m: float(min(floor[k][i] for k in floor)) for i, m in enumerate(METHODS)}
    a, b = args.prior
    big = args.max_count
    n_max, rate0 = max(args.ns), args.rates[0]
    caps = "; ".join(
        f"λ = {lam:g}: r < {a / (big * (lam - 1)):.3g} (calibrated r = "
        f"{by_setting[rate0, n_max, lam]['knob'][0, -1]:.4g} at ε = {eps_grid[-1]:g}), "
        f"m < {a / (big * (lam - 1)):.3g} (m = {by_setting[rate0, n_max, lam]['knob'][1, -1]:.4g})"
        for lam in args.lams
    )

    figs = "\n".join(f"![{f}]({f})" for f in figures)
    return f"""## Gamma-Poisson (`experiments/{NAME}.py`)

Prior Gamma({a:g}, {b:g}) (shape, rate); counts min(Poisson(θ₀), M) with the public bound
M = {big} (the model's `clip=True`); θ₀ ∈ {args.rates}; n ∈ {args.ns}; λ ∈ {args.lams};
ε ∈ {len(eps_grid)} log-spaced values from {eps_grid[0]:g} to {eps_grid[-1]:g};
{args.trials} data sets per setting (one sum S shared by every method and ε); seed
{args.seed}. {rows:,} rows in `{NAME}.csv`; wall time
{elapsed}{" (`--quick`)" if args.quick else ""}. Noisy sufficient statistics: σ = M√(λ/(2ε))
on the sum (sensitivity M), clipped to [0, nM], then one posterior draw at the noisy sum.
Figures: mean error (line), 25–75% band over trials; dashed: the non-private posterior
sample.

{figs}

**Which method has the lowest mean |θ − θ₀|**, counted over the (θ₀, n, ε) cells (a win
needs a lead of two paired standard errors over the runner-up):

{win_table}

Winner per cell (D diffused, C concentrated, N noisy statistics; · no clear winner):

{win_map}

**Mean |θ − θ₀| ± std over trials at λ = {lam0:g}:**

{detail}

**Discussion.**

* *Any ε is reachable.* Every ε on the grid was certified for both posterior-sampling
  mechanisms at every λ, although direct sampling is RDP only for λ < 1 + α/M =
  {1 + a / big:g} here (docs/gamma_poisson.md: the pair S = 0 vs S = M leaves the
  parameter space).
* *Who wins.* Clear wins over all λ: {wins_text} (of {len(args.lams) * cells} cells). The
  ratio of the baseline's mean error to the better sampler's spans
  {np.min(r_small):.2g}–{np.max(r_small):.2g} at n = {min(args.ns)} and
  {np.min(r_large):.2g}–{np.max(r_large):.2g} at n = {max(args.ns)} (< 1: the baseline is
  better).
* *The pole caps both knobs at α/(M(λ − 1)),* whatever ε: {caps}. With α = {a:g} and a
  bound M = {big} this cap is small: diffusion keeps a likelihood weight r ≤ that cap (its
  posterior is about 1/√r times wider than the exact one), concentration adds
  α/m ≥ M(λ − 1) pseudo-counts at the prior mean α/β = {a / b:g}, which large n swamps.
  At n = {n_max} and ε = {eps_grid[-1]:g}, the mean error relative to the non-private
  draw is at best {best_floor["diffused"]:.2g} (diffused), {best_floor["concentrated"]:.2g}
  (concentrated) and {best_floor["noisy-stats"]:.2g} (noisy statistics); the worst is
  {worst_floor:.2g} ({worst_method} at θ₀ = {worst_key[0]:g}, λ = {worst_key[2]:g}).
* The Gaussian baseline pays for the bound M on every record, the sampling mechanisms pay
  for it through the cap; a smaller public M helps both, at the price of clipping more
  counts.
"""


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    timer = C.Timer()
    eps_grid = np.asarray(args.eps_grid, dtype=float)
    settings = [(rate, n, lam) for rate in args.rates for n in args.ns for lam in args.lams]
    tasks = [
        (i, args.seed, rate, n, lam, eps_grid, args.trials, tuple(args.prior), args.max_count)
        for i, (rate, n, lam) in enumerate(settings)
    ]
    results = C.run_tasks(run_task, tasks, args.jobs, NAME, not args.no_progress)
    by_setting = dict(zip(settings, results, strict=True))
    out = Path(args.out)
    columns = "method rate n lam eps trial sum estimate knob".split()
    rows = C.write_csv(out / f"{NAME}.csv", columns, _rows(settings, results, eps_grid))
    figures = _figures(args, by_setting, eps_grid, out)
    report = _report(args, by_setting, eps_grid, figures, str(timer), rows)
    C.replace_report_section(out / "REPORT.md", NAME, report)
    print(f"{NAME}: {rows} rows, {len(figures)} figures, REPORT.md section in {out} ({timer})")


if __name__ == "__main__":
    main()
