"""Session valuation (SPEC L6, C8): which memories of a closing session are worth promoting.

The deterministic rule always holds: a memory that is important, was recalled at least once, or was
flagged ``must_promote`` by the caller is promoted. An LLM engine may add to it: it is shown the
other session memories under short refs ("1", "2", ...) and says which are worth keeping beyond the
session; refs it was not shown are ignored. Without an LLM engine (``rules``), or when the engine
fails, times out or refuses the task, the deterministic rule alone decides. Memory content never
reaches the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

from engram.actors.engine_outputs import VALUE_SESSION_TASK, SessionValuation
from engram.actors.engines.base import Engine, EngineError, StructuredRequest, generate_with_retry
from engram.actors.prompts import session_value_messages
from engram.models.domain import Memory
from engram.models.settings import EvolutionSettings

log = logging.getLogger(__name__)

Valuer = Callable[[Sequence[Memory], Collection[str]], Awaitable[set[str]]]
"""Chooses which session memories to promote: (session memories, must_promote ids) -> ids."""

# Memories per engine request: a small local model keeps track of a short list far better.
MEMORIES_PER_REQUEST = 25
# Characters of each memory shown to the engine (memories are short facts; this bounds the prompt).
PROMPT_CHARS_PER_MEMORY = 300


def deterministic_value(memories: Sequence[Memory], must_promote: Collection[str]) -> set[str]:
    """The rule that always holds: important, recalled at least once, or flagged by the caller."""
    flagged = set(must_promote)
    return {m.memory_id for m in memories if m.is_important or m.recall_count > 0 or m.memory_id in flagged}


def value_requests(memories: Sequence[Memory]) -> list[tuple[dict[str, str], StructuredRequest]]:
    """One request per ``MEMORIES_PER_REQUEST`` memories, each with its ref -> memory id map.

    Memories without content (a shredded key) are not asked about.
    """
    asked = [m for m in memories if m.content]
    batches: list[tuple[dict[str, str], StructuredRequest]] = []
    for start in range(0, len(asked), MEMORIES_PER_REQUEST):
        chunk = asked[start : start + MEMORIES_PER_REQUEST]
        refs = {str(i): m.memory_id for i, m in enumerate(chunk, 1)}
        shown = [(str(i), (m.content or "")[:PROMPT_CHARS_PER_MEMORY]) for i, m in enumerate(chunk, 1)]
        request = StructuredRequest(
            task=VALUE_SESSION_TASK,
            messages=session_value_messages(shown),
            output=SessionValuation,
            payload={
                "memories": [
                    {"ref": ref, "memory_id": m.memory_id, "content": text}
                    for (ref, text), m in zip(shown, chunk, strict=True)
                ]
            },
            max_tokens=min(64 + 48 * len(chunk), 2048),
        )
        batches.append((refs, request))
    return batches


def kept_ids(valuation: SessionValuation, refs: Mapping[str, str]) -> set[str]:
    """The memory ids an engine said to keep; refs it was not given are ignored."""
    return {refs[v.ref.strip()] for v in valuation.memories if v.keep and v.ref.strip() in refs}


class EngineValuer:
    """The default ``Valuer``: the deterministic rule, plus what an LLM engine says to keep."""

    def __init__(self, engine: Engine | None, settings: EvolutionSettings) -> None:
        """``settings.llm_timeout_s`` bounds the engine call (read per call: it changes at run time)."""
        self._engine = engine if engine is not None and engine.is_llm else None
        self._settings = settings

    async def __call__(self, memories: Sequence[Memory], must_promote: Collection[str]) -> set[str]:
        chosen = deterministic_value(memories, must_promote)
        engine = self._engine
        if engine is None:
            return chosen
        batches = value_requests([m for m in memories if m.memory_id not in chosen])
        if not batches:
            return chosen
        kept: set[str] = set()
        try:
            async with asyncio.timeout(self._settings.llm_timeout_s):
                results = await generate_with_retry(engine, [request for _, request in batches])
            for (refs, _), result in zip(batches, results, strict=True):
                if isinstance(result, SessionValuation):
                    kept |= kept_ids(result, refs)
                else:
                    kind = type(result).__name__ if isinstance(result, EngineError) else "bad output"
                    log.warning(
                        "session valuation by %s failed for %d memories (%s); the deterministic rule decides",
                        engine.name,
                        len(refs),
                        kind,
                    )
        except Exception as exc:  # whatever went wrong (timeout, a broken engine), the rule decides
            log.warning(
                "session valuation by %s failed (%s); the deterministic rule decides",
                engine.name,
                type(exc).__name__,
            )
            return chosen
        return chosen | kept
