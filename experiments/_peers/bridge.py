"""Call IBM diffprivlib in its own interpreter (``dpl_runner.py`` as a subprocess).

diffprivlib 0.6.6 (the latest release) imports ``sklearn.tree._tree.DOUBLE``, which
scikit-learn 1.8 removed, so it cannot share privbayes' environment. ``make peers-env``
installs the ``peers`` extra's pins into ``.venv-peers``; :func:`find_python` looks, in
order, at an explicit path, ``$PRIVBAYES_PEERS_PYTHON``, ``<repo>/.venv-peers/bin/python``
and the running interpreter, and takes the first that imports diffprivlib. None found:
the study runs without diffprivlib and says so.

Arrays cross as .npy files in a temporary folder, so diffprivlib sees exactly the
training split the other methods see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

RUNNER = Path(__file__).resolve().parent / "dpl_runner.py"
ROOT = Path(__file__).resolve().parents[2]
ENV_VAR = "PRIVBAYES_PEERS_PYTHON"
TIMEOUT = 1800  # seconds per subprocess call


def _child_env() -> dict:
    """The child's environment: one BLAS thread (--jobs parallelises), no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


@lru_cache(maxsize=8)
def probe(python: str) -> dict | None:
    """The versions diffprivlib's runner reports under ``python``, or None if it fails."""
    try:
        proc = subprocess.run(
            [python, str(RUNNER), "--versions"],
            capture_output=True,
            text=True,
            timeout=120,
            env=_child_env(),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def candidates(explicit: str | None = None) -> list[str]:
    out = [explicit, os.environ.get(ENV_VAR), str(ROOT / ".venv-peers" / "bin" / "python")]
    out.append(sys.executable)
    return [p for p in out if p]


def find_python(explicit: str | None = None) -> tuple[str | None, dict | None]:
    """(interpreter, versions) of the first candidate that imports diffprivlib."""
    for python in candidates(explicit):
        if python != sys.executable and not Path(python).exists():
            continue
        found = probe(python)
        if found is not None:
            return python, found
    return None, None


def run(python: str, jobs: list[dict], arrays: dict[str, np.ndarray] | None = None) -> dict:
    """Run ``jobs`` (see dpl_runner.py) under ``python``; returns {id: result}.

    Raises RuntimeError with the child's stderr when it fails.
    """
    arrays = arrays or {}
    with tempfile.TemporaryDirectory(prefix="privbayes-dpl-") as tmp:
        folder = Path(tmp)
        for name, value in arrays.items():
            np.save(folder / f"{name}.npy", np.asarray(value))
        spec = {"jobs": jobs, "arrays": sorted(arrays)}
        (folder / "spec.json").write_text(json.dumps(spec))
        proc = subprocess.run(
            [python, str(RUNNER), str(folder)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=_child_env(),
        )
        if proc.returncode != 0:
            raise RuntimeError(f"diffprivlib runner failed:\n{proc.stderr[-3000:]}")
        return json.loads((folder / "result.json").read_text())["results"]
