"""Problems found by a user trial of the linear / Poisson regression features (README
examples and bad inputs); each test failed before its fix."""

import numpy as np
import pytest

import privbayes as pb


def _data(n=200, d=2, seed=0):
    rng = np.random.default_rng(seed)
    x = pb.preprocessing.clip_rows(rng.normal(0, 0.5, (n, d)), c=1.0)
    y = np.clip(x @ np.linspace(1, -1, d) + 0.3 * rng.normal(size=n), -2, 2)
    return x, y


def test_linear_and_logistic_models_construct():
    # integ2 merge left a NameError (_OPTION_BACKENDS) in BayesianLogisticRegression.__init__:
    # every logistic, linear and Poisson model (and the README example) failed to construct.
    lin = pb.BayesianLinearRegression(beta=1e-2, c=1.0, y_bound=2.0, noise_sd=0.3)
    assert lin.schedule is not None
    assert pb.BayesianLogisticRegression(beta=0.01).schedule is not None
    assert pb.BayesianPoissonRegression(beta=0.01, c=1.0, max_count=5, radius=1.0)
