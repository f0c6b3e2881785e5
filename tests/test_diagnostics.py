"""Our MCMC diagnostics (privbayes.sampling.diagnostics) against ArviZ, the reference."""

import math
import warnings

import arviz as az
import numpy as np
import pytest

from privbayes.sampling import diagnostics as D


def _ar1(rng, chains, draws, k, phi, shift=0.0):
    x = np.empty((chains, draws, k))
    x[:, 0] = rng.normal(size=(chains, k))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + math.sqrt(1 - phi**2) * rng.normal(size=(chains, k))
    x[0] += shift  # one chain off: R-hat must see it
    return x


def _imh_like(rng, chains, draws, k, accept):
    """Chains that repeat their state on rejection: many ties, as IMH produces."""
    x = np.empty((chains, draws, k))
    x[:, 0] = rng.normal(size=(chains, k))
    for t in range(1, draws):
        move = rng.random(chains) < accept
        x[:, t] = np.where(move[:, None], rng.normal(size=(chains, k)), x[:, t - 1])
    return x


def _arviz(x):
    ds = az.convert_to_dataset({"w": x})
    return (
        az.rhat(ds)["w"].values,
        az.ess(ds, method="bulk")["w"].values,
        az.ess(ds, method="tail")["w"].values,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda r: _ar1(r, 4, 200, 5, 0.3),
        lambda r: _ar1(r, 4, 201, 3, 0.9),  # odd draws, slow mixing
        lambda r: _ar1(r, 2, 50, 2, 0.5, shift=3.0),  # not converged
        lambda r: _ar1(r, 8, 10, 4, -0.4),  # antithetic, tiny
        lambda r: _imh_like(r, 4, 300, 4, 0.3),  # ties
        lambda r: _imh_like(r, 16, 100, 2, 0.05),
    ],
)
def test_rhat_and_ess_match_arviz(make):
    x = make(np.random.default_rng(7))
    rhat, bulk, tail = _arviz(x)
    np.testing.assert_allclose(D.split_rhat(x), rhat, rtol=1e-10)
    np.testing.assert_allclose(D.ess_bulk(x), bulk, rtol=1e-10)
    np.testing.assert_allclose(D.ess_tail(x), tail, rtol=1e-10)


def test_nan_propagates_where_arviz_would_skip_it():
    rng = np.random.default_rng(1)
    x = _ar1(rng, 4, 100, 3, 0.2)
    x[:, :, 1] = 0.5  # a coordinate whose chains are constant: R-hat is 0/0
    r = D.split_rhat(x)
    assert np.isnan(r[1]) and np.isfinite(r[[0, 2]]).all()
    assert np.isnan(np.max(r))  # the maxima the back-ends take keep it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skipping = float(az.rhat(az.convert_to_dataset({"w": x}))["w"].max())
    assert math.isfinite(skipping)  # xarray's max skips NaN: the bug we avoid
    x[0, 3, 2] = np.nan
    assert np.isnan(D.split_rhat(x)[2]) and np.isnan(D.ess_bulk(x)[2])
    assert np.isnan(D.ess_tail(x)[2])
    assert np.isnan(D.split_rhat(x[:1])).all()  # one chain: undefined
    assert np.isnan(D.split_rhat(x[:, :3])).all()  # three draws: undefined
    assert D.ess_bulk(np.ones((4, 50)))[0] == 200  # constant: every draw counts (ArviZ)


@pytest.mark.parametrize("kind", ["normal", "t3", "pareto", "lognormal"])
@pytest.mark.parametrize("size", [50, 1000, 20000])
def test_pareto_k_matches_arviz(kind, size):
    rng = np.random.default_rng(size)
    log_w = {
        "normal": lambda: rng.normal(size=size) * 0.3,
        "t3": lambda: np.log(np.abs(rng.standard_t(3, size=size))),
        "pareto": lambda: np.log(rng.pareto(0.8, size=size) + 1),  # k about 1.25
        "lognormal": lambda: rng.normal(size=size) * 2.5,
    }[kind]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = float(az.psislw(log_w.copy())[1])
    assert D.pareto_k(log_w) == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_pareto_k_edge_cases():
    assert D.pareto_k(np.zeros(3)) == math.inf  # too few for a tail fit (as ArviZ)
    assert math.isnan(D.pareto_k([0.0, np.nan, 1.0, 2.0, 3.0, 4.0]))
    heavy = np.log(np.random.default_rng(0).pareto(0.5, 5000) + 1)  # k = 2
    assert D.pareto_k(heavy) > 1.5


def test_convergence_message_advice():
    hopeless = D.convergence_message(["R-hat nan > 1.01"], 3, can_warn=False)
    assert "would not release it either" in hopeless and "'warn' would release" not in hopeless
    close = D.convergence_message(["R-hat 1.0200 > 1.01"], 1, can_warn=True)
    assert "'warn' would release" in close and "1 attempt " in close
    for text in (hopeless, close):
        assert "stays spent" in text and "beta" in text and "another back-end" in text
        assert "\n" not in text
