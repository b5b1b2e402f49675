"""Splitting text into statements and clauses, and telling whether a statement is about the speaker."""

from __future__ import annotations

import re
from typing import Final

from engram.actors.statements.chitchat import is_chitchat
from engram.actors.statements.text import _HAS_CJK, _ZH_CONNECTIVE, _ZH_TIME, _fold, _words, is_chinese

_ABBREVIATIONS: Final = _words(
    "mr mrs ms dr prof st jr sr vs etc e.g i.e inc ltd co no approx dept mt ft u.s u.k a.m p.m"
)
_BOUNDARY: Final = re.compile(r"(?:[!?;。！？；…]|\.)+[\"'”’)\]）」』]*")


def _is_boundary(line: str, match: re.Match[str]) -> bool:
    marks = match.group().rstrip("\"'”’)]）」』")
    if set(marks) != {"."} or len(marks) > 1:
        return True
    after = line[match.end() : match.end() + 1]
    if after and not after.isspace() and not _HAS_CJK.match(after):
        return False  # 3.5, google.com, e.g.x
    word = re.search(r"([A-Za-z][A-Za-z.]*)$", line[max(0, match.start() - 12) : match.start()])
    if word is None:
        return True
    token = word.group(1).lower()
    return token not in _ABBREVIATIONS and len(token) > 1


def split_statements(text: str) -> list[str]:
    """Split into sentences on . ! ? ; 。！？；and newlines, keeping the end marks; decimals stay whole."""
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _BOUNDARY.finditer(line):
            if _is_boundary(line, match):
                piece = line[start : match.end()].strip()
                if piece:
                    out.append(piece)
                start = match.end()
        rest = line[start:].strip()
        if rest:
            out.append(rest)
    return out


_EN_CONNECTIVE: Final = (
    r"(?:(?:and|but|so|also|then|plus|well|oh|actually|anyway|btw|now|currently|these days|since then),?\s+)*"
)
_EN_SUBJECT: Final = re.compile(
    rf"^{_EN_CONNECTIVE}(?:i|i'm|im|i've|i'll|i'd|my|we|we're|we've|we'll|we'd|our)(?![\w'])"
)
_EN_QUESTION_START: Final = re.compile(
    r"^(?:what|where|when|why|how|who|which|whose|is|are|do|does|did|can|could|would|will|should|any)\s"
)
_ZH_SUBJECT: Final = re.compile(f"^{_ZH_CONNECTIVE}*(?:也|还)?{_ZH_TIME}*(?:我|本人)")
_ZH_VERBISH: Final = re.compile(
    f"^{_ZH_CONNECTIVE}*(?:{_ZH_TIME}|要|会|想|去|在|是|有|喜欢|爱|讨厌|不|没|打算|计划|准备|需要|得|正在|"
    "刚|已经|经常|一直|住|搬|能|可以|应该|必须|对.{1,6}过敏|也|还)"
)
_PIECE_BREAK: Final = re.compile(
    r"[,，]\s*|\s+(?=(?:and|but|so)\s+(?:i|i'm|i've|i'll|i'd|my)\b)"
    "|(?=(?:而且|并且|但是|不过|所以|然后)(?:我|本人))",
    re.IGNORECASE,
)


def _starts_with_subject(piece: str) -> bool:
    folded = _fold(piece).lstrip()
    return bool(_EN_SUBJECT.match(folded) or _ZH_SUBJECT.match(folded))


def _stripped_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _PIECE_BREAK.finditer(text):
        spans.append((start, match.start()))
        start = max(start, match.end())
    spans.append((start, len(text)))
    out: list[tuple[int, int]] = []
    for begin, end in spans:
        piece = text[begin:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            out.append((begin + lead, begin + len(piece.rstrip())))
    return out


def split_clauses(statement: str) -> list[str]:
    """Split one statement at commas where a new first-person clause starts ("Hi, my name is John")."""
    # A unit is (prefix, start, end); the prefix lends a subjectless Chinese clause its speaker.
    units: list[tuple[str, int, int]] = []
    for begin, end in _stripped_spans(statement):
        piece = statement[begin:end]
        if not units:
            units.append(("", begin, end))
            continue
        prefix, ustart, uend = units[-1]
        previous = prefix + statement[ustart:uend]
        if is_chitchat(previous) or _starts_with_subject(piece) or _EN_QUESTION_START.match(_fold(piece)):
            units.append(("", begin, end))
        elif is_chinese(piece) and _ZH_VERBISH.match(piece) and is_personal(previous):
            connective = re.match(f"{_ZH_CONNECTIVE}*", piece)
            units.append(("我", begin + (connective.end() if connective else 0), end))
        else:
            units[-1] = (prefix, ustart, end)
    return [prefix + statement[begin:end] for prefix, begin, end in units]


# --- about the speaker? ----------------------------------------------------------------------------

_EN_FIRST_PERSON: Final = re.compile(
    r"(?<![\w'])(?:i|i'm|im|i've|i'll|i'd|my|mine|myself|we|we're|we've|we'll|we'd|our|ours|ourselves)(?![\w'])"
)
_EN_PLAN_REQUEST: Final = re.compile(
    r"\b(?:book|reserve|order|buy|find|get|schedule|arrange|plan|remind|help|call)\s+(?:me|us)\b"
)
_ZH_PLAN_REQUEST: Final = re.compile("(?:帮|替|给)我(?:订|买|预订|预约|找|安排|约|挂号|定)|提醒我|叫我")
_ZH_OBJECT_ME: Final = re.compile("(?:给|告诉|教|跟|对|让|问|陪|请|帮|替|提醒)我(?!们)")


def _is_question(folded: str) -> bool:
    tail = folded.rstrip(" \"')]」』")
    return tail.endswith("?") or bool(re.search("(?:吗|(?<![什怎那这多])么)[\\s.!。~]*$", tail))


def is_personal(statement: str) -> bool:
    """True for a statement about the speaker (first person, or a request revealing a plan); not questions."""
    folded = _fold(statement)
    if is_chitchat(statement):
        return False
    plan_request = bool(_EN_PLAN_REQUEST.search(folded) or _ZH_PLAN_REQUEST.search(folded))
    if _is_question(folded):
        return plan_request
    if plan_request or _EN_FIRST_PERSON.search(folded):
        return True
    return "本人" in folded or "我" in _ZH_OBJECT_ME.sub("", folded)
