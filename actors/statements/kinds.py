"""A fact's kind and importance, from bilingual keyword lists."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from engram.actors.engine_outputs import FactKind
from engram.actors.statements.attributes import attribute, preference
from engram.actors.statements.expiry import expiry_days
from engram.actors.statements.text import _fold

_HEALTH: Final = re.compile(
    r"allerg|asthma|diabet|pregnan|medication|medicine|prescription|blood pressure|disease|illness|injur"
    r"|surgery|therapy|symptom|migraine|intoleran|gluten|lactose|cholesterol|heart condition|cancer"
    r"|depress|anxiety|\bsick\b|hospital|see a doctor|dentist|insomnia"
    "|过敏|哮喘|糖尿病|怀孕|药|看医生|医院|病|血压|手术|症状|偏头痛|不耐受|乳糖|忌口|体检|牙医|失眠|抑郁|焦虑|胆固醇"
)
# Dietary choices are preferences, if firm ones (importance scores them as hard constraints).
_DIET: Final = re.compile(r"\b(?:vegan|vegetarian|halal|kosher|pescatarian)\b|素食|吃素|清真")
_HARD_CONSTRAINT: Final = re.compile(
    r"allerg|intoleran|never eats?|can't eat|cannot eat|must not|mustn't|must never|vegan|vegetarian|halal"
    r"|kosher|pregnan|过敏|不能吃|不能喝|忌口|千万不要|绝对不|一定不要|不耐受|素食|吃素|清真|怀孕"
)
_PLAN: Final = re.compile(
    r"\b(?:will|going to|gonna|plans? to|planning|intends? to|wants? to|would like to|looking for|needs? to"
    r"|hoping to|about to|upcoming|book|reserve|trip|appointment|deadline|wants to be reminded)\b"
    "|要去|要做|要交|要参加|要买|要见|要开|将要|打算|计划|准备|想去|想要|想订|想买|想找|需要记得|出差|旅行|旅游|行程|预订|预约|截止"
)
_PROCEDURE: Final = re.compile(
    r"\b(?:every (?:day|morning|evening|night|week|month)|daily|weekly|routine|habit|usually|always|steps?"
    r"|workflow|process|whenever)\b|\bfirst\b.+\bthen\b|每天|每周|每晚|每早|每次|习惯|通常|总是|步骤|流程|先.+再|一般都"
)
_PROFESSIONAL: Final = re.compile(
    r"\b(?:works?|worked|working|job|career|company|employer|office|colleagues?|coworkers?|boss|manager|engineer"
    r"|developer|programmer|designer|teacher|professor|lawyer|nurse|doctor|accountant|consultant|scientist"
    r"|researcher|startup|project|promotion|salary|clients?|profession|occupation|intern)\b"
    "|工作|上班|公司|职业|工程师|程序员|设计师|老师|教师|律师|医生|护士|经理|同事|老板|客户|项目|加班|升职|工资|实习|职位"
)
_EVENT: Final = re.compile(
    r"\b(?:yesterday|last (?:week|night|month|year|weekend)|ago|went|visited|attended|met|celebrated|finished"
    r"|started|bought|won|lost|graduated|got|had|was|were|has been|has booked)\b"
    "|昨天|前天|上周|上个月|去年|刚才|刚刚|去了|参加了|见了|买了|完成了|毕业了"
)
_PERSONAL: Final = re.compile(
    r"\b(?:name|years old|age|born|birthday|lives?|lived|living|moved|hometown|from|married|wife|husband"
    r"|partner|girlfriend|boyfriend|sons?|daughters?|kids?|children|child|family|mother|father|mom|dad|parents?"
    r"|brothers?|sisters?|dogs?|cats?|pets?|single|divorced|engaged)\b"
    "|名字|岁|生日|出生|住|搬|老家|家乡|结婚|已婚|单身|妻子|老婆|丈夫|老公|儿子|女儿|孩子|家人|父母|爸爸|妈妈|哥哥|姐姐|弟弟|妹妹|宠物|狗|猫|男朋友|女朋友"
)
_ATTRIBUTE_KINDS: Final[Mapping[str, FactKind]] = {
    "name": "personal",
    "age": "personal",
    "residence": "personal",
    "hometown": "personal",
    "relationship": "personal",
    "job": "professional",
    "employer": "professional",
}


def classify(fact: str) -> FactKind:
    """The fact's kind, from bilingual keyword lists (health first, misc when nothing matches)."""
    folded = _fold(fact)
    if _HEALTH.search(folded):
        return "health"
    found = attribute(fact)
    if found is not None:
        return _ATTRIBUTE_KINDS.get(found[0], "preference")
    if preference(fact) is not None or _DIET.search(folded):
        return "preference"
    if _PLAN.search(folded) or (expiry_days(fact) is not None and not _EVENT.search(folded)):
        return "plan"
    for kind, pattern in (
        ("procedure", _PROCEDURE),
        ("professional", _PROFESSIONAL),
        ("event", _EVENT),
        ("personal", _PERSONAL),
    ):
        if pattern.search(folded):
            return kind  # type: ignore[return-value]
    return "misc"


_BASE_IMPORTANCE: Final[Mapping[FactKind, float]] = {
    "health": 0.9,
    "personal": 0.7,
    "professional": 0.65,
    "plan": 0.6,
    "procedure": 0.6,
    "preference": 0.5,
    "event": 0.45,
    "misc": 0.3,
}


def importance(fact: str, kind: FactKind) -> float:
    """A score in [0, 1]: health, names and hard constraints high, casual preferences medium, misc low."""
    score = _BASE_IMPORTANCE[kind]
    found = attribute(fact)
    if found is not None and found[0] == "name":
        score = max(score, 0.85)
    if _HARD_CONSTRAINT.search(_fold(fact)):
        score = max(score, 0.9)
    return round(min(1.0, max(0.0, score)), 2)
