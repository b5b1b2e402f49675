"""Key entities of a fact: names, places, products, quoted titles, dated or measured numbers."""

from __future__ import annotations

import re
from typing import Final

from engram.actors.statements.attributes import _CITIES
from engram.actors.statements.text import _HAS_CJK, _words, is_chinese

_EN_STOP_CAPITALS: Final = _words(
    """i the a an my our we he she it they this that these those there is was are has have had name
    likes loves enjoys prefers dislikes hates lives works wants needs looking going moved will would can
    could should does doesn't did plans planning favorite favourite hi hello hey thanks please today
    tomorrow yesterday tonight next last also and but so just not never always usually in on at for to
    from with of every booked user
    wow yeah yes yep yup no nope oh ooh ah aw aww hmm hm um uh haha lol omg ok okay sure great awesome
    cool nice wonderful amazing thank sorry well anyway absolutely totally definitely really congrats
    congratulations i'm i've i'd i'll you're you've that's it's what's let's don't can't won't isn't"""
)
_EN_NAME_RUN: Final = re.compile(r"\b[A-Z][\w&'-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w&'-]*)*")
_QUOTED: Final = re.compile('"([^"]{2,60})"|“([^”]{2,60})”|《([^》]{1,60})》|「([^」]{1,60})」')
_MEASURE: Final = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?|\d{4}年(?:\d{1,2}月(?:\d{1,2}[日号])?)?"
    r"|\d{1,2}月\d{1,2}[日号]|[$¥€£]\s?\d+(?:[.,]\d+)?"
    r"|\d+(?:\.\d+)?\s?(?:years? old|kg|km|cm|lbs?|miles?|%|usd|dollars?|yuan"
    r"|元|块|岁|公斤|斤|米|公里|小时|分钟|点)"
    r"|\b(?:19|20)\d{2}\b"
)
_ZH_PLACE_SUFFIX: Final = "市省区县路街镇"
_ZH_PLACE_STOP: Final = frozenset("在到去了是从住搬于的和与及我你他她要回往来自个这那一")
_ZH_NOT_PLACES: Final = _words(
    "超市 城市 菜市 夜市 市场 地区 社区 小区 山区 郊区 市区 景区 马路 道路 一路 上路 走路 区别"
)
_LATIN_TOKEN: Final = re.compile(r"[A-Za-z][A-Za-z0-9+#.\-]*[A-Za-z0-9+#]|[A-Za-z]{2,}")


def _zh_places(text: str) -> list[str]:
    found = [city for city in _CITIES if city in text]
    for i, char in enumerate(text):
        if char not in _ZH_PLACE_SUFFIX or text[i : i + 2] in _ZH_NOT_PLACES:
            continue
        j = i
        while j > 0 and i - j < 4 and _HAS_CJK.match(text[j - 1]) and text[j - 1] not in _ZH_PLACE_STOP:
            if text[j - 1] in _ZH_PLACE_SUFFIX or any(text.endswith(city, 0, j) for city in _CITIES):
                break
            j -= 1
        stem = text[j:i]
        if not stem or text[j : i + 1] in _ZH_NOT_PLACES:
            continue
        found.append(stem if stem in _CITIES else text[j : i + 1])
    return found


def _is_city(words: list[str]) -> bool:
    return " ".join(words).casefold() in _CITIES.values()


def _en_names(text: str) -> list[str]:
    names: list[str] = []
    for m in _EN_NAME_RUN.finditer(text):
        words = m.group().split()
        before = m.start() - 1
        while before >= 0 and text[before].isspace():
            before -= 1
        # After a colon starts a quoted turn ("Caroline: Wow, ..."), as after a full stop.
        sentence_start = before < 0 or text[before] in ".!?:"
        while words and words[0].lower().strip("'") in _EN_STOP_CAPITALS:
            words.pop(0)
            sentence_start = False
        if sentence_start and words and not re.search(r"[A-Z]", words[0][1:]) and not _is_city(words):
            # A fact opens with its verb ("Likes", "Studies Chinese"): the first word is no name.
            words.pop(0)
        if words:
            names.append(" ".join(words))
    return names


def entities(fact: str) -> list[str]:
    """Key entities: names, places, products, quoted titles, dated or measured numbers (at most 8)."""
    found: list[str] = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(fact)]
    found += [m.group().strip() for m in _MEASURE.finditer(fact)]
    if is_chinese(fact):
        found += _zh_places(fact)
        found += [m.group() for m in _LATIN_TOKEN.finditer(fact)]
    else:
        found += _en_names(fact)
        found += [m.group() for m in re.finditer(r"\b[a-z]+[A-Z][\w]*", fact)]
    seen: dict[str, str] = {}
    for item in found:
        item = item.strip(" ,.;:!?")
        key = item.casefold()
        if item and key not in seen and not any(key in other for other in seen):
            seen[key] = item
            if len(seen) == 8:
                break
    return list(seen.values())
