"""Objective perturbation for logistic regression (Chaudhuri, Monteleoni & Sarwate 2011).

Algorithm 2 of CMS11 (JMLR 12, "ERM with objective perturbation"), Theorem 9: with rows
||x_i|| <= 1, a convex loss with |l'| <= 1 and |l''| <= c_l, and the regulariser
Lambda ||f||^2 / 2,

    eps' = eps - log(1 + 2 c_l/(n Lambda) + c_l^2/(n^2 Lambda^2));
    if eps' > 0: Delta = 0, else Delta = c_l / (n (e^(eps/4) - 1)) - Lambda, eps' = eps/2;
    b ~ density proportional to exp(-eps' ||b|| / 2)  (||b|| ~ Gamma(d, 2/eps'), direction
    uniform on the sphere);
    f = argmin (1/n) sum l(y_i f.x_i) + (Lambda + Delta)/2 ||f||^2 + b.f / n

is eps-DP for data sets that differ in one record (replace-one, n public) - the same
neighbour relation as privbayes, so the guarantee needs no conversion; pure eps-DP implies
(eps, delta)-DP for every delta. The logistic loss has |l'| <= 1 and c_l = 1/4.

The theorem assumes the *exact* minimiser. We solve with L-BFGS to a gradient norm of
1e-10 (then Newton steps if needed) and report the final gradient norm g: by (Lambda +
Delta)-strong convexity the released f is within g / (Lambda + Delta) of the exact one.
That gap is not covered by the theorem: rows are marked "approximate".
Rows with ||x|| <= c are divided by c (a public constant) so the theorem's ||x|| <= 1 holds.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

LOGISTIC_SMOOTHNESS = 0.25  # c_l: the logistic loss has l'' <= 1/4
NORM_SLACK = 1e-12  # relative slack on ||x|| <= c (rows scaled onto the sphere exactly)


def objpert_params(
    eps: float, n: int, lam: float, smooth: float = LOGISTIC_SMOOTHNESS
) -> tuple[float, float]:
    """(eps', Delta) of CMS11 Algorithm 2 for target eps, n records and regulariser lam.

    eps' is the privacy parameter of the noise density exp(-eps' ||b|| / 2); Delta the extra
    regularisation (0 unless eps - log(1 + 2c/(n lam) + c^2/(n lam)^2) <= 0).
    """
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be finite and > 0; got {eps!r}")
    if not (lam > 0 and math.isfinite(lam)):
        raise ValueError(f"lam (the regulariser Lambda) must be finite and > 0; got {lam!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n!r}")
    q = smooth / (n * lam)
    eps_prime = eps - math.log1p(2.0 * q + q * q)
    if eps_prime > 0:
        return eps_prime, 0.0
    return eps / 2.0, smooth / (n * math.expm1(eps / 4.0)) - lam


def draw_noise(d: int, eps_prime: float, rng: np.random.Generator) -> np.ndarray:
    """b in R^d with density proportional to exp(-eps' ||b|| / 2): Gamma(d, 2/eps') norm."""
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    return direction * rng.gamma(shape=d, scale=2.0 / eps_prime)


def _objective(f, x, y, reg, b, n):
    z = y * (x @ f)
    loss = np.logaddexp(0.0, -z).sum() / n
    grad_z = -special.expit(-z) * y  # d loss_i / d (f.x_i)
    value = loss + 0.5 * reg * (f @ f) + (b @ f) / n
    grad = x.T @ grad_z / n + reg * f + b / n
    return value, grad


def _hessian(f, x, y, reg, n):
    p = special.expit(x @ f)
    w = p * (1.0 - p)
    return (x.T * w) @ x / n + reg * np.eye(x.shape[1])


def objective_perturbation(
    x: np.ndarray,
    y: np.ndarray,
    eps: float,
    lam: float,
    c: float,
    rng: np.random.Generator,
    gtol: float = 1e-10,
) -> tuple[np.ndarray, dict]:
    """One eps-DP release of logistic-regression weights (CMS11 Alg. 2), shape (d,).

    x : (n, d) rows with ||x|| <= c (refused otherwise); y : (n,) labels in {0, 1} or
    {-1, +1}; lam : the regulariser Lambda in the units of rows scaled to norm <= 1.
    Returns (w for the original rows, info with eps', Delta, the final gradient norm and
    the distance bound to the exact minimiser).
    """
    x = np.asarray(x, dtype=float)
    y = np.where(np.asarray(y, dtype=float) > 0, 1.0, -1.0)
    n, d = x.shape
    norms = np.linalg.norm(x, axis=1)
    if (norms > c * (1 + NORM_SLACK)).any():
        raise ValueError(f"rows of x must have norm <= c = {c:g}; objective perturbation needs it")
    xs = x / (c * (1 + NORM_SLACK))  # ||x|| <= 1 for the theorem
    eps_prime, delta_reg = objpert_params(eps, n, lam)
    b = draw_noise(d, eps_prime, rng)
    reg = lam + delta_reg
    res = optimize.minimize(
        _objective,
        np.zeros(d),
        args=(xs, y, reg, b, n),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 20_000, "gtol": gtol, "ftol": 0.0, "maxcor": 30},
    )
    f = res.x
    g = np.linalg.norm(_objective(f, xs, y, reg, b, n)[1])
    for _ in range(20):  # Newton polish: the objective is reg-strongly convex and smooth
        if g <= gtol:
            break
        grad = _objective(f, xs, y, reg, b, n)[1]
        f = f - np.linalg.solve(_hessian(f, xs, y, reg, n), grad)
        g = np.linalg.norm(_objective(f, xs, y, reg, b, n)[1])
    info = {
        "eps_prime": eps_prime,
        "Delta": delta_reg,
        "grad_norm": float(g),
        "distance_bound": float(g / reg),
        "lam": lam,
    }
    return f / (c * (1 + NORM_SLACK)), info
