"""Neighbour relations: which pairs of data sets a curve's guarantee is about
(docs/accounting.md §9).

An RDP curve bounds the divergence between a mechanism's outputs on *neighbouring* data
sets, and the word has two common meanings: replace-one (same public size n, one record
changed: every privbayes release) and add/remove (one record added or removed: the
Poisson-subsampled Gaussian of DP-SGD accountants). Curves of different relations do not
compose into a guarantee of either (the class of bug of SmartNoise-core issue #356), so
every accountant and ledger budget has one relation and refuses curves of another.

A curve's relation is, in this order: the ``relation=`` given when it is composed; its
``relation`` attribute (privbayes releases: replace-one); replace-one for a privbayes
Calibration or ``partial(model.rdp, ...)``; add/remove for ``partial(subsampled_gaussian_rdp,
...)``; otherwise None. None means *relation-agnostic*: the plain curves (Gaussian, Laplace,
randomized response, discrete Gaussian, pure DP, zCDP), bare functions and arrays, whose
sensitivity is the caller's to state, are taken to hold for the relation of the
accountant (or budget) they are composed into — as dp_accounting's events are analysed
under the accountant's ``neighboring_relation``.
"""

from __future__ import annotations

import functools

from ..errors import NeighbourRelationError
from ..kinds import is_calibration

__all__ = ["ADD_REMOVE", "RELATIONS", "REPLACE_ONE", "check_relation", "merge", "relation_of"]

REPLACE_ONE = "replace-one"  #: one record replaced, the size n public (every privbayes release)
ADD_REMOVE = "add/remove"  #: one record added or removed (DP-SGD's subsampled Gaussian)
RELATIONS = (REPLACE_ONE, ADD_REMOVE)

# curves of privbayes.accounting.curves whose analysis fixes a relation
_CURVE_RELATIONS = {"subsampled_gaussian_rdp": ADD_REMOVE}


def check_relation(relation, name: str = "relation") -> str | None:
    """``relation`` checked: None, "replace-one" or "add/remove" (ValueError otherwise)."""
    if relation is None or (isinstance(relation, str) and relation in RELATIONS):
        return relation
    raise ValueError(f"{name} must be None, {REPLACE_ONE!r} or {ADD_REMOVE!r}; got {relation!r}")


def relation_of(curve) -> str | None:
    """The neighbour relation ``curve`` carries (see the module docstring); None when it is
    relation-agnostic. Raises ValueError for a ``relation`` attribute that is not one."""
    rel = getattr(curve, "relation", None)
    if rel is not None and not callable(rel):
        return check_relation(rel, "a curve's relation")
    if is_calibration(curve) or is_calibration(getattr(curve, "calibration", None)):
        return REPLACE_ONE  # a privbayes release, charge or calibration
    if isinstance(curve, functools.partial):
        func = curve.func
        from . import curves

        name = getattr(func, "__name__", None)
        if name in _CURVE_RELATIONS and getattr(curves, name, None) is func:
            return _CURVE_RELATIONS[name]
        from ..frozen import Frozen

        if isinstance(getattr(func, "__self__", None), Frozen):
            return REPLACE_ONE  # partial(model.rdp, n, ...): a privbayes mechanism
    return None


def merge(current: str | None, curve, relation=None, *, where: str) -> str | None:
    """The relation after composing ``curve`` into something of relation ``current``: the
    curve's (``relation`` if given, which must agree with the curve's own) when
    ``current`` is None, else ``current``. Raises NeighbourRelationError when they differ
    (nothing has been recorded: callers merge before any state change)."""
    given = check_relation(relation)
    own = relation_of(curve)
    if given is not None and own is not None and given != own:
        raise NeighbourRelationError(
            f"relation={given!r} was given for a curve for {own} neighbours "
            f"({_what(curve)}); nothing was composed",
            expected=own,
            got=given,
        )
    rel = given if given is not None else own
    if rel is None or current is None or rel == current:
        return current if rel is None else rel
    raise NeighbourRelationError(
        f"{where} composes curves for {current} neighbours and cannot take one for {rel} "
        f"neighbours ({_what(curve)}): "
        "an RDP bound for one neighbour relation says nothing about pairs of the other, so "
        "the sum would certify neither. Keep each relation in its own accountant or budget "
        "(privbayes releases are replace-one; subsampled_gaussian_rdp is add/remove); "
        "nothing was composed",
        expected=current,
        got=rel,
    )


def _what(curve) -> str:
    cal = getattr(curve, "calibration", curve)
    model = getattr(cal, "model", None)
    if model is not None:
        return f"a {type(model).__name__} release"
    if isinstance(curve, functools.partial):
        return f"partial({getattr(curve.func, '__name__', 'function')}, ...)"
    return type(curve).__name__
