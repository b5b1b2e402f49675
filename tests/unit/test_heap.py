"""Freezing a started process's heap (#11)."""

from __future__ import annotations

import gc

import pytest

from engram.serve.heap import (
    FULL_COLLECTION_EVERY,
    FullCollections,
    freeze_long_lived,
    heap_census,
    space_full_collections,
)

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


class _Probe:
    """A type of this test's own, to find among the census's names."""


def test_the_census_counts_what_a_full_collection_walks_by_type_and_not_the_frozen() -> None:
    frozen_probes = [_Probe() for _ in range(50)]
    try:
        freeze_long_lived()
        later = [_Probe() for _ in range(30)]
        census = heap_census(top=10_000)
        # Only the 30 made after the freeze are walked; the 50 frozen ones are counted apart.
        assert census["_Probe"] == len(later)
        assert census["frozen"] == gc.get_freeze_count() >= len(frozen_probes)
        assert census["tracked"] >= len(later) + 1
        # The most common types first, after the two totals; values are counts, never contents.
        assert list(heap_census(top=2))[:2] == ["tracked", "frozen"] and len(heap_census(top=2)) == 4
    finally:
        gc.unfreeze()


def test_full_collections_are_spaced_and_the_younger_generations_kept() -> None:
    before = gc.get_threshold()
    try:
        space_full_collections()
        # 10 is CPython's default; in a Recall replica under load it meant a full collection every
        # ~12 s, each walking every snapshot loaded since the warm-up (docs/benchmarks.md).
        assert gc.get_threshold() == (before[0], before[1], FULL_COLLECTION_EVERY)
        assert FULL_COLLECTION_EVERY > 10
    finally:
        gc.set_threshold(*before)
