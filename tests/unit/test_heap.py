"""Freezing a started process's heap (#11)."""

from __future__ import annotations

import gc

import pytest

from engram.serve.heap import freeze_long_lived

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
