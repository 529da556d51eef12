# Only Python >= 3.11 and make are needed: the first `make run` or `make test` creates .venv and installs the
# package with its test extras; the stamp makes later runs instant until pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed

.PHONY: run test bench

run: $(STAMP)
	$(VENV)/bin/openmaic serve $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(ARGS)

# Each benchmarks/NAME.py runs as the module benchmarks.NAME, so benchmarks can share helpers in the package;
# files starting with an underscore are helpers, not benchmarks.
bench: $(STAMP)
	@set -e; for script in benchmarks/[!_]*.py; do \
		[ -e "$$script" ] || { echo "no benchmarks in benchmarks/"; break; }; \
		module=$$(basename "$$script" .py); \
		echo "== benchmarks.$$module"; $(VENV)/bin/python -m "benchmarks.$$module" $(ARGS); \
	done

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@
