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
import _conjugate as K  # noqa: E402

import privbayes as pb  # noqa: E402

NAME = "beta_bernoulli"
METHODS = K.METHODS
STUDY = K.Study(
    name=NAME,
    title="Beta-Bernoulli",
    option="ps",
    column="p",
    symbol="p",
    slug="p",
    stat_column="k",
    empirical="k/n",
    units="probability units",
    prior=lambda args: f"Beta({args.prior[0]:g}, {args.prior[1]:g})",
    cell_note=": the lead\nover the runner-up is less than two paired standard errors",
)


def parse_args(argv: list[str] | None = None):
    p = K.parser(__doc__, STUDY, [0.01, 0.1, 0.5], "true p values")
    p.add_argument("--prior", type=C.floats, default=[1.0, 1.0], help="Beta prior a,b")
    return C.parse_quick(p, argv, dict(K.QUICK, ps=[0.01, 0.5]))


def run_task(index: int, seed: int, p: float, n: int, lam: float, eps_grid, trials: int, prior):
    """One (p, n, lam): every eps and method on the same ``trials`` data sets."""
    rng = C.task_rng(seed, index)
    model = pb.BetaBernoulli(*prior)
    k = rng.binomial(n, p, size=trials).astype(float)
    found = K.releases(model, n, lam, eps_grid, k, rng, C.beta_draws, 1.0, (0.0, n))
    return {"stat": k, "emp": k / n, **found}


def _report(args, s: K.Summary) -> str:
    eps_grid, wins_text, cells = s.eps_grid, s.wins_text, s.cells
    worst_key, worst_floor, worst_method = s.worst()
    n_max, p0 = max(args.ns), args.ps[0]
    r_cap = "; ".join(
        f"cap {min(args.prior) / (lam - 1):.3g}, calibrated "
        f"r = {s.by_setting[p0, n_max, lam]['knob'][0, -1]:.6f} at λ = {lam:g}"
        for lam in args.lams
    )
    prior_mean = args.prior[0] / sum(args.prior)
    far = max(args.ps, key=lambda p: abs(p - prior_mean))
    close = min(args.ps, key=lambda p: abs(p - prior_mean))
    return f"""## Beta-Bernoulli (`experiments/{NAME}.py`)

Prior Beta({args.prior[0]:g}, {args.prior[1]:g}); p ∈ {args.ps}; n ∈ {args.ns};
λ ∈ {args.lams}; ε ∈ {len(eps_grid)} log-spaced values from {eps_grid[0]:g} to
{eps_grid[-1]:g}; {args.trials} data sets per setting (one k ~ Binomial(n, p) shared by
every method and ε); seed {args.seed}. {s.rows:,} rows in `{NAME}.csv`; wall time
{s.elapsed}{" (`--quick`)" if args.quick else ""}. Noisy sufficient statistics: σ = √(λ/(2ε))
on the count (sensitivity 1), clipped to [0, n], then one posterior draw at the noisy
count. Figures: mean error (line), 25–75% band over trials; dashed: the non-private
posterior sample.

{s.figures}

{s.tables}

**Discussion.**

* *Any ε is reachable.* Every ε on the grid, down to {eps_grid[0]:g}, was certified for
  both posterior-sampling mechanisms at every λ, although with the prior
  Beta({args.prior[0]:g}, {args.prior[1]:g}) direct sampling is (λ, ε)-RDP only for
  λ < {1 + min(args.prior):g} (Corollary 1). This is the paper's claim and it holds.
* *Who wins.* Clear wins over all λ: {wins_text} (of {len(args.lams) * cells} cells). The ratio of
  the baseline's mean error to the better sampler's spans
  {np.min(s.r_small):.2g}–{np.max(s.r_small):.2g} at n = {min(args.ns)} and
  {np.min(s.r_large):.2g}–{np.max(s.r_large):.2g} at n = {max(args.ns)} (< 1: the baseline is
  better). Gaussian noise of std √(λ/(2ε)) on a count costs O(1/n) in θ, while a tempered
  posterior with likelihood weight r adds sampling noise of order √(θ(1−θ)/(rn)). The
  paper states the Gaussian mechanism's RDP as λΔ²/σ², twice Mironov's λΔ²/(2σ²) that we
  use; that would have handicapped this baseline by a factor √2 in σ.
* *Concentration pulls towards the prior mean* {prior_mean:g}: it wins
  {s.share("concentrated", close)} cells at p = {close:g} and {s.share("concentrated", far)}
  at p = {far:g}, where the baseline wins {s.share("noisy-stats", far)} (clipping the noisy
  count to [0, n] helps it near the boundary). Diffusion wins {s.share("diffused", far)} cells
  at p = {far:g} and {s.share("diffused", close)} at p = {close:g}.
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
    K.main(STUDY, parse_args(argv), run_task, _report)


if __name__ == "__main__":
    main()
