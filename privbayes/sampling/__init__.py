"""Sampling back-ends: exact conjugate draws (and, later, GLM samplers)."""

from .conjugate import sample_dirichlet_log

__all__ = ["sample_dirichlet_log"]
