"""Sufficient-statistics perturbation for linear regression: AdaSSP and naive SSP.

Both release Gaussian-noised versions of X^T X and X^T y (AdaSSP also the smallest
eigenvalue of X^T X) and solve a (ridge) least-squares problem on them; everything after
the releases is post-processing.

**Neighbours and sensitivities** (replace one record, n public, as for every method of
the study; rows ||x|| <= c, |y| <= y_bound):

* lambda_min(X^T X): one replacement is X^T X - x x^T + x' x'^T; each rank-one term moves
  every eigenvalue by at most c^2 in one direction (Weyl), so |Delta lambda_min| <= c^2.
* X^T X, released as its upper triangle (diagonal included) with the lower one mirrored:
  the change D = x' x'^T - x x^T has squared upper-triangle norm <= ||D||_F^2
  = ||x||^4 + ||x'||^4 - 2 (x.x')^2 <= 2 c^4, attained by orthogonal rows of norm c on two
  axes (D diagonal), so the sensitivity is sqrt(2) c^2.
* X^T y: ||x' y' - x y|| <= 2 c y_bound (opposite rows and labels).

(Under add/remove neighbours these would be c^2, c^2 and c y_bound: Wang 2018 states
those.)

**Calibration: exact (eps, delta) by Gaussian differential privacy.** A Gaussian mechanism
with sensitivity Delta and noise sd sigma is mu-GDP with mu = Delta / sigma, and k of them
composed (adaptively or not) are sqrt(sum mu_i^2)-GDP exactly (Dong, Roth & Su 2022,
Cor. 3.3); mu-GDP is (eps, delta)-DP iff delta >= Phi(-eps/mu + mu/2)
- e^eps Phi(-eps/mu - mu/2), the analytic Gaussian mechanism of Balle & Wang (2018),
``_peers.targets.gaussian_delta``. So the largest mu meeting (eps, delta) is
1 / analytic_gaussian_sigma(eps, delta, 1), and each of k releases gets mu / sqrt(k):
Wang's equal split of the budget (eps/3, delta/3 each for AdaSSP), in the exact currency.
Wang's own constants (sigma = sqrt(log(6/delta)) Delta / (eps/3) per release, for
add/remove) are a looser sufficient condition; ours are smaller, at the same guarantee.
Every sigma is rounded up and the composition re-checked (:func:`verify`).

**AdaSSP** (Wang, "Revisiting differentially private linear regression: optimal and
adaptive prediction & estimation in unbounded domain", UAI 2018, Algorithm 2), in our
words: release lambda~ = max(lambda_min(X^T X) + sigma_1 Z - sigma_1 sqrt(log(6/delta)),
0), a lower confidence bound on the smallest eigenvalue; set the ridge
lambda = max(0, sigma_2 sqrt(d log(2 d^2 / rho)) - lambda~), the size the noise matrix's
spectrum can reach (with probability 1 - rho, rho = 0.05 as in Wang's experiments) minus
the curvature the data already have; release X^T X + sigma_2 E (E symmetric, upper
triangle iid N(0, 1)) and X^T y + sigma_3 z; return (X^T X~ + lambda I)^-1 X^T y~. The
paper writes the two constants as log(6/delta) B^2/(eps/3) and
sqrt(d log(6/delta) log(2d^2/rho)) B^2/(eps/3), i.e. sqrt(log(6/delta)) and
sqrt(d log(2d^2/rho)) times its noise sd: we keep those multiples of our sds.

**Naive SSP**: the same two statistics at mu / sqrt(2) each, then the least-squares
solution (X^T X~)^-1 X^T y~ with no regulariser (pseudo-inverse if singular). Its Bayesian
version (the naive plug-in of Bernstein & Sheldon 2019) takes the noisy statistics as if
exact in the conjugate posterior N(Lambda^-1 X^T y~ / s^2, Lambda^-1),
Lambda = n beta I + (X^T X~)_+ / s^2 ((.)_+ the projection on the PSD cone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from _peers import targets
from scipy import special

RHO = 0.05  # AdaSSP's failure probability of the eigenvalue bound (Wang's experiments)


def sensitivities(c: float, y_bound: float) -> dict[str, float]:
    """Replace-one L2 sensitivities of lambda_min(X^T X), upper(X^T X), X^T y."""
    return {"lam_min": c * c, "xx": math.sqrt(2.0) * c * c, "xy": 2.0 * c * y_bound}


def gdp_mu(eps: float, delta: float) -> float:
    """Largest mu (rounded down) such that mu-GDP is (eps, delta)-DP."""
    return float(np.nextafter(1.0 / targets.analytic_gaussian_sigma(eps, delta, 1.0), 0.0))


def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (exact)."""
    return targets.gaussian_delta(eps, 1.0 / mu, 1.0)


def gdp_eps(mu: float, delta: float) -> float:
    """Smallest eps with delta(eps) <= delta for mu-GDP (bisection, rounded up)."""
    lo, hi = 0.0, 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gdp_delta(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return hi


def calibrate(eps: float, delta: float, parts: dict[str, float]) -> dict[str, float]:
    """Noise sds for Gaussian releases of the given sensitivities, an equal share of
    mu^2 each, composing to (eps, delta)-DP. ``parts``: {name: sensitivity}."""
    mu = gdp_mu(eps, delta)
    k = len(parts)
    sig = {}
    for name, sens in parts.items():
        s = sens * math.sqrt(k) / mu
        sig[name] = float(np.nextafter(s * (1.0 + 1e-12), np.inf))
    return sig


def composed_mu(parts: dict[str, float], sigmas: dict[str, float]) -> float:
    return math.sqrt(sum((parts[k] / sigmas[k]) ** 2 for k in parts))


def verify(eps: float, delta: float, parts: dict[str, float], sigmas: dict[str, float]) -> float:
    """The exact eps of the composition at ``delta`` (<= eps, or AssertionError)."""
    got = gdp_eps(composed_mu(parts, sigmas), delta)
    if got > eps:
        raise AssertionError(f"calibration above target: {got} > {eps}")
    return got


def _symmetric_noise(d: int, sd: float, rng) -> np.ndarray:
    """Symmetric d x d matrix, upper triangle (diagonal included) iid N(0, sd^2)."""
    e = np.zeros((d, d))
    iu = np.triu_indices(d)
    e[iu] = sd * rng.standard_normal(iu[0].size)
    return e + np.triu(e, 1).T


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        out = np.linalg.solve(a, b)
        if np.all(np.isfinite(out)):
            return out
    except np.linalg.LinAlgError:
        pass
    return np.linalg.lstsq(a, b, rcond=None)[0]


def check_bounds(x: np.ndarray, y: np.ndarray, c: float, y_bound: float) -> None:
    """Refuse data outside the declared domain (never clip silently)."""
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("X and y must be finite")
    if np.linalg.norm(x, axis=1).max(initial=0.0) > c:
        raise ValueError(f"a row of X has norm above c = {c}")
    if np.abs(y).max(initial=0.0) > y_bound:
        raise ValueError(f"a label exceeds y_bound = {y_bound}")


@dataclass(frozen=True)
class Released:
    """Noisy statistics of one SSP release and its calibration."""

    xx: np.ndarray
    xy: np.ndarray
    sigmas: dict
    eps_dp: float
    ridge: float = 0.0
    lam_min: float | None = None


def adassp(x, y, eps: float, delta: float, c: float, y_bound: float, rng, rho: float = RHO):
    """AdaSSP (see the module docstring): (coefficients (d,), Released)."""
    check_bounds(x, y, c, y_bound)
    n, d = x.shape
    parts = sensitivities(c, y_bound)
    sig = calibrate(eps, delta, parts)
    eps_dp = verify(eps, delta, parts, sig)
    xx, xy = x.T @ x, x.T @ y
    lam_min = float(max(np.linalg.eigvalsh(xx)[0], 0.0))  # eigvalsh's rounding: |.| ~ 1e-13 n
    shift = sig["lam_min"] * math.sqrt(math.log(6.0 / delta))
    lam_tilde = max(lam_min + sig["lam_min"] * float(rng.standard_normal()) - shift, 0.0)
    ridge = max(0.0, sig["xx"] * math.sqrt(d * math.log(2.0 * d * d / rho)) - lam_tilde)
    xx_n = xx + _symmetric_noise(d, sig["xx"], rng)
    xy_n = xy + sig["xy"] * rng.standard_normal(d)
    w = _solve(xx_n + ridge * np.eye(d), xy_n)
    return w, Released(xx_n, xy_n, sig, eps_dp, ridge, lam_tilde)


def naive_ssp(x, y, eps: float, delta: float, c: float, y_bound: float, rng):
    """Naive SSP: (least-squares coefficients on the noisy statistics (d,), Released)."""
    check_bounds(x, y, c, y_bound)
    d = x.shape[1]
    sens = sensitivities(c, y_bound)
    parts = {"xx": sens["xx"], "xy": sens["xy"]}
    sig = calibrate(eps, delta, parts)
    eps_dp = verify(eps, delta, parts, sig)
    xx_n = x.T @ x + _symmetric_noise(d, sig["xx"], rng)
    xy_n = x.T @ y + sig["xy"] * rng.standard_normal(d)
    return _solve(xx_n, xy_n), Released(xx_n, xy_n, sig, eps_dp)


def psd_part(a: np.ndarray) -> np.ndarray:
    vals, vecs = np.linalg.eigh(0.5 * (a + a.T))
    return (vecs * np.maximum(vals, 0.0)) @ vecs.T


def plugin_posterior(rel: Released, prior_precision: float, noise_sd: float):
    """The naive plug-in posterior N(mean, cov) of w given noisy (X^T X, X^T y), the noise
    ignored: (mean (d,), cov (d, d))."""
    d = rel.xy.size
    prec = prior_precision * np.eye(d) + psd_part(rel.xx) / noise_sd**2
    cov = np.linalg.inv(prec)
    cov = 0.5 * (cov + cov.T)
    return cov @ (rel.xy / noise_sd**2), cov


def normal_interval(mean, cov, prob: float = 0.9):
    """Central ``prob`` intervals of each coordinate of N(mean, cov): (lo, hi)."""
    z = special.ndtri(0.5 + prob / 2.0)
    sd = np.sqrt(np.diag(cov))
    return mean - z * sd, mean + z * sd


def ols(x, y) -> np.ndarray:
    """Non-private least squares (minimum-norm if rank-deficient)."""
    return np.linalg.lstsq(x, y, rcond=None)[0]


def conjugate_posterior(x, y, prior_precision: float, noise_sd: float):
    """Exact non-private posterior N(mean, cov) of w (known noise sd)."""
    d = x.shape[1]
    prec = prior_precision * np.eye(d) + x.T @ x / noise_sd**2
    cov = np.linalg.inv(prec)
    cov = 0.5 * (cov + cov.T)
    return cov @ (x.T @ y / noise_sd**2), cov
