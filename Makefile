# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo test bench lint redis site clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

demo: venv
	$(PY) -m tools.demo

test: venv
	$(PY) -m ruff check .
	$(PY) -m pytest

bench: venv
	$(PY) -m tools.bench

# Long-running pieces for a crawl by hand (see the README).
redis: venv
	$(PY) -m tools.redis_server

site: venv
	$(PY) -m demosite.server --port 8000

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

clean:
	rm -rf $(VENV) data .pytest_cache .ruff_cache
