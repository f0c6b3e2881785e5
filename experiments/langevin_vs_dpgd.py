"""The utility release against DP-GD with independent noise, many paired splits.

The peers study (experiments/peers.py) draws every method's noise from a stream fixed by
(seed, run, method, eps), so re-running its Langevin rows re-uses one noise stream: a cell
like Abalone at eps = 0.1, where one run's accuracy varies by ~7 points, can then show
the same sign run after run. This script pairs the default Langevin release
(``backend="langevin"``, ``schedule="utility"``, calibrated by ``pb.sample(..., eps=,
delta=)``) with the study's DP-GD (its rule, its RDP accountant) on fresh splits and
fresh, independent noise per trial, and prints the mean paired difference in test
accuracy (points, ± its standard error). docs/langevin.md §6 reports its output.

    python experiments/langevin_vs_dpgd.py --eps 0.1,0.3,3 --trials 200
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import logistic_regression as LR  # noqa: E402
import peers  # noqa: E402
from _peers import dpgd, rules, targets  # noqa: E402

import privbayes as pb  # noqa: E402


def paired(name: str, eps: float, trials: int, study, delta: float = 1e-5, seed: int = 777):
    """(mean privbayes accuracy, mean DP-GD accuracy, differences) over ``trials`` splits."""
    c, margin = 1.0, rules.MARGIN_SCALE
    rho = targets.max_rho(eps, delta)[0]
    ours, theirs = [], []
    for t in range(trials):
        xtr, ytr, xte, yte = LR.split(name, study, np.random.default_rng([seed, t]))
        n, d = xtr.shape
        steps, eta = rules.dpgd_schedule(n, d, c, rho, margin, rules.DPGD_MAX_STEPS)
        sigma = dpgd.noise_sigma(rho, steps, n, c)
        w = dpgd.dp_gradient_descent(
            xtr, ytr, steps, eta, sigma, c, np.random.default_rng([seed, t, 1])
        )
        theirs.append(LR.accuracy(w, xte, yte))
        model = pb.BayesianLogisticRegression(rules.prior_beta(n, d, c, margin), c,
                                              backend="langevin")  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = pb.sample(model, (xtr, ytr), eps=eps, delta=delta,
                            rng=np.random.default_rng([seed, t, 2]))  # fmt: skip
        assert rel.dp_eps <= eps
        ours.append(LR.accuracy(np.asarray(rel.value), xte, yte))
    return float(np.mean(ours)), float(np.mean(theirs)), np.subtract(ours, theirs)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="abalone")
    p.add_argument("--eps", type=lambda s: [float(e) for e in s.split(",")], default=[0.1])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=777)
    p.add_argument("--data-dir", default=None)
    a = p.parse_args(argv)
    study = peers.parse_args(["--data-dir", a.data_dir] * bool(a.data_dir))
    for eps in a.eps:
        mine, dp, diff = paired(a.dataset, eps, a.trials, study, seed=a.seed)
        se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else float("nan")
        print(
            f"{a.dataset} eps={eps:g} ({a.trials} paired runs): privbayes utility {mine:.4f}, "
            f"DP-GD {dp:.4f}, difference {100 * diff.mean():+.2f} ± {100 * se:.2f} points"
        )


if __name__ == "__main__":
    main()
