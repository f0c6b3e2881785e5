"""Full-batch DP gradient descent for logistic regression, accounted with privbayes' RDP.

Each of T steps releases the average of per-example gradients clipped to norm c, plus
N(0, sigma^2 I). Under replace-one neighbours (n public) the average moves by at most
2c/n in L2 (one clipped gradient of norm <= c replaced by another), so a step is the
Gaussian mechanism with sensitivity Delta = 2c/n: RDP lam Delta^2 / (2 sigma^2)
(``privbayes.accounting.gaussian_rdp``). T adaptive steps compose to T times that, a
rho-zCDP curve with rho = T Delta^2 / (2 sigma^2); for a target rho,
sigma = Delta sqrt(T / (2 rho)). The iterates after the first are post-processing of the
noisy gradients, so the last iterate carries the same guarantee. The certificate covers
the algorithm as run (rows marked "algorithm").

For the logistic loss with ||x|| <= c, |l'| <= 1, so per-example gradients already have
norm <= c and clipping at c changes nothing; it is applied anyway, so the guarantee does
not rest on that argument.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from privbayes.accounting import gaussian_rdp


def sensitivity(n: int, c: float) -> float:
    """L2 sensitivity of the averaged clipped gradient under replace-one: 2c/n."""
    return 2.0 * c / n


def noise_sigma(rho: float, steps: int, n: int, c: float) -> float:
    """Per-step noise std making ``steps`` Gaussian steps rho-zCDP in total (rounded up)."""
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"rho must be finite and > 0; got {rho!r}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps!r}")
    sigma = sensitivity(n, c) * math.sqrt(steps / (2.0 * rho))
    while steps * sensitivity(n, c) ** 2 / (2.0 * sigma**2) > rho:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def dpgd_rdp(orders, sigma: float, steps: int, n: int, c: float) -> np.ndarray:
    """RDP curve of the whole run: ``steps`` compositions of the Gaussian step."""
    return steps * gaussian_rdp(orders, sigma, sensitivity(n, c))


def dp_gradient_descent(
    x: np.ndarray,
    y: np.ndarray,
    steps: int,
    eta: float,
    sigma: float,
    c: float,
    rng: np.random.Generator,
    reg: float = 0.0,
) -> np.ndarray:
    """The last iterate of T noisy full-batch gradient steps from w = 0, shape (d,).

    x : (n, d); y : labels in {0, 1} or {-1, +1}; reg : an L2 term reg ||w||^2 / 2 (data
    independent, so free of privacy cost; the study uses 0 and stops early instead).
    """
    x = np.asarray(x, dtype=float)
    y = np.where(np.asarray(y, dtype=float) > 0, 1.0, -1.0)
    n, d = x.shape
    row_norm = np.linalg.norm(x, axis=1)
    w = np.zeros(d)
    for _ in range(steps):
        s = -special.expit(-y * (x @ w)) * y  # d loss_i / d (w.x_i); gradient_i = s_i x_i
        norm = np.abs(s) * row_norm
        scale = np.minimum(1.0, c / np.maximum(norm, 1e-300))  # per-example clipping at c
        grad = x.T @ (s * scale) / n
        w = w - eta * (grad + reg * w + sigma * rng.standard_normal(d))
    return w
