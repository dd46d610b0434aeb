# Quick start: `make demo` then `make test`. Needs only Python 3.11 and make.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
INPUTS ?= $(wildcard demo/run demo/vault demo/library demo/case)

.PHONY: demo test test-fast test-system ui bench mutation eval-llm clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found (set PYTHON=python3)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The stamp files re-install only when pyproject.toml changes. PYTHONWARNINGS silences setuptools'
# editable-install banner, which tells a user nothing they can act on.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed

$(VENV)/.installed-mutation: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,mutation]'
	touch $@ $(VENV)/.installed

# Copies the bundled examples to demo/ once (so the checked-in examples are never modified), runs
# the proximity job on the run directory and the structure job on the vault through Dagster, then
# the report job on both (their pictures); observes and checks the example library as it is (the
# library_observe job, then its report) and re-reads the example case's published batch (the
# case_batch job reuses it, no model): every product shows in `make ui`, nothing invented.
demo: $(VENV)/.installed
	@for d in run vault library case; do test -d demo/$$d || { mkdir -p demo && cp -r examples/$$d demo/; }; done
	$(BIN)/hypograph proximity demo/run
	@echo
	$(BIN)/hypograph structure demo/vault
	@echo
	$(BIN)/hypograph report demo/run
	@echo
	$(BIN)/hypograph report demo/vault
	@echo
	$(BIN)/hypograph library demo/library --report
	@echo
	$(BIN)/hypograph batch demo/case
	@echo
	@echo "Browse the runs, lineage and checks of every input: make ui"

# The suite on $(WORKERS) pytest-xdist workers (make test WORKERS=0: one process), each test file
# on one worker (its module fixtures built once), each worker with its own Dagster instance.
WORKERS ?= 2
test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile

# The same suite in two parts: without the system tests (those that start Chromium, the web server
# and daemon, PostgreSQL, Redis and Celery, an object store or network namespaces, or kill
# processes: tests/system/ and tests/conftest.py SYSTEM_TESTS), and only them.
test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile -m "not system"

test-system: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile -m system

# The Dagster web UI and daemon on 127.0.0.1:$(PORT) (make ui PORT=3001), on the instance the CLI
# writes to ($$DAGSTER_HOME, else ~/.hypograph/dagster); $(INPUTS) are registered first. A busy
# port is refused in one line before anything starts.
PORT ?= 3000
ui: $(VENV)/.installed
	$(BIN)/hypograph ui $(INPUTS) --port $(PORT)

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/proximity.py --profile sparse --sizes 20000,100000
	$(BIN)/python benchmarks/proximity.py --profile dense --sizes 20000,100000
	$(BIN)/python benchmarks/library_recall.py
	$(BIN)/python benchmarks/commands.py --sizes 500,5000,20000
	$(BIN)/python benchmarks/ui_launch.py --sizes 500,5000

# Mutation testing of the safety-critical modules (not part of `make test`: tens of minutes on two
# cores). MODULES="hypograph/journal.py ..." narrows it; results and equivalents: benchmarks/mutation.md.
mutation: $(VENV)/.installed-mutation
	$(BIN)/python benchmarks/mutation.py $(MODULES)

# Every model-using flow against a real local model (SmolLM2-135M on llama-cpp-python's server, built
# from source once into ~/.cache/hypograph-eval-llm, about 15 min); not part of `make test`.
# SHARED_VAULTS=DIR: where covid1/ and eggs1/ are (default ../shared/examples/vaults).
eval-llm: $(VENV)/.installed
	nice -n 5 $(BIN)/python eval/llm.py $(if $(SHARED_VAULTS),--shared-vaults $(SHARED_VAULTS))

clean:
	rm -rf demo .pytest_cache .mutation
