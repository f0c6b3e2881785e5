"""privbayes: posterior samples with a certified Rényi differential privacy guarantee.

Implements Geumlek, Song, Chaudhuri, "Rényi Differential Privacy Mechanisms for Posterior
Sampling" (NeurIPS 2017). Privacy model: replace-one neighbours; n and the prior public.
"""

from . import audit, datasets, preprocessing
from .accounting import RdpAccountant
from .accounting.ledger import Ledger
from .calibration import Calibration, calibrate
from .divergence import renyi_beta, renyi_dirichlet, renyi_expfam
from .divergence_families import renyi_gamma, renyi_normal
from .errors import (
    BudgetExceededError,
    ConvergenceError,
    InfeasiblePrivacyError,
    PrivBayesError,
    SamplingError,
)
from .estimators import PrivateLogisticRegression
from .models import (
    BayesianLogisticRegression,
    BetaBernoulli,
    DirichletCategorical,
    GammaPoisson,
    NormalKnownVariance,
)
from .release import PrivateSample, release_query, sample

__version__ = "0.1.0"

__all__ = [
    "BayesianLogisticRegression",
    "BetaBernoulli",
    "ConvergenceError",
    "SamplingError",
    "BudgetExceededError",
    "Calibration",
    "DirichletCategorical",
    "GammaPoisson",
    "InfeasiblePrivacyError",
    "Ledger",
    "NormalKnownVariance",
    "PrivBayesError",
    "PrivateLogisticRegression",
    "PrivateSample",
    "RdpAccountant",
    "audit",
    "calibrate",
    "datasets",
    "preprocessing",
    "release_query",
    "renyi_beta",
    "renyi_dirichlet",
    "renyi_expfam",
    "renyi_gamma",
    "renyi_normal",
    "sample",
]
