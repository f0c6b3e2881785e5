"""Row-wise preprocessing that keeps the privacy analysis valid.

The GLM certificates assume every row satisfies ||x||_2 <= c *before* the mechanism runs,
and that neighbouring data sets stay neighbours after preprocessing. A transformation
applied to each row on its own (depending only on that row and on public constants)
keeps both. One that looks at the data set as a whole does not: scaling every row by the
data's own maximum norm, or standardising with the data's mean and variance, lets one
record change every other row (replace the largest row and all rows rescale), so the
"neighbouring" inputs of the mechanism can differ in every record and the certified eps
no longer bounds anything. Such statistics must be public constants, or be released
privately themselves and paid for.
"""

from __future__ import annotations

import numpy as np

from .validation import as_numeric_array, check_positive


def _row_norms(x: np.ndarray) -> np.ndarray:
    """Row norms without overflow for huge entries: scale each row by its largest |entry|."""
    big = np.max(np.abs(x), axis=1, keepdims=True) if x.shape[1] else np.zeros((len(x), 1))
    safe = np.where(big > 0, big, 1.0)
    return np.linalg.norm(x / safe, axis=1, keepdims=True) * safe


def clip_rows(X, c: float = 1.0) -> np.ndarray:
    """Scale down each row whose norm exceeds ``c`` onto the sphere of radius c.

    Parameters: X, shape (n, d), finite; c > 0, a public bound. Returns a new array of
    shape (n, d). Rows already inside the ball are unchanged. Row-wise, so it keeps
    neighbours neighbours (module docstring). Raises ValueError for NaN/inf or bad shapes.
    """
    x = as_numeric_array(X, "X")
    c = check_positive(c, "c")
    if x.ndim != 2:
        raise ValueError(f"X must be 2-D, shape (n, d); got shape {x.shape}")
    norms = _row_norms(x)
    # (x / ||x||) c, not x (c / ||x||): c / ||x|| can be subnormal (c = 1e-100 and rows
    # near 1e220), and its lost digits would leave clipped rows above c
    return np.where(norms > c, (x / np.where(norms > 0, norms, 1.0)) * c, x)


def scale_rows(X, bound: float, c: float = 1.0) -> np.ndarray:
    """Multiply every row by ``c / bound`` for a *public* bound on the row norms.

    Use when a bound on ||x|| is known before seeing the data (e.g. from the measuring
    device or a codebook). Rows that still exceed c are left as they are, so the model
    refuses them; combine with :func:`clip_rows` to clip them explicitly. Never pass the
    data's own maximum norm as ``bound`` (module docstring).

    Raises ValueError when ``c / bound`` is not a finite normal float (it would turn every
    row into inf or 0), checked before X is read.
    """
    bound = check_positive(bound, "bound")
    c = check_positive(c, "c")
    factor = c / bound
    if not (np.isfinite(factor) and factor >= np.finfo(float).tiny):
        raise ValueError(
            f"c / bound = {factor!r} is not a finite normal number (c={c!r}, bound={bound!r}): "
            "every row would become inf or 0; choose a bound nearer to c"
        )
    x = as_numeric_array(X, "X")
    if x.ndim != 2:
        raise ValueError(f"X must be 2-D, shape (n, d); got shape {x.shape}")
    return x * factor


def normalize_rows(X, c: float = 1.0) -> np.ndarray:
    """Scale every non-zero row to norm exactly ``c`` (direction only). Row-wise and safe."""
    x = as_numeric_array(X, "X")
    c = check_positive(c, "c")
    if x.ndim != 2:
        raise ValueError(f"X must be 2-D, shape (n, d); got shape {x.shape}")
    norms = _row_norms(x)
    return np.where(norms > 0, (x / np.where(norms > 0, norms, 1.0)) * c, x)
