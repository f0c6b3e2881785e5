"""RDP accounting: curves of standard mechanisms, composition, conversion to (eps, delta),
a durable ledger and the process-wide default accountant (docs/accounting.md); exact
Gaussian-DP where it is proven (docs/gdp.md)."""

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
from .gdp import GdpBound, compose_gdp, gaussian_gdp, gdp_delta, gdp_epsilon, gdp_rdp
from .gdp_accountant import GdpAccountant, GdpEvent, NotGdpError, gaussian_event, gdp_event

__all__ = [
    "DEFAULT_ORDERS",
    "GdpAccountant",
    "GdpBound",
    "GdpEvent",
    "NotGdpError",
    "compose_gdp",
    "gaussian_event",
    "gaussian_gdp",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_event",
    "gdp_rdp",
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
