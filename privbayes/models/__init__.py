"""Models: one module each, holding its prior, update, boundary pairs and RDP bound.

Every model implements the hooks of :class:`privbayes.models.base.Model` (docs/models.md).
"""

from .base import Model
from .beta_bernoulli import BetaBernoulli, MeanQuery
from .dirichlet_categorical import DirichletCategorical
from .gamma_poisson import GammaPoisson
from .linear import BayesianLinearRegression  # noqa: F401  (stand-in: not in __all__ yet)
from .logistic import BayesianLogisticRegression, auto_beta
from .multinomial import MultinomialLogisticRegression
from .normal import NormalKnownVariance

__all__ = [
    "BayesianLogisticRegression",
    "BetaBernoulli",
    "DirichletCategorical",
    "GammaPoisson",
    "MeanQuery",
    "Model",
    "MultinomialLogisticRegression",
    "NormalKnownVariance",
    "auto_beta",
]
