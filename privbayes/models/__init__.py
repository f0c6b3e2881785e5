"""Models: one module each, holding its prior, update, boundary pairs and RDP bound.

Every model implements the hooks of :class:`privbayes.models.base.Model` (docs/models.md).
"""

from .base import Model
from .beta_bernoulli import BetaBernoulli, MeanQuery
from .dirichlet_categorical import DirichletCategorical
from .gamma_poisson import GammaPoisson
from .linear import BayesianLinearRegression
from .logistic import BayesianLogisticRegression, auto_beta
from .multinomial import MultinomialLogisticRegression
from .normal import NormalKnownVariance
from .poisson import BayesianPoissonRegression

__all__ = [
    "BayesianLinearRegression",
    "BayesianLogisticRegression",
    "BayesianPoissonRegression",
    "BetaBernoulli",
    "DirichletCategorical",
    "GammaPoisson",
    "MeanQuery",
    "Model",
    "MultinomialLogisticRegression",
    "NormalKnownVariance",
    "auto_beta",
]
