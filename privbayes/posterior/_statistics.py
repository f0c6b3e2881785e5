"""The integer statistics a noise-aware release perturbs, and their public sensitivities.

Each conjugate model's statistic is already exact (privbayes.data); the noise-aware
release needs it as an *integer* whose change between replace-one neighbours has a public
bound (docs/noise_aware.md §1):

* BetaBernoulli: the count of ones, Delta^2 = 1;
* DirichletCategorical: the K category counts; a replaced record moves two of them by
  +-1, Delta^2 = 2;
* GammaPoisson: the sum of the counts, Delta^2 = max_count^2;
* MeanQuery: T = floor(2^8 S), S the exact sum of the values in [0, 1]: Delta = 2^8
  (docs/numerics.md §7), Delta^2 = 2^16;
* NormalKnownVariance: T = floor(2^8 sum v_i) with v_i = fl(fl(x_i - low) / fl(high - low))
  in [0, 1] (rounding is monotone, so each v_i lies in [0, 1] and is a function of its
  record alone): Delta = 2^8, Delta^2 = 2^16, as for the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data import EXACT_SUM_BITS, exact_sum, statistics
from ..frozen import Frozen

GRID_BITS = 8  # fixed-point sums are floored to multiples of 2^-8 (docs/numerics.md §7)
GRID = 1 << GRID_BITS


class FixedPointNormal(Frozen):
    """The chunk kernel (privbayes.data.Reduction) of a Normal model's noise-aware
    statistic T = floor(2^8 sum_i v_i), v_i = fl(fl(x_i - low) / fl(high - low)).

    Domain rules, messages and ``clip`` are the model's own (records outside [low, high]
    refused unless the model clips them); the sum of the v_i is exact (integer multiples of
    2^-1127, any partitioning) and floored once at the end.
    """

    _data_ndims = (1,)
    _data_rules = 1

    def __init__(self, model) -> None:
        self.model = model
        self.low = model.low
        self.width = model.high - model.low  # fl(high - low) > 0: low < high, both <= 1e100
        self._freeze()

    def _data_shape(self, shape: tuple, name: str) -> None:
        self.model._data_shape(shape, name)

    def _data_chunk(self, arr: np.ndarray):
        m = self.model
        if m.clip:
            arr = np.clip(arr, m.low, m.high)
            bad = np.zeros(arr.shape, bool)
        else:
            bad = (arr < m.low) | (arr > m.high)
        v = np.where(bad, 0.0, (arr - self.low) / self.width)
        # a no-op (monotone rounding keeps v in [0, 1]); it makes the bound |v| <= 1 that the
        # sensitivity rests on hold by construction
        v = np.clip(v, 0.0, 1.0)
        return exact_sum(v), [bad]

    def _data_message(self, rule: int, where: str, value, count: int) -> str:
        return self.model._data_message(rule, where, value, count)

    def _data_finish(self, total: int, n: int) -> tuple[int, int]:
        if n > 2 ** (53 - GRID_BITS):
            raise ValueError(
                f"at most 2**{53 - GRID_BITS} values can be summed exactly on the grid"
            )
        return int(total) >> (EXACT_SUM_BITS - GRID_BITS), n


@dataclass(frozen=True)
class Spec:
    """How one model meets the noise-aware release: its integer statistic, sensitivity,
    dimension and posterior family."""

    kind: str  # "beta-bernoulli", "query", "gamma-poisson", "normal", "dirichlet", "linear"
    sensitivity_sq: int
    dim: int
    label: str
    kernel: Any

    def statistic(self, data, column=None, name: str = "data"):
        """(integer statistic, n) from the data, through privbayes.data (validation first)."""
        stats, n = statistics(self.kernel, data, column=column, name=name)
        return self.to_int(stats), n

    def to_int(self, stats):
        if self.kind == "beta-bernoulli":
            return int(stats[0])
        if self.kind == "query":
            return int(stats[0] * GRID)  # S_q is a multiple of 2^-8: exact
        if self.kind == "dirichlet":
            return np.asarray(stats).astype(np.int64)
        return int(stats)


def spec_of(model) -> Spec:
    """The :class:`Spec` of a conjugate model or the mean query; TypeError for any other
    model (raised before anything is read or charged)."""
    from ..models import (
        BetaBernoulli,
        DirichletCategorical,
        GammaPoisson,
        MeanQuery,
        NormalKnownVariance,
    )

    hook = getattr(model, "noise_aware_spec", None)
    if callable(hook) and not isinstance(model, type):  # linear regression (its own module)
        from .linear import LINEAR_LABEL

        return Spec("linear", 0, 0, LINEAR_LABEL, hook())
    if isinstance(model, MeanQuery):
        return Spec("query", GRID * GRID, 1, "floor(2^8 sum of the values), units of 2^-8", model)
    if isinstance(model, BetaBernoulli):
        return Spec("beta-bernoulli", 1, 1, "count of ones", model)
    if isinstance(model, GammaPoisson):
        return Spec("gamma-poisson", model.max_count**2, 1, "sum of the counts", model)
    if isinstance(model, NormalKnownVariance):
        return Spec(
            "normal",
            GRID * GRID,
            1,
            "floor(2^8 sum of (x - low) / (high - low)), units of 2^-8",
            FixedPointNormal(model),
        )
    if isinstance(model, DirichletCategorical):
        return Spec("dirichlet", 2, model.K, "category counts", model)
    raise TypeError(
        "noise-aware posteriors are for the conjugate models (BetaBernoulli, "
        "DirichletCategorical, GammaPoisson, NormalKnownVariance), the mean query "
        "(privbayes.models.MeanQuery) and BayesianLinearRegression; got "
        f"{type(model).__name__}"
    )
