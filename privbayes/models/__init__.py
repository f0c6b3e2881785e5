"""Models: one module each, holding its prior, update, boundary pairs and RDP bound."""

from .beta_bernoulli import BetaBernoulli, MeanQuery
from .dirichlet_categorical import DirichletCategorical
from .logistic import BayesianLogisticRegression

__all__ = ["BayesianLogisticRegression", "BetaBernoulli", "DirichletCategorical", "MeanQuery"]
