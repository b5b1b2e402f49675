"""The rules engine on transcripts of named people (issue #13): facts about anyone, events, plans and
dates are kept and attributed to their speaker; chit-chat and questions are dropped."""

from __future__ import annotations

from datetime import date

import pytest

from engram.actors.engines.rules import extract, message_facts

pytestmark = pytest.mark.unit

TRANSCRIPT = [
    ("D1:1", "Caroline: Hey Mel! Good to see you! How have you been?"),
    ("D1:2", "Melanie: Hey Caroline! My daughter turns five next week. We're going camping in July."),
    ("D1:3", "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."),
    ("D1:4", "Melanie: Wow, that's cool, Caroline! What happened there?"),
    ("D1:5", "Caroline: The transgender stories were so inspiring! Thanks, Melanie!"),
    ("D1:6", "Melanie: Thanks, Caroline! Bye!"),
]


def facts_by_turn() -> dict[str | None, str]:
    messages = [{"role": "user", "content": text, "msg_id": msg_id} for msg_id, text in TRANSCRIPT]
    output = extract({"messages": messages, "ownership": "USER", "today": "2023-05-08"})
    return {f.source_msg_id: f.text for f in output.facts}


def test_each_speakers_informative_statements_are_kept_and_attributed() -> None:
    facts = facts_by_turn()
    assert (
        facts["D1:2"].startswith("Melanie: ") and "daughter turns five next week" in facts["D1:2"].casefold()
    )
    assert "camping in July" in facts["D1:2"]
    assert facts["D1:3"] == "Caroline: Went to a LGBTQ support group yesterday and it was so powerful."
    # A statement about something other than the speaker is kept too.
    assert facts["D1:5"] == "Caroline: The transgender stories were so inspiring."


def test_chit_chat_and_questions_are_dropped() -> None:
    facts = facts_by_turn()
    assert set(facts) == {"D1:2", "D1:3", "D1:5"}
    assert not any("Good to see you" in f or "Thanks" in f or "?" in f for f in facts.values())


def test_a_past_event_does_not_expire_and_a_plan_does() -> None:
    [event] = message_facts("Melanie: I ran a charity race last Saturday.", "user", date(2023, 5, 8))
    assert event.expires_in_days is None
    [plan] = message_facts("Melanie: We're going camping next week.", "user", date(2023, 5, 8))
    assert plan.expires_in_days is not None


def test_unlabelled_messages_keep_the_first_person_rules() -> None:
    assert [f.text for f in message_facts("I live in Lisbon. The sky is blue.", "user")] == [
        "Lives in Lisbon"
    ]
