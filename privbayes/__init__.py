"""privbayes: posterior samples with a certified Rényi differential privacy guarantee.

Implements Geumlek, Song, Chaudhuri, "Rényi Differential Privacy Mechanisms for Posterior
Sampling" (NeurIPS 2017). Privacy model: replace-one neighbours; n and the prior public
(docs/privacy.md).

Names are imported on first use (PEP 562), so ``import privbayes`` and the command line
start fast: numpy and scipy load with the first model or release, scikit-learn with
:class:`PrivateLogisticRegression`, matplotlib with :mod:`privbayes.audit`'s plots, PyMC
and ArviZ only with ``backend="pymc"`` (tests/test_imports.py keeps it that way).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .errors import (
    BudgetExceededError,
    ConvergenceError,
    DataError,
    InfeasiblePrivacyError,
    KnobCappedWarning,
    LedgerError,
    NeighbourRelationError,
    PrivBayesError,
    ReleaseInterrupted,
    SamplingError,
    SharedRandomnessWarning,
    StepCapWarning,
)

__version__ = "0.1.0"

# public name -> (module, attribute or None for the module itself)
_LAZY = {
    "BayesianLinearRegression": (".models", "BayesianLinearRegression"),
    "BayesianLogisticRegression": (".models", "BayesianLogisticRegression"),
    "BayesianPoissonRegression": (".models", "BayesianPoissonRegression"),
    "BetaBernoulli": (".models", "BetaBernoulli"),
    "DirichletCategorical": (".models", "DirichletCategorical"),
    "ExactInfeasibleError": (".sampling.exact", "ExactInfeasibleError"),
    "GammaPoisson": (".models", "GammaPoisson"),
    "MultinomialLogisticRegression": (".models", "MultinomialLogisticRegression"),
    "NormalKnownVariance": (".models", "NormalKnownVariance"),
    "auto_beta": (".models", "auto_beta"),
    "Calibration": (".calibration", "Calibration"),
    "calibrate": (".calibration", "calibrate"),
    "Ledger": (".accounting.ledger", "Ledger"),
    "RdpAccountant": (".accounting", "RdpAccountant"),
    "PrivateLogisticRegression": (".estimators", "PrivateLogisticRegression"),
    "PrivatePosterior": (".posterior.release", "PrivatePosterior"),
    "PrivateSample": (".release", "PrivateSample"),
    "plan": (".posterior.planning", "plan"),
    "posterior": (".posterior", None),  # a callable module: privbayes.posterior(model, ...)
    "release_query": (".release", "release_query"),
    "sample": (".release", "sample"),
    "renyi_beta": (".divergence", "renyi_beta"),
    "renyi_dirichlet": (".divergence", "renyi_dirichlet"),
    "renyi_expfam": (".divergence", "renyi_expfam"),
    "renyi_gamma": (".divergence_families", "renyi_gamma"),
    "renyi_normal": (".divergence_families", "renyi_normal"),
    "accounting": (".accounting", None),
    "audit": (".audit", None),
    "data": (".data", None),
    "datasets": (".datasets", None),
    "preprocessing": (".preprocessing", None),
    "models": (".models", None),
}

__all__ = [
    "BayesianLinearRegression",
    "BayesianLogisticRegression",
    "BayesianPoissonRegression",
    "BetaBernoulli",
    "BudgetExceededError",
    "Calibration",
    "ConvergenceError",
    "DataError",
    "DirichletCategorical",
    "ExactInfeasibleError",
    "GammaPoisson",
    "InfeasiblePrivacyError",
    "KnobCappedWarning",
    "Ledger",
    "LedgerError",
    "MultinomialLogisticRegression",
    "NeighbourRelationError",
    "NormalKnownVariance",
    "PrivBayesError",
    "PrivateLogisticRegression",
    "PrivatePosterior",
    "PrivateSample",
    "RdpAccountant",
    "ReleaseInterrupted",
    "SamplingError",
    "SharedRandomnessWarning",
    "StepCapWarning",
    "accounting",
    "audit",
    "auto_beta",
    "calibrate",
    "data",
    "datasets",
    "models",
    "plan",
    "posterior",
    "preprocessing",
    "release_query",
    "renyi_beta",
    "renyi_dirichlet",
    "renyi_expfam",
    "renyi_gamma",
    "renyi_normal",
    "sample",
]


def __getattr__(name: str):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'privbayes' has no attribute {name!r}") from None
    mod = importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # for type checkers and IDEs: the names resolved above
    from . import accounting, audit, data, datasets, models, posterior, preprocessing
    from .accounting import RdpAccountant
    from .accounting.ledger import Ledger
    from .calibration import Calibration, calibrate
    from .divergence import renyi_beta, renyi_dirichlet, renyi_expfam
    from .divergence_families import renyi_gamma, renyi_normal
    from .estimators import PrivateLogisticRegression
    from .models import (
        BayesianLinearRegression,
        BayesianLogisticRegression,
        BayesianPoissonRegression,
        BetaBernoulli,
        DirichletCategorical,
        GammaPoisson,
        MultinomialLogisticRegression,
        NormalKnownVariance,
        auto_beta,
    )
    from .posterior.planning import plan
    from .posterior.release import PrivatePosterior
    from .release import PrivateSample, release_query, sample
    from .sampling.exact import ExactInfeasibleError
