"""Noise-aware Bayesian linear regression with an unknown noise variance
(docs/linear_regression.md §N6).

Model: y_i = w.x_i + N(0, sigma^2) with sigma unknown; the Normal-Inverse-Gamma prior
sigma^2 ~ IG(a0, b0), w | sigma^2 ~ N(0, sigma^2 (n beta)^-1 I) (a0, b0, beta public; the
intercept, with ``fit_intercept``, has the same prior). The release is the one of
privbayes.posterior.linear, unchanged: (X^T X, X^T y, y^T y) on the fixed-point grid with
discrete Gaussian noise; its sensitivity and calibration read d, c, y_bound and the grid,
never the noise sd. What changes is the posterior, post-processing of the noisy statistic:
the Gaussian approximation of (b~, C~) = (noisy X^T y, noisy y^T y) given (w, sigma^2, A~),

    mean  (A~ w,  w^T A~ w + n s^2),
    cov   [[s^2 A+ + tau^2 (I + K(w)),    2 s^2 A+ w + tau^2 k(w)],
           [.,   4 s^2 w^T A+ w + 2 n s^4 + tau_C^2 + tau^2 kappa(w)]]

(grid units, s = sigma / y_bound; K, k, kappa the covariances of (Z_A w, w^T Z_A w), Z_A
the design's release noise), sampled by importance sampling in (w, log sigma^2).
"""

from __future__ import annotations

import numpy as np

from ..noise.discrete_gaussian import discrete_gaussian_variance
from .linear import GRID, PROPOSALS, LinearPosterior, _dim_to_p, _psd, unpack

__all__ = ["LinearNIGPosterior", "conjugate_nig_posterior"]


class LinearNIGPosterior(LinearPosterior):
    """p(w, sigma^2 | released statistic) under the Normal-Inverse-Gamma prior (§N6).

    Parameters as :class:`privbayes.posterior.linear.LinearPosterior`; ``spec.noise_sd`` is
    None and ``spec.noise_prior`` = (a0, b0). ``mean``, ``interval`` and ``draw`` are the
    coefficients' (marginally over sigma); ``noise_sd_mean``, ``noise_sd_interval`` and
    ``joint_draw`` give sigma (y's units). ``diagnostics`` (public) as there.
    """

    def __init__(self, spec, n, statistic, sigma2, *, rng=None, proposals: int = PROPOSALS):
        self._setup(spec, n, statistic, sigma2)
        self._fit_gaussian()
        rng = np.random.default_rng() if rng is None else rng
        self.proposals = int(proposals)
        self._w, self._lw, self.diagnostics = self._fit(rng, self.proposals)

    def _setup(self, spec, n, statistic, sigma2) -> None:
        """Everything but the fit: the statistic in grid units, the noise variances, the
        prior in grid coordinates."""
        if spec.noise_sd is not None:
            raise ValueError("LinearNIGPosterior is for noise_sd=None (an unknown variance)")
        self.spec, self.n, self.sigma2 = spec, int(n), sigma2
        self.statistic = np.asarray(statistic, dtype=np.int64)
        fi = spec.fit_intercept
        self.d = _dim_to_p(self.statistic.size, fi) - int(fi)
        p = self.d + int(fi)
        self.p = p
        h = spec.h
        q2 = float(GRID) * GRID
        var_dg = discrete_gaussian_variance(sigma2) / (q2 * q2)
        self.tau2 = var_dg + self.n / (6.0 * q2)  # entries of A and b (§N4)
        self.tau2_c = var_dg + self.n / (3.0 * q2)  # y^T y: rounding 2 v delta per record
        a, b, c = unpack(self.statistic, self.d, fi, h, self.n)
        self.A, self.b, self.C = a, b, c
        self.A_psd = _psd(a)
        unit = np.full(p, spec.y_bound / spec.c)
        if fi:
            unit[-1] = spec.y_bound * (h / GRID)
        self.unit = unit
        # w~ | s^2 ~ N(0, diag(s^2 / prior_prec)), s^2 = sigma^2 / y_bound^2 ~ IG(a0, b0g)
        self.prior_prec = self.n * spec.beta * unit**2 / spec.y_bound**2
        self.a0, b0 = spec.noise_prior
        self.b0g = b0 / spec.y_bound**2
        mask = np.ones((p, p))
        if fi:
            mask[-1, -1] = 0.0
        self.mask = mask

    @property
    def _dim(self) -> int:
        return self.p + 1

    # -- the likelihood (b~, C~) | w, s^2 ~ N(mu, S) -------------------------------------------
    def _design_cov(self, w: np.ndarray):
        """The covariances of (Z_A w, w^T Z_A w) over tau^2, for w (N, p): K (N, p, p),
        k (N, p), kappa (N,). Z_A symmetric, independent upper-triangle entries where the
        mask is 1."""
        m, md = self.mask, np.diag(self.mask)
        w2 = w * w
        off = w2 @ m.T - w2 * md  # sum_{l != j} M_jl w_l^2
        K = w[:, :, None] * w[:, None, :] * m + off[:, :, None] * np.eye(self.p)
        k = w * (md * w2 + 2.0 * off)
        kappa = np.sum(md * w2 * w2, axis=1) + 2.0 * np.sum(w2 * off, axis=1)
        return K, k, kappa

    def log_density(self, phi: np.ndarray) -> np.ndarray:
        """log p(w~, t | statistic) up to a constant, t = log s^2, for phi (N, p + 1)."""
        phi = np.atleast_2d(phi)
        p = self.p
        w, t = phi[:, :p], phi[:, p]
        s2 = np.exp(t)
        K, k, kappa = self._design_cov(w)
        aw = w @ self.A_psd.T
        waw = np.einsum("ij,ij->i", w, aw)
        S = np.empty((w.shape[0], p + 1, p + 1))
        S[:, :p, :p] = s2[:, None, None] * self.A_psd + self.tau2 * (np.eye(p) + K)
        cross = 2.0 * s2[:, None] * aw + self.tau2 * k
        S[:, :p, p] = cross
        S[:, p, :p] = cross
        S[:, p, p] = 4.0 * s2 * waw + 2.0 * self.n * s2 * s2 + self.tau2_c + self.tau2 * kappa
        r = np.empty((w.shape[0], p + 1))
        r[:, :p] = self.b - w @ self.A.T
        r[:, p] = self.C - np.einsum("ij,ij->i", w, w @ self.A.T) - self.n * s2
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                chol = np.linalg.cholesky(S)
            except np.linalg.LinAlgError:
                return np.full(w.shape[0], -np.inf)
            z = np.linalg.solve(chol, r[:, :, None])[:, :, 0]
            logdet = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), axis=1)
            prior_w = -0.5 * np.sum(self.prior_prec * w * w, axis=1) / s2 - 0.5 * p * t
            prior_t = -self.a0 * t - self.b0g / s2  # IG(a0, b0g) on s^2, Jacobian of t
            out = prior_w + prior_t - 0.5 * logdet - 0.5 * np.sum(z * z, axis=1)
        return np.where(np.isfinite(out), out, -np.inf)

    def _fit_gaussian(self) -> None:
        """Starting point (§N6): alternate generalised least squares for w at s^2 and the
        maximiser of the exact log density over a grid of log s^2 at that w (the grid spans
        the prior's mode and the moment estimate from C~, each +-8: robust when the release
        noise makes C~ small or negative); then damped Newton steps on the exact log
        density."""
        p, n = self.p, self.n
        t_prior = np.log(self.b0g / (self.a0 + 1.0))  # the prior's mode of log s^2
        t = t_prior
        m = np.zeros(p)
        for _ in range(4):
            s2 = float(np.exp(t))
            s = self._joint_cov(np.concatenate([m, [t]]))[:p, :p]
            si_a = np.linalg.solve(s, self.A)
            prec = np.diag(self.prior_prec / s2) + self.A.T @ si_a
            m = np.linalg.solve(prec, si_a.T @ self.b)
            rss = self.C - 2.0 * m @ self.b + m @ self.A @ m
            t_data = np.log(rss / n) if rss > 0 else t_prior
            grid = np.linspace(min(t_prior, t_data) - 8.0, max(t_prior, t_data) + 8.0, 321)
            phi = np.column_stack([np.tile(m, (grid.size, 1)), grid])
            f = self.log_density(phi)
            if not np.any(np.isfinite(f)):
                break
            t = float(grid[int(np.argmax(f))])
        s2 = float(np.exp(t))
        cov = np.zeros((p + 1, p + 1))
        cw = np.linalg.inv(prec)
        cov[:p, :p] = 0.5 * (cw + cw.T)
        info = 0.5 * n * n * s2 * s2 / (2.0 * n * s2 * s2 + self.tau2_c) + self.a0
        cov[p, p] = 1.0 / info
        self.loc, self.cov = np.concatenate([m, [t]]), cov
        self._newton()

    def _newton(self, steps: int = 60, h: float = 0.1) -> None:
        """Damped Newton ascent of the exact log density from the starting point: gradient
        and Hessian by central differences in the coordinates whitened by the current
        covariance, steps capped at 1 (whitened) and halved until the density rises; the
        proposal then uses the inverse Hessian at the maximum. Keeps the starting
        approximation where the Hessian is not negative definite."""
        k = self._dim
        ii, jj = np.triu_indices(k, 1)
        m, chol = self.loc.copy(), np.linalg.cholesky(self.cov)
        f_m = float(self.log_density(m[None])[0])
        for _ in range(steps):
            grad, hess = self._derivatives(m, chol, h, ii, jj)
            if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(hess))):
                return
            try:
                neg = np.linalg.cholesky(-hess)
            except np.linalg.LinAlgError:
                neg = None
            if neg is None:
                step = grad / max(1.0, float(np.max(np.abs(grad))))  # gradient ascent
            else:
                step = np.linalg.solve(neg.T, np.linalg.solve(neg, grad))
                big = float(np.max(np.abs(step)))
                step = step / max(1.0, big)
            for _ in range(30):
                cand = m + chol @ step
                f_c = float(self.log_density(cand[None])[0])
                if f_c >= f_m - 1e-9:
                    break
                step = step / 2.0
            else:
                break
            m, f_m = cand, f_c
            if neg is not None:
                # re-whiten at the new point (the Hessian there is the next proposal's scale)
                cov = chol @ np.linalg.inv(-hess) @ chol.T
                chol = np.linalg.cholesky(0.5 * (cov + cov.T))
            if np.max(np.abs(step)) < 1e-6:
                break
        grad, hess = self._derivatives(m, chol, h, ii, jj)
        try:
            np.linalg.cholesky(-hess)
        except np.linalg.LinAlgError:
            return
        if not np.all(np.isfinite(hess)):
            return
        cov = chol @ np.linalg.inv(-hess) @ chol.T
        self.loc, self.cov = m, 0.5 * (cov + cov.T)

    def _joint_cov(self, phi: np.ndarray) -> np.ndarray:
        """S at one point phi (p + 1,)."""
        p = self.p
        w, s2 = phi[:p][None], float(np.exp(phi[p]))
        K, k, kappa = self._design_cov(w)
        aw = self.A_psd @ w[0]
        S = np.empty((p + 1, p + 1))
        S[:p, :p] = s2 * self.A_psd + self.tau2 * (np.eye(p) + K[0])
        S[:p, p] = S[p, :p] = 2.0 * s2 * aw + self.tau2 * k[0]
        S[p, p] = (
            4.0 * s2 * (w[0] @ aw) + 2.0 * self.n * s2 * s2 + self.tau2_c + self.tau2 * kappa[0]
        )
        return S

    # -- outputs -----------------------------------------------------------------------------
    def _quantiles(self, col: np.ndarray, probs) -> np.ndarray:
        wt = self._weights()
        order = np.argsort(col)
        cum = np.cumsum(wt[order])
        cum = (cum - 0.5 * wt[order]) / cum[-1]
        return np.interp(probs, cum, col[order])

    def mean(self) -> np.ndarray:
        return (self._weights() @ self._w[:, : self.p]) * self.unit

    def noise_sd_mean(self) -> float:
        """Posterior mean of sigma (y's units)."""
        return float(self._weights() @ np.exp(0.5 * self._w[:, self.p])) * self.spec.y_bound

    def noise_sd_interval(self, prob: float):
        """Central interval (lo, hi) of mass ``prob`` for sigma (y's units): weighted
        quantiles of the reference run (sigma is monotone in log sigma^2)."""
        tail = (1.0 - prob) / 2.0
        lo, hi = self._quantiles(self._w[:, self.p], [tail, 1.0 - tail])
        return float(np.exp(0.5 * lo) * self.spec.y_bound), float(
            np.exp(0.5 * hi) * self.spec.y_bound
        )

    def joint_draw(self, size: int, rng: np.random.Generator) -> dict:
        """{"w": (size, p), "noise_sd": (size,)}: joint draws by sampling-importance-
        resampling from a fresh run of max(8192, 4 size) proposals."""
        phi, lw, _ = self._fit(rng, max(self.proposals, 4 * size))
        wt = np.exp(lw)
        pick = rng.choice(phi.shape[0], size=size, replace=True, p=wt / wt.sum())
        return {
            "w": phi[pick, : self.p] * self.unit,
            "noise_sd": np.exp(0.5 * phi[pick, self.p]) * self.spec.y_bound,
        }

    def draw(self, size: int | None, rng: np.random.Generator):
        """(w, None): the coefficients, shape (p,) or (size, p)."""
        out = self.joint_draw(1 if size is None else size, rng)["w"]
        return (out[0], None) if size is None else (out, None)

    def approx_sd(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov)[: self.p]) * self.unit


def conjugate_nig_posterior(spec, x: np.ndarray, y: np.ndarray):
    """The exact (non-private) Normal-Inverse-Gamma posterior of (w, sigma^2) given (X, y)
    under spec's prior: (mean, V, a_n, b_n) with sigma^2 ~ IG(a_n, b_n) and w | sigma^2 ~
    N(mean, sigma^2 V); w's marginal is Student t with 2 a_n degrees of freedom, location
    mean and scale matrix (b_n / a_n) V. The truth of the large-eps limit (tests)."""
    n = x.shape[0]
    if spec.fit_intercept:
        x = np.hstack([x, np.ones((n, 1))])
    a0, b0 = spec.noise_prior
    prec = n * spec.beta * np.eye(x.shape[1]) + x.T @ x
    v = np.linalg.inv(prec)
    mean = v @ (x.T @ y)
    a_n = a0 + n / 2.0
    b_n = b0 + 0.5 * (y @ y - mean @ prec @ mean)
    return mean, v, a_n, b_n


def nig_intervals(mean, v, a_n, b_n, prob):
    """Exact central intervals of the NIG posterior: per coefficient (Student t) and for
    sigma (sqrt of the inverse-gamma quantiles): ((lo, hi), (sigma_lo, sigma_hi))."""
    from scipy import stats

    tail = (1.0 - prob) / 2.0
    scale = np.sqrt(np.diag(v) * b_n / a_n)
    tq = stats.t.ppf(1.0 - tail, 2.0 * a_n)
    ig = stats.invgamma(a_n, scale=b_n)
    return (mean - tq * scale, mean + tq * scale), (
        float(np.sqrt(ig.ppf(tail))),
        float(np.sqrt(ig.ppf(1.0 - tail))),
    )
