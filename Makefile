# Two entry points a newcomer needs: `make demo` and `make test`.
# Both create a local virtual environment (.venv) and install ember into it first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m ember.examples.demo

test: $(STAMP)
	$(VENV)/bin/ruff check ember tests benchmarks
	$(VENV)/bin/ruff format --check ember tests benchmarks
	$(VENV)/bin/mypy ember
	$(PY) -m pytest -n auto -q

lint: $(STAMP)
	$(VENV)/bin/ruff check ember tests benchmarks
	$(VENV)/bin/ruff format --check ember tests benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy ember

bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/ffi_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
