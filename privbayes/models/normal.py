"""Normal mean with known noise: theta ~ N(mu, sigma^2), x_i ~ N(theta, noise_sigma^2),
x_i in [low, high] (public bounds).

The mechanisms sample N(mean, 1/tau) with tau = 1/(m sigma^2) + r n / noise_sigma^2 (the
precision does not depend on the data) and mean = (mu/(m sigma^2) + r S/noise_sigma^2)/tau,
S = sum(x). A neighbour moves S by at most high - low, so the mean by at most
delta = r (high - low) / (noise_sigma^2 tau), and (docs/normal.md)

    D_lam = lam delta^2 tau / 2 = lam r^2 (high - low)^2 / (2 noise_sigma^4 tau),

attained by any pair with one record at low in one data set and at high in the other.
lam = inf is unbounded (equal-variance Gaussians with different means). The sum is
computed centred and correctly rounded (math.fsum); the only data-dependent parameter the
sampler computes is fl(w S_c), and the certificate bounds its shift between neighbours,
rounding included (docs/normal.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .. import mechanisms
from ..certified import round_up
from ..data import exact_sum, fraction_to_float, statistics
from ..validation import _real, check_bool, check_n, check_unit_knob
from .base import OneKnobConjugate, U, add_up, check_orders, solve_increasing

_SCALE = (1e-100, 1e100)  # sigma, noise_sigma: squares neither overflow nor vanish
_LOCATION = 1e100  # |mu|, |low|, |high|


_UNDERFLOW = 2.0**-960  # below this the float certificate's relative error bound fails


def _exact_up(lam: float, delta: float, sd: float) -> float:
    """lam delta^2 / (2 sd^2) in exact rationals, rounded up (the float form underflows)."""
    return round_up(Fraction(lam) * Fraction(delta) ** 2 / (2 * Fraction(sd) ** 2))


def _scale(value, name: str) -> float:
    v = _real(value, name, "a finite real number > 0")
    if not (math.isfinite(v) and _SCALE[0] <= v <= _SCALE[1]):
        raise ValueError(f"{name} must be a real number in [1e-100, 1e100]; got {value!r}")
    return v


def _location(value, name: str) -> float:
    v = _real(value, name, "a finite real number")
    if not (math.isfinite(v) and abs(v) <= _LOCATION):
        raise ValueError(
            f"{name} must be a finite real number with |{name}| <= 1e100; got {value!r}"
        )
    return v


class NormalKnownVariance(OneKnobConjugate):
    """N(mu, sigma^2) prior on the mean theta of N(theta, noise_sigma^2) records in [low, high].

    Parameters
    ----------
    mu : float, the prior mean. sigma : float > 0, the prior standard deviation.
    noise_sigma : float > 0, the known standard deviation of each record.
    low, high : floats, low < high: the public range of every record. Choose them before
        seeing the data (they set the sensitivity high - low); never read them off the data.
    clip : False (default) refuses records outside [low, high]; True clips them explicitly
        (the guarantee then covers the clipped records).

    Data for :func:`privbayes.sample`: a 1-D array of finite numbers, shape (n,). The released
    value is theta (a float; ``log_value`` is None).

    Mechanisms: direct samples the posterior N(mean_n, 1/tau_n) (RDP at every finite lam:
    eps = lam (high - low)^2 / (2 noise_sigma^4 tau_n)); diffused raises the likelihood to
    r; concentrated widens the prior to N(mu, m sigma^2) (prior^(1/m)). No method is
    (inf, eps)-RDP. Source: docs/normal.md (our derivation).
    """

    _lam_inf_message = (
        "no finite eps exists at lam=inf for any r, m > 0: two Gaussians with one variance "
        "and different means have an unbounded density ratio (Gaussians have no pure-DP "
        "bound); choose a finite lam"
    )

    def __init__(self, mu, sigma, noise_sigma, low, high, *, clip: bool = False) -> None:
        self.mu = _location(mu, "mu")
        self.sigma = _scale(sigma, "sigma")
        self.noise_sigma = _scale(noise_sigma, "noise_sigma")
        self.low = _location(low, "low")
        self.high = _location(high, "high")
        if not self.low < self.high:
            raise ValueError(f"low must be < high; got low={low!r}, high={high!r}")
        self.clip = check_bool(clip, "clip")
        # Records enter centred, y = fl(x - c) in [fl(low - c), fl(high - c)] (rounding is
        # monotone), so sums and their rounding scale with the range, not with |x|.
        self._centre = 0.5 * self.low + 0.5 * self.high
        self._ylo = self.low - self._centre
        self._yhi = self.high - self._centre
        self._freeze()

    def __repr__(self) -> str:
        extra = ", clip=True" if self.clip else ""
        return (
            f"NormalKnownVariance(mu={self.mu!r}, sigma={self.sigma!r}, "
            f"noise_sigma={self.noise_sigma!r}, low={self.low!r}, high={self.high!r}{extra})"
        )

    # -- data -----------------------------------------------------------------------
    def _statistics(self, data) -> tuple[float, int]:
        """(correctly rounded sum of the centred records fl(x_i - c), n): privbayes.data
        sums them exactly (integers times 2^-1127) and rounds once, as math.fsum would."""
        return statistics(self, data)

    _data_ndims = (1,)
    _data_rules = 1

    def _data_shape(self, shape: tuple, name: str) -> None:
        if len(shape) != 1:
            raise ValueError(
                f"{name} must be a 1-D array of numbers, shape (n,); got shape {shape}"
            )

    def _data_chunk(self, arr: np.ndarray):
        if self.clip:
            arr = np.clip(arr, self.low, self.high)
            bad = np.zeros(arr.shape, bool)
        else:
            bad = (arr < self.low) | (arr > self.high)
        y = np.where(bad, 0.0, arr - self._centre)
        return exact_sum(y), [bad]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        name = where.rsplit("[", 1)[0]
        return (
            f"{name} must lie in [low, high] = [{self.low:g}, {self.high:g}]; {where} = "
            f"{value!r} ({count} outside). Choose the range as a public bound, or build the "
            "model with clip=True to clip explicitly"
        )

    def _data_finish(self, total: int, n: int) -> tuple[float, int]:
        return fraction_to_float(total), n

    # -- the parameters the sampler uses ------------------------------------------------
    def _constants(self, n: int, r: float, m: float):
        """(w, offset, sd): the release is fl(offset + (fl(w S_c) + sd Z)), Z ~ N(0, 1).

        w = (r / noise^2) / tau weighs the centred sum, offset = c + (mu - c) p0 / tau is
        the data-independent part of the mean, sd = tau^(-1/2). Only fl(w S_c) depends on
        the data: the law certified is N(fl(w S_c), sd^2), and adding the public offset
        afterwards is post-processing. None when a constant overflows (no certificate).
        """
        s2 = self.noise_sigma**2
        prior_var = m * self.sigma**2
        if not prior_var > 0:  # m sigma^2 underflowed: the prior's precision overflows
            return None
        p0 = 1.0 / prior_var  # precision of prior^(1/m)
        tau = p0 + r * n / s2
        w = (r / s2) / tau
        offset = self._centre + (self.mu - self._centre) * (p0 / tau)
        sd = 1.0 / math.sqrt(tau)
        if not all(math.isfinite(v) for v in (w, offset, sd)) or sd == 0:
            return None
        return w, offset, sd

    @property
    def centre(self) -> float:
        """c = fl(low/2 + high/2): the model's statistic is the correctly rounded sum of the
        centred records fl(x_i - c) (:func:`privbayes.data.statistics`; docs/normal.md,
        "Rounding"), so a plain sum S corresponds to the centred sum S - n c."""
        return self._centre

    def posterior_params(self, n, s_c, r: float = 1.0, m: float = 1.0):
        """(loc, offset, sd): the release is fl(offset + fl(loc + sd Z)), Z ~ N(0, 1).

        Parameters
        ----------
        n : int >= 0, the number of records (public). s_c : the centred sum S_c
            (:func:`privbayes.data.statistics`, the sum of fl(x_i - :attr:`centre`)), a
            scalar or an array of any shape; finite. r, m : knobs in (0, 1] (e.g.
            ``cal.r``, ``cal.m`` of :func:`privbayes.calibrate`).

        Returns loc = fl(w S_c) (a float, or an array shaped like ``s_c``), the only
        data-dependent parameter, and the public floats offset = c + (mu - c) p0 / tau and
        sd = tau^(-1/2), tau = 1/(m sigma^2) + r n / noise_sigma^2: the released law is
        N(offset + loc, sd^2) up to the rounding of the last addition. These are the
        release's own floats (docs/normal.md, "Rounding"), so
        ``offset + (loc + sd * rng.standard_normal(...))`` with the same generator gives
        the released value. A noisy S_c (for post-processing) gets the same arithmetic.

        Raises ValueError for a non-finite S_c, knobs outside (0, 1], or knobs at which a
        constant overflows (no release exists there); TypeError for non-numeric input.
        """
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        raw = np.asarray(s_c)
        if raw.dtype.kind not in "biuf":
            raise TypeError(f"s_c must hold numbers; got dtype {raw.dtype}")
        sums = raw.astype(float)
        if not np.isfinite(sums).all():
            raise ValueError("s_c must be finite")
        consts = self._constants(n, r, m)
        if consts is None:
            raise ValueError(f"the prior's precision or the weights overflow at m={m!r}, r={r!r}")
        w, offset, sd = consts
        loc = w * sums  # the arithmetic of _draw, elementwise
        return (float(loc) if loc.ndim == 0 else loc), offset, sd

    # -- certificate ------------------------------------------------------------------
    def _spread(self, n: int) -> float:
        """A >= the largest change of the computed centred sum S_c between neighbours.

        |sum y - sum y'| <= yhi - ylo exactly, and fsum adds at most u n Y to each sum;
        the product fl(w S_c) adds u w n Y (1 + u) to each: delta <= w (dy + 4.0001 u n Y).
        The factors 1 + 8u and 6u leave room for the rounding of this bound itself.
        """
        y = max(-self._ylo, self._yhi)
        return add_up(self._yhi, -self._ylo) * (1.0 + 8 * U) + 6 * U * n * y

    def _sup_at(self, n: int, lam, r: float, m: float):
        """(certified D_lam = lam delta^2 / (2 sd^2), pair index 0); ``lam`` may be an array.

        delta = w A + 2^-1072 bounds |fl(w S_c) - fl(w S_c')| over neighbours (the
        absolute term covers subnormal products). The certificate itself: ``rdp`` reports
        exactly this value. The factor 1 + 8u covers the rounding of this expression.
        """
        consts = self._constants(n, r, m) if r > 0 and m > 0 else None
        if consts is None:
            return (np.full(np.shape(lam), np.inf) if np.ndim(lam) else math.inf), 0
        w, _, sd = consts
        delta = w * self._spread(n) + 2.0**-1072
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            q = delta / sd  # a product, not ** 2: Python's float power raises on overflow
            val = lam * 0.5 * (q * q) * (1.0 + 8 * U)
        if np.ndim(val):
            val = np.where(np.isnan(val), np.inf, val)
            tiny = np.flatnonzero(val < _UNDERFLOW)
            if tiny.size:
                val = np.array(val, float)
                flat = val.reshape(-1)
                lams = np.broadcast_to(lam, val.shape).reshape(-1)
                for i in tiny:
                    flat[i] = _exact_up(float(lams[i]), delta, sd)
            return val, 0
        if math.isnan(val):
            return math.inf, 0
        # where the float expression underflows its rounding error is no longer relative:
        # evaluate it exactly and round up (never a certificate of 0 for D > 0)
        return (_exact_up(float(lam), delta, sd) if val < _UNDERFLOW else float(val)), 0

    def _search(self, n: int, lam: float, eps: float, method: str) -> tuple[float, int]:
        """Closed-form root of eps = c r^2 / (p0 + r n / s^2) (diffused, p0 = 1/sigma^2) or
        c / (1/(m sigma^2) + n / s^2) (concentrated), c = lam A^2 / (2 s^4); then a
        bracketed solve on the certificate itself (docs/normal.md)."""
        guess = self._guess(n, lam, eps, method)

        def certify(value: float) -> float:
            return self._sup_at(n, lam, *mechanisms.knobs(method, value))[0]

        return solve_increasing(certify, guess, eps, mechanisms.KNOB[method])

    def _guess(self, n: int, lam: float, eps: float, method: str) -> float:
        """The closed-form root (a starting point only: the certificate decides), or 1.0
        where the floats of the formula overflow or vanish (extreme public inputs)."""
        s2 = self.noise_sigma**2
        try:
            c = lam * 0.5 * (self._spread(n) / s2) ** 2
            b = eps * n / s2
            if method == "diffused":
                e = eps / self.sigma**2
                guess = (b + math.hypot(b, 2.0 * math.sqrt(c * e))) / (2.0 * c)
            else:
                p0 = c / eps - n / s2
                guess = 1.0 / (self.sigma**2 * p0) if p0 > 0 else 1.0
        except (OverflowError, ZeroDivisionError):
            return 1.0
        return guess if math.isfinite(guess) and guess > 0 else 1.0

    def rdp(self, n, orders, r: float = 1.0, m: float = 1.0, method: str | None = None):
        """Certified RDP curve lam delta^2 tau / 2 for data sets of size n (array like ``orders``).

        ``orders`` >= 1 (1 = KL) or inf (always unbounded for n >= 1); r, m in (0, 1];
        ``method`` is accepted for symmetry and ignored.
        """
        n = check_n(n)
        r = check_unit_knob(r, "r")
        m = check_unit_knob(m, "m")
        orders = check_orders(orders)
        if n == 0:
            return np.zeros(orders.shape)
        flat = orders.ravel()
        out = np.full(flat.shape, np.inf)
        fin = np.isfinite(flat)
        if fin.any():
            out[fin] = self._sup_at(n, flat[fin], r, m)[0]
        return out.reshape(orders.shape)

    def _pair(self, n: int, index: int) -> dict:
        return {
            "record": self.high,
            "neighbour_record": self.low,
            "others": self.low,
            "sum_shift": self.high - self.low,
        }

    def _worst_pair(self, n: int, cal, *, d: int = 1):
        """(data, neighbour): n records at low, record 0 at high in data (shape (n,))."""
        data = np.full(n, self.low)
        neighbour = data.copy()
        data[0] = self.high
        return data, neighbour

    # -- release ----------------------------------------------------------------------
    def _draw(self, s_c: float, cal, rng, size: int | None = None, **_opt):
        """(theta, None, None): fl(offset + (fl(w S_c) + sd Z)); ``size=k``: shape (k,)."""
        consts = self._constants(cal.n, cal.r, cal.m)
        if consts is None:  # unreachable through calibrate: such knobs certify nothing
            raise ValueError("the calibration's knobs overflow this model's parameters")
        w, offset, sd = consts
        loc = w * s_c  # the only data-dependent parameter
        k = 1 if size is None else int(size)
        # offset + (...) is a fixed map applied to a N(loc, sd^2) draw: post-processing
        theta = offset + (loc + sd * rng.standard_normal(k))
        if size is None:
            return float(theta[0]), None, None
        theta.setflags(write=False)
        return theta, None, None
