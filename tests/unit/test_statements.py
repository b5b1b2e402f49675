"""Bilingual statement analysis: chit-chat, splitting, first person, fact style, kinds, attributes."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.actors.statements import (
    attribute,
    classify,
    entities,
    expiry_days,
    importance,
    is_chitchat,
    is_personal,
    preference,
    same_meaning_verbs,
    same_value,
    split_clauses,
    split_statements,
    to_fact,
)
from engram.actors.statements.chitchat import _CHITCHAT_WORDS

pytestmark = pytest.mark.unit

CHITCHAT = [
    "Hi.",
    "Hello!",
    "Thanks, bye",
    "ok",
    "Okay, thank you so much!",
    "hahaha",
    "哈哈",
    "你好",
    "谢谢",
    "好的",
]
CHITCHAT += ["Good morning!", "嗯嗯，好的，谢谢！", "Nice to meet you", "I'm sorry", "拜拜", "", "🙂"]


@pytest.mark.parametrize("text", CHITCHAT)
def test_chitchat_is_recognised(text: str) -> None:
    assert is_chitchat(text)


@pytest.mark.parametrize(
    "text",
    ["Hi, my name is John.", "I like pizza", "我叫张伟", "ok 我住在北京", "Thanks, I live in Paris", "42"],
)
def test_statements_with_content_are_not_chitchat(text: str) -> None:
    assert not is_chitchat(text)


def test_split_statements_on_sentence_marks_and_newlines() -> None:
    assert split_statements("Hi, my name is John. I am a software engineer.") == [
        "Hi, my name is John.",
        "I am a software engineer.",
    ]
    assert split_statements("你好！我叫李雷。你呢？好；\n再见") == [
        "你好！",
        "我叫李雷。",
        "你呢？",
        "好；",
        "再见",
    ]
    assert split_statements("Really?! Yes... ok") == ["Really?!", "Yes...", "ok"]


def test_split_statements_keeps_decimals_abbreviations_and_domains() -> None:
    assert split_statements("I paid 3.5 dollars. Mr. Smith works at example.com now.") == [
        "I paid 3.5 dollars.",
        "Mr. Smith works at example.com now.",
    ]
    assert split_statements("J. K. Rowling wrote it, e.g. this one.") == [
        "J. K. Rowling wrote it, e.g. this one."
    ]


@given(st.text())
def test_split_statements_never_loses_characters(text: str) -> None:
    def visible(s: str) -> str:
        return "".join(c for c in s if not c.isspace())

    pieces = split_statements(text)
    assert visible("".join(pieces)) == visible(text)
    assert all(piece and piece == piece.strip() for piece in pieces)


def test_split_clauses_separates_greetings_and_first_person_clauses() -> None:
    assert split_clauses("Hi, my name is John.") == ["Hi", "my name is John."]
    assert split_clauses("I like apples, oranges and bananas.") == ["I like apples, oranges and bananas."]
    assert split_clauses("I live in Beijing and I work at Google.") == [
        "I live in Beijing",
        "and I work at Google.",
    ]
    assert split_clauses("I want to visit Japan, any tips?") == ["I want to visit Japan", "any tips?"]


def test_split_clauses_lends_the_speaker_to_subjectless_chinese_clauses() -> None:
    assert split_clauses("我叫李雷，我住在杭州，下周要去上海出差。") == [
        "我叫李雷",
        "我住在杭州",
        "我下周要去上海出差。",
    ]
    assert split_clauses("我喜欢吃苹果，但是不吃香菜") == ["我喜欢吃苹果", "我不吃香菜"]
    # No speaker to lend: the clause stays with its neighbour.
    assert split_clauses("天气很好，要去公园") == ["天气很好，要去公园"]


@pytest.mark.parametrize(
    "text",
    [
        "Hi, my name is John.",
        "I am a software engineer",
        "I'm looking for a restaurant in San Francisco",
        "We moved to Berlin",
        "Can you book me a table for two tomorrow?",
        "Please remind me to call mom",
        "我叫张伟",
        "明天我要去北京",
        "帮我订周五去上海的机票",
        "能帮我订周五去上海的机票吗？",
        "I will remind you tomorrow",
    ],
)
def test_personal_statements(text: str) -> None:
    assert is_personal(text)


@pytest.mark.parametrize(
    "text",
    [
        "There are branches in trees.",
        "The sky is blue",
        "What's the weather?",
        "Do I need an umbrella?",
        "你吃饭了吗？",
        "我可以去吗",
        "Tell me a joke",
        "给我讲个笑话",
        "天空是蓝色的",
        "Hi.",
        "谢谢",
    ],
)
def test_impersonal_statements_and_questions(text: str) -> None:
    assert not is_personal(text)


@pytest.mark.parametrize(
    ("statement", "fact"),
    [
        ("Hi, my name is John.", "Name is John"),
        ("I am a software engineer", "Is a software engineer"),
        ("Hi, I am looking for a restaurant in San Francisco.", "Looking for a restaurant in San Francisco"),
        ("I'm looking for a restaurant in San Francisco", "Looking for a restaurant in San Francisco"),
        ("I really like cheese pizza", "Likes cheese pizza"),
        ("I live in Beijing", "Lives in Beijing"),
        ("I don't like olives", "Doesn't like olives"),
        ("I never eat pork", "Never eats pork"),
        ("I'm 30 years old", "Is 30 years old"),
        ("My favorite color is blue", "Favorite color is blue"),
        ("I'd like to visit Japan", "Would like to visit Japan"),
        ("Tomorrow I have a meeting with Anna", "Has a meeting with Anna tomorrow"),
        ("Please remind me to call mom", "Wants to be reminded to call mom"),
        ("We moved to Berlin", "We moved to Berlin"),
        ("我叫张伟", "名字是张伟"),
        ("我的名字是张伟", "名字是张伟"),
        ("我住在北京", "住在北京"),
        ("我喜欢吃辣", "喜欢吃辣"),
        ("我真的很喜欢芝士披萨。", "喜欢芝士披萨"),
        ("我的生日是5月1日", "生日是5月1日"),
        ("明天我要去北京", "明天要去北京"),
        ("你好，我是一名医生", "是一名医生"),
        ("帮我订周五去上海的机票", "想订周五去上海的机票"),
    ],
)
def test_to_fact_compact_style(statement: str, fact: str) -> None:
    assert to_fact(statement) == fact


@pytest.mark.parametrize(
    ("statement", "fact"),
    [
        ("I will remind you tomorrow", "Will remind the user tomorrow"),
        ("Sure! I've booked the table for you.", "Has booked the table for the user"),
        ("I'll keep your preferences in mind", "Will keep the user's preferences in mind"),
        ("我会记住你对花生过敏", "会记住用户对花生过敏"),
        ("I know you're allergic to nuts", "Knows the user is allergic to nuts"),
    ],
)
def test_to_fact_for_the_assistant_names_the_user(statement: str, fact: str) -> None:
    assert to_fact(statement, "assistant") == fact


@pytest.mark.parametrize(
    ("fact", "kind"),
    [
        ("Is allergic to peanuts", "health"),
        ("对花生过敏", "health"),
        ("Name is John", "personal"),
        ("住在杭州", "personal"),
        ("Is a software engineer", "professional"),
        ("Works at Google", "professional"),
        ("Likes cheese pizza", "preference"),
        ("喜欢吃辣", "preference"),
        ("Favorite color is blue", "preference"),
        ("Looking for a restaurant in San Francisco", "plan"),
        ("下周要去上海出差", "plan"),
        ("Goes to the gym every morning", "procedure"),
        ("Went to Paris last year", "event"),
        ("Has a red bicycle", "misc"),
        ("Is vegetarian", "preference"),
        ("吃素", "preference"),
    ],
)
def test_classify(fact: str, kind: str) -> None:
    assert classify(fact) == kind


def test_importance_orders_health_names_and_constraints_above_casual_facts() -> None:
    allergy = importance("Is allergic to peanuts", "health")
    name = importance("Name is John", "personal")
    pizza = importance("Likes cheese pizza", "preference")
    misc = importance("Has a red bicycle", "misc")
    assert allergy >= 0.9
    assert name >= 0.8
    assert importance("Never eats pork", "preference") >= 0.9
    assert importance("Is vegetarian", classify("Is vegetarian")) >= 0.9
    assert allergy > pizza > misc
    assert 0.4 <= pizza <= 0.6
    assert misc <= 0.35


@pytest.mark.parametrize(
    ("statement", "days"),
    [
        ("I have a meeting today", 1),
        ("Dinner tonight", 1),
        ("Flying to Tokyo tomorrow", 2),
        ("next month I start a new job", 31),
        ("in 3 days", 4),
        ("今天要加班", 1),
        ("明天要交报告", 2),
        ("后天去杭州", 3),
        ("下个月搬家", 31),
        ("3天后出发", 4),
        ("Likes cheese pizza", None),
        ("goes to the gym every Monday", None),
        ("每周一开会", None),
        ("Met Anna yesterday", None),
    ],
)
def test_expiry_days_without_a_date(statement: str, days: int | None) -> None:
    assert expiry_days(statement) == days


@pytest.mark.parametrize("statement", ["this week", "next week", "这周", "下周", "on Friday", "下周五"])
def test_expiry_days_for_weeks_are_one_to_two_weeks(statement: str) -> None:
    days = expiry_days(statement)
    assert days is not None
    assert 7 <= days <= 14


def test_expiry_days_with_today_counts_to_the_end_of_the_period() -> None:
    wednesday = date(2026, 1, 7)
    assert expiry_days("tomorrow", wednesday) == 2
    assert expiry_days("this week", wednesday) == 5  # through Sunday the 11th
    assert expiry_days("下周要去上海出差", wednesday) == 12  # through Sunday the 18th
    assert expiry_days("on Friday", wednesday) == 3
    assert expiry_days("next month", wednesday) == 53  # through February


@pytest.mark.parametrize(
    ("fact", "expected"),
    [
        ("Looking for a restaurant in San Francisco", ["San Francisco"]),
        ("Name is John", ["John"]),
        ('Read "The Hobbit" in 2020', ["The Hobbit", "2020"]),
        ("Bought an iPhone for $999", ["$999", "iPhone"]),
        ("住在北京市朝阳区", ["北京", "朝阳区"]),
        ("下周要去上海出差", ["上海"]),
        ("喜欢用iPhone和MacBook", ["iPhone", "MacBook"]),
        ("我在上海中山路工作", ["上海", "中山路"]),
        ("去超市买菜", []),
        ("Likes cheese pizza", []),
    ],
)
def test_entities(fact: str, expected: list[str]) -> None:
    assert entities(fact) == expected


def test_entities_are_at_most_eight_and_unique() -> None:
    many = " ".join(f"Met Person{i} Smith{i} today." for i in range(20))
    found = entities(many)
    assert len(found) <= 8
    assert len({e.casefold() for e in found}) == len(found)


@pytest.mark.parametrize(
    ("fact", "expected"),
    [
        ("Lives in Beijing", ("residence", "beijing")),
        ("Moved to Hangzhou last month", ("residence", "hangzhou")),
        ("I live in New York City now", ("residence", "new york city")),
        ("住在北京", ("residence", "北京")),
        ("搬到了杭州", ("residence", "杭州")),
        ("Name is John", ("name", "john")),
        ("名字是张伟", ("name", "张伟")),
        ("Works as a nurse", ("job", "nurse")),
        ("Is a software engineer", ("job", "software engineer")),
        ("是一名医生", ("job", "医生")),
        ("Works at Google", ("employer", "google")),
        ("在谷歌工作", ("employer", "谷歌")),
        ("Is 30 years old", ("age", "30")),
        ("今年30岁", ("age", "30")),
        ("Is married", ("relationship", "married")),
        ("已婚", ("relationship", "married")),
        ("Favorite color is blue", ("favorite:color", "blue")),
        ("最喜欢的颜色是蓝色", ("favorite:颜色", "蓝色")),
        ("Likes cheese pizza", None),
        ("Is a fan of jazz", None),
        ("Is a vegetarian", None),
        ("叫了外卖", None),
        ("住院了", None),
        ("Is a software engineer at Google", ("job", "software engineer")),
        ("Works at Google in London", ("employer", "google")),
    ],
)
def test_attribute(fact: str, expected: tuple[str, str] | None) -> None:
    assert attribute(fact) == expected


@pytest.mark.parametrize(
    ("fact", "expected"),
    [
        ("Likes cheese pizza", (1, "cheese pizza")),
        ("Loves the cheese pizza!", (1, "cheese pizza")),
        ("Enjoys cheese pizza a lot", (1, "cheese pizza")),
        ("Is a big fan of jazz", (1, "jazz")),
        ("Prefers tea over coffee", (1, "tea")),
        ("Dislikes cheese pizza", (-1, "cheese pizza")),
        ("Doesn't like olives", (-1, "olives")),
        ("can't stand cilantro", (-1, "cilantro")),
        ("喜欢芝士披萨", (1, "芝士披萨")),
        ("偏好绿茶", (1, "绿茶")),
        ("不喜欢香菜", (-1, "香菜")),
        ("讨厌香菜", (-1, "香菜")),
        ("Would like to visit Japan", None),
        ("最喜欢的颜色是蓝色", None),
        ("Lives in Beijing", None),
    ],
)
def test_preference(fact: str, expected: tuple[int, str] | None) -> None:
    assert preference(fact) == expected


def test_same_meaning_verbs() -> None:
    assert same_meaning_verbs("likes", "loves")
    assert same_meaning_verbs("Enjoys", "likes")
    assert same_meaning_verbs("喜欢", "爱")
    assert same_meaning_verbs("hates", "dislikes")
    assert not same_meaning_verbs("likes", "hates")
    assert not same_meaning_verbs("likes", "visits")
    assert (
        preference("Likes cheese pizza")
        == preference("Loves cheese pizza")
        == preference("Enjoys cheese pizza")
    )


def test_same_value_knows_city_names_in_both_scripts() -> None:
    assert same_value("北京", "Beijing")
    assert same_value("杭州市", "hangzhou")
    assert not same_value("北京", "上海")


@given(st.text(max_size=200))
def test_analysis_never_fails_and_stays_in_range(text: str) -> None:
    kind = classify(text)
    assert 0.0 <= importance(text, kind) <= 1.0
    days = expiry_days(text)
    assert days is None or 1 <= days <= 3650
    assert len(entities(text)) <= 8
    for clause in split_clauses(text):
        assert isinstance(to_fact(clause), str)
        assert isinstance(is_personal(clause), bool)
    attribute(text)
    preference(text)


@given(st.lists(st.sampled_from(sorted(_CHITCHAT_WORDS)), min_size=1, max_size=6))
def test_any_run_of_chitchat_words_is_chitchat(words: list[str]) -> None:
    assert is_chitchat(" ".join(words).capitalize() + "!")


def test_long_chinese_runs_do_not_backtrack() -> None:
    # A regex of overlapping phrases took seconds here; the word-break check is linear.
    assert not is_chitchat("谢谢你" * 300 + "猫")
    assert is_chitchat("谢谢你" * 300)
