# The two set-up commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench experiments peers-env clean

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

experiments: $(VENV)/.installed peers-env  # full settings (see experiments/README.md)
	$(BIN)/python experiments/beta_bernoulli.py
	$(BIN)/python experiments/statistical_query.py
	$(BIN)/python experiments/logistic_regression.py
	$(BIN)/python experiments/gamma_poisson.py
	$(BIN)/python experiments/normal_mean.py
	$(BIN)/python experiments/noise_aware.py
	$(BIN)/python experiments/peers.py
	$(BIN)/python experiments/linear_regression.py

# diffprivlib (the peers study) in its own venv: the `peers` extra's pins only
PEERS_VENV := .venv-peers
peers-env: $(PEERS_VENV)/.installed

$(PEERS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet $$($(PYTHON) -c "import tomllib; \
		print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project'] \
		['optional-dependencies']['peers']))")
	touch $@

clean:
	rm -rf $(VENV) $(PEERS_VENV) build *.egg-info .pytest_cache .ruff_cache
