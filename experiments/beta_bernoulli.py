"""Beta-Bernoulli: diffused vs concentrated vs noisy sufficient statistics (paper §5).

Synthetic coin flips with a known p. For every (p, n, lambda, eps) and trial, one data set
(k ~ Binomial(n, p), shared by all methods) and one release per method:

* diffused / concentrated: ``pb.calibrate`` then the library's exact Beta draw (what
  ``pb.sample`` releases);
* noisy-stats: k + N(0, sigma^2), sigma = sqrt(lam / (2 eps)) so that the Gaussian mechanism
  on the count (sensitivity 1 under replace-one) is (lam, eps)-RDP; clipped to [0, n]; then
  a draw from the posterior at the noisy count (post-processing);
* non-private: a draw from the exact posterior Beta(a + k, b + n - k).

Metric: |theta - p| and |theta - k/n|. Run ``python experiments/beta_bernoulli.py --help``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

import privbayes as pb  # noqa: E402

NAME = "beta_bernoulli"
METHODS = ("diffused", "concentrated", "noisy-stats")
QUICK = dict(ps=[0.01, 0.5], ns=[10, 1000], eps_grid=C.log_grid("0.01:10:4"), trials=40)


def parse_args(argv: list[str] | None = None):
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--ps", type=C.floats, default=[0.01, 0.1, 0.5], help="true p values")
    p.add_argument("--ns", type=C.ints, default=[10, 100, 1000, 10000], help="data set sizes")
    p.add_argument("--lams", type=C.floats, default=[2.0, 8.0], help="Renyi orders")
    p.add_argument(
        "--eps-grid", type=C.log_grid, default="0.01:10:7", help="LOW:HIGH:COUNT (log) or list"
    )
    p.add_argument("--trials", type=int, default=200, help="data sets per setting")
    p.add_argument("--prior", type=C.floats, default=[1.0, 1.0], help="Beta prior a,b")
    args = p.parse_args(argv)
    if args.quick:  # quick settings replace the defaults; explicit options still win
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    return args


def run_task(index: int, seed: int, p: float, n: int, lam: float, eps_grid, trials: int, prior):
    """One (p, n, lam): every eps and method on the same ``trials`` data sets."""
    rng = C.task_rng(seed, index)
    model = pb.BetaBernoulli(*prior)
    k = rng.binomial(n, p, size=trials).astype(float)
    est = np.empty((len(METHODS), len(eps_grid), trials))
    knob = np.empty((len(METHODS), len(eps_grid)))
    for j, eps in enumerate(eps_grid):
        for i, method in enumerate(METHODS[:2]):
            est[i, j], cal = C.beta_release(model, n, lam, eps, method, k, rng)
            knob[i, j] = cal.r if method == "diffused" else cal.m
        sigma = C.gaussian_sigma(lam, eps, 1.0)
        noisy = np.clip(k + sigma * rng.standard_normal(trials), 0.0, n)
        est[2, j] = C.beta_draws(model, n, noisy, rng)
        knob[2, j] = sigma
    nonpriv = C.beta_draws(model, n, k, rng)
    return {"k": k, "est": est, "knob": knob, "nonpriv": nonpriv}


def _rows(settings, results, eps_grid):
    for (p, n, lam), res in zip(settings, results, strict=True):
        k, knob = res["k"], res["knob"].tolist()
        for t in range(len(k)):
            for i, method in enumerate(METHODS):
                for j, eps in enumerate(eps_grid):
                    th = res["est"][i, j, t]
                    yield (method, p, n, lam, float(eps), t, int(k[t]), float(th), knob[i][j])
            yield ("non-private", p, n, lam, "", t, int(k[t]), float(res["nonpriv"][t]), "")


def _errors(res, p, n):
    """(errors vs p, errors vs k/n): arrays (methods, eps, trials); non-private (trials,)."""
    emp = res["k"] / n
    return (
        np.abs(res["est"] - p),
        np.abs(res["est"] - emp),
        np.abs(res["nonpriv"] - p),
        np.abs(res["nonpriv"] - emp),
    )


def _figures(args, by_setting, eps_grid, out: Path) -> list[str]:
    names = []
    for lam in args.lams:
        for p in args.ps:
            fig, axes = C.new_figure(len(args.ns), 2)
            for col, n in enumerate(args.ns):
                err_p, err_e, np_p, np_e = _errors(by_setting[p, n, lam], p, n)
                for row, (err, nperr, what) in enumerate(
                    ((err_p, np_p, "|θ − p|"), (err_e, np_e, "|θ − k/n|"))
                ):
                    ax = axes[row, col]
                    for i, method in enumerate(METHODS):
                        C.plot_band(ax, eps_grid, err[i], method)
                    C.plot_hline(ax, nperr, "non-private")
                    ax.set_xlabel("ε (nats, RDP at λ)")
                    ax.set_ylabel(f"{what} (probability units)")
                    ax.set_title(f"n = {n}", fontsize=10)
                    ax.grid(alpha=0.3, which="both", lw=0.4)
            axes[0, 0].legend(fontsize=7, loc="lower left")
            fig.suptitle(
                f"Beta-Bernoulli, p = {p:g}, λ = {lam:g}, prior Beta({args.prior[0]:g}, "
                f"{args.prior[1]:g}): mean error over {args.trials} trials, band 25–75%",
                fontsize=10,
            )
            name = f"{NAME}_p{p:g}_lam{lam:g}.png"
            C.save_figure(fig, out / name)
            names.append(name)
    return names


def _report(args, by_setting, eps_grid, figures, elapsed: str, rows: int) -> str:
    lam0 = args.lams[0]
    letters = {"diffused": "D", "concentrated": "C", "noisy-stats": "N"}
    errs = {key: _errors(res, key[0], key[1])[0] for key, res in by_setting.items()}
    mean_err = {key: e.mean(axis=-1) for key, e in errs.items()}
    # winner per eps, or None when the lead over the runner-up is within 2 paired SEs
    winner = {key: C.leaders(e, METHODS) for key, e in errs.items()}
    counts = {lam: [w for k, ws in winner.items() if k[2] == lam for w in ws] for lam in args.lams}
    cells = len(args.ps) * len(args.ns) * len(eps_grid)
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
        ["p", "n"] + [f"λ={lam:g} ε={e:.2g}" for lam in args.lams for e in eps_grid],
        [
            [f"{p:g}", str(n)]
            + [letters.get(m, "·") for lam in args.lams for m in winner[p, n, lam]]
            for p in args.ps
            for n in args.ns
        ],
    )
    ranking = sorted(METHODS, key=lambda m: -sum(c.count(m) for c in counts.values()))
    total_wins = {m: sum(c.count(m) for c in counts.values()) for m in METHODS}
    wins_text = ", ".join(f"{m} {total_wins[m]}" for m in ranking)
    pick = [C.nearest(eps_grid, e) for e in (0.1, 1.0)]
    header = ["p", "n"]
    for j in pick:
        header += [f"{m} ε={eps_grid[j]:.3g}" for m in METHODS]
    header.append("non-private")
    body = []
    for p in args.ps:
        for n in args.ns:
            err_p, _, np_p, _ = _errors(by_setting[p, n, lam0], p, n)
            row = [f"{p:g}", str(n)]
            for j in pick:
                row += [C.mean_std(err_p[i, j]) for i in range(len(METHODS))]
            body.append(row + [C.mean_std(np_p)])
    detail = C.markdown_table(header, body)

    def share(method: str, p: float) -> str:
        w = [m for k, ws in winner.items() if k[0] == p for m in ws]
        return f"{w.count(method)} of {len(w)}"

    # baseline error / best sampler error, at the smallest and the largest n
    ratio = {k: m[2] / np.minimum(m[0], m[1]) for k, m in mean_err.items()}
    r_small = np.concatenate([v for k, v in ratio.items() if k[1] == min(args.ns)])
    r_large = np.concatenate([v for k, v in ratio.items() if k[1] == max(args.ns)])
    # distance to the non-private floor at the largest eps and n
    floor = {
        k: m[:, -1] / _errors(by_setting[k], k[0], k[1])[2].mean()
        for k, m in mean_err.items()
        if k[1] == max(args.ns)
    }
    worst_key = max(floor, key=lambda k: floor[k].max())
    worst_floor = float(floor[worst_key].max())
    worst_method = METHODS[int(np.argmax(floor[worst_key]))]
    n_max, p0 = max(args.ns), args.ps[0]
    r_cap = "; ".join(
        f"cap {min(args.prior) / (lam - 1):.3g}, calibrated "
        f"r = {by_setting[p0, n_max, lam]['knob'][0, -1]:.6f} at λ = {lam:g}"
        for lam in args.lams
    )
    prior_mean = args.prior[0] / sum(args.prior)
    far = max(args.ps, key=lambda p: abs(p - prior_mean))
    close = min(args.ps, key=lambda p: abs(p - prior_mean))

    figs = "\n".join(f"![{f}]({f})" for f in figures)
    return f"""## Beta-Bernoulli (`experiments/{NAME}.py`)

Prior Beta({args.prior[0]:g}, {args.prior[1]:g}); p ∈ {args.ps}; n ∈ {args.ns};
λ ∈ {args.lams}; ε ∈ {len(eps_grid)} log-spaced values from {eps_grid[0]:g} to
{eps_grid[-1]:g}; {args.trials} data sets per setting (one k ~ Binomial(n, p) shared by
every method and ε); seed {args.seed}. {rows:,} rows in `{NAME}.csv`; wall time
{elapsed}{" (`--quick`)" if args.quick else ""}. Noisy sufficient statistics: σ = √(λ/(2ε))
on the count (sensitivity 1), clipped to [0, n], then one posterior draw at the noisy
count. Figures: mean error (line), 25–75% band over trials; dashed: the non-private
posterior sample.

{figs}

**Which method has the lowest mean |θ − p|**, counted over the (p, n, ε) cells (a win
needs a lead of two paired standard errors over the runner-up):

{win_table}

Winner per cell (D diffused, C concentrated, N noisy statistics; · no clear winner: the lead
over the runner-up is less than two paired standard errors):

{win_map}

**Mean |θ − p| ± std over trials at λ = {lam0:g}:**

{detail}

**Discussion.**

* *Any ε is reachable.* Every ε on the grid, down to {eps_grid[0]:g}, was certified for
  both posterior-sampling mechanisms at every λ, although with the prior
  Beta({args.prior[0]:g}, {args.prior[1]:g}) direct sampling is (λ, ε)-RDP only for
  λ < {1 + min(args.prior):g} (Corollary 1). This is the paper's claim and it holds.
* *Who wins.* Clear wins over all λ: {wins_text} (of {len(args.lams) * cells} cells). The ratio of
  the baseline's mean error to the better sampler's spans
  {np.min(r_small):.2g}–{np.max(r_small):.2g} at n = {min(args.ns)} and
  {np.min(r_large):.2g}–{np.max(r_large):.2g} at n = {max(args.ns)} (< 1: the baseline is
  better). Gaussian noise of std √(λ/(2ε)) on a count costs O(1/n) in θ, while a tempered
  posterior with likelihood weight r adds sampling noise of order √(θ(1−θ)/(rn)). The
  paper states the Gaussian mechanism's RDP as λΔ²/σ², twice Mironov's λΔ²/(2σ²) that we
  use; that would have handicapped this baseline by a factor √2 in σ.
* *Concentration pulls towards the prior mean* {prior_mean:g}: it wins
  {share("concentrated", close)} cells at p = {close:g} and {share("concentrated", far)}
  at p = {far:g}, where the baseline wins {share("noisy-stats", far)} (clipping the noisy
  count to [0, n] helps it near the boundary). Diffusion wins {share("diffused", far)} cells
  at p = {far:g} and {share("diffused", close)} at p = {close:g}.
* *Large n.* At n = {max(args.ns)} and ε = {eps_grid[-1]:g} every private method's mean
  error is within a factor {worst_floor:.2g} of the non-private posterior sample's (the
  worst: {worst_method} at p = {worst_key[0]:g}, λ = {worst_key[2]:g}). For diffusion the
  pole of the Beta divergence caps the weight at
  r < min(a, b)/(λ − 1) however large ε is ({r_cap}), so its
  tempered posterior never sharpens to the full one, whereas concentration's cap on m only
  inflates the prior by (λ − 1)/min(a, b) pseudo-counts, which large n swamps.
* The paper's Beta-Bernoulli figure (its settings and numbers were not available to us)
  is therefore not reproduced number for number; the qualitative claim we can check — the
  new mechanisms give a certified release at every (λ, ε), and their error falls to the
  non-private level as ε grows — holds. Whether they beat the noisy-statistics baseline
  depends on p: see the win counts.
"""


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    timer = C.Timer()
    eps_grid = np.asarray(args.eps_grid, dtype=float)
    settings = [(p, n, lam) for p in args.ps for n in args.ns for lam in args.lams]
    tasks = [
        (i, args.seed, p, n, lam, eps_grid, args.trials, tuple(args.prior))
        for i, (p, n, lam) in enumerate(settings)
    ]
    results = C.run_tasks(run_task, tasks, args.jobs, NAME, not args.no_progress)
    by_setting = dict(zip(settings, results, strict=True))
    out = Path(args.out)
    columns = "method p n lam eps trial k estimate knob".split()
    rows = C.write_csv(out / f"{NAME}.csv", columns, _rows(settings, results, eps_grid))
    figures = _figures(args, by_setting, eps_grid, out)
    report = _report(args, by_setting, eps_grid, figures, str(timer), rows)
    C.replace_report_section(out / "REPORT.md", NAME, report)
    print(f"{NAME}: {rows} rows, {len(figures)} figures, REPORT.md section in {out} ({timer})")


if __name__ == "__main__":
    main()
