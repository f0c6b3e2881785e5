"""Privacy auditing: measure a mechanism's privacy loss from the outside (docs/audit.md).

A certificate is only as good as the code behind it. An audit runs a mechanism many times
on two neighbouring data sets D and D', tries to tell the outputs apart, and turns how
well it succeeds into a statistically valid **lower bound** on the eps of (eps, delta)-DP:
if the mechanism really were (eps, delta)-DP, no test could have false-positive rate
alpha and false-negative rate beta with

    alpha + e^eps * beta < 1 - delta    or    beta + e^eps * alpha < 1 - delta

(Kairouz, Oh, Viswanath 2015; used for audits by Jagielski, Ullman, Oprea 2020 and Nasr,
Song, Thakurta, Papernot, Carlini 2021). The rates are bounded with Clopper-Pearson
intervals (Clopper & Pearson 1934), and the test (a threshold on a scalar score) is
chosen on one half of the trials and evaluated on the other half, so the bound holds with
the stated confidence whatever the selection did. An empirical lower bound above the
certified eps is evidence of a bug (or of an unsound certificate).

Also here: a binned (histogram) estimate of the Rényi divergence between the two output
distributions (scalar outputs; a lower estimate, since binning loses information, with a
bootstrap interval for the binned divergence), the worst-case neighbouring pair of
every privbayes mechanism (from the calibrator's boundary pair), and a privbayes release
with a fixed calibration wrapped as a black-box mechanism.

Modules: ``stats`` (Clopper-Pearson bounds, eps from error rates), ``blackbox`` (the
black-box audit and its result), ``renyi`` (binned Rényi divergence estimate), ``pairs``
(worst-case pairs, calibrated mechanisms, audits of privbayes models), ``plot``.
"""

from .blackbox import AuditError, AuditResult, audit
from .pairs import CalibratedMechanism, audit_curve, audit_model, certified_dp, worst_case_pair
from .plot import plot_audits
from .renyi import RenyiEstimate, renyi_estimate
from .stats import MIN_TRIALS, clopper_pearson, eps_from_rates

__all__ = [
    "MIN_TRIALS",
    "AuditError",
    "AuditResult",
    "CalibratedMechanism",
    "RenyiEstimate",
    "audit",
    "audit_curve",
    "audit_model",
    "certified_dp",
    "clopper_pearson",
    "eps_from_rates",
    "plot_audits",
    "renyi_estimate",
    "worst_case_pair",
]
