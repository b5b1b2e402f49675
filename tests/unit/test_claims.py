"""Claims, value tokens and transcript statements (issue #13): pure functions over plain strings."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.actors import evolution_rules as rules
from engram.actors import statements

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Locker code at the Lisbon office is K001a2b3", "Locker code at the Lisbon office is K011bb64"),
        ("Wifi password is sunflower42", "Wifi password is now tulip77"),
        ("Password hint is the name of my first pet", "Password hint is my mother's maiden name"),
        ("Dentist appointment is on Thursday at 3pm", "Moved my dentist appointment to Friday at 4pm"),
        ("Phone number is 555-0101", "New phone number is 555-0199"),
        ("Daughter's school bus leaves at 7:15", "Daughter's school bus now leaves at 7:40"),
        ("手机号码是13812345678", "手机号换成了13900001111"),
        ("牙医预约在周四下午三点", "牙医预约改到周五下午四点"),
        ("储物柜密码是4321", "储物柜密码改成了8765"),
    ],
)
def test_another_value_of_the_same_attribute_is_a_contradiction(old: str, new: str) -> None:
    old_claim, new_claim = statements.claim(old), statements.claim(new)
    assert old_claim is not None and new_claim is not None
    assert old_claim[0] == new_claim[0] and old_claim[1] != new_claim[1]
    assert rules.contradicts(old, new)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (
            "Reference number of my visa application is VA-1234",
            "Reference number of my tax return is TR-9876",
        ),
        ("Passport number is X1234567", "Daughter's passport number is Y7654321"),
        ("护照号码是E12345678", "女儿的护照号码是E87654321"),
    ],
)
def test_attributes_of_different_things_do_not_contradict(left: str, right: str) -> None:
    assert not rules.contradicts(left, right)


@pytest.mark.parametrize(
    "fact",
    [
        "Dog is very playful",
        "The weather is nice",
        "It is great",
        "朋友在周五来",
        "狗很可爱",
        "Is allergic to shellfish",
    ],
)
def test_descriptions_are_not_claims(fact: str) -> None:
    # "Dog is very playful" adds to "Dog is a golden retriever": it must never replace it.
    assert statements.claim(fact) is None


def test_an_additive_statement_is_not_a_claim() -> None:
    assert statements.claim("Also has a locker code at the Porto office: P77") is None


def test_value_tokens_name_codes_numbers_dates_amounts_and_names() -> None:
    assert statements.value_tokens("Locker code at the Lisbon office is K001a2b3") == {"k001a2b3", "lisbon"}
    assert statements.value_tokens("Monthly rent is $1,350") == {"$1,350"}
    assert statements.value_tokens("生日是三月十二号") == {"三月", "十二号"}
    assert statements.value_tokens("牙医预约改到周五下午四点") == {"周五", "四点"}
    assert statements.value_tokens("Likes cheese pizza") == frozenset()


def test_a_differing_value_is_never_a_semantic_duplicate() -> None:
    old = rules.Candidate("0", "m1", "Paid invoice 4471 from the plumber", "h1", 0.99, T0)
    new = rules.NewFact("Paid invoice 4472 from the plumber", "h2", T0)
    assert rules.decide(new, [old]).event == "ADD"
    same = rules.NewFact("Paid invoice 4471 from the plumber", "h3", T0)
    assert rules.decide(same, [old]).event == "NONE"


def test_a_changed_code_supersedes_whatever_the_cosine() -> None:
    old = rules.Candidate("0", "m1", "Locker code at the Lisbon office is K011bb64", "h1", 0.96, T0)
    new = rules.NewFact("Locker code at the Lisbon office is K021c9d0", "h2", T0)
    decision = rules.decide(new, [old])
    assert (decision.event, decision.target) == ("SUPERSEDE", old)
    assert "K0" not in decision.reason  # reasons never quote the content


def test_speaker_labels_of_a_transcript() -> None:
    assert statements.speaker_label("Caroline: I went to a support group.") == (
        "Caroline",
        "I went to a support group.",
    )
    assert statements.speaker_label("张伟：我下周去上海") == ("张伟", "我下周去上海")
    assert statements.speaker_label("Note: I moved to Berlin") == (None, "Note: I moved to Berlin")
    assert statements.speaker_label("I live in Berlin") == (None, "I live in Berlin")


@pytest.mark.parametrize(
    ("statement", "kept"),
    [
        ("The transgender stories were so inspiring!", True),
        ("Her daughter turns five next week.", True),
        ("We're thinking about going camping next month.", True),
        ("Thanks, Melanie!", False),
        ("Wow, that's cool, Caroline!", False),
        ("What kinda jobs are you thinking of?", False),
        ("Good to see you!", False),
    ],
)
def test_transcript_statements_worth_remembering(statement: str, kept: bool) -> None:
    assert statements.is_informative(statement, ("Caroline", "Melanie")) is kept
