"""Peer DP mechanisms and the (eps, delta) plumbing of ``experiments/peers.py``.

Modules (one job each):

* :mod:`.targets`  - calibrate any RDP-certified mechanism to an (eps, delta)-DP target with
  privbayes' own accountant; the analytic Gaussian mechanism (Balle & Wang 2018).
* :mod:`.rules`    - the public rules that set every hyper-parameter (privbayes' prior
  precision, OPS radius, objective perturbation's regulariser, DP-GD's schedule).
* :mod:`.objpert`  - objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Alg. 2).
* :mod:`.dpgd`     - full-batch DP gradient descent with RDP accounting.
* :mod:`.counts`   - Laplace / Gaussian mechanisms on counts and histograms.
* :mod:`.bridge`   - runs IBM diffprivlib in its own interpreter (``dpl_runner.py``).

Neighbours are replace-one with n public throughout, as in privbayes.
"""
