"""Gaussian differential privacy (mu-GDP, Dong, Roth & Su 2022): exact conversion to
(eps, delta), composition and the implied RDP curve, every value rounded to the safe side
(docs/gdp.md).

A mechanism is mu-GDP when distinguishing any two neighbouring inputs from its output is at
least as hard as distinguishing N(0, 1) from N(mu, 1). Then, for every eps >= 0, it is
(eps, delta_mu(eps))-DP with

    delta_mu(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)

(Dong, Roth & Su, Corollary 2.13), and this is exact: no smaller delta holds for every
mu-GDP mechanism (the Gaussian pair attains it). mu-GDP mechanisms compose (adaptively)
into sqrt(sum mu_i^2)-GDP (their Corollary 3.3), and a mu-GDP mechanism has RDP curve at
most lam mu^2 / 2 (the Gaussian pair's Rényi divergence; data processing).

Numerics (docs/gdp.md §3): delta_mu is evaluated in mpmath at a precision chosen for the
cancellation of its two terms, with a proven bound on every rounding error (mpmath's erfc
and exp trusted to 2^20 units of their last place, as in privbayes.certified), and rounded
up; eps for a delta is the mpmath root rounded up and then *checked* by the upper bound on
delta. mpmath is imported on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..certified import round_up

__all__ = [
    "GdpBound",
    "compose_gdp",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_rdp",
    "gaussian_gdp",
]

_TARGET_BITS = 64  # relative accuracy asked of the delta bound (2^-64)
_MAX_PREC = 1 << 16  # bits; beyond, the (still valid) looser bound is returned
_TRUST = 2.0**20  # mpmath's erfc / exp / log: within 2^20 units of the last place
_SMALLEST = 5e-324


def _mu(mu) -> float:
    if isinstance(mu, str | bool) or not isinstance(mu, int | float | np.integer | np.floating):
        raise TypeError(f"mu must be a number >= 0 (inf allowed); got {mu!r}")
    m = float(mu)
    if not m >= 0:  # NaN fails too
        raise ValueError(f"mu must be >= 0 (inf allowed); got {mu!r}")
    return m


def _eps(eps) -> float:
    if isinstance(eps, str | bool) or not isinstance(eps, int | float | np.integer | np.floating):
        raise TypeError(f"eps must be a number >= 0 (inf allowed); got {eps!r}")
    e = float(eps)
    if not e >= 0:
        raise ValueError(f"eps must be >= 0 (inf allowed); got {eps!r}")
    return e


def _delta(delta) -> float:
    if isinstance(delta, str | bool) or not isinstance(
        delta, int | float | np.integer | np.floating
    ):
        raise TypeError(f"delta must be a number in [0, 1]; got {delta!r}")
    d = float(delta)
    if not 0.0 <= d <= 1.0:
        raise ValueError(f"delta must lie in [0, 1]; got {delta!r}")
    return d


def _mp():
    import mpmath

    return mpmath


def _delta_terms(mp, eps: float, mu: float, prec: int, drop_b: bool = False):
    """(A~, B~, err) at ``prec`` bits: A~ ~ Phi(-eps/mu + mu/2), B~ ~ e^eps Phi(-eps/mu -
    mu/2), and err a proven bound on |(A~ - B~) - delta_mu(eps)| (docs/gdp.md §3)."""
    with mp.workprec(prec):
        u = mp.mpf(2) ** (-prec)
        e, m = mp.mpf(eps), mp.mpf(mu)  # exact: floats are exact mpfs
        q = e / m  # relative error <= u
        half = m / 2  # exact
        x1, x2 = -q + half, -q - half
        # |computed x - exact x| <= 2u (|q| + |half| + |x|): the quotient, the sum
        # and the division by sqrt(2) inside Phi (folded into the argument error)
        s2 = mp.sqrt(2)
        a = mp.erfc(-x1 / s2) / 2
        # drop_b: B >= 0 is left out, so A alone bounds delta above (huge arguments,
        # where B / A <= (|x1| + 1) / |x2| is negligible and erfc would overflow)
        b = mp.mpf(0) if drop_b else mp.exp(e) * (mp.erfc(-x2 / s2) / 2)
        trust = _TRUST * u
        out = []
        for x, val, factors in ((x1, a, 1), (x2, b, 2)):
            dx = 8 * u * (abs(q) + half + abs(x))
            # Phi'(t)/Phi(t) <= max(-t, 0) + 1 (Mills ratio bound, docs/gdp.md §3), so a
            # perturbation dx of the argument changes Phi by a factor within exp(+-h dx)
            h = max(-x, 0) + dx + 1
            # computed = exact (1 + theta): the argument's factor, erfc (and exp) trusted
            # to 2^20 ulp, the halving exact, the product rounded (u), all multiplied
            theta = (1 + mp.expm1(h * dx)) * (1 + trust) ** factors * (1 + 4 * u) - 1
            theta *= 1 + 16 * u
            # |computed - exact| <= theta / (1 - theta) |computed|
            out.append(abs(val) * theta / (1 - theta) if theta < mp.mpf(1) / 2 else mp.inf)
        diff = a - b
        err = (out[0] + out[1]) * (1 + 16 * u) + 4 * u * (abs(a) + abs(b))
        return a, b, diff, err


def _delta_bound(eps: float, mu: float):
    """(upper, central) mpf values of delta_mu(eps) for 0 < mu < inf, 0 <= eps < inf."""
    mp = _mp()
    # where the arguments lie: enough bits that the margin below is far wider than the
    # rounding of -eps/mu + mu/2 (which cancels when eps/mu ~ mu/2)
    lg = max(0.0, math.log2(mu), math.log2(eps) - math.log2(mu) if eps > 0 else 0.0)
    prec = 96 + int(lg)
    with mp.workprec(prec + 32):
        q = mp.mpf(eps) / mp.mpf(mu)
        x1, x2 = -q + mp.mpf(mu) / 2, -q - mp.mpf(mu) / 2
        slack = 4 * mp.mpf(2) ** (-prec - 32) * (abs(q) + mp.mpf(mu)) + 1
    if x1 + slack < -45:  # delta <= Phi(x1) <= Phi(-45) < 1e-440
        return mp.mpf(_SMALLEST), mp.mpf(0)
    if x1 - slack > 1e60:  # delta <= 1, and it is 1 to within 1e-300
        return mp.mpf(1), mp.mpf(1)
    drop_b = bool(x2 < -1e60)
    while True:
        a, b, diff, err = _delta_terms(mp, eps, mu, prec, drop_b)
        with mp.workprec(prec + 8):
            ok = diff > 0 and err <= diff * mp.mpf(2) ** (-_TARGET_BITS)
            if ok or prec >= _MAX_PREC:
                up = diff + err * (1 + mp.mpf(2) ** (-prec + 4))
                return up, diff
            # how many more bits the cancellation needs: log2((A + B) / (A - B))
            gap = mp.log(abs(a) + abs(b), 2) - (mp.log(diff, 2) if diff > 0 else mp.log(err, 2) - 8)
        prec = min(_MAX_PREC, max(2 * prec, prec + int(gap) + _TARGET_BITS + 16))


def _mpf_to_float_up(mp, x) -> float:
    """The smallest float >= the mpf x (x >= 0); inf above the float range."""
    if x <= 0:
        return 0.0
    try:
        f = float(x)
    except OverflowError:  # pragma: no cover - mpmath returns inf instead
        return math.inf
    if math.isfinite(f) and mp.mpf(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def gdp_delta(eps, mu) -> float:
    """delta of (eps, delta)-DP for a mu-GDP mechanism: an upper bound on
    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), within ~2^-64 relative of it and
    never below it (docs/gdp.md §3).

    ``eps``: >= 0 (nats; inf allowed). ``mu``: >= 0 (inf allowed). Returns a float in
    [0, 1]. Limits: mu = 0 (the output ignores the input) gives 0; eps = inf gives 0 for
    finite mu (the two laws are mutually absolutely continuous) and 1 for mu = inf
    (perfectly distinguishable); mu = inf gives 1 at every finite eps. For 0 < mu < inf
    and finite eps the result is >= the smallest positive double.
    Raises TypeError / ValueError for a negative, NaN or non-numeric argument.
    Source: Dong, Roth & Su (2022), Corollary 2.13; rounding: docs/gdp.md §3.
    """
    e, m = _eps(eps), _mu(mu)
    if m == 0:
        return 0.0
    if math.isinf(m):
        return 1.0
    if math.isinf(e):
        return 0.0
    mp = _mp()
    up, _ = _delta_bound(e, m)
    return min(1.0, max(_mpf_to_float_up(mp, up), _SMALLEST))


def _delta_central(mp, eps, mu: float):
    """(delta_mu(eps), its derivative -e^eps Phi(-eps/mu - mu/2), A + B): central values
    at the current precision (used only to locate the root; the result is checked by
    :func:`gdp_delta`)."""
    m = mp.mpf(mu)
    q = eps / m
    s2 = mp.sqrt(2)
    a = mp.erfc((q - m / 2) / s2) / 2
    b = mp.exp(eps) * mp.erfc((q + m / 2) / s2) / 2
    return a - b, -b, a + b


def gdp_epsilon(delta, mu) -> float:
    """The smallest eps (a float, rounded up) with the mu-GDP mechanism (eps, delta)-DP:
    eps with gdp_delta(eps, mu) <= delta (checked), at most ~1e-15 relative above the exact
    root of delta_mu(eps) = delta (docs/gdp.md §3).

    ``delta``: in [0, 1]. ``mu``: >= 0 (inf allowed). Limits: delta = 1 or mu = 0 give 0;
    delta = 0 with mu > 0 gives inf (mu-GDP is not pure DP); mu = inf gives inf for
    delta < 1; 0 when delta >= delta_mu(0) = 2 Phi(mu/2) - 1; inf when the root exceeds the
    float range (huge mu).
    Raises TypeError / ValueError for a bad argument.
    Source: Dong, Roth & Su (2022), Corollary 2.13; root and rounding: docs/gdp.md §3.
    """
    d, m = _delta(delta), _mu(mu)
    if d == 1 or m == 0:
        return 0.0
    if math.isinf(m) or d == 0:
        return math.inf
    if gdp_delta(0.0, m) <= d:
        return 0.0
    mp = _mp()
    # delta_mu(eps) <= Phi(mu/2 - eps/mu) <= exp(-(eps/mu - mu/2)^2 / 2): a bracket [0, hi]
    log_inv = -math.log(d) if d >= 2.2250738585072014e-308 else 745.2
    hi_f = m * (m / 2 + math.sqrt(2 * log_inv)) * (1 + 1e-9) + 1e-300
    if not math.isfinite(hi_f):
        return math.inf
    try:
        root = _root(mp, d, m, hi_f)
    except (OverflowError, ValueError):  # pragma: no cover - mpmath's range (mu ~ 1e154)
        return math.inf
    f = _mpf_to_float_up(mp, root)
    if not math.isfinite(f):
        return math.inf
    # the check: the certified delta bound at f; step up until it holds
    step = 0
    while gdp_delta(f, m) > d:
        step += 1
        f = math.nextafter(f * (1 + 2.0 ** (-53 + min(step, 40))), math.inf)
        if not math.isfinite(f):  # pragma: no cover
            return math.inf
    return f


def _root(mp, d: float, m: float, hi_f: float):
    """The root of delta_mu(eps) = d in [0, hi_f] (central values; a candidate only)."""
    with mp.workprec(128):
        target = mp.mpf(d)
        lo, hi = mp.mpf(0), mp.mpf(hi_f)
        # the precision follows the cancellation (A + B) / delta_mu seen so far, plus the
        # arguments' size; the root is then located to far below an ulp
        bits = 128 + int(2 * math.log2(2 + hi_f / m + m))
        x = hi / 2
        for _ in range(400):
            # Newton on log delta, safeguarded by bisection
            with mp.workprec(bits):
                val, der, total = _delta_central(mp, x, m)
            if val <= total * mp.mpf(2) ** (64 - bits) and bits < _MAX_PREC:
                bits = min(_MAX_PREC, 2 * bits)  # cancelled: the sign is not certain
                continue
            if val > target:
                lo = x
            else:
                hi = x
            nxt = None
            if val > 0 and der < 0:
                nxt = x + (mp.log(val) - mp.log(target)) * val / (-der)
            if nxt is None or not lo < nxt < hi:
                nxt = (lo + hi) / 2
            done = abs(nxt - x) <= abs(x) * mp.mpf(2) ** -90 or hi - lo <= hi * mp.mpf(2) ** -90
            x = nxt
            if done:
                break
        return max(x, lo)


def sqrt_up(q: Fraction) -> float:
    """The smallest float whose square is >= the exact rational q >= 0 (inf above range)."""
    q = Fraction(q)
    if q <= 0:
        return 0.0
    try:
        f = math.sqrt(float(q))
    except OverflowError:
        return math.inf
    if not math.isfinite(f):
        return math.inf
    while Fraction(f) ** 2 < q:
        f = math.nextafter(f, math.inf)
        if math.isinf(f):
            return f
    while f > 0:
        g = math.nextafter(f, 0.0)
        if Fraction(g) ** 2 >= q:
            f = g
        else:
            break
    return f


def compose_gdp(mus, counts=None) -> float:
    """mu of the (adaptive) composition of mu_i-GDP mechanisms: sqrt(sum count_i mu_i^2),
    summed exactly and rounded up. ``mus``: iterable of numbers >= 0 (inf allowed);
    ``counts``: optional integers >= 0 (default 1 each). Returns a float >= 0.
    Source: Dong, Roth & Su (2022), Corollary 3.3."""
    mus = [_mu(v) for v in mus]
    counts = [1] * len(mus) if counts is None else list(counts)
    if len(counts) != len(mus):
        raise ValueError("mus and counts must have the same length")
    total = Fraction(0)
    for v, c in zip(mus, counts, strict=True):
        if isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 0:
            raise ValueError(f"counts must be integers >= 0; got {c!r}")
        if c == 0:
            continue
        if math.isinf(v):
            return math.inf
        total += int(c) * Fraction(v) ** 2
    return sqrt_up(total)


def gdp_rdp(orders, mu) -> np.ndarray:
    """RDP curve implied by mu-GDP: lam mu^2 / 2 at each order (exact rationals rounded up;
    order 1 is the KL value mu^2/2; inf at order inf unless mu = 0). Shaped like
    ``orders``. Raises ValueError for orders < 1 or NaN, TypeError / ValueError for a bad
    mu. Source: the Gaussian pair's Rényi divergence (Mironov 2017, Table II) and the data
    processing inequality (docs/gdp.md §1)."""
    m = _mu(mu)
    lam = np.asarray(orders, dtype=float)
    if np.isnan(lam).any() or (lam < 1).any():
        raise ValueError(f"orders must be >= 1 (1 = KL) or inf; got {orders!r}")
    if m == 0:
        return np.zeros(lam.shape)
    if math.isinf(m):
        return np.full(lam.shape, np.inf)
    half = Fraction(m) ** 2 / 2
    flat = lam.ravel()
    uniq, inverse = np.unique(flat, return_inverse=True)
    vals = [round_up(Fraction(v) * half) if math.isfinite(v) else math.inf for v in uniq]
    return np.asarray(vals, dtype=float)[inverse].reshape(lam.shape)


def gaussian_gdp(sigma, sensitivity=1.0) -> float:
    """mu of the Gaussian mechanism N(f(D), sigma^2 I) with L2 sensitivity Delta:
    mu = Delta / sigma, rounded up (inf for sigma = 0 < Delta; 0 for Delta = 0).
    Raises TypeError / ValueError for a negative, NaN or infinite argument.
    Source: Dong, Roth & Su (2022), Theorem 2.7."""
    s = _finite(sigma, "sigma")
    t = _finite(sensitivity, "sensitivity")
    if t == 0:
        return 0.0
    if s == 0:
        return math.inf
    return round_up(Fraction(t) / Fraction(s))


def _finite(value, name: str) -> float:
    if isinstance(value, str | bool) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise TypeError(f"{name} must be a number; got {value!r}")
    v = float(value)
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be finite and >= 0; got {value!r}")
    return v


@dataclass(frozen=True)
class GdpBound:
    """A GDP-based certificate: the mechanism is within total variation ``tv`` (as
    failures that release nothing, docs/accounting.md §8) of a mechanism whose output
    density is, pointwise and for every input, within a factor e^(+-log_ratio) of a
    mu-GDP mechanism's (docs/gdp.md §4). ``log_ratio = tv = 0``: plain mu-GDP.

    Then it is (eps, delta)-DP for every eps >= 2 log_ratio + log(1/(1 - tv)) with
    delta = e^log_ratio delta_mu(eps - log(1/(1 - tv)) - 2 log_ratio) + tv (docs/gdp.md
    §4, Lemmas 1 and 2). mu, log_ratio >= 0 (nats), tv in [0, 1).
    """

    mu: float
    log_ratio: float = 0.0
    tv: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _mu(self.mu))
        a = _finite(self.log_ratio, "log_ratio")
        object.__setattr__(self, "log_ratio", a)
        if (
            isinstance(self.tv, bool)
            or not isinstance(self.tv, int | float)
            or not (0 <= self.tv <= 1)
        ):
            raise ValueError(f"tv must be a number in [0, 1]; got {self.tv!r}")
        object.__setattr__(self, "tv", float(self.tv))

    @property
    def exact(self) -> bool:
        """True when the bound is plain mu-GDP (no density or failure allowance)."""
        return self.log_ratio == 0 and self.tv == 0

    def _inner_epsilon(self, delta: float) -> float:
        """eps of the never-failing mechanism at ``delta`` (Lemma 1), rounded up."""
        a = self.log_ratio
        if a == 0:
            return gdp_epsilon(delta, self.mu)
        if delta <= 0:
            return math.inf if self.mu > 0 else round_up(2 * Fraction(a))
        # e^a delta_mu(eps') <= delta  <=  delta_mu(eps') <= delta e^-a (rounded down)
        scaled = math.exp(-a) * (1 - 2.0**-48)  # exp within 4 ulp: below e^-a
        inner = min(delta * scaled * (1 - 2.0**-52), delta)
        e = gdp_epsilon(inner, self.mu)
        if math.isinf(e):
            return e
        return round_up(Fraction(e) + 2 * Fraction(a))

    def epsilon(self, delta) -> float:
        """eps of (eps, delta)-DP certified by this bound at ``delta`` in [0, 1], rounded
        up (inf when delta <= tv and tv > 0, or when no finite eps holds). Raises
        ValueError for a delta outside [0, 1]."""
        from .accountant import eps_with_tv

        d = _delta(delta)
        if d == 1:
            return 0.0
        if self.tv == 0:
            return self._inner_epsilon(d)
        return eps_with_tv(lambda x: (self._inner_epsilon(x),), d, Fraction(self.tv))[0]

    def delta(self, eps) -> float:
        """delta of (eps, delta)-DP certified by this bound at ``eps`` >= 0, rounded up
        (1 when eps is below the allowances' shift)."""
        from .accountant import TV_EPS_MAX, failure_eps

        e = _eps(eps)
        if self.tv > 0:
            e = min(e, TV_EPS_MAX)
            shift = failure_eps(Fraction(self.tv))
            e = math.nextafter(e - shift, -math.inf) if shift > 0 else e
            if not e >= 0:
                return 1.0
        a = self.log_ratio
        if a > 0:
            shift2 = round_up(2 * Fraction(a))
            e = math.nextafter(e - shift2, -math.inf) if math.isfinite(e) else e
            if not e >= 0:
                return 1.0
        base = gdp_delta(e, self.mu)
        if a > 0 and base > 0:
            base = math.nextafter(base * math.exp(a) * (1 + 2.0**-48), math.inf)
        if self.tv > 0:
            base = math.nextafter(base + self.tv, math.inf)
        return min(1.0, base)

    def compose(self, other: GdpBound, count: int = 1) -> GdpBound:
        """The bound of this mechanism followed (adaptively) by ``count`` copies of
        ``other``: mu^2 adds (exact, rounded up), log_ratio and tv add (rounded up;
        docs/gdp.md §4, Lemma 3)."""
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        if count == 0:
            return self
        mu = compose_gdp([self.mu, other.mu], [1, int(count)])
        a = round_up(Fraction(self.log_ratio) + int(count) * Fraction(other.log_ratio))
        tv = min(1.0, round_up(Fraction(self.tv) + int(count) * Fraction(other.tv)))
        return GdpBound(mu, a, tv)
