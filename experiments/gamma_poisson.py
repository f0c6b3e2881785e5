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
import _conjugate as K  # noqa: E402

import privbayes as pb  # noqa: E402

NAME = "gamma_poisson"
METHODS = K.METHODS
STUDY = K.Study(
    name=NAME,
    title="Gamma-Poisson",
    option="rates",
    column="rate",
    symbol="θ₀",
    slug="rate",
    stat_column="sum",
    empirical="S/n",
    units="events per record",
    prior=lambda args: f"Gamma({args.prior[0]:g}, {args.prior[1]:g})",
    fixed=lambda args: f"M = {args.max_count}, ",
    task_options=("prior", "max_count"),
)


def parse_args(argv: list[str] | None = None):
    p = K.parser(__doc__, STUDY, [0.5, 3.0], "true Poisson rates")
    p.add_argument("--prior", type=C.floats, default=[1.0, 1.0], help="Gamma prior shape,rate")
    p.add_argument("--max-count", type=int, default=10, help="public bound M on every count")
    return C.parse_quick(p, argv, dict(K.QUICK, rates=[0.5, 3.0]))


def run_task(
    index: int, seed: int, rate: float, n: int, lam: float, eps_grid, trials: int, prior, big
):
    """One (theta0, n, lam): every eps and method on the same ``trials`` data sets."""
    rng = C.task_rng(seed, index)
    model = pb.GammaPoisson(*prior, big, clip=True)
    s = np.minimum(rng.poisson(rate, size=(trials, n)), big).sum(axis=1).astype(float)
    found = K.releases(model, n, lam, eps_grid, s, rng, C.gamma_draws, float(big), (0.0, n * big))
    return {"stat": s, "emp": s / n, **found}


def _report(args, s: K.Summary) -> str:
    eps_grid, wins_text, cells = s.eps_grid, s.wins_text, s.cells
    worst_key, worst_floor, worst_method = s.worst()
    floor = s.floor
    best_floor = {m: float(min(floor[k][i] for k in floor)) for i, m in enumerate(METHODS)}
    a, b = args.prior
    big = args.max_count
    n_max, rate0 = max(args.ns), args.rates[0]
    knob = {lam: s.by_setting[rate0, n_max, lam]["knob"] for lam in args.lams}
    caps = "; ".join(
        f"λ = {lam:g}: r < {a / (big * (lam - 1)):.3g} (calibrated r = "
        f"{knob[lam][0, -1]:.4g} at ε = {eps_grid[-1]:g}), "
        f"m < {a / (big * (lam - 1)):.3g} (m = {knob[lam][1, -1]:.4g})"
        for lam in args.lams
    )

    return f"""## Gamma-Poisson (`experiments/{NAME}.py`)

Prior Gamma({a:g}, {b:g}) (shape, rate); counts min(Poisson(θ₀), M) with the public bound
M = {big} (the model's `clip=True`); θ₀ ∈ {args.rates}; n ∈ {args.ns}; λ ∈ {args.lams};
ε ∈ {len(eps_grid)} log-spaced values from {eps_grid[0]:g} to {eps_grid[-1]:g};
{args.trials} data sets per setting (one sum S shared by every method and ε); seed
{args.seed}. {s.rows:,} rows in `{NAME}.csv`; wall time
{s.elapsed}{" (`--quick`)" if args.quick else ""}. Noisy sufficient statistics: σ = M√(λ/(2ε))
on the sum (sensitivity M), clipped to [0, nM], then one posterior draw at the noisy sum.
Figures: mean error (line), 25–75% band over trials; dashed: the non-private posterior
sample.

{s.figures}

{s.tables}

**Discussion.**

* *Any ε is reachable.* Every ε on the grid was certified for both posterior-sampling
  mechanisms at every λ, although direct sampling is RDP only for λ < 1 + α/M =
  {1 + a / big:g} here (docs/gamma_poisson.md: the pair S = 0 vs S = M leaves the
  parameter space).
* *Who wins.* Clear wins over all λ: {wins_text} (of {len(args.lams) * cells} cells). The
  ratio of the baseline's mean error to the better sampler's spans
  {np.min(s.r_small):.2g}–{np.max(s.r_small):.2g} at n = {min(args.ns)} and
  {np.min(s.r_large):.2g}–{np.max(s.r_large):.2g} at n = {max(args.ns)} (< 1: the baseline is
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
    K.main(STUDY, parse_args(argv), run_task, _report)


if __name__ == "__main__":
    main()
