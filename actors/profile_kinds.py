"""Which profile section a fact belongs to (SPEC L7), from the bilingual statement analysis.

A pure function over a fact's text: single-valued attributes (``statements.attribute`` /
``statements.claim``: residence, job, name...) are identity, family and other people are
relationships, and the fact kinds of ``statements.classify`` give preferences, routines and plans.
Events and small talk belong to no section.
"""

from __future__ import annotations

import re
from typing import Final

from engram.actors import statements
from engram.actors.statements.text import _fold
from engram.models.profile import ProfileKind

_IDENTITY_ATTRIBUTES: Final = frozenset({"name", "age", "residence", "hometown", "job", "employer"})
_RELATIVES: Final = re.compile(
    r"\b(?:wife|husband|partner|spouse|girlfriend|boyfriend|fianc[eé]e?|sons?|daughters?|kids?|children"
    r"|child|mother|father|mom|mum|dad|parents?|brothers?|sisters?|siblings?|twin|grand(?:mother|father"
    r"|ma|pa|parents?|son|daughter|children)|aunt|uncle|cousins?|nephew|niece|in-laws?|friends?"
    r"|best friend|roommate|colleagues?|coworkers?|boss|manager|mentor|neighbou?rs?|dog|cat|pet)\b"
    "|妻子|老婆|丈夫|老公|爱人|对象|男朋友|女朋友|未婚[夫妻]|儿子|女儿|孩子|父母|爸爸|妈妈|父亲|母亲|哥哥|姐姐|弟弟|妹妹"
    "|兄弟|姐妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|叔叔|阿姨|舅舅|姑姑|表[哥姐弟妹]|堂[哥姐弟妹]|侄[子女]|外甥|朋友|闺蜜"
    "|室友|同事|老板|领导|上司|导师|邻居|宠物|小狗|小猫"
)
# Recurring habits the fact kinds miss ("every Sunday", "on weekends", "每周六").
_ROUTINE: Final = re.compile(
    r"\b(?:every|each)\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|weekday"
    r"|other day|afternoon|lunch|summer|winter|year)\b"
    r"|\bon (?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends|weekdays)\b"
    r"|\btwice a\b|\bonce a (?:week|month)\b"
    "|每(?:周|星期|个?月|年|个?周末)[一二三四五六日天]?|周末都|工作日"
)


def profile_kind(fact: str) -> tuple[ProfileKind, str | None] | None:
    """(section, attribute slot) of a fact, or None when it belongs in no profile section.

    The slot names a single-valued attribute ("residence", "claim:locker code"): a profile keeps
    one fact per slot.
    """
    found = statements.attribute(fact)
    if found is not None:
        attr = found[0]
        if attr == "relationship":
            return ProfileKind.RELATIONSHIPS, attr
        if attr in _IDENTITY_ATTRIBUTES:
            return ProfileKind.IDENTITY, attr
        if attr.startswith("favorite:"):
            return ProfileKind.PREFERENCES, attr
    folded = _fold(fact)
    kind = statements.classify(fact)
    if kind == "plan":
        return ProfileKind.PLANS, None
    if kind == "procedure" or (kind in ("misc", "event") and _ROUTINE.search(folded)):
        return ProfileKind.ROUTINES, None
    if kind == "preference":
        return ProfileKind.PREFERENCES, None
    if _RELATIVES.search(folded):
        # "Sister's name is Ana" then "Sister's name is Anna": the claim names the slot.
        claimed = statements.claim(fact)
        return ProfileKind.RELATIONSHIPS, claimed[0] if claimed else None
    if kind in ("personal", "professional", "health"):
        # Health facts that last (an allergy, a condition) say who the user is; a dated one
        # ("dentist on Tuesday") is a plan.
        if kind == "health" and statements.expiry_days(fact) is not None:
            return ProfileKind.PLANS, None
        return ProfileKind.IDENTITY, None
    return None
