"""Public rules for every hyper-parameter of the logistic-regression study.

Each rule is a pure function of public quantities only: the number of records n, the
dimension d, the feature bound c (||x||_2 <= c), the privacy target (eps, delta) (through
rho for the Gaussian-based methods) and one constant shared by every method, the margin
scale M (:data:`MARGIN_SCALE`). None reads data. The derivations are in
experiments/README.md ("Public rules"); in short, each rule minimises the sum of

* a bias bound: regularisation (or early stopping) costs at most kappa ||w*||^2 / 2 in
  logistic risk for a target w* with ||w*|| <= B, where B = M / c (margins |w.x| <= M);
* the method's noise, bounded over every spectrum the data's Hessian could have
  (eigenvalues h in [0, c^2/4]).

M is the only number the rules share, fixed before any experiment was run (log-odds of
10 = probabilities 4.5e-5 .. 1 - 4.5e-5: more confident than any of the tasks needs); every
method gets the same M, so no method is told more about the data than another.
"""

from __future__ import annotations

import math

MARGIN_SCALE = 10.0  # M: prior belief that the margins |w.x| are of order M (public)
DPGD_MAX_STEPS = 1000  # DP-GD compute budget (passes over the data)
DIFFPRIVLIB_DEFAULT_C = 1.0  # what a user who keeps diffprivlib's default gets


def _positive(**kw) -> None:
    for name, v in kw.items():
        if not (isinstance(v, int | float) and not isinstance(v, bool)):
            raise TypeError(f"{name} must be a public number; got {type(v).__name__}")
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"{name} must be finite and > 0; got {v!r}")


def prior_beta(n: int, d: int, c: float, margin: float = MARGIN_SCALE) -> float:
    """privbayes' prior precision per record: beta = c^2 d / (n M^2).

    The prior N(0, (n beta)^-1 I) then has E||w||^2 = d / (n beta) = (M / c)^2: it says the
    margins are of order M. Diffusion's calibration then sets r = min(1, sqrt(beta / beta0))
    with beta0 = 2 c^2 / (n rho) (the precision at which the plain posterior meets the
    target), which is the r that minimises bias + tempered-posterior spread (README).
    """
    _positive(n=n, d=d, c=c, margin=margin)
    return c * c * d / (n * margin * margin)


def ops_radius(c: float, margin: float = MARGIN_SCALE) -> float:
    """OPS truncation radius R = M / c: the ball the prior above believes in."""
    _positive(c=c, margin=margin)
    return margin / c


def objpert_lambda(n: int, d: int, eps: float, margin: float = MARGIN_SCALE) -> float:
    """Objective perturbation's regulariser for rows scaled to ||x|| <= 1: d / (eps n M).

    Noise b/n with E||b||^2 ~ 4 d^2 / eps^2 moves the minimiser by (H + Lambda)^-1 b / n; its
    excess risk is at most ||b||^2 / (8 n^2 Lambda) over every spectrum; plus Lambda M^2 / 2
    of bias, minimised at Lambda = d / (eps n M).
    """
    _positive(n=n, d=d, eps=eps, margin=margin)
    return d / (eps * n * margin)


def diffprivlib_C(n: int, d: int, eps: float, margin: float = MARGIN_SCALE) -> float:
    """diffprivlib's C for the same regulariser: its objective is mean loss + ||w||^2/(2Cn)."""
    return 1.0 / (n * objpert_lambda(n, d, eps, margin))


def dpgd_schedule(
    n: int,
    d: int,
    c: float,
    rho: float,
    margin: float = MARGIN_SCALE,
    max_steps: int = DPGD_MAX_STEPS,
) -> tuple[int, float]:
    """(steps T, step size eta) of full-batch DP-GD at a total rho-zCDP budget.

    eta = 4 / c^2 = 1/L (the logistic loss is c^2/4-smooth). Gradient descent from 0 has
    optimisation error <= B^2 / (2 eta T); the Gaussian noise, sigma^2 = T Delta^2 / (2 rho)
    per step with Delta = 2c/n, leaves the iterate a variance eta^2 sigma^2 sum_k (1-eta h)^2k
    <= eta sigma^2 / h along a direction of curvature h, so at most d eta sigma^2 / 2 in
    risk over every spectrum. Their sum is smallest at eta T = M n sqrt(rho / (2 d)) / c^2,
    i.e. T = M n sqrt(rho / (2 d)) / 4, rounded, capped at ``max_steps`` and at least 1.
    """
    _positive(n=n, d=d, c=c, rho=rho, margin=margin)
    eta = 4.0 / (c * c)
    steps = margin * n * math.sqrt(rho / (2.0 * d)) / 4.0
    return int(min(max(round(steps), 1), max_steps)), eta


# The method the rule picks for privbayes. With beta = prior_beta(...), diffusion's
# calibrated r is the bias-variance optimum of the derivation; concentration at m < 1
# releases the posterior at prior precision 2c^2/rho whatever beta is (README), i.e. the
# r = 1 corner; OPS is pure DP and pays for it when delta > 0 is allowed.
PRIVBAYES_METHOD = "diffused"
