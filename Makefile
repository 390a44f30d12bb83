# `make train` and `make test` each do their own set-up on a fresh machine (offline but for the package registries).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install train test test-fast test-all lint format bench smoke clean device-check-prepare device-check-dry-run

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

# The inner loop, in minutes: what runs no whole command (tests/conftest.py marks those by the fixture they take) and
# walks no whole catalogue (each experiment composed and stepped, each docs page or table rebuilt: marked catalogue),
# one pytest-xdist worker per core (each with one torch thread: tests/conftest.py).
test-fast: install
	$(PY) -m pytest -m "not slow and not command and not catalogue" -q -n auto

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

# The device check's luggage (scripts/device_check.sh, docs/benchmarks.md): pure-Python wheels of what the GPU
# image lacks, at this environment's versions, into .whl/; the four Fashion-MNIST files of Debian's package into
# data/fashion_mnist/. Both folders are ignored by git and carried by the device call.
DEVICE_WHEELS := hydra-core omegaconf antlr4-python3-runtime typeguard pytorch-metric-learning
device-check-prepare: install
	$(PY) -m pip wheel -q --no-deps -w .whl $$($(PY) -m pip freeze | grep -i -E "^($$(echo $(DEVICE_WHEELS) | tr ' ' '|'))==")
	test -d /usr/share/datasets/fashion-mnist || apt-get install -y dataset-fashion-mnist
	mkdir -p data/fashion_mnist && cp /usr/share/datasets/fashion-mnist/*.gz data/fashion_mnist/

device-check-dry-run: install
	bash scripts/device_check.sh --dry-run $${TMPDIR:-/tmp}/device_check
