"""The engine's side of compression (L5): the request it is shown, and no call without an LLM."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.actors.compression import COMPRESS_TASK, PROMPT_MEMORIES, EngineSummarizer, summary_request
from engram.actors.engines.rules import RulesEngine
from engram.models.domain import Memory
from engram.models.enums import Level, MemType, Ownership
from engram.models.settings import EvolutionSettings

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def coffee(day: int) -> Memory:
    at = T0 + timedelta(days=day)
    return Memory(
        memory_id=f"m{day:03d}",
        user_id="u1",
        app_id="",
        level=Level.GLOBAL,
        ownership=Ownership.USER,
        mem_type=MemType.EPISODIC,
        content=f"Ordered coffee at the station cafe on {at:%Y-%m-%d}",
        weight=0.3,
        weight_at=at,
        created_at=at,
        updated_at=at,
        valid_at=at,
        content_hash="h",
        embedding_model="m",
    )


def test_the_request_shows_each_memory_with_its_date_and_bounds_the_prompt() -> None:
    group = [coffee(d) for d in range(PROMPT_MEMORIES + 5)]
    request = summary_request(group)
    assert request.task == COMPRESS_TASK
    last = request.messages[-1].content
    assert "- (2026-01-01) Ordered coffee at the station cafe on 2026-01-01" in last
    assert f"({len(group)} in all)" in last and "(and 5 more like these)" in last
    assert f"on {T0 + timedelta(days=PROMPT_MEMORIES):%Y-%m-%d}" not in last


async def test_the_rules_engine_is_never_asked_and_leaves_the_summary_to_the_merge() -> None:
    assert await EngineSummarizer(RulesEngine(), EvolutionSettings())([coffee(0), coffee(1)]) is None
    assert await EngineSummarizer(None, EvolutionSettings())([coffee(0)]) is None
