"""The parser as a whole: entry points, help texts, and one rule for flags a model does not
use (issue 12 item 12: they were sometimes ignored, sometimes refused)."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from privbayes.cli import COMMANDS, _models, build_parser

ROOT = Path(__file__).resolve().parents[2]
# a value each model flag accepts (refusals are checked before the value is used)
VALUE = {
    "column": ["flag"],
    "categories": ["a,b"],
    "positive": ["1"],
    "negative": ["0"],
    "alpha": ["1"],
    "beta": ["1"],
    "max_count": ["5"],
    "mu": ["0"],  # 0 == False: a zero value must still count as given
    "sigma": ["1"],
    "noise_sigma": ["1"],
    "low": ["-1"],
    "high": ["1"],
    "label": ["flag"],
    "classes": ["a,b"],
    "features": ["age"],
    "c": ["1"],
    "scale": ["2"],
    "clip": [],
    "intercept": [],
    "intercept_scaling": ["0.3"],
    "backend": ["imh"],
    "d": ["1"],
    "radius": ["2"],
    "max_steps": ["50"],
    "schedule": ["stationary"],
    "margin_scale": ["10"],
    "target": ["y"],
    "y_bound": ["3"],
    "noise_sd": ["1"],
}
BASE = {
    "sample": ["--data", "no-such-file.csv", "--lam", "2", "--eps", "1"],
    "calibrate": ["--n", "10", "--lam", "2", "--eps", "1"],
    "audit": ["--lam", "2", "--eps", "1", "--trials", "100"],
}


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_option_has_help():
    """Issue 12 item 11: --eps, --delta, --ledger and query/calibrate options had none."""
    missing = [
        f"{name} {'/'.join(a.option_strings) or a.dest}"
        for name, sub in _subparsers().items()
        for a in sub._actions
        if not a.help  # argparse.SUPPRESS marks flags only parsed to be refused
    ]
    assert set(_subparsers()) == set(COMMANDS) and not missing


def test_method_lists_match_the_library():
    from privbayes.mechanisms import CONJUGATE_METHODS
    from privbayes.models.logistic import GLM_METHODS

    assert _models.CONJUGATE_METHODS == CONJUGATE_METHODS
    assert _models.GLM_METHODS == GLM_METHODS


CASES = [
    (command, adapter.name, dest)
    for command in ("sample", "calibrate", "audit")
    for adapter in _models.ADAPTERS
    if command in adapter.flags
    for dest in _models.command_flags(command)
    if dest not in adapter.flags[command]
]


@pytest.mark.parametrize("command,model,dest", CASES)
def test_flags_a_model_does_not_use_are_refused(run, command, model, dest):
    flag = _models.FLAGS[dest][0][0]
    code, out, err = run(command, "--model", model, *BASE[command], flag, *VALUE[dest])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{flag} does not apply to" in err  # before any data file is opened
    assert "no such file" not in err


def test_refusal_cases_cover_the_known_faults():
    got = {(c, m, d) for c, m, d in CASES}
    for case in [
        ("sample", "beta-bernoulli", "features"),
        ("sample", "beta-bernoulli", "clip"),
        ("sample", "beta-bernoulli", "c"),
        ("calibrate", "logistic", "alpha"),
        ("sample", "dirichlet-categorical", "beta"),
        ("sample", "logistic", "column"),
        ("sample", "gamma-poisson", "low"),
        ("sample", "normal", "max_count"),
        ("sample", "normal", "alpha"),
        ("calibrate", "gamma-poisson", "mu"),
        ("sample", "normal", "intercept"),
        ("audit", "normal", "c"),
        ("sample", "multinomial", "positive"),
        ("sample", "multinomial", "column"),
        ("calibrate", "multinomial", "max_count"),
        ("sample", "logistic", "classes"),
        ("audit", "dirichlet-categorical", "classes"),
    ]:
        assert case in got


@pytest.mark.parametrize(
    "model,dest,a,b",
    [
        ("beta-bernoulli", "alpha", ["1"], ["3", "2"]),
        ("beta-bernoulli", "beta", ["1"], ["4"]),
        ("dirichlet-categorical", "alpha", ["1", "1", "1"], ["3", "3", "3"]),
        ("dirichlet-categorical", "categories", ["a,b"], ["a,b,c,d"]),
        ("logistic", "beta", ["0.01"], ["0.02"]),
        ("logistic", "c", ["1"], ["2"]),
    ],
)
def test_calibrate_flags_that_apply_are_used(run, model, dest, a, b):
    flag = _models.FLAGS[dest][0][0]
    base = ("calibrate", "--model", model, "--n", "50", "--lam", "2", "--eps", "0.3")
    outs = [run(*base, flag, *v)[1] for v in (a, b)]
    assert json.loads(outs[0])["r"] != json.loads(outs[1])["r"]


def test_method_ops_is_refused_for_conjugate_models(run, csv_file):
    code, _, err = run(
        "sample", "--model", "beta-bernoulli", "--data", csv_file, "--column", "flag",
        "--lam", "2", "--eps", "1", "--method", "ops",
    )  # fmt: skip
    assert code == 2
    assert "--method ops applies to --model logistic, multinomial and linear only" in err


def test_prior_given_twice_is_refused(run):
    code, _, err = run(
        "calibrate", "--model", "beta-bernoulli", "--n", "5", "--lam", "2", "--eps", "1",
        "--alpha", "1", "2", "--beta", "3",
    )  # fmt: skip
    assert code == 2 and "given twice" in err


def test_python_dash_m_and_the_entry_point():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [sys.executable, "-m", "privbayes", "--version"], capture_output=True, text=True, env=env
    )
    assert res.returncode == 0 and res.stdout.startswith("privbayes ")
    assert 'privbayes = "privbayes.cli:main"' in (ROOT / "pyproject.toml").read_text()


def test_help_shows_the_default_ledger(monkeypatch, capsys):
    monkeypatch.delenv("PRIVBAYES_LEDGER", raising=False)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["budget", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "privbayes-ledger.sqlite" in text and "$PRIVBAYES_LEDGER" in text
    monkeypatch.setenv("PRIVBAYES_LEDGER", "/srv/ledgers/main.sqlite")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sample", "--help"])
    assert "/srv/ledgers/main.sqlite" in " ".join(capsys.readouterr().out.split())
