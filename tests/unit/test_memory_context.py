"""A memory's context (#31) as plain data: its bound, where it is sealed, what the lexicon sees."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from engram.actors.lexical import tokenize
from engram.actors.snapshot import lexical_terms
from engram.models.api import AddStructuredRequest, BatchAddStructuredRequest
from engram.models.api_base import MAX_CONTEXT_CHARS, bounded_context
from engram.models.domain import Memory
from engram.models.enums import Level, MemType, Ownership
from engram.storage.crypto import ContentCipher
from engram.storage.repositories.rows import Labels, open_labels, seal_labels

pytestmark = pytest.mark.unit

CIPHER = ContentCipher("u1", b"k" * 32)
NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _memory(content: str, context: str | None) -> Memory:
    return Memory(
        memory_id="m1",
        user_id="u1",
        app_id="",
        level=Level.GLOBAL,
        ownership=Ownership.USER,
        mem_type=MemType.EPISODIC,
        content=content,
        weight=0.5,
        weight_at=NOW,
        created_at=NOW,
        updated_at=NOW,
        valid_at=NOW,
        content_hash="h",
        embedding_model="m",
        context=context,
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


def test_labels_seal_the_context_and_older_blobs_open_without_one() -> None:
    sealed = seal_labels(CIPHER, "m1", ["t"], ["Ana"], "Where do you work?")
    row = {"memory_id": "m1", "labels": sealed}
    assert open_labels(CIPHER, row) == Labels(("t",), ("Ana",), "Where do you work?")
    assert b"work" not in sealed
    # Bound to its memory: another memory's row cannot borrow it.
    assert open_labels(CIPHER, {"memory_id": "m2", "labels": sealed}) == Labels()
    older = CIPHER.seal_bytes(json.dumps({"tags": [], "entities": ["Ana"]}).encode(), "labels:m1")
    assert open_labels(CIPHER, {"memory_id": "m1", "labels": older}).context is None


def test_a_context_over_the_bound_is_refused_at_the_boundary() -> None:
    fields = {"user_id": "u1", "ownership": "USER", "mem_type": "EPISODIC", "content": "Went to Woodhaven"}
    with pytest.raises(ValidationError, match="context"):
        AddStructuredRequest.model_validate({**fields, "context": "x" * (MAX_CONTEXT_CHARS + 1)})
    item = {"ownership": "USER", "mem_type": "EPISODIC", "content": "Went to Woodhaven", "context": "Where?"}
    batch = BatchAddStructuredRequest.model_validate({"user_id": "u1", "items": [item]})
    assert [r.context for r in batch.item_requests()] == ["Where?"]
