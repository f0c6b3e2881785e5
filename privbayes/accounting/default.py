"""The process-wide default accountant: every release made in this process is composed
into it, so repeated fits cannot spend privacy silently (like diffprivlib's
BudgetAccountant default). Thread-safe; survives ``fork`` with a fresh lock
(docs/accounting.md §6).

    from privbayes.accounting import default_accountant
    default_accountant().get_epsilon(1e-6)   # everything released so far in this process
    default_accountant().releases            # how many releases that is
"""

from __future__ import annotations

import os
import threading

import numpy as np

from .accountant import RdpAccountant, _check_tv, _content, _release_part
from .relations import REPLACE_ONE, merge

__all__ = ["SharedAccountant", "default_accountant", "reset_default_accountant"]


class SharedAccountant(RdpAccountant):
    """An :class:`RdpAccountant` safe to share between threads.

    ``compose`` evaluates the curve outside the lock (it may be slow) and adds it under the
    lock; the conversions (``get_epsilon``, ``get_epsilon_and_order``, ``get_delta``) and
    ``rdp`` read a consistent snapshot. ``releases`` counts the curves composed (with
    their counts); ``reset()`` forgets everything. Copies and pickles get a fresh lock.
    """

    def __init__(self, orders=None, relation: str | None = None) -> None:
        super().__init__(orders, relation)
        self._given_relation = self._relation
        self._lock = threading.Lock()
        self._pending: dict[tuple, list] = {}  # content key of a release -> [_Part, count]

    def __getstate__(self) -> dict:
        with self._lock:
            state = dict(self.__dict__)
        del state["_lock"]  # a lock cannot be copied; the copy gets its own
        state["_pending"] = {k: list(v) for k, v in state["_pending"].items()}
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("_given_relation", None)  # pickled before relations existed
        super().__setstate__(state)
        self._lock = threading.Lock()

    def compose(self, curve, count: int = 1, relation: str | None = None) -> SharedAccountant:
        # checked first (no state touched), again under the lock, where it is set: two
        # threads composing different relations cannot both pass
        merge(self._relation, curve, relation, where=self._where())
        if getattr(curve, "_rdp_is_size_times_calibration", False):
            # a privbayes release: kept as its (public, immutable) calibration and evaluated
            # when the accountant is read, once per distinct mechanism (O(1) here)
            if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
                raise ValueError(f"count must be an integer >= 0; got {count!r}")
            kept = _release_part(curve.calibration)
            if kept is not None:
                if count:
                    key, cal = kept
                    tv = _check_tv(curve)
                    pkey = (key, curve.size, _content(tv))
                    with self._lock:
                        self._relation = merge(self._relation, curve, relation, where=self._where())
                        entry = self._pending.get(pkey)
                        if entry is None:  # no draws kept
                            self._pending[pkey] = [_Part(cal, curve.size, tv), int(count)]
                        else:
                            entry[1] += int(count)
                        self.releases += int(count)
                return self
        prepared = self._prepare(curve, count)  # validates; no state touched
        with self._lock:
            self._relation = merge(self._relation, curve, relation, where=self._where())
            self._add(*prepared, count)
        return self

    def _where(self) -> str:
        return "the default accountant" if self is _default else "this accountant"

    def _flush(self) -> None:
        """Evaluate the pending releases (under the lock)."""
        pending, self._pending = self._pending, {}
        for curve, count in pending.values():
            self._add(*self._prepare(curve, count), count)
            self.releases -= count  # counted when composed

    def _snapshot(self) -> RdpAccountant:
        with self._lock:
            self._flush()
            if self._upper is None:
                self._upper = self._sum.upper()  # never mutated in place: composing replaces it
            return self._copy()

    def get_epsilon_and_order(self, delta, method="improved", refine=True):
        return self._snapshot().get_epsilon_and_order(delta, method, refine)

    def get_delta(self, eps, refine=True):
        return self._snapshot().get_delta(eps, refine)

    @property
    def rdp(self) -> np.ndarray:
        return self._snapshot().rdp

    @property
    def tv(self) -> float:
        return self._snapshot().tv

    def reset(self) -> None:
        """Forget every composed curve (releases back to 0); the relation given at
        construction is kept (the default accountant's: replace-one)."""
        with self._lock:
            RdpAccountant.__init__(self, self.orders, self._given_relation)
            self._pending = {}

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # a lock held by another thread at fork is never freed


class _Part:
    """A release as the default accountant keeps it: its public calibration (as kept by
    the accountant: immutable), size and tv."""

    __slots__ = ("calibration", "size", "tv")
    _rdp_is_size_times_calibration = True

    def __init__(self, calibration, size, tv: float) -> None:
        self.calibration, self.size, self.tv = calibration, size, tv

    def __reduce__(self):
        return (_Part, (self.calibration, self.size, self.tv))


_default: SharedAccountant | None = None
_default_lock = threading.Lock()


def default_accountant() -> SharedAccountant:
    """The process-wide :class:`SharedAccountant` (on :data:`DEFAULT_ORDERS`), created on
    first use. privbayes's release functions compose every release into it, so its relation
    is replace-one: an add/remove curve (e.g. ``partial(subsampled_gaussian_rdp, ...)``) is
    refused with NeighbourRelationError, and nothing is recorded."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = SharedAccountant(relation=REPLACE_ONE)
    return _default


def reset_default_accountant() -> None:
    """Forget everything composed into the default accountant (e.g. between experiments)."""
    default_accountant().reset()


def _reinit_after_fork() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    if _default is not None:
        _default._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)
