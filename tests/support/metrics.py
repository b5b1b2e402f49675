"""Engram's metrics recorded in memory for the length of a test (no Ray)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from engram.models.metrics import MemoryInstruments, install


@contextlib.contextmanager
def recorded_metrics() -> Iterator[MemoryInstruments]:
    """Install in-memory instruments; the previous backend is put back after."""
    memory = MemoryInstruments()
    previous = install(memory)
    try:
        yield memory
    finally:
        install(previous)
