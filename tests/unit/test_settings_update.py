"""Run-time settings overrides (O1): validated whole, applied in place, refused when invalid."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engram.models.settings import Settings
from engram.serve.settings_update import apply_overrides

pytestmark = pytest.mark.unit


def test_overrides_apply_in_place_to_shared_sections() -> None:
    settings = Settings()
    recall = settings.recall  # a component holding the section sees the change
    apply_overrides(settings, {"recall": {"relevance_weight": 0.2, "weight_weight": 0.8}})
    assert (recall.relevance_weight, recall.weight_weight) == (0.2, 0.8)
    assert recall.min_relevance == 0.3


def test_invalid_overrides_change_nothing() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        apply_overrides(settings, {"capacity": {"app_limit": 5}, "recall": {"min_relevance": 7}})
    assert settings.capacity.app_limit == 200
    with pytest.raises(ValueError, match="cannot change at run time"):
        apply_overrides(settings, {"storage": {"data_dir": "/elsewhere"}})
