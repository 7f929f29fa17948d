# Two entry points for a fresh machine: `make demo` (set up + run the demo sweep) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU wheel of torch lies on disk; any other torch spec pulls a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

.PHONY: setup demo test bench
setup: $(BIN)/.installed

demo: setup
	$(BIN)/ragbench sweep configs/demo.yaml

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/embed_stage.py
