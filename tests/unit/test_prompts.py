"""Extraction (W3) and evolution (W4) prompts: date, roles, ownership split, few-shot turns, refs."""

from __future__ import annotations

import json
from datetime import date

import pytest

from engram.actors.engine_outputs import EvolutionOutput, ExtractionOutput
from engram.actors.engines.base import ChatMessage
from engram.actors.prompts import Ownership, evolution_messages, extraction_messages

pytestmark = pytest.mark.unit

TODAY = date(2026, 3, 14)
CONVERSATION = [
    ("system", "SYSTEM-SECRET: you are a helpful bot"),
    ("user", "USER-LINE: I am vegetarian."),
    ("assistant", "AGENT-LINE: I will remind you on Friday."),
    ("tool", "TOOL-LINE: weather=sunny"),
    ("User", "USER-LINE-2: I live in Lyon."),
]


def _text(messages: tuple[ChatMessage, ...]) -> str:
    return "\n".join(m.content for m in messages)


def test_extraction_injects_todays_date_and_ends_with_the_conversation() -> None:
    messages = extraction_messages(CONVERSATION, ownership="USER", today=TODAY)
    assert messages[0].role == "system"
    assert "2026-03-14" in messages[0].content
    assert messages[-1].role == "user"
    assert "USER-LINE: I am vegetarian." in messages[-1].content
    assert "USER-LINE-2: I live in Lyon." in messages[-1].content


@pytest.mark.parametrize("ownership", ["USER", "AGENT"])
def test_system_and_other_messages_never_reach_the_prompt(ownership: Ownership) -> None:
    messages = extraction_messages(CONVERSATION, ownership=ownership, today=TODAY)
    text = _text(messages)
    assert "SYSTEM-SECRET" not in text
    assert "TOOL-LINE" not in text
    assert [m.role for m in messages].count("system") == 1


def test_user_ownership_reads_only_user_messages() -> None:
    last = extraction_messages(CONVERSATION, ownership="USER", today=TODAY)[-1].content
    assert "USER-LINE" in last
    assert "AGENT-LINE" not in last
    assert all(line.startswith("user: ") for line in last.splitlines())


def test_agent_ownership_reads_only_assistant_messages() -> None:
    messages = extraction_messages(CONVERSATION, ownership="AGENT", today=TODAY)
    last = messages[-1].content
    assert "AGENT-LINE" in last
    assert "USER-LINE" not in last
    assert all(line.startswith("assistant: ") for line in last.splitlines())
    assert "about the assistant" in messages[0].content


def test_prompt_keeps_the_seven_categories_and_the_rules() -> None:
    system = extraction_messages([("user", "x")], ownership="USER", today=TODAY)[0].content
    assert "personal information organiser" in system
    for n in range(1, 8):
        assert f"\n{n}. " in system
    assert "same language" in system
    assert "system messages" in system
    assert '{"facts": []}' in system


def test_few_shot_examples_teach_what_not_to_store() -> None:
    messages = extraction_messages([("user", "x")], ownership="USER", today=TODAY)
    shots = {
        u.content: json.loads(a.content) for u, a in zip(messages[1:-1:2], messages[2:-1:2], strict=True)
    }
    assert [m.role for m in messages[1:-1]] == ["user", "assistant"] * (len(messages[1:-1]) // 2)
    assert shots["user: Hi."] == {"facts": []}
    assert shots["user: There are branches in trees."] == {"facts": []}
    restaurant = shots["user: Hi, I am looking for a restaurant in San Francisco."]["facts"]
    assert [f["text"] for f in restaurant] == ["Looking for a restaurant in San Francisco"]
    john = shots["user: Hi, my name is John. I am a software engineer."]["facts"]
    assert [f["text"] for f in john] == ["Name is John", "Is a software engineer"]
    chinese = next(v for k, v in shots.items() if "上海" in k)["facts"]
    assert chinese and all(any("\u4e00" <= ch <= "\u9fff" for ch in f["text"]) for f in chinese)
    # Every example answer is itself a valid answer.
    for answer in shots.values():
        ExtractionOutput.model_validate(answer)


def test_agent_few_shots_are_valid_answers_too() -> None:
    messages = extraction_messages([("assistant", "x")], ownership="AGENT", today=TODAY)
    for answer in messages[2:-1:2]:
        ExtractionOutput.model_validate_json(answer.content)


def test_focus_is_added_only_when_given() -> None:
    plain = extraction_messages([("user", "x")], ownership="USER", today=TODAY)[0].content
    focused = extraction_messages([("user", "x")], ownership="USER", today=TODAY, focus="diet")[0].content
    assert "special attention" not in plain
    assert "Pay special attention to: diet" in focused


def test_extraction_without_messages_of_the_role_still_builds() -> None:
    messages = extraction_messages([("system", "only a system prompt")], ownership="USER", today=TODAY)
    assert "only a system prompt" not in _text(messages)
    assert messages[-1].role == "user"


def test_evolution_lists_only_the_given_refs() -> None:
    messages = evolution_messages("Loves pizza", [("0", "Likes pizza"), ("3", "Lives\nin Paris")])
    assert messages[0].role == "system"
    for event in ("ADD", "UPDATE", "SUPERSEDE", "NONE"):
        assert event in messages[0].content
    last = messages[-1].content
    assert last.splitlines() == ["Memories:", "0: Likes pizza", "3: Lives in Paris", "New fact: Loves pizza"]


def test_evolution_few_shots_cover_the_seed_cases() -> None:
    messages = evolution_messages("x", [])
    answers = [EvolutionOutput.model_validate_json(a.content) for a in messages[2:-1:2]]
    assert {a.event for a in answers} == {"ADD", "UPDATE", "SUPERSEDE", "NONE"}
    none_shot = next(u.content for u, a in zip(messages[1:-1:2], answers, strict=True) if a.event == "NONE")
    assert "Likes cheese pizza" in none_shot
    assert "Loves cheese pizza" in none_shot
    update = next(a for a in answers if a.event == "UPDATE")
    assert update.target == "0"
    assert update.text
    assert "(none)" in messages[-1].content


def test_evolution_refuses_repeated_or_empty_refs() -> None:
    with pytest.raises(ValueError, match="unique"):
        evolution_messages("x", [("0", "a"), ("0", "b")])
    with pytest.raises(ValueError, match="non-empty"):
        evolution_messages("x", [(" ", "a")])
