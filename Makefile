# `make train` and `make test` each do their own set-up on a fresh machine (offline but for the package registries).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install train test test-all lint format bench smoke clean

install: $(STAMP)

# torch and torchvision are pinned as a pair in constraints.txt: torchvision's wheels only work with the torch build
# they were made for, and an unpinned torch pulls the registry's newest build.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

train: install
	$(PY) train.py

test: install
	$(PY) -m pytest -m "not slow" -q

test-all: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install
	$(PY) scripts/bench.py

smoke: install
	$(PY) train.py -m experiment=corel/table2 debug=smoke
	$(PY) scripts/make_tables.py corel/table2

clean:
	rm -rf outputs/runs outputs/multirun outputs/tables .pytest_cache
