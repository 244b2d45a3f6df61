# ragmon — the two front-door commands are `make run` and `make test`.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast test-alibi bench lint clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch is pinned: a looser range would pull a multi-GB CUDA build.
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[ml,dev]"
	touch $(STAMP)

install: $(STAMP)

## Start ragmon with its embedded default (broker, Redis, API, workers, Prometheus if installed) and demo traffic.
run: install
	$(BIN)/ragmon up --demo

## The test suite (real Tansu broker, real Redis, real Prometheus where installed).
test: install
	$(BIN)/pytest -q

## Parity of our MMD² with alibi-detect's, in alibi's own virtual environment (BSL 1.1, numpy<2).
test-alibi:
	bash tests/alibi/setup_venv.sh
	PYTHONPATH=. .venv-alibi/bin/python -m pytest -q --confcutdir=tests/alibi tests/alibi

test-fast: install
	$(BIN)/pytest -q -m "not slow"

## Benchmarks: each writes a report under tests/bench/reports/.
bench: install
	PYTHONPATH=. $(BIN)/python -m tests.bench.run_all

lint: install
	$(BIN)/ruff check service workers tests dashboards
	$(BIN)/mypy service workers dashboards

clean:
	rm -rf .ragmon .pytest_cache .mypy_cache .ruff_cache
