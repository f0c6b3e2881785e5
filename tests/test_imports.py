"""Heavy dependencies load where they are used (issue 12 item 15): a test that fails if
someone re-adds a heavy top-level import. Each check runs in a fresh interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pymc", "pytensor", "arviz", "matplotlib", "numba", "sklearn", "pandas", "xarray")


def _loaded(code: str) -> set[str]:
    """Top-level packages (and scipy submodules) imported after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    names = json.loads(res.stdout.splitlines()[-1])
    return {n for n in names if "." not in n or n.startswith("scipy.")}


def test_import_privbayes_loads_no_numerics():
    mods = _loaded("import privbayes")
    assert not mods & {*HEAVY, "numpy", "scipy"}


def test_cli_parser_loads_no_numerics():
    mods = _loaded(
        "from privbayes.cli import build_parser\n"
        "build_parser().parse_args(['calibrate', '--model', 'logistic', '--n', '1', "
        "'--lam', '2', '--eps', '1'])"
    )
    assert not mods & {*HEAVY, "numpy", "scipy"}


def test_conjugate_release_loads_no_heavy_dependency():
    mods = _loaded("import privbayes as pb\npb.sample(pb.BetaBernoulli(), [0, 1, 1], 2.0, 1.0)")
    assert not mods & set(HEAVY)
    assert "scipy.stats" not in mods  # ~0.4 s; the conjugate path needs only special/optimize


@pytest.mark.parametrize("name", ["PrivateLogisticRegression", "audit", "datasets"])
def test_lazy_names_load_on_first_use(name):
    mods = _loaded(f"import privbayes\nprivbayes.{name}")
    if name == "PrivateLogisticRegression":
        assert "sklearn" in mods  # where it is used
    assert not mods & {"pymc", "arviz"}


def test_imh_release_loads_no_arviz():
    code = (
        "import numpy as np, privbayes as pb\n"
        "X = pb.preprocessing.clip_rows(np.random.default_rng(0).normal(size=(40, 2)), 0.9)\n"
        "pb.sample(pb.BayesianLogisticRegression(beta=0.1), (X, X[:, 0] > 0), 2.0, 1.0, rng=0)"
    )
    assert not _loaded(code) & set(HEAVY)


def test_every_public_name_resolves():
    import privbayes

    for name in privbayes.__all__:
        assert getattr(privbayes, name) is not None
    assert set(privbayes.__all__) <= set(dir(privbayes))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        privbayes.nope  # noqa: B018
