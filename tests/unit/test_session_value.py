"""Session valuation (L6): the deterministic rule, the prompt, the engine's answer and its fallbacks."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel, ValidationError

from engram.actors.engine_outputs import VALUE_SESSION_TASK, MemoryValue, SessionValuation
from engram.actors.engines.base import EngineError, StructuredRequest
from engram.actors.engines.rules import RulesEngine
from engram.actors.prompts import session_value_messages
from engram.actors.session_value import (
    MEMORIES_PER_REQUEST,
    EngineValuer,
    deterministic_value,
    kept_ids,
    value_requests,
)
from engram.models.domain import Memory
from engram.models.enums import Level
from engram.models.settings import EvolutionSettings
from tests.support.memories import build_memory

pytestmark = pytest.mark.unit

NOW = datetime(2026, 3, 14, tzinfo=UTC)
FIVE_S = EvolutionSettings(llm_timeout_s=5)


def memory(memory_id: str, content: str | None = "Likes tea", **fields: object) -> Memory:
    session: dict[str, object] = {"app_id": "shop", "level": Level.SESSION, "session_id": "s1"}
    return build_memory(NOW, memory_id=memory_id, content=content, **{**session, **fields})


class KeepByWord:
    """An LLM engine that keeps the memories whose content holds ``word`` (and may invent a ref)."""

    name = "fake-llm"
    is_llm = True

    def __init__(self, word: str, *, invent: bool = False, fail: bool = False) -> None:
        self.word, self.invent, self.fail = word, invent, fail
        self.requests: list[StructuredRequest] = []

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.requests.extend(requests)
        if self.fail:
            return [EngineError("bad json") for _ in requests]
        answers: list[BaseModel | EngineError] = []
        for request in requests:
            values = [
                MemoryValue(ref=m["ref"], keep=self.word in m["content"], reason="r")
                for m in request.payload["memories"]
            ]
            if self.invent:
                values.append(MemoryValue(ref="99", keep=True, reason="invented"))
            answers.append(SessionValuation(memories=values))
        return answers

    async def close(self) -> None:
        pass


def test_deterministic_rule_promotes_important_recalled_and_flagged() -> None:
    memories = [
        memory("a", is_important=True),
        memory("b", recall_count=1),
        memory("c"),
        memory("d"),
    ]
    assert deterministic_value(memories, ["c", "not-in-session"]) == {"a", "b", "c"}


def test_prompt_lists_the_refs_and_texts_only() -> None:
    messages = session_value_messages([("1", "Is  allergic\nto peanuts"), ("2", "Said hello")])
    assert messages[0].role == "system" and "never invent a ref" in messages[0].content
    assert messages[-1].role == "user"
    assert messages[-1].content == "Memories:\n1: Is allergic to peanuts\n2: Said hello"
    # The few-shot answer is a valid SessionValuation.
    SessionValuation.model_validate(json.loads(messages[2].content))
    for bad in ([], [("1", "a"), ("1", "b")], [(" ", "a")]):
        with pytest.raises(ValueError, match="refs"):
            session_value_messages(bad)


def test_output_model_is_bounded() -> None:
    with pytest.raises(ValidationError):
        SessionValuation(memories=[MemoryValue(ref=str(i), keep=True) for i in range(51)])
    with pytest.raises(ValidationError):
        MemoryValue(ref="1", keep=True, reason="x" * 301)
    with pytest.raises(ValidationError):
        MemoryValue(ref="", keep=True)


def test_requests_use_short_refs_skip_empty_content_and_chunk() -> None:
    memories = [memory(f"id{i}", f"fact {i} " + "x" * 400) for i in range(MEMORIES_PER_REQUEST + 2)]
    memories.append(memory("shredded", None))
    batches = value_requests(memories)
    assert [len(refs) for refs, _ in batches] == [MEMORIES_PER_REQUEST, 2]
    refs, request = batches[1]
    assert refs == {"1": f"id{MEMORIES_PER_REQUEST}", "2": f"id{MEMORIES_PER_REQUEST + 1}"}
    assert request.task == VALUE_SESSION_TASK and request.output is SessionValuation
    assert "shredded" not in str([r.payload for _, r in batches])
    assert all(len(line) < 320 for line in request.messages[-1].content.splitlines())
    assert "id0" not in batches[0][1].messages[-1].content  # the prompt shows refs, not memory ids


def test_kept_ids_ignore_invented_refs_and_refusals() -> None:
    valuation = SessionValuation(
        memories=[
            MemoryValue(ref="1", keep=True),
            MemoryValue(ref="2", keep=False),
            MemoryValue(ref=" 3 ", keep=True),
            MemoryValue(ref="7", keep=True),
        ]
    )
    assert kept_ids(valuation, {"1": "a", "2": "b", "3": "c"}) == {"a", "c"}


async def test_engine_valuer_adds_what_the_engine_keeps_to_the_deterministic_set() -> None:
    engine = KeepByWord("allergic", invent=True)
    memories = [
        memory("keep", "Is allergic to peanuts"),
        memory("drop", "Said hello"),
        memory("important", "Said goodbye", is_important=True),
    ]
    chosen = await EngineValuer(engine, FIVE_S)(memories, [])
    assert chosen == {"keep", "important"}
    # Memories the rule promotes anyway are not asked about.
    [request] = engine.requests
    assert [m["memory_id"] for m in request.payload["memories"]] == ["keep", "drop"]


async def test_engine_valuer_falls_back_on_failure_and_never_calls_the_rules_engine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memories = [memory("flagged", "Secret plan"), memory("other", "Secret allergy")]
    failing = KeepByWord("Secret", fail=True)
    with caplog.at_level(logging.WARNING):
        assert await EngineValuer(failing, FIVE_S)(memories, ["flagged"]) == {"flagged"}
    assert len(failing.requests) == 2  # asked once and retried once
    assert "Secret" not in caplog.text  # content never reaches the log

    class CountingRules(RulesEngine):
        calls = 0

        async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
            CountingRules.calls += 1
            return await super().generate(requests)

    assert await EngineValuer(CountingRules(), FIVE_S)(memories, []) == set()
    assert CountingRules.calls == 0


async def test_engine_valuer_falls_back_on_timeout_and_exceptions() -> None:
    class Slow(KeepByWord):
        async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
            await asyncio.sleep(10)
            return []

    class Broken(KeepByWord):
        async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
            raise RuntimeError("boom")

    class Short(KeepByWord):
        async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
            return []

    memories = [memory("a", "Likes tea", recall_count=2), memory("b", "Likes tea")]
    for engine in (Slow("tea"), Broken("tea"), Short("tea")):
        assert await EngineValuer(engine, EvolutionSettings(llm_timeout_s=0.05))(memories, []) == {"a"}
