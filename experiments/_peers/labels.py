"""Names of the study's methods, what each certificate covers, and display labels."""

from __future__ import annotations

PB_METHODS = ("diffused", "concentrated", "ops")
PEERS = ("dpgd", "objpert", "diffprivlib", "diffprivlib-default")
COUNT_METHODS = ("diffused", "concentrated", "laplace", "gaussian", "noisy-stats", "diffprivlib")
REFS = ("map", "majority-class")

# What each certificate covers (experiments/README.md, "Peers"):
# exact = the law of the released value; algorithm = the algorithm as run;
# approximate = an idealised computation (exact posterior sampling, an exact minimiser)
# that the implementation only approximates. A back-end missing here is shown as
# "unknown" until it is added.
BACKEND_GUARANTEE = {
    "imh": "approximate",
    "pymc": "approximate",
    "exact": "exact",
    "langevin": "algorithm",
}
PEER_GUARANTEE = {
    "dpgd": "algorithm",
    "objpert": "approximate",
    "diffprivlib": "approximate",
    "diffprivlib-default": "approximate",
}
# counts: conjugate draws are exact; Laplace, Gaussian and diffprivlib's tools are exact
COUNT_GUARANTEE = dict.fromkeys(COUNT_METHODS, "exact")

PEER_NAMES = {
    "dpgd": "DP-GD (full batch)",
    "objpert": "objective perturbation (CMS11)",
    "diffprivlib": "diffprivlib LR (rule C)",
    "diffprivlib-default": "diffprivlib LR (default C=1)",
}
COUNT_LETTERS = {
    "diffused": "D",
    "concentrated": "C",
    "laplace": "L",
    "gaussian": "G",
    "noisy-stats": "N",
    "diffprivlib": "P",
}


def guarantee(method: str, backend: str = "") -> str:
    if method in PB_METHODS:
        return BACKEND_GUARANTEE.get(backend, "unknown")
    return PEER_GUARANTEE.get(method, "")


def label(method: str, backend: str = "") -> str:
    """A figure/table label with the guarantee mark."""
    if method in PB_METHODS:
        return f"privbayes {method} [{backend}, {guarantee(method, backend)}]"
    return f"{PEER_NAMES[method]} [{guarantee(method)}]"


def short(method: str, backend: str = "") -> str:
    return f"pb-{method}[{backend}]" if method in PB_METHODS else method
