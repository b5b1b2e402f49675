# The README's two commands live here so that CI and people run exactly the same thing.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: install test lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,postgres]'

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest
