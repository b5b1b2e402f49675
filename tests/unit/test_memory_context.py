"""A memory's context (#31) as plain data: its bound, what the lexicon and a cold recall see."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pydantic import ValidationError

from engram.actors import isolation
from engram.actors.cold_recall import candidates
from engram.actors.lexical import tokenize
from engram.actors.snapshot import lexical_terms
from engram.models.api import AddStructuredRequest, BatchAddStructuredRequest, RecallRequest
from engram.models.api_base import MAX_CONTEXT_CHARS, bounded_context
from engram.models.domain import Memory
from engram.models.enums import Level, MemType, Ownership, Status
from engram.storage.vector_copies import PlacedCopy
from tests.support.memories import build_memory

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _memory(content: str, context: str | None) -> Memory:
    return build_memory(NOW, content=content, context=context)


def _placed(memory_id: str, content: str, context: str | None) -> PlacedCopy:
    return PlacedCopy(
        memory_id,
        "u1",
        "",
        None,
        Level.GLOBAL,
        Ownership.USER,
        MemType.EPISODIC,
        Status.ACTIVE,
        NOW - timedelta(days=1),
        None,
        None,
        "m",
        content,
        context,
        np.array([1.0, 0.0], dtype=np.float32),
    )


def test_a_blank_context_is_none_and_a_long_one_keeps_its_end() -> None:
    assert bounded_context(None) is None and bounded_context("  \n ") is None
    long = "x" * MAX_CONTEXT_CHARS + " where did you go?"
    kept = bounded_context(long)
    assert kept is not None and len(kept) == MAX_CONTEXT_CHARS and kept.endswith("where did you go?")


def test_the_lexicon_sees_the_content_then_the_context() -> None:
    assert lexical_terms(_memory("I went to Woodhaven", None)) == ["went", "woodhaven"]
    with_context = lexical_terms(_memory("I went to Woodhaven", "Where was the camping trip?"))
    assert with_context[:2] == ["went", "woodhaven"] and with_context[2:] == tokenize("camping trip")


def test_a_cold_recall_picks_a_memory_by_the_words_of_its_context() -> None:
    answer = _placed("m1", "Caroline: I went to Woodhaven.", "Melanie: Where did you go camping last summer?")
    others = [_placed(f"m{i}", f"Caroline: note {i} about painting", None) for i in range(2, 40)]
    flt = isolation.resolve(RecallRequest(user_id="u1", query="camping last summer"))
    # The query's vector is as far from every memory, and the answer comes last: only the words
    # can pick it.
    away = np.array([0.0, 1.0], dtype=np.float32)
    picked = candidates([*others, answer], flt, away, "camping summer", NOW, 2)
    assert picked[0].memory_id == "m1"
    picked = candidates([*others, replace(answer, context=None)], flt, away, "camping summer", NOW, 2)
    assert "m1" not in [p.memory_id for p in picked]


def test_a_context_over_the_bound_is_refused_at_the_boundary() -> None:
    fields = {"user_id": "u1", "ownership": "USER", "mem_type": "EPISODIC", "content": "Went to Woodhaven"}
    with pytest.raises(ValidationError, match="context"):
        AddStructuredRequest.model_validate({**fields, "context": "x" * (MAX_CONTEXT_CHARS + 1)})
    item = {"ownership": "USER", "mem_type": "EPISODIC", "content": "Went to Woodhaven", "context": "Where?"}
    batch = BatchAddStructuredRequest.model_validate({"user_id": "u1", "items": [item]})
    assert [r.context for r in batch.item_requests()] == ["Where?"]
