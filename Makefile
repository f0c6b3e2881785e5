# The two set-up commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench experiments clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/privbayes demo

test: $(VENV)/.installed
	$(BIN)/ruff check privbayes tests benchmarks experiments
	$(BIN)/python -m pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check privbayes tests benchmarks experiments
	$(BIN)/ruff format --check privbayes tests benchmarks experiments

bench: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python benchmarks/calibration.py
	$(BIN)/python benchmarks/accounting.py

experiments: $(VENV)/.installed  # the paper's experiments, full settings (see experiments/README.md)
	$(BIN)/python experiments/beta_bernoulli.py
	$(BIN)/python experiments/statistical_query.py
	$(BIN)/python experiments/logistic_regression.py
	$(BIN)/python experiments/gamma_poisson.py
	$(BIN)/python experiments/normal_mean.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
