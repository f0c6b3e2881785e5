"""RDP curves eps(orders) of standard mechanisms, vectorised over orders (BACKGROUND.md §1)."""

from __future__ import annotations

import numpy as np
from scipy import special


def _orders(orders) -> np.ndarray:
    arr = np.asarray(orders, dtype=float)
    if np.isnan(arr).any() or (arr < 1).any():
        raise ValueError(f"orders must be >= 1 (1 = KL) or inf; got {orders!r}")
    return arr


def pure_dp_rdp(orders, eps0: float) -> np.ndarray:
    """Tight RDP curve of a pure eps0-DP mechanism (Bun & Steinke 2016; BACKGROUND.md §1).

    ``1/(lam-1) * log[(sinh(lam e) - sinh((lam-1) e)) / sinh(e)]``, evaluated as
    ``e + log1p(expm1(-2 (lam-1) e) * expit(-e)) / (lam - 1)`` (our rearrangement: factor
    exp(lam e) out of the sinh difference), which neither overflows nor cancels. lam = 1
    gives the KL limit ``e * tanh(e / 2)``, lam = inf gives eps0.

    Parameters: ``orders`` scalar or array >= 1 (or inf); ``eps0`` >= 0 (nats).
    Returns an array shaped like ``orders``.
    """
    lam = _orders(orders)
    e = float(eps0)
    if not (e >= 0 and np.isfinite(e)):
        raise ValueError(f"eps0 must be finite and >= 0; got {eps0}")
    if e == 0:
        return np.zeros(lam.shape)
    out = np.full(lam.shape, e)
    mid = np.isfinite(lam) & (lam > 1)
    lm = lam[mid]
    out[mid] = e + np.log1p(np.expm1(-2 * (lm - 1) * e) * special.expit(-e)) / (lm - 1)
    out[lam == 1] = e * np.tanh(e / 2)
    return np.minimum(out, e)  # rounding guard: the curve never exceeds eps0


def zcdp_rdp(orders, rho: float) -> np.ndarray:
    """rho-zCDP as an RDP curve: eps(lam) = rho * lam (inf at lam = inf unless rho = 0)."""
    lam = _orders(orders)
    if not (rho >= 0 and np.isfinite(rho)):
        raise ValueError(f"rho must be finite and >= 0; got {rho}")
    if rho == 0:
        return np.zeros(lam.shape)
    return rho * lam
