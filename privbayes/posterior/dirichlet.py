"""Dirichlet-Categorical given noisy counts: Gibbs sampling over the latent counts
(docs/noise_aware.md §5).

The released statistic is c~ = c + Z, Z a vector of K independent N_Z(0, sigma^2), for the
category counts c (sum n). The latent c has the Dirichlet-multinomial prior predictive
DirMult(n, alpha); the posterior of p is the mixture of Dir(alpha + c) over
p(c | c~) proportional to DirMult(c; n, alpha) prod_k N_Z(c~_k - c_k; sigma^2).

The sampler (collapsed: p integrated out, as in Bernstein & Sheldon 2018's Gibbs
samplers over latent statistics) updates a pair (i, j) of coordinates at a time with
c_i + c_j = T fixed: given the others, c_i has the exact conditional

    BetaBin(c_i; T, alpha_i, alpha_j) exp(-(c_i - m)^2 / sigma^2),   m = (c~_i + T - c~_j) / 2,

drawn from a window around m with the proven truncation bound of the mixtures
(privbayes.posterior._mixture, §3). Each sweep updates K pairs along a random cycle of the
categories. Every chain starts from its own point (the projection of c~ onto the simplex,
then draws of the prior predictive), so split R-hat can see chains that have not mixed.

It reads only c~ and public inputs: its diagnostics (R-hat, ESS) are public, and an
MCMC error costs accuracy, never privacy.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import special

from ..errors import ConvergenceError
from ..sampling.conjugate import sample_dirichlet_log, simplex_from_log
from ..sampling.diagnostics import ess_bulk, split_rhat
from ._mixture import TOL, BetaMixture, lgamma_shift

RHAT_MAX = 1.01
ESS_MIN = 400  # bulk ESS over all chains, per coordinate
RETRIES = 2  # runs with twice the tuning and draws, before the diagnostics are reported bad


def _gap(lo, hi, c):
    """min |s - c| over integers s in [lo, hi], elementwise (inf where lo > hi)."""
    out = np.where(c < lo, lo - c, np.where(c > hi, c - hi, 0.0))
    return np.where(lo > hi, np.inf, out)


def _pair_update(c, ct, i, j, alpha, v, rng, tol=TOL):
    """Redraw (c_i, c_j) for every row of c (R, K) from its exact windowed conditional.

    Returns the per-row truncation bound of this update (shape (R,)).
    """
    a_i, a_j = float(alpha[i]), float(alpha[j])
    total = c[:, i] + c[:, j]
    m = 0.5 * (ct[:, i] + total - ct[:, j])
    centre = np.clip(np.rint(m), 0, total).astype(np.int64)
    half = int(math.ceil(math.sqrt(2.0 * v * (math.log(1.0 / tol) + 40.0)))) + 1
    # a window of half-width max(T) + 1 already covers every row's whole range 0..T (bound
    # 0): wider ones only cost memory (sigma^2 = 1e12 at eps = 1e-12 asked for ~1e7 columns)
    half = min(half, int(np.max(total, initial=0)) + 1)
    tf = total.astype(float)
    const = lgamma_shift(tf, a_i + a_j) + special.betaln(a_i, a_j)
    while True:
        offsets = np.arange(-half, half + 1)
        x = centre[:, None] + offsets[None, :]
        valid = (x >= 0) & (x <= total[:, None])
        xc = np.clip(x, 0, total[:, None]).astype(float)
        log_m = lgamma_shift(xc, a_i) + lgamma_shift(tf[:, None] - xc, a_j) - const[:, None]
        lw = np.where(valid, log_m - (xc - m[:, None]) ** 2 / (2.0 * v), -np.inf)
        top = np.max(lw, axis=1)
        rel = np.exp(lw - top[:, None])
        mass = rel.sum(axis=1)
        left, right = centre - half, centre + half
        d = np.minimum(_gap(0, left - 1, m), _gap(right + 1, total, m))
        with np.errstate(over="ignore"):
            bound = np.where(
                np.isinf(d), 0.0, np.exp(np.minimum(-(d * d) / (2.0 * v) - top - np.log(mass), 0.0))
            ) * (1.0 + 1e-9)
        covered = (left <= 0) & (right >= total)
        bound = np.where(covered, 0.0, bound)
        if np.all(bound <= tol):
            break
        half *= 2
    cum = np.cumsum(rel, axis=1)
    u = rng.random(c.shape[0]) * mass
    idx = np.minimum((cum < u[:, None]).sum(axis=1), x.shape[1] - 1)
    new = x[np.arange(c.shape[0]), idx]
    c[:, i] = new
    c[:, j] = total - new
    return bound


def _project(ct: np.ndarray, n: int) -> np.ndarray:
    """The integer vector >= 0 with sum n nearest (largest remainders) to c~ scaled to n."""
    pos = np.maximum(ct.astype(float), 0.0)
    k = pos.size
    if pos.sum() == 0:
        pos = np.ones(k)
    target = pos * (n / pos.sum())
    base = np.floor(target).astype(np.int64)
    short = n - int(base.sum())
    if short > 0:
        base[np.argsort(-(target - base), kind="stable")[:short]] += 1
    return base


def _starts(ct: np.ndarray, n: int, alpha: np.ndarray, chains: int, rng) -> np.ndarray:
    """(chains, K) starting counts: the projection of c~, then prior-predictive draws."""
    out = np.empty((chains, alpha.size), dtype=np.int64)
    out[0] = _project(ct, n)
    for r in range(1, chains):
        p = simplex_from_log(sample_dirichlet_log(alpha, rng))
        out[r] = rng.multinomial(n, p / p.sum())
    return out


def gibbs(ct, n: int, alpha, sigma2: float, chains: int, tune: int, draws: int, rng):
    """Latent count draws for P problems at once (batched: the calibration tests run
    hundreds of data sets through one call).

    Parameters
    ----------
    ct : int array (P, K) (or (K,)), the noisy counts. n : the public size. alpha : (K,).
    sigma2 : the noise's sigma^2. chains, tune, draws : per problem. rng : Generator.

    Returns (latent counts (P, chains, draws, K) int64, per-chain truncation bound
    (P, chains): the sum of the pair updates' bounds).
    """
    ct = np.atleast_2d(np.asarray(ct, dtype=np.int64))
    alpha = np.asarray(alpha, dtype=float)
    P, K = ct.shape
    c = np.concatenate([_starts(ct[p], n, alpha, chains, rng) for p in range(P)])
    rows = np.repeat(ct, chains, axis=0).astype(float)
    v = sigma2 / 2.0  # the pair's two Gaussian factors in c_i: variance sigma^2 / 2
    out = np.empty((P * chains, draws, K), dtype=np.int64)
    tv = np.zeros(P * chains)
    for sweep in range(tune + draws):
        if K == 2:
            pairs = [(0, 1)]
        else:
            perm = rng.permutation(K)
            pairs = [(int(perm[k]), int(perm[(k + 1) % K])) for k in range(K)]
        for i, j in pairs:
            tv += _pair_update(c, rows, i, j, alpha, v, rng)
        if sweep >= tune:
            out[:, sweep - tune] = c
    return out.reshape(P, chains, draws, K), tv.reshape(P, chains)


def p_draws(latent: np.ndarray, alpha: np.ndarray, rng, reps: int = 1) -> np.ndarray:
    """p ~ Dir(alpha + c) for every latent draw c (``reps`` each): shape latent.shape[:-1]
    + (reps,) + (K,) when reps > 1, else latent.shape."""
    params = alpha + latent.astype(float)
    if reps > 1:
        params = np.repeat(params[..., None, :], reps, axis=-2)
    return simplex_from_log(sample_dirichlet_log(params, rng))


def _check_count(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return int(value)


class DirichletPosterior:
    """p(p | c~) for :class:`privbayes.DirichletCategorical` by Gibbs sampling (public).

    Parameters
    ----------
    model : DirichletCategorical. n : int >= 0. statistic : int array (K,), the noisy
        counts c~. sigma2 : float > 0.
    rng : the Generator of the reference run (default: fresh OS entropy).
    chains, tune, draws : the reference run (default 4 chains, 200 sweeps of tuning, 500
        recorded sweeps each); ``sample`` and ``to_inference_data`` run fresh chains with
        the same tuning.
    on_bad_diagnostics : "raise" (default): ``draw``, ``interval`` and ``mean`` raise
        ConvergenceError when a run's R-hat exceeds 1.01 (or is undefined) or its bulk ESS
        is below 400 after two retries with twice the tuning and draws; "warn": warn.

    ``diagnostics`` (public: the chains read only c~): {"rhat", "ess_bulk" (per
    coordinate, shape (K,) lists), "chains", "tune", "draws", "attempts", "ok"}.
    """

    var_name = "p"

    def __init__(
        self,
        model,
        n: int,
        statistic,
        sigma2: float,
        *,
        rng=None,
        chains: int = 4,
        tune: int = 200,
        draws: int = 500,
        on_bad_diagnostics: str = "raise",
    ) -> None:
        if on_bad_diagnostics not in ("raise", "warn"):
            raise ValueError(
                f"on_bad_diagnostics must be 'raise' or 'warn'; got {on_bad_diagnostics!r}"
            )
        self.chains = _check_count(chains, "chains", 2)
        self.tune = _check_count(tune, "tune", 1)
        self.draws = _check_count(draws, "draws", 4)
        self.model, self.n, self.sigma2 = model, int(n), sigma2
        self.statistic = np.asarray(statistic, dtype=np.int64)
        self.alpha = np.asarray(model.alpha, dtype=float)
        self.on_bad = on_bad_diagnostics
        rng = np.random.default_rng() if rng is None else rng
        self._latent, self.diagnostics, self.truncation = self._fit(
            self.chains, self.tune, self.draws, rng
        )

    def _run(self, chains, tune, draws, rng):
        latent, tv = gibbs(
            self.statistic, self.n, self.alpha, self.sigma2, chains, tune, draws, rng
        )
        return latent[0], float(np.max(tv))

    def _fit(self, chains, tune, draws, rng):
        """A run that passes its diagnostics, retried with twice the tuning and draws."""
        for attempt in range(RETRIES + 1):
            latent, tv = self._run(chains, tune, draws, rng)
            diag = self._diagnose(latent, rng, chains, tune, draws, attempt + 1)
            if diag["ok"]:
                break
            tune, draws = 2 * tune, 2 * draws
        return latent, diag, tv

    def _diagnose(self, latent, rng, chains, tune, draws, attempts) -> dict:
        p = p_draws(latent, self.alpha, rng)  # (chains, draws, K)
        rhat = np.asarray(split_rhat(p), float)
        ess = np.asarray(ess_bulk(p), float)
        # a coordinate with one value in every draw of every chain (tiny alpha: the
        # posterior is a point mass at a vertex) has an undefined R-hat, but chains that
        # started apart and all hold the same value agree: R-hat 1, every draw effective
        flat = p.reshape(-1, p.shape[-1])
        same = np.all(flat == flat[:1], axis=0)
        rhat[same], ess[same] = 1.0, float(flat.shape[0])
        worst_rhat = float(np.max(rhat))  # NaN propagates: counted as a failure
        worst_ess = float(np.min(ess))
        ok = bool(worst_rhat <= RHAT_MAX and worst_ess >= ESS_MIN)
        return {
            "sampler": "gibbs over the latent counts (pairs, collapsed)",
            "rhat": rhat.tolist(),
            "ess_bulk": ess.tolist(),
            "max_rhat": worst_rhat,
            "min_ess_bulk": worst_ess,
            "chains": chains,
            "tune": tune,
            "draws": draws,
            "attempts": attempts,
            "ok": ok,
            "public": True,
        }

    def _gate(self, diag: dict) -> None:
        if diag["ok"]:
            return
        message = (
            f"the Gibbs sampler over the latent counts did not pass its diagnostics (max "
            f"R-hat {diag['max_rhat']:.4g} > {RHAT_MAX} or min bulk ESS "
            f"{diag['min_ess_bulk']:.4g} < {ESS_MIN}, after {diag['attempts']} runs of "
            f"{diag['chains']} chains up to {diag['tune']} + {diag['draws']} sweeps). These "
            "diagnostics are public (the chains read only the released noisy counts); the "
            "release itself is unaffected: rebuild the posterior with more tune/draws "
            "(privbayes.posterior.family_of(model, n, post.statistic, sigma2, tune=..., "
            "draws=...)), or pass on_bad_diagnostics='warn'"
        )
        if self.on_bad == "warn":
            warnings.warn(message, RuntimeWarning, stacklevel=4)
            return
        raise ConvergenceError(message, diagnostics=diag)

    # -- the family interface ------------------------------------------------------------
    def draw(self, size: int | None, rng: np.random.Generator):
        """(p, log p): shape (K,), or (size, K) with ``size``; fresh chains (tuning as the
        reference run), then Dir(alpha + c) draws from their states."""
        self._gate(self.diagnostics)
        k = 1 if size is None else size
        per = max(100, min(math.ceil(k / self.chains), self.draws))
        latent, diag, _ = self._fit(self.chains, self.tune, per, rng)
        self._gate(diag)
        states = latent.reshape(-1, latent.shape[-1])
        reps = math.ceil(k / states.shape[0])
        params = self.alpha + states.astype(float)
        if reps > 1:
            params = np.repeat(params, reps, axis=0)
        pick = rng.permutation(params.shape[0])[:k]
        lp = sample_dirichlet_log(params[pick], rng)
        p = simplex_from_log(lp)
        if size is None:
            return p[0], lp[0]
        return p, lp

    def chain_draws(self, per: int, chains: int, rng) -> np.ndarray:
        """(chains, per, K) draws of p from ``chains`` fresh chains (for ArviZ)."""
        self._gate(self.diagnostics)
        chains = max(chains, 2)
        # at least the reference run's length: the diagnostics need ESS >= 400, which a
        # short run (to_inference_data(draws=40): 10 sweeps a chain) can never show
        latent, diag, _ = self._fit(chains, self.tune, max(per, self.draws), rng)
        self._gate(diag)
        return p_draws(latent[:, :per], self.alpha, rng)

    def mean(self) -> np.ndarray:
        self._gate(self.diagnostics)
        total = self.alpha.sum() + self.n
        out = (self.alpha + self._latent.reshape(-1, self.alpha.size).mean(axis=0)) / total
        return out

    def interval(self, prob: float):
        """Per coordinate: quantiles of the mixture of Beta marginals over the reference
        run's latent draws (Rao-Blackwellised)."""
        self._gate(self.diagnostics)
        tail = (1.0 - prob) / 2.0
        states = self._latent.reshape(-1, self.alpha.size)
        lo, hi = np.empty(self.alpha.size), np.empty(self.alpha.size)
        for k in range(self.alpha.size):
            vals, counts = np.unique(states[:, k], return_counts=True)
            a = self.alpha[k] + vals
            # the other coordinates' sum, not (alpha_0 + n) - a: that difference cancels
            # to 0 (a Beta(a, 0), NaN quantiles) when the other alphas are tiny
            rest = float(np.sum(np.delete(self.alpha, k))) + (self.n - vals)
            mix = BetaMixture(a, rest, counts / counts.sum())
            lo[k], hi[k] = mix.quantile(tail), mix.quantile(1.0 - tail)
        return lo, hi

    def shape(self) -> tuple[int, ...]:
        return (self.alpha.size,)
