"""Start-up cost of `import privbayes` and of the command line (issue 12 item 15).

Each case runs in a fresh interpreter (as a user's shell command would), several times;
the table gives the median wall time and its ratio to the baseline `python -c pass`
measured in the same run. Targets: `privbayes --help` under 0.5 s, a conjugate
`privbayes sample` under 1 s. Not a test: timings depend on the machine and its load.

    python benchmarks/startup.py [--repeat 7] [--root CHECKOUT]

--root times another checkout (e.g. the main branch, to compare before and after).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOGISTIC = (
    "import numpy as np, privbayes as pb\n"
    "rng = np.random.default_rng(0)\n"
    "X = pb.preprocessing.clip_rows(rng.normal(size=(2000, 10)) * 0.3, 1.0)\n"
    "y = (X[:, 0] > 0).astype(float)\n"
    "pb.sample(pb.BayesianLogisticRegression(beta=0.01), (X, y), 2.0, 1.0, rng=0)\n"
)


def _cases(data: Path) -> list[tuple[str, list[str]]]:
    py = [sys.executable]
    cli = [*py, "-m", "privbayes"]
    return [
        ("python -c pass (baseline)", [*py, "-c", "pass"]),
        ("python -c 'import numpy'", [*py, "-c", "import numpy"]),
        # the floor of any release today: calibration's root finder is scipy.optimize.brentq
        ("python -c 'import scipy.optimize'", [*py, "-c", "import scipy.optimize"]),
        ("import privbayes", [*py, "-c", "import privbayes"]),
        ("privbayes --help", [*cli, "--help"]),
        (
            "privbayes calibrate (beta-bernoulli)",
            [
                *cli,
                "calibrate",
                "--model",
                "beta-bernoulli",
                "--n",
                "1000",
                "--lam",
                "2",
                "--eps",
                "1",
            ],
        ),  # fmt: skip
        (
            "privbayes sample (beta-bernoulli)",
            [
                *cli,
                "sample",
                "--model",
                "beta-bernoulli",
                "--data",
                str(data),
                "--column",
                "x",
                "--lam",
                "2",
                "--eps",
                "1",
            ],
        ),  # fmt: skip
        ("first logistic release (IMH, n=2000, d=10)", [*py, "-c", LOGISTIC]),
    ]


def _time(cmd: list[str], env: dict, repeat: int, cwd: str) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        # cwd outside any checkout: `python -c` and `-m` put the cwd first on sys.path
        subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=cwd)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per case (median)")
    parser.add_argument(
        "--root",
        default=str(Path(__file__).resolve().parents[1]),
        help="checkout whose privbayes is timed (default: this one)",
    )
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(Path(args.root).resolve()))
    env.pop("PRIVBAYES_LEDGER", None)  # no ledger for the timed `sample`
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "flips.csv"
        data.write_text("x\n" + "1\n0\n1\n" * 1000)
        rows = [(name, _time(cmd, env, args.repeat, tmp)) for name, cmd in _cases(data)]
    base = rows[0][1]
    print(f"privbayes from {args.root}; median of {args.repeat} fresh interpreters")
    print(f"{'case':<44}{'seconds':>9}{'x baseline':>12}")
    for name, sec in rows:
        print(f"{name:<44}{sec:>9.3f}{sec / base:>12.1f}")


if __name__ == "__main__":
    main()
