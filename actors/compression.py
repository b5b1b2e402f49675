"""The engine's summary of a compression group (L5): an LLM writes it, the rules engine does not.

``EngineSummarizer`` is the lifecycle's ``Summarize``: it shows an LLM engine the group's memories
(dated, one per line) and asks for one statement that keeps what they share and says how often and
since when. Without an LLM engine, or when it fails, times out or answers nothing usable, it
returns None and compression writes the deterministic merge (``models.rules.compression``).
Memory content never reaches the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from pydantic import BaseModel, Field

from engram.actors.engines.base import ChatMessage, Engine, StructuredRequest, generate_with_retry
from engram.models.api import MAX_CONTENT_CHARS
from engram.models.domain import Memory
from engram.models.settings import EvolutionSettings

log = logging.getLogger(__name__)

COMPRESS_TASK = "compress_memories"
# Memories shown to the engine per group, and characters of each (bounds the prompt).
PROMPT_MEMORIES = 50
PROMPT_CHARS_PER_MEMORY = 300

_SYSTEM = (
    "You consolidate a user's long-term memory. You are given several similar memories, each with "
    "its date. Write ONE short statement, in the language of the memories, that keeps everything "
    "they have in common (who, what, where, which item) and says how often and over which dates it "
    "happened, so that it still answers the questions the memories answer. Add no fact that is not "
    'in the memories. Answer only JSON: {"text": "..."}.'
)
_EXAMPLE = (
    "Memories:\n- (2026-03-02) Bought a croissant at Maison Kayser\n"
    "- (2026-03-09) Bought a croissant at Maison Kayser\n- (2026-03-16) Bought croissants at Maison Kayser",
    '{"text": "Buys croissants at Maison Kayser, usually weekly (3 times from 2026-03-02 to 2026-03-16)"}',
)


class CompressionSummary(BaseModel):
    """One statement summarising a group of similar memories."""

    text: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)


def summary_messages(memories: Sequence[Memory]) -> tuple[ChatMessage, ...]:
    """The prompt over a group: the instruction, one worked example, then the group's dated memories."""
    lines = "\n".join(
        f"- ({m.valid_at:%Y-%m-%d}) {(m.content or '')[:PROMPT_CHARS_PER_MEMORY]}"
        for m in memories[:PROMPT_MEMORIES]
    )
    more = len(memories) - PROMPT_MEMORIES
    tail = f"\n(and {more} more like these)" if more > 0 else ""
    return (
        ChatMessage("system", _SYSTEM),
        ChatMessage("user", _EXAMPLE[0]),
        ChatMessage("assistant", _EXAMPLE[1]),
        ChatMessage("user", f"Memories ({len(memories)} in all):\n{lines}{tail}"),
    )


def summary_request(memories: Sequence[Memory]) -> StructuredRequest:
    """The engine request for one group's summary."""
    return StructuredRequest(
        task=COMPRESS_TASK,
        messages=summary_messages(memories),
        output=CompressionSummary,
        payload={"memories": [{"memory_id": m.memory_id, "content": m.content or ""} for m in memories]},
        max_tokens=256,
    )


class EngineSummarizer:
    """A lifecycle ``Summarize`` over an engine; None (the deterministic merge) without an LLM."""

    def __init__(self, engine: Engine | None, settings: EvolutionSettings) -> None:
        """``settings.llm_timeout_s`` bounds each call (read per call: it changes at run time)."""
        self._engine = engine if engine is not None and engine.is_llm else None
        self._settings = settings

    async def __call__(self, memories: Sequence[Memory]) -> str | None:
        engine = self._engine
        if engine is None or not memories:
            return None
        try:
            async with asyncio.timeout(self._settings.llm_timeout_s):
                [result] = await generate_with_retry(engine, [summary_request(memories)])
        except Exception as exc:  # whatever went wrong (timeout, a broken engine), the merge decides
            log.warning(
                "compression summary by %s failed (%s); rules merge used", engine.name, type(exc).__name__
            )
            return None
        if not isinstance(result, CompressionSummary) or not result.text.strip():
            log.warning(
                "compression summary by %s unusable (%s); rules merge used",
                engine.name,
                type(result).__name__,
            )
            return None
        return result.text.strip()
