"""Deterministic evolution decisions (W4, W5): the degraded path and the check on an LLM's proposals.

Order of the rules: exact duplicate, semantic duplicate (never when the new fact names another code,
number, date, amount or name, or another value of the same attribute), same meaning, contradiction
(same subject and attribute, any attribute ``statements.claim`` reads, with a different value:
SUPERSEDE), a richer merged preference (UPDATE), else ADD. Which side of a contradiction wins is the caller's
call (by valid_at); this module only detects it. Reasons never quote the user's content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engram.actors import statements


@dataclass(frozen=True, slots=True)
class Candidate:
    """An existing memory similar to the new fact, with its short reference for the LLM prompt."""

    ref: str
    memory_id: str
    text: str
    content_hash: str
    cosine: float
    valid_at: datetime


@dataclass(frozen=True, slots=True)
class NewFact:
    """The fact being evolved into the store."""

    text: str
    content_hash: str
    valid_at: datetime


@dataclass(frozen=True, slots=True)
class RuleDecision:
    """What to do with the new fact, against which candidate, with the merged text for UPDATE."""

    event: Literal["ADD", "UPDATE", "SUPERSEDE", "NONE"]
    target: Candidate | None
    merged_text: str | None
    reason: str


def decide(new: NewFact, similar: Sequence[Candidate], *, dedup_threshold: float = 0.95) -> RuleDecision:
    """Decide ADD / UPDATE / SUPERSEDE / NONE for ``new``; among matching candidates the most similar wins."""
    ranked = sorted(similar, key=lambda c: -c.cosine)
    for candidate in ranked:
        if candidate.content_hash == new.content_hash:
            return RuleDecision("NONE", candidate, None, "duplicate content")
    new_attr = statements.claim(new.text)
    for candidate in ranked:
        # A differing code, number, date, amount or name is new information, whatever the cosine.
        if candidate.cosine >= dedup_threshold and not new_information(new.text, candidate.text):
            return RuleDecision(
                "NONE", candidate, None, f"semantic duplicate (cosine {candidate.cosine:.2f})"
            )
    new_pref = statements.preference(new.text)
    for candidate in ranked:
        old_pref, old_attr = statements.preference(candidate.text), statements.claim(candidate.text)
        if new_pref is not None and old_pref is not None and _listed(old_pref, new_pref):
            return RuleDecision("NONE", candidate, None, "same meaning: same preference")
        if new_attr and old_attr and new_attr[0] == old_attr[0] and _covers(old_attr, new_attr[1]):
            return RuleDecision("NONE", candidate, None, f"same meaning: same {_label(new_attr[0])}")
    for candidate in ranked:
        old_attr = statements.claim(candidate.text)
        if old_attr and ends(candidate.text, new.text):
            return RuleDecision("SUPERSEDE", candidate, None, f"{_label(old_attr[0])} ended")
        if new_attr and old_attr and new_attr[0] == old_attr[0]:
            if _covers(new_attr, old_attr[1]):
                return RuleDecision("UPDATE", candidate, new.text, f"more specific {_label(new_attr[0])}")
            return RuleDecision("SUPERSEDE", candidate, None, f"{_label(new_attr[0])} changed")
        if _preference_reversed(candidate.text, new.text):
            return RuleDecision("SUPERSEDE", candidate, None, "preference reversed")
    if new_pref is not None:
        for candidate in ranked:
            merged = _merged_preference(candidate.text, new.text)
            if merged is not None:
                return RuleDecision("UPDATE", candidate, merged, "merged with a related preference")
    return RuleDecision("ADD", None, None, "new information")


def contradicts(a: str, b: str) -> bool:
    """True when a and b give different values of one single-valued attribute or opposite preferences,
    or one states the end of the other's value ("Works at Acme", "No longer works at Acme")."""
    return _attribute_changed(a, b) or _preference_reversed(a, b) or ends(a, b) or ends(b, a)


def ends(old_text: str, new_text: str) -> bool:
    """Whether ``new_text`` states the end of the value ``old_text`` gives ("Quit Google")."""
    gone, old = statements.ended(new_text), statements.claim(old_text)
    if gone is None or old is None:
        return False
    attributes = {"employer", "residence"} if gone[0] == "left" else {gone[0]}
    return old[0] in attributes and (_covers(old, gone[1]) or _covers((old[0], gone[1]), old[1]))


def new_information(new_text: str, old_text: str) -> bool:
    """Whether ``new_text`` says something ``old_text`` does not, however alike they read: it names other
    identifiers, numbers, dates, amounts or names, or another value of the same attribute."""
    return statements.values_differ(new_text, old_text) or _attribute_changed(old_text, new_text)


def _label(attribute: str) -> str:
    # "favorite:color" and "claim:locker code" name the user's content; the reason keeps the family.
    family = attribute.split(":", 1)[0]
    return "attribute value" if family == "claim" else family


# Attributes whose values nest: "北京" within "北京市朝阳区", "engineer" within "software engineer".
_NESTING = frozenset({"residence", "hometown", "employer", "job"})


def _covers(known: tuple[str, str], value: str) -> bool:
    """``value`` says nothing the known attribute did not: the same value, or a broader part of it."""
    attribute, old = known
    if statements.same_value(old, value):
        return True
    if attribute not in _NESTING or len(value) < 2:
        return False
    if statements.is_chinese(value):
        return value in old
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", old) is not None


def _attribute_changed(old_text: str, new_text: str) -> bool:
    old, new = statements.claim(old_text), statements.claim(new_text)
    if old is None or new is None or old[0] != new[0]:
        return False
    return not _covers(old, new[1]) and not _covers(new, old[1])


def _preference_reversed(old_text: str, new_text: str) -> bool:
    old, new = statements.preference(old_text), statements.preference(new_text)
    return old is not None and new is not None and old[0] == -new[0] and old[1] == new[1]


_LIST_SEPARATOR = re.compile(r"\s*(?:,\s*and\s+|,|\band\b|、|和|与|及)\s*")


def _items(obj: str) -> list[str]:
    return [item.strip() for item in _LIST_SEPARATOR.split(obj) if item.strip()]


def _listed(old: tuple[int, str], new: tuple[int, str]) -> bool:
    """Whether the old preference already states the new one (same polarity, object among its items)."""
    return old[0] == new[0] and (old[1] == new[1] or new[1] in _items(old[1]))


def _head(item: str) -> str:
    if statements.is_chinese(item):
        return item
    last = item.split()[-1]
    return last[:-1] if len(last) > 3 and last.endswith("s") and not last.endswith("ss") else last


def _shares_head(old: str, new: str) -> bool:
    """Both name kinds of one thing: "cheese pizza" / "chicken pizza", "芝士披萨" / "鸡肉披萨"."""
    if statements.is_chinese(old) != statements.is_chinese(new):
        return False
    if statements.is_chinese(old):
        common = 0
        while common < min(len(old), len(new)) and old[-1 - common] == new[-1 - common]:
            common += 1
        return 0 < common < min(len(old), len(new))
    return len(old.split()) > 1 and len(new.split()) > 1 and _head(old) == _head(new)


def _merged_preference(old_text: str, new_text: str) -> str | None:
    """The candidate's statement extended with the new object: "Likes cheese pizza and chicken pizza"."""
    old, new = statements.preference(old_text), statements.preference(new_text)
    if old is None or new is None or old[0] != new[0]:
        return None
    items = _items(old[1])
    if not items or not all(_shares_head(item, new[1]) for item in items):
        return None
    start = old_text.casefold().find(old[1])
    if start < 0 or len(old_text.casefold()) != len(old_text):
        return None
    span = old_text[start : start + len(old[1])]
    new_start = new_text.casefold().find(new[1])
    addition = new_text[new_start : new_start + len(new[1])] if new_start >= 0 else new[1]
    listed = [*_items(span), addition]
    if statements.is_chinese(old_text):
        joined = "、".join(listed[:-1]) + "和" + listed[-1]
    else:
        joined = ", ".join(listed[:-1]) + " and " + listed[-1]
    return old_text[:start] + joined + old_text[start + len(old[1]) :]
