"""Building blocks of ``experiments/linear_regression.py`` (private linear regression
against its peers): features with public bounds (``data``), the sufficient-statistics
peers AdaSSP and naive SSP with their exact (eps, delta) calibration (``ssp``), and the
figures and REPORT.md section (``report``)."""
