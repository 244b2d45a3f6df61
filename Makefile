# ragmon — the two front-door commands are `make run` and `make test`.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install host-run host-test run test test-fast test-alibi bench lint clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch is pinned: a looser range would pull a multi-GB CUDA build.
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[ml,dev]"
	touch $(STAMP)

install: $(STAMP)

## Debian packages, npm type checker, alibi venv: one script (deploy/setup/host.sh), quick when all is present.
host-run:
	bash deploy/setup/host.sh run

host-test:
	bash deploy/setup/host.sh test

## Start ragmon with its embedded default (broker, Redis, API, workers, Prometheus, Alertmanager) and demo traffic.
run: install host-run
	$(BIN)/ragmon up --demo

## The test suite (real Tansu broker, Redis, Prometheus, browser), then the alibi-detect parity check.
## RAGMON_SETUP_DONE=1 turns a missing tool into a failure: the set-up above installs every one.
test: install host-test
	RAGMON_SETUP_DONE=1 $(BIN)/pytest -q
	$(MAKE) --no-print-directory test-alibi

## Parity of our MMD² with alibi-detect's, in alibi's own virtual environment (BSL 1.1, numpy<2).
test-alibi:
	bash tests/alibi/setup_venv.sh
	PYTHONPATH=. .venv-alibi/bin/python -m pytest -q --confcutdir=tests/alibi tests/alibi

test-fast: install host-test
	$(BIN)/pytest -q -m "not slow"

## Benchmarks: each writes a report under tests/bench/reports/.
bench: install
	PYTHONPATH=. $(BIN)/python -m tests.bench.run_all

lint: install
	$(BIN)/ruff check service workers tests dashboards
	$(BIN)/mypy service workers dashboards

clean:
	rm -rf .ragmon .pytest_cache .mypy_cache .ruff_cache
