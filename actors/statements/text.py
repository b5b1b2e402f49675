"""Shared text helpers for the statement heuristics: word lists, folding, script detection, CJK patterns."""

from __future__ import annotations

import re
import unicodedata
from typing import Final, Literal

Speaker = Literal["user", "assistant"]

_CJK: Final = "\u4e00-\u9fff"
_HAS_CJK: Final = re.compile(f"[{_CJK}]")
_LATIN: Final = re.compile("[A-Za-z]")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _fold(text: str) -> str:
    """Analysis form: NFKC (fullwidth punctuation becomes ASCII), casefolded, straight apostrophes."""
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'").replace("\u2018", "'")


def is_chinese(text: str) -> bool:
    """True when the text reads as Chinese: it opens with a CJK character or has more of them than letters."""
    first = re.search(f"[{_CJK}A-Za-z]", text)
    if first is None:
        return False
    cjk = len(_HAS_CJK.findall(text))
    return bool(_HAS_CJK.match(first.group())) or cjk > len(_LATIN.findall(text))


def _capitalise(text: str) -> str:
    # "iPhone" keeps its case: only a plain lowercase word is capitalised.
    if len(text) > 1 and text[1].isupper():
        return text
    return text[:1].upper() + text[1:]


_ZH_CONNECTIVE: Final = "(?:而且|并且|但是|但|不过|所以|然后|还有|另外|其实|对了|同时|可是|因为|因此)"
_ZH_TIME: Final = (
    "(?:今天|明天|后天|大后天|昨天|前天|今晚|明晚|今早|明早|下周[一二三四五六日天末]?|这周末?|本周|上周|"
    "下个?月|这个?月|本月|上个?月|明年|今年|去年|周末|现在|目前|最近|每天|平时|以前|之前|后来|刚才|"
    "(?:星期|周|礼拜)[一二三四五六日天])"
)
