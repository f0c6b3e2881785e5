"""Typed neighbour relations (issue 21 §3): every privbayes release is replace-one, the
subsampled Gaussian add/remove; accountants refuse to mix them, before recording anything."""

import copy
import functools
import pickle
import threading

import numpy as np
import pytest

import privbayes as pb
from privbayes.accounting import (
    RdpAccountant,
    SharedAccountant,
    default_accountant,
    gaussian_rdp,
    laplace_rdp,
    reset_default_accountant,
    subsampled_gaussian_rdp,
)
from privbayes.accounting.relations import ADD_REMOVE, REPLACE_ONE, relation_of
from privbayes.charges import Charge

FLIPS = np.array([0, 1, 1, 0, 1, 1])
SGD = functools.partial(subsampled_gaussian_rdp, q=0.01, sigma=1.1)


def _state(acc):
    """Everything an accountant reports (for 'nothing was recorded')."""
    return (acc.rdp.tolist(), acc.releases, acc.tv, acc.relation, acc.get_epsilon(1e-6))


@pytest.fixture(scope="module")
def rel():
    return pb.sample(pb.BetaBernoulli(), FLIPS, 10.0, 1.0, rng=0)


def test_every_privbayes_release_is_replace_one(rel):
    model = pb.BetaBernoulli()
    post = pb.posterior(model, FLIPS, 10.0, 1.0, rng=0)
    query = pb.release_query([0.1, 0.5, 0.9], 4.0, 1.0, rng=0)
    for thing in (
        rel,
        rel.calibration,  # a Calibration (no attribute: recognised by type)
        Charge(rel.calibration, 3, 0.0),
        post,
        post.calibration,
        query,
        functools.partial(model.rdp, 6, r=0.5, m=1.0, method="diffused"),
    ):
        assert relation_of(thing) == REPLACE_ONE, thing
    assert rel.relation == post.relation == query.relation == REPLACE_ONE
    assert relation_of(SGD) == ADD_REMOVE
    # the plain curves, bare functions and arrays are relation-agnostic
    for agnostic in (
        functools.partial(gaussian_rdp, sigma=2.0),
        functools.partial(laplace_rdp, b=1.0),
        lambda o: subsampled_gaussian_rdp(o, 0.01, 1.1),  # a bare function says nothing
        np.zeros(3),
    ):
        assert relation_of(agnostic) is None


@pytest.mark.parametrize("first", ["release", "sgd"])
def test_a_mismatched_relation_is_refused_and_nothing_recorded(rel, first):
    acc = RdpAccountant()
    acc.compose(functools.partial(gaussian_rdp, sigma=5.0))  # agnostic: fixes nothing
    assert acc.relation is None
    acc.compose(rel if first == "release" else SGD, 2)
    assert acc.relation == (REPLACE_ONE if first == "release" else ADD_REMOVE)
    before = _state(acc)
    with pytest.raises(pb.NeighbourRelationError) as info:
        acc.compose(SGD if first == "release" else rel)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, pb.PrivBayesError)
    assert err.expected == acc.relation and err.got != err.expected
    assert "nothing was composed" in str(err)
    assert _state(acc) == before
    # a bare function declared with the other relation is refused too; its own is fine
    other = ADD_REMOVE if first == "release" else REPLACE_ONE
    with pytest.raises(pb.NeighbourRelationError):
        acc.compose(lambda o: gaussian_rdp(o, 3.0), relation=other)
    with pytest.raises(pb.NeighbourRelationError):
        acc.compose(np.zeros(acc.orders.size), relation=other)
    assert _state(acc) == before
    acc.compose(lambda o: gaussian_rdp(o, 3.0), relation=acc.relation)
    assert acc.releases == before[1] + 1


def test_relation_given_must_agree_with_the_curves_own(rel):
    acc = RdpAccountant()
    with pytest.raises(pb.NeighbourRelationError, match="was given"):
        acc.compose(rel, relation=ADD_REMOVE)
    with pytest.raises(ValueError, match="relation must be"):
        acc.compose(rel, relation="replace one")
    with pytest.raises(ValueError, match="relation must be"):
        RdpAccountant(relation="bounded")
    assert acc.releases == 0 and acc.relation is None
    fixed = RdpAccountant(relation=ADD_REMOVE)
    with pytest.raises(pb.NeighbourRelationError):
        fixed.compose(rel)
    assert fixed.relation == ADD_REMOVE and fixed.releases == 0


def test_the_relation_survives_copies_and_pickles(rel):
    acc = RdpAccountant().compose(rel)
    for twin in (copy.deepcopy(acc), pickle.loads(pickle.dumps(acc)), acc._copy()):
        assert twin.relation == REPLACE_ONE
        with pytest.raises(pb.NeighbourRelationError):
            twin.compose(SGD)


@pytest.mark.parametrize("how", ["release", "function"])
def test_the_default_accountant_refuses_add_remove_and_records_nothing(rel, how):
    reset_default_accountant()
    acc = default_accountant()
    assert acc.relation == REPLACE_ONE  # fixed: every privbayes release goes in
    acc.compose(rel)
    before = _state(acc)
    with pytest.raises(pb.NeighbourRelationError, match="the default accountant"):
        if how == "release":
            acc.compose(SGD, 10)
        else:
            acc.compose(lambda o: subsampled_gaussian_rdp(o, 0.01, 1.1), relation=ADD_REMOVE)
    assert _state(acc) == before
    reset_default_accountant()
    assert acc.relation == REPLACE_ONE and acc.releases == 0  # reset keeps the relation
    # releases still go in after a refusal (sample composes into it)
    pb.sample(pb.BetaBernoulli(), FLIPS, 10.0, 1.0, rng=1)
    assert acc.releases == 1
    reset_default_accountant()


def test_a_shared_accountant_checks_its_fast_release_path(rel):
    acc = SharedAccountant(relation=ADD_REMOVE)
    acc.compose(SGD, 5)
    before = _state(acc)
    with pytest.raises(pb.NeighbourRelationError):
        acc.compose(rel)  # the O(1) path for releases
    assert _state(acc) == before
    free = SharedAccountant()
    free.compose(rel)  # the first typed curve fixes the relation
    with pytest.raises(pb.NeighbourRelationError):
        free.compose(SGD)
    free.reset()
    assert free.relation is None  # none given at construction
    free.compose(SGD)
    assert free.relation == ADD_REMOVE


def test_threads_composing_both_relations_never_mix(rel):
    """The shared accountant sets its relation under its lock: of two threads racing to
    compose curves of different relations, only one relation ever gets in."""
    for _ in range(5):
        acc, ok = SharedAccountant(), {"release": 0, "sgd": 0}
        barrier = threading.Barrier(2)

        def go(name, curve, acc=acc, ok=ok, barrier=barrier):
            barrier.wait()
            for _ in range(20):
                try:
                    acc.compose(curve)
                    ok[name] += 1
                except pb.NeighbourRelationError:
                    pass

        threads = [
            threading.Thread(target=go, args=("release", rel)),
            threading.Thread(target=go, args=("sgd", SGD)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert (ok["release"] == 0) != (ok["sgd"] == 0)  # exactly one relation won
        assert acc.releases == ok["release"] + ok["sgd"]
        assert acc.relation == (REPLACE_ONE if ok["release"] else ADD_REMOVE)
