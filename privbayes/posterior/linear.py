"""Bayesian linear regression, noise-aware: release (X^T X, X^T y, y^T y) once with exact
integer noise on fixed-point statistics, then the posterior of w given them with the noise
modelled (docs/linear_regression.md §N1-§N4).

Model: y_i = w.x_i + N(0, noise_sd^2), noise_sd public; prior w ~ N(0, (n beta)^-1 I);
records with ||x_i|| <= c and |y_i| <= y_bound (refused otherwise, before any charge).
With ``fit_intercept`` the row [x_i, 1] is used and the intercept (the last coefficient)
has the same prior.

The release (§N1-§N2). Every record is put on a public grid: u = rint(x * fl(2^16 / c)),
v = rint(y * fl(2^16 / y_bound)) (integers; |v| <= 2^16, ||u||^2 <= P), and, with an
intercept, the constant column h = 2^15 (``intercept_scaling`` 1/2 of the grid unit).
The statistic is the upper triangle (diagonal included) of Z^T Z, Z = [u, h, v] row by
row, without the (h, h) entry (n h^2, public): integers summed exactly. A replaced record
moves it by an integer vector of squared norm at most Delta^2 = floor(2 P^2 + 2 H P +
(H + M)^2 / 2 + max(2 P M + 4 H M, P M + 2 H M + M^2)), M = 2^32, H = h^2 (0 without
intercept) — proven in docs/linear_regression.md §N2 — and the discrete Gaussian
N_Z(0, sigma^2) per coordinate certifies lam Delta^2 / (2 sigma^2) exactly (rounded up).

The posterior (§N3), post-processing of the noisy statistic alone: in grid units
A~ = A + Z_A, b~ = b + Z_b with b | A, w ~ N(A w, s_e^2 A) exactly (the regression model,
given the design), and A = A~ - Z_A with Z_A ~ N(0, tau^2) given A~ (a flat prior on the
design's second moments: Bernstein & Sheldon 2019's data model with vague moments). Then

    b~ | w  ~  N(A~ w,  s_e^2 A~+ + tau^2 I + tau^2 K(w)),   K(w) = Cov(Z_A w) / tau^2,

with A~+ the projection of A~ on the PSD cone (only in the covariance). The posterior
p(w | A~, b~) proportional to N(w; 0, prior) times this likelihood is sampled by
self-normalised importance sampling from a multivariate t around its Gaussian
approximation; the effective sample size (public) is reported and raised by doubling the
proposals.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import special
from scipy.linalg import blas

from ..certified import round_down
from ..data import DataError, is_dask, statistics
from ..noise.discrete_gaussian import discrete_gaussian_variance
from ..validation import check_positive

__all__ = [
    "GRID",
    "LinearNoiseAwareSpec",
    "LinearPosterior",
    "LinearStatistics",
    "linear_sensitivity_sq",
]

GRID_BITS = 16
GRID = 1 << GRID_BITS  # q: x / c and y / y_bound are put on the grid 2^-16
_U = Fraction(1, 1 << 53)  # unit roundoff of float64
NORM_SLACK = 1e-12  # as the GLMs (docs/numerics.md §8): c_cert = c (1 + 2 NORM_SLACK)
MAX_ROWS = 1 << 20  # rows per exact block: 2^20 P < 2^53 (float64 sums of integers exact)
MAX_FEATURES = 1 << 20
MAX_N = 1 << 30  # the summed statistics stay below 2^63 (int64 release vector)
PROPOSALS = 8192  # importance-sampling proposals of the reference run
ESS_MIN = 1000
RETRIES = 3


def _norm_error(d: int) -> float:
    """Relative error bound of a float row norm (docs/numerics.md §8): (d + 2) u + 2^-160."""
    return (d + 2) * 2.0**-53 + 2.0**-160


@dataclass(frozen=True)
class LinearNoiseAwareSpec:
    """The public inputs of the noise-aware linear regression release and posterior.

    beta : prior precision per record (w ~ N(0, (n beta)^-1 I)). c : bound on ||x||.
    y_bound : bound on |y|. noise_sd : the known sd of y around w.x, or None: unknown, with
    the Normal-Inverse-Gamma prior sigma^2 ~ IG(a0, b0), w | sigma^2 ~ N(0, sigma^2 (n
    beta)^-1 I) (docs/linear_regression.md §N6). noise_prior : (a0, b0), public, with
    noise_sd=None only (checked by :func:`check_noise_prior`). fit_intercept : append
    the constant column 1 (its coefficient last, same prior). intercept_scaling : the
    intercept column's value on the grid, as a fraction of the grid unit (h = scaling *
    2^16; default 1/2: docs/linear_regression.md §N2 on the trade-off).
    """

    beta: float
    c: float
    y_bound: float
    noise_sd: float | None
    fit_intercept: bool = False
    intercept_scaling: float = 0.5
    noise_prior: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for name in ("beta", "c", "y_bound"):
            object.__setattr__(self, name, check_positive(getattr(self, name), name))
        if self.noise_sd is None:
            object.__setattr__(self, "noise_prior", check_noise_prior(self.noise_prior))
        else:
            object.__setattr__(self, "noise_sd", check_positive(self.noise_sd, "noise_sd"))
            if self.noise_prior is not None:
                raise ValueError(
                    "noise_prior applies with noise_sd=None only (an unknown noise variance); "
                    f"got noise_sd={self.noise_sd!r} and noise_prior={self.noise_prior!r}"
                )
        if not isinstance(self.fit_intercept, bool | np.bool_):
            raise TypeError(f"fit_intercept must be a bool; got {self.fit_intercept!r}")
        s = check_positive(self.intercept_scaling, "intercept_scaling")
        if not s <= 1:
            raise ValueError(f"intercept_scaling must lie in (0, 1]; got {s!r}")
        h = round(s * GRID)
        if h < 1:
            raise ValueError(f"intercept_scaling must be >= 2^-16; got {s!r}")
        object.__setattr__(self, "intercept_scaling", h / GRID)
        object.__setattr__(self, "fit_intercept", bool(self.fit_intercept))

    @property
    def h(self) -> int:
        """The intercept column on the grid (an integer; 0 without intercept)."""
        return round(self.intercept_scaling * GRID) if self.fit_intercept else 0


def check_noise_prior(prior) -> tuple[float, float]:
    """(a0, b0) of the inverse-gamma prior sigma^2 ~ IG(a0, b0) (density proportional to
    (sigma^2)^-(a0 + 1) exp(-b0 / sigma^2); sigma in y's units): two finite numbers in
    [1e-100, 1e100]. TypeError for a non-pair or a non-number, ValueError otherwise."""
    if isinstance(prior, str) or not isinstance(prior, tuple | list) or len(prior) != 2:
        raise TypeError(
            f"noise_prior must be a pair (a0, b0) of numbers > 0 (sigma^2 ~ IG(a0, b0)); got "
            f"{prior!r}"
        )
    out = []
    for name, v in zip(("a0", "b0"), prior, strict=True):
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            raise TypeError(f"noise_prior's {name} must be a number; got {v!r}")
        v = float(v)
        if not (math.isfinite(v) and 1e-100 <= v <= 1e100):
            raise ValueError(
                f"noise_prior's {name} must be finite and in [1e-100, 1e100]; got {v!r}"
            )
        out.append(v)
    return out[0], out[1]


def _ceil_sqrt(k: int) -> int:
    r = math.isqrt(k)
    return r if r * r == k else r + 1


def grid_norm_sq_bound(d: int) -> int:
    """P: the largest ||u||^2 a valid record's grid vector can have (an integer; §N2):
    ||u|| <= 2^16 (1 + u)^2 (1 + 2 NORM_SLACK) + ceil(sqrt d) / 2."""
    bound = Fraction(GRID) * (1 + _U) ** 2 * (1 + 2 * Fraction(NORM_SLACK)) + Fraction(
        _ceil_sqrt(d), 2
    )
    return math.floor(bound * bound)


def linear_sensitivity_sq(d: int, h: int = 0) -> int:
    """Delta^2 of the integer statistic (docs/linear_regression.md §N2), exactly.

    d : features (without the intercept). h : the intercept column on the grid (0: none).
    Returns floor(2 P^2 + 2 H P + (H + M)^2 / 2 + max(2 P M + 4 H M, P M + 2 H M + M^2)) with
    P = :func:`grid_norm_sq_bound` (d), M = 2^32, H = h^2.
    """
    P, M, H = grid_norm_sq_bound(d), GRID * GRID, h * h
    bound = (
        2 * P * P
        + 2 * H * P
        + Fraction((H + M) ** 2, 2)
        + max(2 * P * M + 4 * H * M, P * M + 2 * H * M + M * M)
    )
    return math.floor(bound)


def statistic_dim(d: int, fit_intercept: bool) -> int:
    p = d + int(fit_intercept)
    return (p + 1) * (p + 2) // 2 - int(fit_intercept)


def _dim_to_p(dim: int, fit_intercept: bool) -> int:
    full = dim + int(fit_intercept)
    k = (math.isqrt(8 * full + 1) - 1) // 2  # k (k + 1) / 2 = full, k = p + 1
    if k * (k + 1) // 2 != full:
        raise ValueError(f"a statistic of length {dim} is no linear-regression release")
    return k - 1


class LinearStatistics:
    """The chunk kernel (privbayes.data.Reduction) of the release, on rows [X | y].

    Rules: 0: |y| > y_bound; 1: ||x|| above the float threshold (whose true norm is then
    <= c (1 + 2e-12), docs/numerics.md §8). Statistics: Z^T Z as an (k, k) array of Python
    ints (Z = [u, h, v]), exact: float64 products and sums of integers below 2^53.
    """

    _data_ndims = (2,)
    _data_rules = 2

    def __init__(self, spec: LinearNoiseAwareSpec, d: int) -> None:
        self.spec, self.d = spec, int(d)
        self.scale_x = GRID / spec.c  # fl(q / c): a per-record function (§N2)
        self.scale_y = GRID / spec.y_bound
        c_cert = Fraction(spec.c) * (1 + 2 * Fraction(NORM_SLACK))
        self.threshold = round_down(c_cert / (1 + Fraction(_norm_error(self.d))))
        self.P = grid_norm_sq_bound(self.d)

    def _data_shape(self, shape: tuple, name: str) -> None:
        if len(shape) != 2 or shape[1] != self.d + 1:
            raise ValueError(f"{name}: expected rows [X | y] of width {self.d + 1}")

    def masks(self, x: np.ndarray, y: np.ndarray):
        bad_y = ~(np.abs(y) <= self.spec.y_bound)
        # a float norm (squares summed in some order, then sqrt): docs/numerics.md §8
        over = np.sqrt(np.einsum("ij,ij->i", x, x)) > self.threshold
        return bad_y, over

    def gram(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Z^T Z (object array of Python ints) for valid rows x (rows, d), y (rows,)."""
        k = self.d + int(self.spec.fit_intercept) + 1
        total = np.zeros((k, k), dtype=object)
        for start in range(0, x.shape[0], MAX_ROWS):
            xb, yb = x[start : start + MAX_ROWS], y[start : start + MAX_ROWS]
            z = np.empty((xb.shape[0], k))
            np.multiply(xb, self.scale_x, out=z[:, : self.d])
            if self.spec.fit_intercept:
                z[:, self.d] = self.spec.h
            np.multiply(yb, self.scale_y, out=z[:, -1])
            np.rint(z, out=z)
            # by construction (§N2): ||u||^2 <= P for a valid row (exact: integers < 2^53)
            sq = np.einsum("ij,ij->i", z[:, : self.d], z[:, : self.d])
            if sq.size and not float(sq.max()) <= self.P:
                raise RuntimeError(
                    "privbayes: a grid row exceeds its proven norm bound; please report this"
                )
            # Z^T Z, upper triangle (dsyrk: robust to a loaded machine, unlike matmul's
            # threads); exact: every partial sum is an integer below 2^53
            g = blas.dsyrk(1.0, z.T, trans=0)
            total = total + np.triu(g).astype(np.int64).astype(object)
        return total

    def _data_chunk(self, arr: np.ndarray):
        x, y = arr[:, : self.d], arr[:, self.d]
        bad_y, over = self.masks(x, y)
        ok = ~(bad_y | over)
        if not ok.all():
            return None, [bad_y, over]
        return self.gram(x, y), [bad_y, over]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        i = where[where.rindex("[") + 1 : -1].split(",")[0]
        if rule == 0:
            return (
                f"y must lie in [-y_bound, y_bound] = [-{self.spec.y_bound:g}, "
                f"{self.spec.y_bound:g}]; y[{i}] = {float(value[-1])!r} ({count} row(s) "
                "outside; choose a public y_bound before seeing the data, or clip y onto it with "
                "numpy.clip, a public choice)"
            )
        return (
            f"{count} row(s) of X have norm > c = {self.spec.c:g} (first: X[{i}]); scale by "
            "a public bound or clip rows with privbayes.preprocessing"
        )

    def _data_finish(self, stats, n: int):
        return stats, n

    def vector(self, gram) -> np.ndarray:
        """The released layout: the upper triangle of Z^T Z row by row, without (h, h)."""
        k = gram.shape[0]
        iu = np.triu_indices(k)
        vals = gram[iu]
        if self.spec.fit_intercept:
            keep = ~((iu[0] == self.d) & (iu[1] == self.d))
            vals = vals[keep]
        return np.array([int(v) for v in vals], dtype=np.int64)


def _named(exc: DataError, raw, d: int) -> DataError:
    """The [X | y] pass's DataError as the argument it is about (X or y)."""
    i = exc.index
    if exc.rule == "finite":
        row = raw[i]
        row = row.compute() if hasattr(row, "compute") else row
        row = np.ma.filled(np.ma.asarray(row, dtype=float), np.nan)
        j = int(np.argmax(~np.isfinite(row)))
        column = "X" if j < d else "y"
        at = f"X[{i}, {j}]" if j < d else f"y[{i}]"
        value = float(row[j])
        message = (
            f"{column} must be finite; {at} = {value!r} ({exc.count} row(s) of (X, y) "
            "with NaN, inf or a missing value)"
        )
        return DataError(
            message, column=column, rule="finite", count=exc.count, index=i, value=value
        )
    if exc.rule == 0:
        return DataError(
            str(exc), column="y", rule=0, count=exc.count, index=i, value=float(exc.value[-1])
        )
    value = float(np.linalg.norm(np.asarray(exc.value[:d], dtype=float)))
    return DataError(str(exc), column="X", rule=1, count=exc.count, index=i, value=value)


def split_xy(data):
    """(X, y) from ``data``: a pair (X of shape (n, d), y of shape (n,)); public shape
    checks only (TypeError/ValueError), nothing read beyond the shapes."""
    if not isinstance(data, tuple | list) or len(data) != 2:
        raise TypeError(
            "linear regression data must be a pair (X, y): X of shape (n, d), y of shape (n,)"
        )
    x, y = data
    if is_dask(x) or is_dask(y):
        if not (is_dask(x) and is_dask(y)):
            raise TypeError("X and y must both be Dask collections (or both in memory)")
        return x, y, True
    from ..data import as_array

    xa = as_array(x, "X")
    ya = as_array(y, "y")
    if ya.ndim == 2 and ya.shape[1] == 1:
        ya = ya[:, 0]
    if xa.ndim != 2:
        raise ValueError(f"X must be 2-D, shape (n, d); got {xa.ndim}-D")
    if ya.ndim != 1 or ya.shape[0] != xa.shape[0]:
        raise ValueError(f"y must have shape ({xa.shape[0]},) to match X; got {ya.shape}")
    return xa, ya, False


def linear_shape(data) -> tuple[int, int]:
    """(n, d) of the pair (public)."""
    x, y, lazy = split_xy(data)
    if lazy:
        shape = x.shape
        n = shape[0]
        if isinstance(n, float) and math.isnan(n):
            n = None
        d = shape[1] if len(shape) == 2 else None
        if d is None:
            raise ValueError("X must be 2-D, shape (n, d)")
        return n, int(d)
    return x.shape[0], x.shape[1]


LINEAR_LABEL = (
    "upper triangle of Z^T Z without (h, h), Z = [rint(x 2^16 / c), h, rint(y 2^16 / "
    "y_bound)] (integers)"
)


def linear_release_spec(spec, d: int):
    """The release's Spec once d (public) is known: Delta^2 and the dimension."""
    import dataclasses

    na = spec.kernel
    return dataclasses.replace(
        spec,
        sensitivity_sq=linear_sensitivity_sq(d, na.h),
        dim=statistic_dim(d, na.fit_intercept),
    )


NOISE_TAIL = 40  # |N_Z(0, sigma^2)| > 40 sigma has probability ~e^-800 (data-independent)
INT64_MAX = (1 << 63) - 1


def check_noise_range(spec: LinearNoiseAwareSpec, dim: int, n: int, lam, sigma2) -> None:
    """Refuse, from public inputs and before any charge, a sigma so large that the noisy
    int64 vector could overflow. Every entry of the statistic is at most n P in magnitude
    (|u_a u_b|, |u_a v|, |h u_a|, |h v|, v^2 <= P: §N1), so n P + 40 sigma < 2^63 is
    required (|N_Z(0, sigma^2)| > 40 sigma has probability ~e^-800, whatever the data).
    Beyond it the discrete Gaussian sampler raised OverflowError after the charge, or the
    sum wrapped around. ``dim``: the statistic's length (d follows). Raises
    InfeasiblePrivacyError with ``reachable["min_eps"]``, the smallest eps at ``lam``
    whose sigma fits (rounded up)."""
    from ..certified import round_up
    from ..errors import InfeasiblePrivacyError

    fi = spec.fit_intercept
    d = _dim_to_p(dim, fi) - int(fi)
    room = INT64_MAX - int(n) * grid_norm_sq_bound(d)
    s2 = Fraction(sigma2)
    if room > 0 and NOISE_TAIL * NOISE_TAIL * s2 < Fraction(room) ** 2:
        return
    limit = Fraction(max(room, 1) - 1, NOISE_TAIL) ** 2  # sigma^2 below it fits
    min_eps = round_up(Fraction(lam) * linear_sensitivity_sq(d, spec.h) / (2 * limit))
    raise InfeasiblePrivacyError(
        f"the noise for this eps (sigma^2 = {float(s2):.3g}) would leave the int64 range of "
        f"the released statistic (n P + 40 sigma >= 2^63 at n = {n}, d = {d}): ask for eps "
        f">= {min_eps:.3g} at lam={float(lam)!r}",
        reachable={"min_eps": min_eps},
    )


def check_d(d: int) -> None:
    if d < 1:
        raise ValueError("X has d = 0 features; need at least one")
    if d > MAX_FEATURES:
        raise ValueError(f"X has d = {d} features; at most 2**20 are supported")


def linear_statistic(spec: LinearNoiseAwareSpec, data) -> tuple[np.ndarray, int, int]:
    """Validate the pair (X, y) and return (integer statistic (dim,), n, d): every check
    before anything is charged; DataError names X or y, the count and the first row."""
    x, y, lazy = split_xy(data)
    if lazy:
        import dask.array as da

        from ..glm.passes import dask_array  # the GLMs' Dask coercion

        xa, ya = dask_array(x, "X"), dask_array(y, "y")
        if ya.ndim == 2 and ya.shape[1] == 1:
            ya = ya[:, 0]
        if xa.ndim != 2 or ya.ndim != 1:
            raise ValueError("X must be 2-D (n, d) and y 1-D (n,)")
        d = int(xa.shape[1])
        check_d(d)
        raw = da.concatenate([xa, ya.rechunk((xa.chunks[0],))[:, None]], axis=1)
        raw = raw.rechunk({1: -1})
    else:
        d = x.shape[1]
        check_d(d)
        raw = None
    kernel = LinearStatistics(spec, d)
    if raw is None:
        # the fast path: the rules on the whole arrays; the [X | y] pass only to name errors
        finite = bool(np.isfinite(x).all() and np.isfinite(y).all())
        if finite and x.shape[0] == 0:
            raise ValueError("X has n = 0 rows: the prior N(0, (n beta)^-1 I) is improper at n = 0")
        if finite:
            bad_y, over = kernel.masks(x, y)
            if not (bad_y.any() or over.any()):
                n = x.shape[0]
                if n > MAX_N:
                    raise ValueError(f"at most 2**30 records are supported; got n = {n}")
                return kernel.vector(kernel.gram(x, y)), n, d
        raw = np.column_stack([x, y])
    try:
        gram, n = statistics(kernel, raw, name="(X, y)")
    except DataError as exc:
        raise _named(exc, raw, d) from None
    if n > MAX_N:
        raise ValueError(f"at most 2**30 records are supported; got n = {n}")
    if n == 0:
        raise ValueError("X has n = 0 rows: the prior N(0, (n beta)^-1 I) is improper at n = 0")
    return kernel.vector(gram), n, d


# -- the posterior ----------------------------------------------------------------------------


def unpack(statistic, d: int, fit_intercept: bool, h: int, n: int):
    """(A, b, C) in grid units (floats; A (p, p) symmetric with A_hh = n h^2 / q^2)."""
    p = d + int(fit_intercept)
    k = p + 1
    iu = np.triu_indices(k)
    full = np.asarray(statistic, dtype=float)
    if fit_intercept:
        pos = np.flatnonzero((iu[0] == d) & (iu[1] == d))[0]
        full = np.insert(full, pos, float(n) * h * h)
    g = np.zeros((k, k))
    g[iu] = full
    g = g + np.triu(g, 1).T
    g /= float(GRID) * GRID
    return g[:p, :p], g[:p, p], float(g[p, p])


def _psd(a: np.ndarray) -> np.ndarray:
    vals, vecs = np.linalg.eigh(a)
    return (vecs * np.maximum(vals, 0.0)) @ vecs.T


class LinearPosterior:
    """p(w | released statistic) for noise-aware linear regression (public inputs only).

    Parameters
    ----------
    spec : LinearNoiseAwareSpec. n : the public size (>= 1). statistic : int array, the
    released noisy statistic. sigma2 : the discrete Gaussian's sigma^2 (grid units squared).
    rng : Generator of the reference importance-sampling run. proposals : its size.

    Coefficients are in the data's units (w_j for x_j; the intercept last). ``diagnostics``
    (public): the importance sampler's effective sample size, proposals, attempts, ok.
    """

    var_name = "w"
    dim_name = "coefficient"
    truncation = 0.0

    @property
    def _dim(self) -> int:
        """The importance sampler's dimension (the coefficients; §N6 adds log sigma^2)."""
        return self.p

    def __init__(self, spec, n, statistic, sigma2, *, rng=None, proposals: int = PROPOSALS):
        self.spec, self.n, self.sigma2 = spec, int(n), sigma2
        self.statistic = np.asarray(statistic, dtype=np.int64)
        fi = spec.fit_intercept
        self.d = _dim_to_p(self.statistic.size, fi) - int(fi)
        p = self.d + int(fi)
        self.p = p
        h = spec.h
        q4 = float(GRID) ** 4
        self.tau2 = discrete_gaussian_variance(sigma2) / q4 + self.n / (6.0 * GRID * GRID)
        a, b, _ = unpack(self.statistic, self.d, fi, h, self.n)
        self.A, self.b = a, b
        self.A_psd = _psd(a)
        # the units: w_j = unit_j w~_j (x_j / c and y / y_bound on the grid; intercept h / q)
        unit = np.full(p, spec.y_bound / spec.c)
        if fi:
            unit[-1] = spec.y_bound * (h / GRID)
        self.unit = unit
        self.prior_prec = self.n * spec.beta * unit**2  # diagonal, grid coordinates
        self.se2 = (spec.noise_sd / spec.y_bound) ** 2
        mask = np.ones((p, p))
        if fi:
            mask[-1, -1] = 0.0  # A_hh = n h^2 is public: no noise
        self.mask = mask
        self._fit_gaussian()
        rng = np.random.default_rng() if rng is None else rng
        self.proposals = int(proposals)
        self._w, self._lw, self.diagnostics = self._fit(rng, self.proposals)

    # -- the likelihood b~ | w ~ N(A~ w, S(w)) -------------------------------------------------
    def _cov(self, w: np.ndarray) -> np.ndarray:
        """S(w) for a batch w (N, p): (N, p, p)."""
        w2 = w * w
        diag = w2 @ self.mask.T - w2 * np.diag(self.mask)  # sum_k M_jk w_k^2 - M_jj w_j^2
        outer = w[:, :, None] * w[:, None, :] * self.mask
        k = outer + diag[:, :, None] * np.eye(self.p)
        base = self.se2 * self.A_psd + self.tau2 * np.eye(self.p)
        return base + self.tau2 * k

    def log_density(self, w: np.ndarray) -> np.ndarray:
        """log p(w | statistic) up to a constant, for w (N, p) in grid coordinates."""
        w = np.atleast_2d(w)
        s = self._cov(w)
        chol = np.linalg.cholesky(s)
        r = self.b - w @ self.A.T
        z = np.linalg.solve(chol, r[:, :, None])[:, :, 0]
        logdet = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), axis=1)
        prior = -0.5 * np.sum(self.prior_prec * w * w, axis=1)
        return prior - 0.5 * logdet - 0.5 * np.sum(z * z, axis=1)

    def _fit_gaussian(self) -> None:
        """The Gaussian approximation: generalised least squares with S at the current
        mean, iterated (the proposal's centre and scale)."""
        m = np.zeros(self.p)
        for _ in range(50):
            s = self._cov(m[None])[0]
            si_a = np.linalg.solve(s, self.A)
            prec = np.diag(self.prior_prec) + self.A.T @ si_a
            new = np.linalg.solve(prec, si_a.T @ self.b)
            done = np.max(np.abs(new - m)) <= 1e-12 * (1.0 + np.max(np.abs(new)))
            m = new
            if done:
                break
        cov = np.linalg.inv(prec)
        self.loc, self.cov = m, 0.5 * (cov + cov.T)
        self._newton()

    def _newton(self, steps: int = 3, h: float = 0.1) -> None:
        """Newton steps on the exact log density from the GLS point, with its gradient and
        Hessian by central differences in the coordinates whitened by the GLS covariance
        (one batched evaluation per step); the proposal then uses the inverse Hessian."""
        p = self._dim
        chol = np.linalg.cholesky(self.cov)
        m = self.loc
        ii, jj = np.triu_indices(p, 1)
        for _ in range(steps):
            grad, hess = self._derivatives(m, chol, h, ii, jj)
            try:
                neg = np.linalg.cholesky(-hess)
            except np.linalg.LinAlgError:
                return  # not concave here: keep the GLS approximation
            step = np.linalg.solve(neg.T, np.linalg.solve(neg, grad))
            m = m + chol @ step
            if np.max(np.abs(step)) < 1e-6:
                break
        inv = np.linalg.inv(-hess)
        cov = chol @ inv @ chol.T
        self.loc, self.cov = m, 0.5 * (cov + cov.T)

    def _derivatives(self, m, chol, h, ii, jj):
        """Gradient and Hessian of the log density at m in the coordinates whitened by
        chol, by central differences (one batched evaluation)."""
        k = self._dim
        eye = np.eye(k) * h
        pts = [np.zeros((1, k)), eye, -eye]
        for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
            pts.append(si * eye[ii] + sj * eye[jj])
        e = np.concatenate(pts)
        f = self.log_density(m + e @ chol.T)
        f0, fp, fm = f[0], f[1 : 1 + k], f[1 + k : 1 + 2 * k]
        q = len(ii)
        fpp, fpm, fmp, fmm = (f[1 + 2 * k + j * q : 1 + 2 * k + (j + 1) * q] for j in range(4))
        with np.errstate(invalid="ignore"):
            grad = (fp - fm) / (2 * h)
            hess = np.diag((fp - 2 * f0 + fm) / (h * h))
            off = (fpp - fpm - fmp + fmm) / (4 * h * h)
        hess[ii, jj] = off
        hess[jj, ii] = off
        return grad, hess

    def _propose(self, rng, size: int, nu: float = 10.0, inflate: float = 1.1):
        chol = np.linalg.cholesky(self.cov) * inflate
        z = rng.standard_normal((size, self._dim))
        g = rng.chisquare(nu, size) / nu
        w = self.loc + (z @ chol.T) / np.sqrt(g)[:, None]
        dev = np.linalg.solve(chol, (w - self.loc).T).T
        logq = -0.5 * (nu + self._dim) * np.log1p(np.sum(dev * dev, axis=1) / nu)
        return w, logq

    def _run(self, rng, size: int):
        w, logq = self._propose(rng, size)
        lw = (
            np.concatenate([self.log_density(w[i : i + 4096]) for i in range(0, size, 4096)]) - logq
        )
        lw = lw - np.max(lw)
        wt = np.exp(lw)
        ess = float(wt.sum() ** 2 / np.sum(wt * wt))
        return w, lw, ess

    def _fit(self, rng, size: int):
        attempt = 0
        while True:
            w, lw, ess = self._run(rng, size)
            ok = ess >= ESS_MIN
            if ok or attempt == RETRIES:
                break
            attempt, size = attempt + 1, 2 * size
        diag = {
            "sampler": "importance sampling (multivariate t around the Gaussian approximation)",
            "ess": ess,
            "proposals": size,
            "attempts": attempt + 1,
            "ok": bool(ok),
            "public": True,
        }
        if not ok:
            warnings.warn(
                f"the noise-aware linear posterior's importance sampler has ESS {ess:.0f} < "
                f"{ESS_MIN} after {attempt + 1} runs (public diagnostics)",
                RuntimeWarning,
                stacklevel=3,
            )
        return w, lw, diag

    # -- the family interface -----------------------------------------------------------------
    def _weights(self):
        wt = np.exp(self._lw)
        return wt / wt.sum()

    def mean(self) -> np.ndarray:
        return (self._weights() @ self._w) * self.unit

    def interval(self, prob: float):
        """Per coefficient: weighted quantiles (1 -+ prob)/2 of the reference run."""
        wt = self._weights()
        lo, hi = np.empty(self.p), np.empty(self.p)
        tail = (1.0 - prob) / 2.0
        for j in range(self.p):
            order = np.argsort(self._w[:, j])
            cum = np.cumsum(wt[order])
            cum = (cum - 0.5 * wt[order]) / cum[-1]
            vals = self._w[order, j]
            lo[j], hi[j] = np.interp([tail, 1.0 - tail], cum, vals)
        a, b = lo * self.unit, hi * self.unit
        return np.minimum(a, b), np.maximum(a, b)

    def draw(self, size: int | None, rng: np.random.Generator):
        """(w, None): shape (p,) or (size, p); sampling-importance-resampling from a fresh
        run of max(8192, 4 size) proposals."""
        k = 1 if size is None else size
        w, lw, _ = self._fit(rng, max(self.proposals, 4 * k))
        wt = np.exp(lw)
        pick = rng.choice(w.shape[0], size=k, replace=True, p=wt / wt.sum())
        out = w[pick] * self.unit
        if size is None:
            return out[0], None
        return out, None

    def shape(self) -> tuple[int, ...]:
        return (self.p,)

    def approx_sd(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov)) * self.unit


def conjugate_posterior(spec, x: np.ndarray, y: np.ndarray):
    """The exact (non-private) conjugate posterior N(mean, cov) of w given (X, y): the
    truth the sigma -> 0 limit must reach (tests, and the widths the study compares)."""
    n = x.shape[0]
    if spec.fit_intercept:
        x = np.hstack([x, np.ones((n, 1))])
    prec = n * spec.beta * np.eye(x.shape[1]) + x.T @ x / spec.noise_sd**2
    cov = np.linalg.inv(prec)
    return cov @ (x.T @ y) / spec.noise_sd**2, cov


def normal_interval(mean, cov, prob):
    z = float(special.ndtri(0.5 + prob / 2.0))
    sd = np.sqrt(np.diag(cov))
    return mean - z * sd, mean + z * sd
