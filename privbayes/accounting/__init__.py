"""RDP accounting: curves of standard mechanisms, composition, conversion to (eps, delta),
a durable ledger and the process-wide default accountant (docs/accounting.md)."""

from .accountant import DEFAULT_ORDERS, WIDE_ORDERS, OrdersWarning, RdpAccountant, rdp_to_dp
from .curves import (
    discrete_gaussian_rdp,
    gaussian_rdp,
    laplace_rdp,
    pure_dp_rdp,
    randomized_response_rdp,
    subsampled_gaussian_rdp,
    zcdp_rdp,
)
from .default import SharedAccountant, default_accountant, reset_default_accountant

__all__ = [
    "DEFAULT_ORDERS",
    "OrdersWarning",
    "RdpAccountant",
    "SharedAccountant",
    "WIDE_ORDERS",
    "default_accountant",
    "discrete_gaussian_rdp",
    "gaussian_rdp",
    "laplace_rdp",
    "pure_dp_rdp",
    "randomized_response_rdp",
    "rdp_to_dp",
    "reset_default_accountant",
    "subsampled_gaussian_rdp",
    "zcdp_rdp",
]
