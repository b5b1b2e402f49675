"""The rules engine (W3): seed few-shots, language, ownership split, msg ids, the engine contract."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.actors.engine_outputs import EVOLVE_TASK, EXTRACT_TASK, EvolutionOutput, ExtractionOutput
from engram.actors.engines.base import Engine, EngineError, StructuredRequest, UnsupportedTaskError
from engram.actors.engines.rules import RulesEngine, extract

pytestmark = pytest.mark.unit


def _payload(
    *messages: tuple[str, str], ownership: str = "USER", today: str = "2026-01-07"
) -> dict[str, Any]:
    return {
        "messages": [
            {"role": role, "content": content, "msg_id": f"m{i}"}
            for i, (role, content) in enumerate(messages)
        ],
        "ownership": ownership,
        "today": today,
    }


def _texts(*messages: tuple[str, str], ownership: str = "USER") -> list[str]:
    return [fact.text for fact in extract(_payload(*messages, ownership=ownership)).facts]


@pytest.mark.parametrize(
    ("content", "facts"),
    [
        ("Hi.", []),
        ("There are branches in trees.", []),
        (
            "Hi, I am looking for a restaurant in San Francisco.",
            ["Looking for a restaurant in San Francisco"],
        ),
        ("Hi, my name is John. I am a software engineer.", ["Name is John", "Is a software engineer"]),
        ("What's the weather like today?", []),
        ("Thanks, bye!", []),
    ],
)
def test_seed_few_shots(content: str, facts: list[str]) -> None:
    assert _texts(("user", content)) == facts


def test_chinese_conversation_yields_chinese_facts() -> None:
    out = extract(_payload(("user", "你好！我叫李雷，我住在杭州，下周要去上海出差。")))
    by_text = {fact.text: fact for fact in out.facts}
    assert list(by_text) == ["名字是李雷", "住在杭州", "下周要去上海出差"]
    assert by_text["名字是李雷"].kind == "personal"
    assert by_text["住在杭州"].entities == ["杭州"]
    plan = by_text["下周要去上海出差"]
    assert plan.kind == "plan"
    assert plan.expires_in_days is not None
    assert 7 <= plan.expires_in_days <= 14
    assert plan.entities == ["上海"]
    assert by_text["名字是李雷"].expires_in_days is None


def test_facts_carry_kind_importance_and_entities() -> None:
    out = extract(_payload(("user", "I'm allergic to peanuts. I really like cheese pizza.")))
    allergy, pizza = out.facts
    assert (allergy.text, allergy.kind) == ("Is allergic to peanuts", "health")
    assert (pizza.text, pizza.kind) == ("Likes cheese pizza", "preference")
    assert allergy.importance > pizza.importance


def test_system_messages_contribute_nothing() -> None:
    system = ("system", "My name is Engram. I live in the cloud. I like helping users.")
    assert _texts(system) == []
    assert _texts(system, ownership="AGENT") == []
    assert _texts(system, ("user", "I live in Paris.")) == ["Lives in Paris"]


def test_ownership_splits_user_and_assistant_statements() -> None:
    conversation = (
        ("user", "I am allergic to peanuts. Can you remember that?"),
        (
            "assistant",
            "Of course! I will remember that you are allergic to peanuts. I've booked the table for you.",
        ),
        ("assistant", "好的，我会记住你对花生过敏。"),
    )
    user = _texts(*conversation)
    agent = _texts(*conversation, ownership="AGENT")
    assert user == ["Is allergic to peanuts"]
    assert agent == [
        "Will remember that the user is allergic to peanuts",
        "Has booked the table for the user",
        "会记住用户对花生过敏",
    ]
    assert not set(user) & set(agent)


def test_assistant_general_knowledge_and_courtesy_are_not_agent_facts() -> None:
    reply = ("assistant", "Sure, happy to help! Paris is the capital of France. Your flight leaves at 9.")
    assert _texts(reply, ownership="AGENT") == []


def test_source_msg_ids_are_kept() -> None:
    out = extract(_payload(("user", "Hi!"), ("user", "I live in Paris."), ("user", "我喜欢吃辣")))
    assert [(f.text, f.source_msg_id) for f in out.facts] == [("Lives in Paris", "m1"), ("喜欢吃辣", "m2")]
    no_id = extract({"messages": [{"role": "user", "content": "I live in Paris."}], "ownership": "USER"})
    assert no_id.facts[0].source_msg_id is None


def test_duplicates_within_one_output_are_removed() -> None:
    out = extract(_payload(("user", "I like tea. I like tea!"), ("user", "i like TEA")))
    assert [f.text for f in out.facts] == ["Likes tea"]
    assert out.facts[0].source_msg_id == "m0"


def test_expiry_uses_the_payload_date() -> None:
    out = extract(_payload(("user", "I have a dentist appointment tomorrow."), today="2026-01-07"))
    assert out.facts[0].expires_in_days == 2


@pytest.mark.parametrize(
    "payload",
    [
        {"messages": [], "ownership": "SYSTEM"},
        {"messages": []},
        {"messages": "hello", "ownership": "USER"},
        {"messages": [{"role": "user", "content": 3}], "ownership": "USER"},
        {"messages": [], "ownership": "USER", "today": "yesterday"},
    ],
)
def test_malformed_payloads_raise_engine_errors(payload: dict[str, Any]) -> None:
    with pytest.raises(EngineError):
        extract(payload)


async def test_engine_answers_one_result_per_request_in_order() -> None:
    engine: Engine = RulesEngine()
    assert (engine.name, engine.is_llm) == ("rules", False)
    requests = [
        StructuredRequest(EXTRACT_TASK, (), ExtractionOutput, _payload(("user", "I live in Paris."))),
        StructuredRequest(EVOLVE_TASK, (), EvolutionOutput, {}),
        StructuredRequest(EXTRACT_TASK, (), ExtractionOutput, {"messages": [], "ownership": "nobody"}),
        StructuredRequest(EXTRACT_TASK, (), ExtractionOutput, _payload(("user", "Hi."))),
    ]
    first, second, third, fourth = await engine.generate(requests)
    assert isinstance(first, ExtractionOutput)
    assert [f.text for f in first.facts] == ["Lives in Paris"]
    assert isinstance(second, UnsupportedTaskError)
    assert isinstance(third, EngineError)
    assert not isinstance(third, UnsupportedTaskError)
    assert fourth == ExtractionOutput(facts=[])
    assert await engine.generate([]) == []
    await engine.close()


CHITCHAT_PHRASES = [
    "Hi",
    "Hello",
    "Thanks",
    "Thank you so much",
    "ok",
    "Bye",
    "哈哈",
    "你好",
    "谢谢",
    "好的",
    "嗯",
]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant"]),
            st.lists(st.sampled_from(CHITCHAT_PHRASES), min_size=1, max_size=4),
            st.sampled_from([". ", "! ", ", ", "，", "！", "\n", " "]),
        ),
        max_size=5,
    ),
    st.sampled_from(["USER", "AGENT"]),
)
def test_chitchat_only_conversations_yield_no_facts(
    turns: list[tuple[str, list[str], str]], ownership: str
) -> None:
    messages = [(role, separator.join(phrases)) for role, phrases, separator in turns]
    assert extract(_payload(*messages, ownership=ownership)).facts == []


@given(
    st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), st.text(max_size=80)), max_size=4)
)
def test_extraction_reads_only_the_owner_role(messages: list[tuple[str, str]]) -> None:
    for ownership, role in (("USER", "user"), ("AGENT", "assistant")):
        own = [(r, text) for r, text in messages if r == role]
        everything = _texts(*messages, ownership=ownership)
        assert everything == _texts(*own, ownership=ownership)
