"""The discrete Gaussian mechanism: exact integer noise for exact integer statistics.

N_Z(0, sigma^2) is the law on the integers with P[Z = z] proportional to
exp(-z^2 / (2 sigma^2)) (Canonne, Kamath & Steinke, "The discrete Gaussian for differential
privacy", NeurIPS 2020). Added to an integer statistic whose neighbours differ by an
integer vector of squared L2 norm at most Delta^2, it is (lam, lam Delta^2 / (2 sigma^2))-RDP
at every order lam >= 1 (docs/noise_aware.md §2, with the exact divergence and when the
bound is attained).

The sampler is their Algorithms 1-3 in integer arithmetic: Bernoulli(exp(-gamma)) for a
rational gamma from uniform integers alone, the discrete Laplace by rejection, the discrete
Gaussian by rejection from it. Its only randomness is uniform integers below an integer
bound, drawn by rejection from random bits (62-bit words of ``rng.integers``, numpy's
unbiased integer generator), so no floating-point number touches the noise and the
attacks on the low-order bits of floating-point noise (Mironov 2012) have nothing to act
on (docs/privacy.md §6). sigma^2 is a float and therefore an exact dyadic rational.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..certified import round_down, round_up
from ..errors import InfeasiblePrivacyError
from ..frozen import Frozen

__all__ = [
    "DiscreteGaussianMechanism",
    "calibrate_sigma2",
    "discrete_gaussian_logpmf",
    "discrete_gaussian_pmf",
    "discrete_gaussian_quantile",
    "discrete_gaussian_tail",
    "discrete_gaussian_variance",
    "log_normalizer",
    "sample_discrete_gaussian",
]

_WORD = 62  # bits per word drawn from the generator (rng.integers(0, 2**62): exact uniform)
_REFILL = 64  # words per call to the generator


class _Bits:
    """Uniform random bits and integers from a numpy Generator, exactly.

    Words of 62 uniform bits come from ``rng.integers(0, 2**62)`` (numpy's integer
    generator is unbiased: every value below the bound is equally likely); ``below(m)``
    takes k = bit_length(m - 1) bits at a time and rejects values >= m (probability < 1/2
    per try), so it is exactly uniform on {0, ..., m - 1} for any Python integer m >= 1.
    """

    __slots__ = ("_rng", "_pool", "_word", "_nbits")

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._pool: list[int] = []
        self._word = 0
        self._nbits = 0

    def bits(self, k: int) -> int:
        while self._nbits < k:
            if not self._pool:
                self._pool = self._rng.integers(
                    0, 1 << _WORD, size=_REFILL, dtype=np.int64
                ).tolist()
            self._word |= self._pool.pop() << self._nbits
            self._nbits += _WORD
        out = self._word & ((1 << k) - 1)
        self._word >>= k
        self._nbits -= k
        return out

    def below(self, m: int) -> int:
        if m == 1:
            return 0
        k = (m - 1).bit_length()
        while True:
            v = self.bits(k)
            if v < m:
                return v


def _bernoulli_exp(num: int, den: int, bits: _Bits) -> bool:
    """Bernoulli(exp(-num/den)) for integers num >= 0, den >= 1 (CKS 2020, Algorithm 1).

    For gamma = num/den in [0, 1]: draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until
    the first A_k = 0 and return whether that k is odd (P = sum over odd k of
    gamma^(k-1)/(k-1)! (1 - gamma/k) = e^-gamma). For gamma > 1: exp(-gamma) =
    exp(-1)^floor * exp(-rest), one Bernoulli(exp(-1)) per unit, stopping at the first 0.
    """
    while num > den:
        if not _bernoulli_exp(1, 1, bits):
            return False
        num -= den
    k = 1
    while bits.below(den * k) < num:  # A_k ~ Bernoulli(num / (den k))
        k += 1
    return k % 2 == 1


def _discrete_laplace(t: int, bits: _Bits) -> int:
    """Y with P[Y = y] proportional to exp(-|y| / t), t >= 1 an integer (CKS 2020,
    Algorithm 2 with s = 1): X = U + t V with U uniform on {0..t-1} accepted w.p.
    exp(-U/t) and V geometric (P[V >= v] = e^-v) is geometric with ratio e^(-1/t); a sign,
    rejecting -0."""
    while True:
        u = bits.below(t)
        if not _bernoulli_exp(u, t, bits):
            continue
        v = 0
        while _bernoulli_exp(1, 1, bits):
            v += 1
        x = u + t * v
        negative = bits.bits(1) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


def _discrete_gaussian(p: int, q: int, bits: _Bits) -> int:
    """One draw of N_Z(0, sigma^2), sigma^2 = p/q > 0 (CKS 2020, Algorithm 3).

    t = floor(sigma) + 1; Y ~ discrete Laplace(t) is accepted with probability
    exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)): the accepted law is proportional to
    exp(-|y|/t - (|y| - sigma^2/t)^2 / (2 sigma^2)) = exp(-y^2/(2 sigma^2)) times a constant.
    The acceptance exponent is the rational (|Y| q t - p)^2 / (2 p q t^2).
    """
    t = math.isqrt(p // q) + 1  # floor(sqrt(p/q)) = isqrt(floor(p/q))
    den = 2 * p * q * t * t
    while True:
        y = _discrete_laplace(t, bits)
        a = abs(y) * q * t - p
        if _bernoulli_exp(a * a, den, bits):
            return y


def _check_sigma2(sigma2) -> Fraction:
    if isinstance(sigma2, bool | str) or not isinstance(sigma2, int | float | Fraction | np.number):
        raise TypeError(f"sigma2 must be a number > 0; got {sigma2!r}")
    if isinstance(sigma2, float | np.floating):  # exactly: a long double is not rounded
        if not (np.isfinite(sigma2) and sigma2 > 0):
            raise ValueError(f"sigma2 must be finite and > 0; got {sigma2!r}")
        return Fraction(*sigma2.as_integer_ratio())
    s2 = Fraction(sigma2)
    if not s2 > 0:
        raise ValueError(f"sigma2 must be > 0; got {sigma2!r}")
    return s2


def sample_discrete_gaussian(sigma2, rng: np.random.Generator, size: int | None = None):
    """Exact draws of N_Z(0, sigma^2): P[Z = z] = exp(-z^2 / (2 sigma^2)) / (normaliser).

    Parameters
    ----------
    sigma2 : float, int or Fraction > 0, the variance parameter sigma^2 (a float, NumPy's
        long double included, is the exact dyadic rational it stores: never rounded).
    rng : numpy Generator: its uniform integers are the only source of randomness.
    size : None for one draw (a Python int), or k >= 0 (a NumPy int64 array of shape (k,);
        OverflowError if a draw exceeds the int64 range, which needs sigma^2 > 1e36).

    Integer and rational arithmetic only (CKS 2020, Algorithms 1-3; docs/noise_aware.md §1).
    Raises TypeError/ValueError for a bad sigma2.
    """
    s2 = _check_sigma2(sigma2)
    bits = _Bits(rng)
    p, q = s2.numerator, s2.denominator
    if size is None:
        return _discrete_gaussian(p, q, bits)
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise ValueError(f"size must be None or an integer >= 0; got {size!r}")
    return np.array([_discrete_gaussian(p, q, bits) for _ in range(int(size))], dtype=np.int64)


# -- the law ----------------------------------------------------------------------------------


def log_normalizer(sigma2: float) -> float:
    """log sum_{k in Z} exp(-k^2 / (2 sigma^2)), to a few ulps.

    For sigma^2 >= 1/(2 pi) by Poisson summation, sqrt(2 pi sigma^2) sum_j
    exp(-2 pi^2 sigma^2 j^2) (terms below 5e-21 of the first after j = 1 for such sigma^2);
    below, the direct sum (whose terms then fall faster). Both sums have positive terms.
    """
    s2 = float(sigma2)
    if not (math.isfinite(s2) and s2 > 0):
        raise ValueError(f"sigma2 must be finite and > 0; got {sigma2!r}")
    if s2 >= 1.0 / (2.0 * math.pi):
        c = 2.0 * math.pi**2 * s2
        tail = sum(math.exp(-c * j * j) for j in range(1, 8))
        return 0.5 * math.log(2.0 * math.pi * s2) + math.log1p(2.0 * tail)
    tail = sum(math.exp(-(k * k) / (2.0 * s2)) for k in range(1, 12))
    return math.log1p(2.0 * tail)


def discrete_gaussian_logpmf(x, sigma2: float) -> np.ndarray:
    """log P[Z = x] for Z ~ N_Z(0, sigma^2), x integers (array_like; any shape)."""
    s2 = float(sigma2)
    x = np.asarray(x, dtype=float)
    return -(x * x) / (2.0 * s2) - log_normalizer(s2)


def discrete_gaussian_pmf(x, sigma2: float) -> np.ndarray:
    """P[Z = x] for Z ~ N_Z(0, sigma^2), x integers (array_like; any shape)."""
    return np.exp(discrete_gaussian_logpmf(x, sigma2))


def discrete_gaussian_variance(sigma2: float) -> float:
    """Var Z = E Z^2 for Z ~ N_Z(0, sigma^2) (< sigma^2; CKS 2020, Corollary 9).

    E Z^2 = 2 sigma^4 d/d(sigma^2) log Z(sigma^2): by the dual sum for sigma^2 >= 1/(2 pi),
    sigma^2 - 8 pi^2 sigma^4 S1 / (1 + 2 S0) with S0 = sum_j e^(-2 pi^2 sigma^2 j^2),
    S1 = sum_j j^2 e^(-2 pi^2 sigma^2 j^2); else directly.
    """
    s2 = float(sigma2)
    if s2 >= 1.0 / (2.0 * math.pi):
        c = 2.0 * math.pi**2 * s2
        s0 = sum(math.exp(-c * j * j) for j in range(1, 8))
        s1 = sum(j * j * math.exp(-c * j * j) for j in range(1, 8))
        return s2 - 8.0 * math.pi**2 * s2 * s2 * s1 / (1.0 + 2.0 * s0)
    ks = np.arange(1, 12, dtype=float)
    w = np.exp(-ks * ks / (2.0 * s2))
    return float(2.0 * np.sum(ks * ks * w) / (1.0 + 2.0 * np.sum(w)))


_EXACT_TAIL_SIGMA = 1e5  # below this sigma the tail is summed term by term


def discrete_gaussian_tail(z: int, sigma2: float) -> float:
    """P[|Z| > z] for Z ~ N_Z(0, sigma^2) and an integer z >= 0.

    For sigma <= 1e5 the sum of the pmf over z < |k| <= z + 40 sigma + 40 (the rest is
    below e^-800 of it), in float (relative error ~1e-13); beyond, the upper bound
    2 sqrt(pi sigma^2 / 2) erfc(z / sqrt(2 sigma^2)) / (1 + sqrt(2 pi sigma^2) erfc(1 /
    sqrt(2 sigma^2))) from comparing the sums with integrals of the decreasing density
    (above the exact value by a relative O(1/sigma)).
    """
    from scipy import special

    s2 = float(sigma2)
    sigma = math.sqrt(s2)
    z = int(z)
    if z < 0:
        return 1.0
    if sigma <= _EXACT_TAIL_SIGMA:
        k = np.arange(z + 1, z + 41 + int(40 * sigma) + 1, dtype=float)
        return float(2.0 * np.sum(discrete_gaussian_pmf(k, s2)))
    num = 2.0 * math.sqrt(math.pi * s2 / 2.0) * special.erfc(z / math.sqrt(2.0 * s2))
    den = 1.0 + math.sqrt(2.0 * math.pi * s2) * special.erfc(1.0 / math.sqrt(2.0 * s2))
    return min(1.0, num / den)


def discrete_gaussian_quantile(prob: float, sigma2: float) -> int:
    """The smallest integer z >= 0 with P[|Z| <= z] >= prob (evaluated with a relative
    margin of 1e-9 on the tail, so rounding never makes the coverage fall below prob)."""
    from scipy import special

    if not 0 < prob < 1:
        raise ValueError(f"prob must lie strictly between 0 and 1; got {prob!r}")
    s2 = float(sigma2)
    alpha = (1.0 - prob) * (1.0 - 1e-9)
    # start from the continuous Gaussian's quantile (the discrete tail is within a few
    # lattice steps of it), then walk to the smallest z that meets the target
    guess = math.sqrt(2.0 * s2) * float(special.erfcinv(alpha))
    z = max(0, int(math.floor(guess)) - 2)
    while z > 0 and discrete_gaussian_tail(z - 1, s2) <= alpha:
        z -= 1
    while discrete_gaussian_tail(z, s2) > alpha:
        z += 1
    return z


# -- the certificate and the calibration --------------------------------------------------------


def calibrate_sigma2(lam: float, eps: float, sensitivity_sq) -> float:
    """The smallest float sigma^2 with lam Delta^2 / (2 sigma^2) <= eps exactly.

    Parameters
    ----------
    lam : float > 1 (finite), the Rényi order. eps : float > 0, the target at ``lam``
        (nats). sensitivity_sq : int or float > 0, Delta^2, the largest squared L2 norm of
        the (integer) change of the statistic between neighbouring data sets.

    Returns sigma^2 (a float, exact as a rational). Public inputs only.
    Raises InfeasiblePrivacyError when lam is infinite (no discrete Gaussian is pure DP) or
    when sigma^2 would overflow the float range (eps below ~lam Delta^2 / 1e308).
    """
    if math.isinf(lam):
        raise InfeasiblePrivacyError(
            "the discrete Gaussian has no finite eps at lam=inf (its privacy loss is "
            "unbounded); choose a finite lam",
            reachable={"lam": "finite"},
        )
    exact = Fraction(lam) * Fraction(sensitivity_sq) / (2 * Fraction(eps))
    sigma2 = round_up(exact)  # >= the exact root, so the certificate below is <= eps
    if not math.isfinite(sigma2):
        # exact: float(lam) * float(Delta^2) overflows for a huge lam while the bound is finite
        exact_floor = Fraction(lam) * Fraction(sensitivity_sq) / (2 * Fraction(1.7e308))
        if exact_floor > Fraction(1.7e308):  # no float eps reaches it at this lam
            raise InfeasiblePrivacyError(
                f"lam={lam:g} is too large for the discrete Gaussian: sigma^2 = lam Delta^2 / "
                "(2 eps) exceeds the float range for every float eps; choose a smaller lam",
                reachable={"lam": "smaller"},
            )
        floor = round_up(exact_floor)
        raise InfeasiblePrivacyError(
            f"eps={eps:g} needs sigma^2 = lam Delta^2 / (2 eps) above the float range; ask "
            f"for eps >= {floor:.3g}",
            reachable={"min_eps": floor},
        )
    if sigma2 == 0.0:  # eps so large that sigma^2 underflows: the smallest positive float
        sigma2 = 5e-324
    return sigma2


class DiscreteGaussianMechanism(Frozen):
    """The mechanism ``statistic + N_Z(0, sigma2 I)`` on an integer statistic, as a model
    for the ledger and the accountants (its ``rdp`` is what a release is charged).

    Parameters
    ----------
    sigma2 : float > 0, the noise's variance parameter (public); a Fraction or long double
        is stored as the largest float <= it (draw the noise with ``self.sigma2``).
    sensitivity_sq : int >= 0, Delta^2: the largest squared L2 norm of the change of the
        integer statistic between neighbouring data sets (public).
    dim : int >= 1, the statistic's number of coordinates (one noise draw each).
    statistic : str, what the statistic is (e.g. "count of ones"; shown by ledgers).
    model : the model whose statistic is released (public; shown by ledgers).

    ``rdp(n, orders)`` is :func:`privbayes.accounting.curves.discrete_gaussian_rdp`
    (0 when n = 0: every data set of size 0 is the same). Source: docs/noise_aware.md §2.
    """

    guarantee = "exact"

    def __init__(self, sigma2: float, sensitivity_sq, dim: int, statistic: str, model) -> None:
        # the largest float <= sigma2 (sigma2 itself for a float): a Fraction rounded to
        # nearest may land above it, and the curve would then certify less noise than there is
        self.sigma2 = round_down(_check_sigma2(sigma2))
        self.sensitivity_sq = sensitivity_sq
        self.dim = int(dim)
        self.statistic = str(statistic)
        self.model = model
        self._freeze()

    def __repr__(self) -> str:
        return (
            f"DiscreteGaussianMechanism(sigma2={self.sigma2!r}, "
            f"sensitivity_sq={self.sensitivity_sq!r}, dim={self.dim}, model={self.model!r})"
        )

    @property
    def sensitivity(self) -> float:
        """Delta, the L2 sensitivity: the smallest float >= sqrt(``sensitivity_sq``)."""
        d2 = Fraction(self.sensitivity_sq)
        s = math.sqrt(float(d2))
        while Fraction(s) ** 2 < d2:
            s = math.nextafter(s, math.inf)
        return s

    def noise(self) -> dict:
        """The public description of the noise: enough to recompute the certificate."""
        return {
            "mechanism": "discrete_gaussian",
            "sigma2": self.sigma2,
            "sensitivity": self.sensitivity,
            "sensitivity_sq": self.sensitivity_sq,
            "dim": self.dim,
            "statistic": self.statistic,
        }

    def rdp(self, n, orders, r: float = 1.0, m: float = 1.0, method: str | None = None):
        """Certified RDP curve at ``orders`` (>= 1 or inf): lam Delta^2 / (2 sigma^2),
        exact and rounded up; 0 for n = 0. ``r``, ``m``, ``method`` are ignored."""
        from ..accounting.curves import discrete_gaussian_rdp

        curve = discrete_gaussian_rdp(orders, self.sigma2, self.sensitivity_sq)
        if int(n) == 0:
            return np.zeros(np.shape(curve))
        return curve

    def _describe_charge(self, cal, size) -> str:
        return (
            f"{type(self.model).__name__}/noise-aware discrete_gaussian "
            f"sigma2={self.sigma2:.6g} Delta^2={self.sensitivity_sq} lam={cal.lam:g} [exact]"
        )
