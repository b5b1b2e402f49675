"""Freezing a started process's heap (#11)."""

from __future__ import annotations

import gc

import pytest

from engram.serve.heap import FullCollections, freeze_long_lived

pytestmark = pytest.mark.unit


def test_every_live_object_is_frozen_and_later_ones_are_collected_as_before() -> None:
    kept = [object() for _ in range(100)]
    try:
        frozen = freeze_long_lived()
        assert frozen == gc.get_freeze_count() and frozen >= len(kept)
        assert not any(o is kept for o in gc.get_objects())  # frozen lists are out of the collector's view
        later = [object()]
        assert any(o is later for o in gc.get_objects())
    finally:
        gc.unfreeze()


def test_full_collections_are_counted_with_their_time_and_younger_ones_are_not() -> None:
    counter = FullCollections()
    counter.install()
    counter.install()  # once per process: not counted twice
    try:
        assert counter.figures() == {"full_collections": 0.0, "full_collection_ms": 0.0}
        gc.collect(0)
        gc.collect(1)
        assert counter.count == 0
        gc.collect()
        gc.collect(2)
        assert counter.count == 2 and counter.figures()["full_collection_ms"] >= 0
        assert counter.total_ms > 0
    finally:
        gc.callbacks.remove(counter._on_phase)
