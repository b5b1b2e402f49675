"""Conversations between named people ("Caroline: I went to a support group yesterday"): the speaker's
label, and which statements of such a turn are worth remembering (issue #13).

In a transcript every participant's life is asked about later: facts about the other person, events,
plans and dates count as much as first-person statements, so only chit-chat and questions are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from engram.actors.lexical import tokenize
from engram.actors.statements.chitchat import is_chitchat
from engram.actors.statements.splitting import _EN_PLAN_REQUEST, _ZH_PLAN_REQUEST, _is_question
from engram.actors.statements.text import _fold, _words

_LABEL: Final = re.compile(
    r"^\s*(?P<name>[A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30}){0,2}|[\u4e00-\u9fff]{2,4})"
    r"\s*[:：]\s*(?P<body>\S.*)$",
    re.DOTALL,
)
# Capitalised words that open a note rather than name a speaker ("Note: I moved to Berlin").
_NOT_A_SPEAKER: Final = _words(
    """note notes update reminder fyi ps p.s btw edit question answer todo to-do important warning tip summary
    re subject info update important attention user assistant system agent me i q a"""
)
_CONTENT_TOKENS_MIN: Final = 2


def speaker_label(text: str) -> tuple[str | None, str]:
    """(speaker name, the rest) for a turn written "<Name>: <text>"; (None, text) otherwise."""
    match = _LABEL.match(text)
    if match is None or match.group("name").casefold() in _NOT_A_SPEAKER:
        return None, text
    return match.group("name"), match.group("body").strip()


def is_informative(statement: str, participants: Collection[str] = ()) -> bool:
    """A statement of a transcript worth remembering: not chit-chat, not a question (unless it reveals
    a plan), with at least two words that are neither small talk nor a participant's name."""
    names = {t for name in participants for t in tokenize(name)}
    folded = _fold(statement)
    without_names = (
        " ".join(w for w in statement.split() if not set(tokenize(w)) & names) if names else statement
    )
    if not without_names.strip() or is_chitchat(without_names):
        return False
    if _is_question(folded):
        return bool(_EN_PLAN_REQUEST.search(folded) or _ZH_PLAN_REQUEST.search(folded))
    content = [w for w in without_names.split() if not is_chitchat(w) and tokenize(w)]
    return len(content) >= _CONTENT_TOKENS_MIN
