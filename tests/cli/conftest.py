"""Fixtures of the command-line tests: small CSV files and a runner."""

import numpy as np
import pytest

from privbayes.cli import main


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "d.csv"
    rows = ["flag,color,income,age"]
    rng = np.random.default_rng(0)
    for i in range(60):
        rows.append(
            f"{i % 3 == 0:d},{['red', 'green', 'blue'][i % 3]},"
            f"{'>50K' if i % 4 == 0 else '<=50K'},{rng.uniform(18, 90):.1f}"
        )
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def logistic_csv(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2)) * 0.4
    y = (X[:, 0] > 0).astype(int)
    path = tmp_path / "lr.csv"
    path.write_text(
        "f1,f2,label\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y, strict=True))
    )
    return path


@pytest.fixture
def run(capsys):
    """run(*argv) -> (exit status, stdout, stderr)."""

    def go(*argv):
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return go
