"""RDP accounting: curves of standard mechanisms (composition and conversion to follow)."""

from .curves import pure_dp_rdp, zcdp_rdp

__all__ = ["pure_dp_rdp", "zcdp_rdp"]
