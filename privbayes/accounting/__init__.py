"""RDP accounting: curves of standard mechanisms, composition, conversion to (eps, delta)."""

from .accountant import DEFAULT_ORDERS, OrdersWarning, RdpAccountant, rdp_to_dp
from .curves import (
    gaussian_rdp,
    laplace_rdp,
    pure_dp_rdp,
    randomized_response_rdp,
    subsampled_gaussian_rdp,
    zcdp_rdp,
)

__all__ = [
    "DEFAULT_ORDERS",
    "OrdersWarning",
    "RdpAccountant",
    "gaussian_rdp",
    "laplace_rdp",
    "pure_dp_rdp",
    "randomized_response_rdp",
    "rdp_to_dp",
    "subsampled_gaussian_rdp",
    "zcdp_rdp",
]
