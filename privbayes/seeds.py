"""The record of seeded random states used by this process's releases (docs/privacy.md §7).

A second release drawing from the same state would replay the same noise, which no
certificate covers: :func:`note_seed` warns (SharedRandomnessWarning) when that happens and
for every seeded release in a child process, whose record cannot see its siblings'.
"""

from __future__ import annotations

import hashlib
import threading
import warnings

import numpy as np

from .errors import SharedRandomnessWarning

__all__ = ["note_seed"]

# Seed material used by this process's releases: a digest of each seeded generator's state
# at the moment of its draw. Same seed -> same release is kept (reproducibility, and
# scikit-learn's idempotence checks); a second release from the same state is never
# silent (SharedRandomnessWarning). Fresh OS entropy (rng=None) is not recorded. The record
# is per process: a child process (a joblib worker of cross_val_score(..., n_jobs=2)) cannot
# see its siblings' releases, so there every seeded release warns.
_USED_STATES: set[bytes] = set()
_USED_LOCK = threading.Lock()

_REPEATED = (
    "this release draws its noise from the same random state as an earlier release "
    "in this process (the same int seed, or a copy of one Generator or RandomState, "
    "e.g. made by sklearn's clone): the two releases share their noise, and their "
    "composition is NOT covered by the certificates charged for them (each was "
    "charged as an independent release). For independent releases pass rng=None / "
    "random_state=None (fresh OS entropy), or a different seed per release; "
    "re-running one release on the same data and settings only reproduces it "
    "(docs/privacy.md §7)"
)
_IN_CHILD = (
    "this release draws its noise from a fixed seed (an int, a RandomState or a "
    "Generator) in a child process (e.g. a joblib worker of cross_val_score or "
    "GridSearchCV with n_jobs > 1): privbayes' record of seeds is per process and cannot "
    "see the releases of other workers or of the parent. Parallel fits given one fixed "
    "random_state share their noise, and their composition is NOT covered by the "
    "certificates charged for them (each was charged as an independent release); the "
    "parent's default_accountant() does not see this release either (a ledger does). "
    "For independent releases pass rng=None / random_state=None (fresh OS entropy) "
    "(docs/privacy.md §7)"
)


def _in_child_process() -> bool:
    """Whether this process was started by another one through multiprocessing (loky,
    joblib's default process back-end, included): its record of seeds and its default
    accountant see its own releases only."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


def _digest(obj, h) -> None:
    """Feed a bit generator's state (dicts, ints, strings, arrays) to the hash ``h``."""
    if isinstance(obj, dict):
        h.update(b"{")
        for key in sorted(obj, key=str):
            _digest(key, h)
            _digest(obj[key], h)
        h.update(b"}")
    elif isinstance(obj, np.ndarray):
        h.update(f"a{obj.dtype.str}{obj.shape}:".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, list | tuple):
        h.update(b"[")
        for item in obj:
            _digest(item, h)
        h.update(b"]")
    else:
        h.update(f"{type(obj).__name__}:{obj!r};".encode())


def _state_digest(generator: np.random.Generator) -> bytes | None:
    """16-byte digest of the generator's bit-generator state (None if it has none)."""
    try:
        state = generator.bit_generator.state
    except (AttributeError, TypeError, ValueError):
        return None
    h = hashlib.blake2b(digest_size=16)
    _digest(state, h)
    return h.digest()


def note_seed(rng, generator: np.random.Generator) -> None:
    """Record the seed material of a release about to draw; warn if an earlier release of
    this process drew from the same state (it would replay the same noise), and warn for
    every seeded release of a child process, whose record misses its siblings' releases."""
    if rng is None:  # fresh OS entropy: never shared
        return
    key = _state_digest(generator)
    with _USED_LOCK:
        seen = key is not None and key in _USED_STATES
        if key is not None:
            _USED_STATES.add(key)
    if seen or _in_child_process():
        warnings.warn(_REPEATED if seen else _IN_CHILD, SharedRandomnessWarning, stacklevel=4)
