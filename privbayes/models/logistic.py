"""Bayesian logistic regression with a Gaussian prior (BACKGROUND.md §4, docs/glm.md).

Prior w ~ N(0, (n beta)^-1 I) in R^d, loss log(1 + exp(-y w.x)), labels y in {-1, +1}
(0/1 accepted), features ||x||_2 <= c. The posterior is n beta-strongly log-concave and a
replaced record changes the log-density by a 2c-Lipschitz function, which gives (our
derivation, docs/glm.md) the zCDP-type curves

    direct        eps(lam) = 2 lam c^2 / (n beta)
    diffused      eps(lam) = 2 lam c^2 r^2 / (n beta)     (likelihood ** r)
    concentrated  eps(lam) = 2 lam c^2 m / (n beta)       (prior precision n beta / m)

and, for OPS (Wang, Fienberg, Smola 2015: prior truncated to ||w|| <= R, likelihood ** t),
pure eps0-DP with eps0 = 2 t c R, converted to RDP by the tight formula.

Certificates are proven upper bounds for the floats the samplers use (docs/numerics.md §8):
the closed forms are evaluated in exact rationals at the float prior precision n*beta/m and
weight r, then rounded up; c and R are enlarged to cover the rounding of the float norms
that decide ||x|| <= c (here) and ||w|| <= R (the OPS samplers); OPS's pure-DP curve is
evaluated in interval arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import optimize

from .. import mechanisms
from ..accounting.curves import pure_dp_rdp
from ..calibration import Calibration, certify_down
from ..certified import pure_dp_rdp_upper, round_down, round_up
from ..errors import InfeasiblePrivacyError
from ..validation import as_numeric_array, check_n, check_positive, check_unit_knob
from ._frozen import Frozen

GLM_METHODS = ("direct", "diffused", "concentrated", "ops")
# MCMC settings per back-end: IMH steps are cheap and its chains forget their start in a
# few steps (docs/glm.md); the burn-in is raised further from the estimated weight bound.
BACKEND_DEFAULTS = {
    "imh": {"tune": 20, "draws": None, "chains": 4},
    "pymc": {"tune": 1000, "draws": 1000, "chains": 4},
}
NORM_SLACK = 1e-12  # relative slack on ||x|| <= c, for rows scaled to the sphere exactly
MAX_FEATURES = 2**24  # d the certificates cover (the OPS ball's float norm test)
PREC_MAX = 1e200  # largest prior precision n beta / m the samplers are trusted with
_U = Fraction(1, 2**53)


def _norm_error(d: int) -> Fraction:
    """Relative bound on how far a float 2-norm in d dims can fall below the true norm.

    sqrt(fl(sum fl(x_i^2))) >= ||x|| sqrt((1-u)(1-gamma_{d-1})) (1-u) for any summation
    order (positive terms), so ||x|| <= fl-norm (1 + (d+2) u) for d <= 2^24; the extra
    2^-160 covers squares lost to underflow when the bound is >= 1e-100 (docs/numerics.md §8).
    """
    return (d + 2) * _U + Fraction(1, 2**160)


def _scale(value, name: str) -> float:
    """beta, c, R: finite, > 0, and with squares that neither overflow nor vanish."""
    v = check_positive(value, name)
    if not 1e-100 <= v <= 1e100:
        raise ValueError(f"{name} must lie in [1e-100, 1e100]; got {v!r}")
    return v


class BayesianLogisticRegression(Frozen):
    """Gaussian-prior logistic regression, released by posterior sampling.

    Parameters
    ----------
    beta : float > 0, prior precision per record: w ~ N(0, (n * beta)^-1 I). Public.
    c : float > 0, the public bound on feature norms, ||x||_2 <= c.
    radius : float > 0 or None, OPS truncation radius R (default c / beta, a ball that
        contains the MAP estimate of every data set: docs/glm.md).
    backend : "imh" (default): mode-fitted independence Metropolis–Hastings over many chains
        (privbayes.sampling.imh), or "pymc": PyMC's NUTS, the reference.
    tune, draws, chains : MCMC settings; None takes the back-end's default (imh: 20 burn-in
        steps — raised to twice the estimate from the weight bound —, 4 chains and
        max(100, ceil(1000 / sqrt(chains))) draws, enough for R-hat to resolve 1.01; pymc:
        1000, 1000, 4). ``sample(..., size=k)`` runs at least k chains.
    reruns : when the diagnostics fail, the run is repeated with twice the tuning and
        draws, up to this many times (default 2).
    target_accept : NUTS target acceptance rate (pymc).
    proposal_scale : imh only: the proposal's spread relative to the Laplace fit (default
        1). Far below 1 the proposal misses the posterior, and the diagnostics say so.

    Data for :func:`privbayes.sample`: a tuple ``(X, y)``, X of shape (n, d) with every row
    of norm <= c (refused otherwise; see :mod:`privbayes.preprocessing`), y of shape (n,)
    in {0, 1} or {-1, +1}. The released value is a weight vector, shape (d,).
    """

    methods = GLM_METHODS
    max_size = 100_000  # releases per sample(..., size=k) call: one chain each

    def __init__(
        self,
        beta: float = 0.01,
        c: float = 1.0,
        radius: float | None = None,
        *,
        backend: str = "imh",
        tune: int | None = None,
        draws: int | None = None,
        chains: int | None = None,
        target_accept: float = 0.9,
        reruns: int = 2,
        proposal_scale: float = 1.0,
    ) -> None:
        self.beta = _scale(beta, "beta")
        self.c = _scale(c, "c")
        self.radius = self.c / self.beta if radius is None else _scale(radius, "radius")
        if backend not in BACKEND_DEFAULTS:
            raise ValueError(f"backend must be one of {tuple(BACKEND_DEFAULTS)}; got {backend!r}")
        self.backend = backend
        defaults = BACKEND_DEFAULTS[backend]
        tune = defaults["tune"] if tune is None else tune
        draws = defaults["draws"] if draws is None else draws
        chains = defaults["chains"] if chains is None else chains
        for name, v, low in (
            ("tune", tune, 0),
            ("draws", draws, 4 if backend == "imh" else 1),
            ("chains", chains, 2 if backend == "imh" else 1),
            ("reruns", reruns, 0),
        ):
            if name == "draws" and v is None and backend == "imh":
                continue  # chosen per run from the number of chains
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {v!r}")
        self.tune, self.chains = int(tune), int(chains)
        self.draws = None if draws is None else int(draws)
        self.reruns = int(reruns)
        if not 0 < target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1); got {target_accept}")
        self.target_accept = float(target_accept)
        self.proposal_scale = check_positive(proposal_scale, "proposal_scale")
        if not 1e-6 <= self.proposal_scale <= 1e3:
            raise ValueError(f"proposal_scale must lie in [1e-6, 1e3]; got {proposal_scale!r}")
        self._freeze()

    def __repr__(self) -> str:
        return (
            f"BayesianLogisticRegression(beta={self.beta!r}, c={self.c!r}, radius={self.radius!r})"
        )

    # -- data ---------------------------------------------------------------------
    def _statistics(self, data) -> tuple[tuple[np.ndarray, np.ndarray], int]:
        """Validated (X, y in {-1, +1}) and n. The data stay inside the release flow."""
        if not isinstance(data, tuple | list) or len(data) != 2:
            raise TypeError(
                "data must be a tuple (X, y) with X of shape (n, d) and y of shape (n,)"
            )
        x = as_numeric_array(data[0], "X")
        y = as_numeric_array(data[1], "y")
        if x.ndim != 2:
            raise ValueError(f"X must be 2-D, shape (n, d); got shape {x.shape}")
        if x.shape[1] == 0:
            raise ValueError("X has d = 0 features; need at least one")
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(f"y must have shape ({x.shape[0]},) to match X; got {y.shape}")
        if x.shape[0] == 0:
            raise ValueError("X has n = 0 rows: the prior N(0, (n beta)^-1 I) is improper at n = 0")
        if not (np.isin(y, [0.0, 1.0]).all() or np.isin(y, [-1.0, 1.0]).all()):
            odd = ~np.isin(y, [-1.0, 0.0, 1.0])
            i = int(np.flatnonzero(odd if odd.any() else y == 0)[0])
            raise ValueError(
                f"y must hold labels in {{0, 1}} or {{-1, +1}}; y[{i}] = {float(y[i])!r}"
            )
        if x.shape[1] > MAX_FEATURES:
            raise ValueError(f"X has d = {x.shape[1]} features; at most 2**24 are supported")
        norms = np.linalg.norm(x, axis=1)
        # rows pass when even the float norm's rounding keeps them within the certificate's c
        over = np.flatnonzero(norms > self._norm_threshold(x.shape[1]))
        if over.size:
            first = ", ".join(str(int(i)) for i in over[:5])
            raise ValueError(
                f"{over.size} row(s) of X have norm > c = {self.c:g} (first: {first}); "
                "scale by a public bound or clip rows with privbayes.preprocessing"
            )
        y = np.where(y > 0, 1.0, -1.0)
        return (x, y), int(x.shape[0])

    # -- certificates ---------------------------------------------------------------
    def rdp(self, n, orders, r: float = 1.0, m: float = 1.0, method: str = "diffused"):
        """Certified RDP curve for data sets of size n; array shaped like ``orders``.

        ``method="ops"`` reads ``r`` as the tempering t: pure eps0 = 2 t c R. Every value is
        a proven upper bound for the samplers' float parameters: the prior precision
        n*beta/m as they compute it, c (1 + 2e-12) for the rows that validation accepts and
        R enlarged by the float norm's rounding (docs/numerics.md §8). inf where the prior
        precision overflows.
        """
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        lam = np.asarray(orders, dtype=float)
        if np.isnan(lam).any() or (lam < 1).any():
            raise ValueError(f"orders must be >= 1 (1 = KL) or inf; got {orders!r}")
        if n == 0:
            return np.zeros(lam.shape)
        if method == "ops":
            return pure_dp_rdp_upper(lam, self._ops_eps0(r))
        rho = self._rho_exact(n, r, m)
        out = np.full(lam.shape, np.inf)
        if rho is None:
            return out
        flat, res = lam.ravel(), out.ravel()
        uniq, inverse = np.unique(flat, return_inverse=True)
        vals = [round_up(Fraction(v) * rho) if math.isfinite(v) else math.inf for v in uniq]
        res[:] = np.asarray(vals)[inverse]
        return res.reshape(lam.shape)

    def _c_cert(self) -> Fraction:
        """The bound on the true norm of every accepted row: c (1 + 2 NORM_SLACK), exact."""
        return Fraction(self.c) * (1 + 2 * Fraction(NORM_SLACK))

    def _norm_threshold(self, d: int) -> float:
        """Largest float norm a row of X (d features) may show: its true norm is then
        <= c (1 + 2 NORM_SLACK) whatever the rounding. Rows scaled onto the sphere of
        radius c pass for d up to ~9000."""
        return round_down(self._c_cert() / (1 + _norm_error(d)))

    def _prior_precision(self, n: int, m: float) -> float:
        """n beta / m, exactly the float expression both GLM samplers evaluate."""
        return n * self.beta / m

    def _rho_exact(self, n: int, r: float = 1.0, m: float = 1.0) -> Fraction | None:
        """2 c^2 r^2 / prec exactly, prec the samplers' float n*beta/m (None: overflow)."""
        prec = self._prior_precision(n, m)
        if not (math.isfinite(prec) and prec > 0):
            return None
        return 2 * self._c_cert() ** 2 * Fraction(r) ** 2 / Fraction(prec)

    def _rho(self, n: int, r: float = 1.0, m: float = 1.0) -> float:
        """The zCDP constant 2 c^2 r^2 / (n beta / m), rounded up (inf on overflow)."""
        rho = self._rho_exact(n, r, m)
        return math.inf if rho is None else round_up(rho)

    def _ops_eps0(self, t: float) -> float:
        """eps0 = 2 t c R over the ball that the samplers' float norm test really keeps,
        ||w|| <= R (1 + (2^24 + 2) u + 2^-160): exact, rounded up."""
        r_eff = Fraction(self.radius) * (1 + _norm_error(MAX_FEATURES))
        return round_up(2 * Fraction(t) * self._c_cert() * r_eff)

    def _calibrate(self, n: int, lam: float, eps: float, method: str) -> Calibration:
        method = mechanisms.check_method(method, GLM_METHODS)
        if n == 0:
            return Calibration(method, 1.0, 1.0, lam, 0.0, eps, 0, None, 0, self)
        if eps == 0:
            raise InfeasiblePrivacyError(
                "eps=0 needs a release that ignores the data: sample from the prior instead",
                reachable={"eps": "> 0"},
            )
        if method == "ops":
            return self._calibrate_ops(n, lam, eps)
        rho = self._rho(n)
        if math.isinf(lam) or math.isinf(rho * lam):
            raise InfeasiblePrivacyError(
                f"method={method!r} has no finite eps at lam={lam:g} (its bound grows like "
                f"{rho:.3g} * lam); use a smaller lam or method='ops' (pure DP)",
                reachable={"lam": "finite", "method": "ops"},
            )

        def certify(knob: float):
            return (float(self.rdp(n, lam, *mechanisms.knobs(method, knob), method=method)),)

        name = mechanisms.KNOB[method] or "knob"
        # closed-form guesses in logs (no overflow or underflow on the way)
        log_gap = math.log(eps) - math.log(lam) - math.log(rho)
        floor = 2.0**-1074
        if method == "direct":
            direct = certify(1.0)[0]
            if direct > eps:
                raise InfeasiblePrivacyError(
                    f"direct sampling certifies eps={direct:.6g} at lam={lam:g} for n={n}, "
                    f"beta={self.beta:g}, c={self.c:g}; ask for eps >= {direct:.6g} or use "
                    "method='diffused' or 'concentrated'",
                    reachable={"min_eps": direct},
                )
            knob = 1.0
        elif method == "diffused":
            knob = math.exp(min(0.0, log_gap / 2))
        else:
            # the samplers' prior precision n beta / m must stay <= PREC_MAX
            floor = min(1.0, round_up(Fraction(n) * Fraction(self.beta) / Fraction(PREC_MAX)))
            while self._prior_precision(n, floor) > PREC_MAX:
                floor = math.nextafter(floor, 2.0)
            knob = math.exp(min(0.0, log_gap))
            lowest = certify(floor)[0]
            if lowest > eps:
                raise InfeasiblePrivacyError(
                    f"method='concentrated' certifies at least eps={lowest:.6g} at lam={lam:g} "
                    f"for n={n}: a smaller eps needs a prior precision n*beta/m above "
                    f"{PREC_MAX:g}; ask for eps >= {lowest:.6g} or use method='diffused'",
                    reachable={"min_eps": lowest, "method": "diffused"},
                )
        knob = min(1.0, max(knob, floor))
        knob, (achieved,), steps = certify_down(knob, certify, eps, name, 2.0, floor)
        r, m = mechanisms.knobs(method, knob)
        return Calibration(method, r, m, lam, achieved, eps, n, None, steps, self)

    def _calibrate_ops(self, n: int, lam: float, eps: float) -> Calibration:
        """Largest eps0 whose tight RDP conversion meets eps at lam; t = eps0 / (2 c R).

        A float search for eps0, then :func:`certify_down` on the certified curve
        (interval arithmetic at the exact, rounded-up eps0 of t)."""

        def certify(t: float):
            return (float(pure_dp_rdp_upper(lam, self._ops_eps0(t))),)

        evals = 1
        log_full = math.log(self._ops_eps0(1.0)) if math.isfinite(self._ops_eps0(1.0)) else 710.0
        if certify(1.0)[0] <= eps:
            t = 1.0
        else:
            if math.isinf(lam):
                log_e = math.log(eps)
            else:
                # eps(lam; e) grows from 0 to e: solve in log(e) (roots can be ~1e-160)
                def gap(log_e: float) -> float:
                    with np.errstate(all="ignore"):  # lam * e may overflow: the curve is e
                        v = float(pure_dp_rdp(lam, math.exp(log_e)))
                    # below the smallest double the curve underflows: any log below -745 is
                    # just as far under the target, and keeps the gap monotone
                    return (math.log(v) if v > 0 else -800.0) - math.log(eps)

                hi = min(log_full, 700.0)
                lo = hi - 1.0
                while gap(lo) > 0 and lo > -740:
                    lo -= 2.0 * (gap(lo) + 1.0)
                if gap(lo) > 0 or gap(hi) <= 0:
                    log_e = lo if gap(lo) <= 0 else -745.0
                else:
                    res = optimize.brentq(
                        gap, lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, full_output=True
                    )
                    log_e, evals = res[0], res[1].function_calls
            t = math.exp(min(0.0, log_e - log_full))
        t = max(t, 2.0**-1074)
        t, (achieved,), steps = certify_down(t, certify, eps, "tempering t", 1.0, 2.0**-1074)
        return Calibration("ops", t, 1.0, lam, achieved, eps, n, None, evals + steps, self)

    # -- release ------------------------------------------------------------------
    def _draw(
        self, xy, cal: Calibration, rng, size=None, *, progressbar=False, on_bad_diagnostics="raise"
    ):
        """(value (d,) or (size, d), None, diagnostics): post-convergence MCMC draws."""
        if self.backend == "imh":
            from ..sampling.imh import release_draw
        else:
            from ..sampling.pymc_backend import release_draw

        value, diagnostics = release_draw(
            self, xy, cal, rng, progressbar=progressbar, on_bad=on_bad_diagnostics, size=size
        )
        return value, None, diagnostics
