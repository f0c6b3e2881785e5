"""privbayes: posterior samples with a certified Rényi differential privacy guarantee.

Implements Geumlek, Song, Chaudhuri, "Rényi Differential Privacy Mechanisms for Posterior
Sampling" (NeurIPS 2017). Privacy model: replace-one neighbours; n and the prior public.
"""

from .calibration import Calibration, calibrate
from .divergence import renyi_beta, renyi_dirichlet, renyi_expfam
from .errors import BudgetExceededError, InfeasiblePrivacyError, PrivBayesError
from .models import BetaBernoulli, DirichletCategorical
from .release import PrivateSample, release_query, sample

__version__ = "0.1.0"

__all__ = [
    "BetaBernoulli",
    "BudgetExceededError",
    "Calibration",
    "DirichletCategorical",
    "InfeasiblePrivacyError",
    "PrivBayesError",
    "PrivateSample",
    "calibrate",
    "release_query",
    "renyi_beta",
    "renyi_dirichlet",
    "renyi_expfam",
    "sample",
]
