"""Expiry from time hints: how many days until "today", "tomorrow" or "下周" runs out."""

from __future__ import annotations

import re
from datetime import date
from typing import Final

from engram.actors.statements.text import _fold

_NUMBER_WORDS: Final = {
    word: n
    for n, word in enumerate(
        ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"), 1
    )
}
_WEEKDAYS_EN: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_ZH: Final = "一二三四五六日"
# (pattern, days without a date, period from today): "d" fixed days, "w0"/"w1" end of this/next week,
# "m0"/"m1" end of this/next month, "y1" end of next year; a weekday index counts to that day.
_EXPIRY_HINTS: Final[tuple[tuple[re.Pattern[str], int, str], ...]] = (
    (
        re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b|今天|今晚|今早|今日|今夜"),
        1,
        "d",
    ),
    (re.compile(r"\btomorrow\b|明天|明晚|明早|明日"), 2, "d"),
    (re.compile(r"\bday after tomorrow\b|(?<!大)后天"), 3, "d"),
    (re.compile("大后天"), 4, "d"),
    (
        re.compile(r"\bthis (?:week|weekend)\b|(?<!每)(?:本周|这周|这个星期|这星期|这礼拜)|(?<![每下])周末"),
        7,
        "w0",
    ),
    (re.compile(r"\bnext (?:week|weekend)\b|下周|下星期|下个星期|下礼拜"), 14, "w1"),
    (re.compile(r"\bthis month\b|本月|这个月"), 31, "m0"),
    (re.compile(r"\bnext month\b|下个月|下月"), 31, "m1"),
    (re.compile(r"\bnext year\b|明年"), 366, "y1"),
)
_EN_WEEKDAY: Final = re.compile(
    r"(?<!every )(?<!each )(?<!last )(?<!past )\b(?:on |this |next )?(" + "|".join(_WEEKDAYS_EN) + r")\b"
)
_ZH_WEEKDAY: Final = re.compile(f"(?<![每上])(?:星期|周|礼拜)([{_WEEKDAYS_ZH}天])")
_IN_N: Final = re.compile(
    r"\bin (\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten) (day|week|month)s?\b"
    r"|(\d{1,3})\s*(天|周|个星期|个月)(?:后|之后|以后|内|之内)"
)


def _period_days(period: str, today: date) -> int:
    if period.startswith("w"):
        return (6 - today.weekday()) + 7 * int(period[1]) + 1
    if period.startswith("m"):
        month = today.month + int(period[1]) + 1
        end = date(today.year + (month - 1) // 12, (month - 1) % 12 + 1, 1)
        return (end - today).days
    return (date(today.year + 2, 1, 1) - today).days


def expiry_days(statement: str, today: date | None = None) -> int | None:
    """Days until a time hint runs out ("today" 1, "tomorrow" 2, "下周" 14); None when there is no hint."""
    folded = _fold(statement)
    found: list[int] = []
    for pattern, days, period in _EXPIRY_HINTS:
        if pattern.search(folded):
            found.append(days if today is None or period == "d" else _period_days(period, today))
    weekdays = [_WEEKDAYS_EN.index(m.group(1)) for m in _EN_WEEKDAY.finditer(folded)]
    weekdays += [
        _WEEKDAYS_ZH.index(m.group(1)) if m.group(1) != "天" else 6 for m in _ZH_WEEKDAY.finditer(folded)
    ]
    for weekday in weekdays:
        found.append(7 if today is None else (weekday - today.weekday()) % 7 + 1)
    for m in _IN_N.finditer(folded):
        count_text, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        count = _NUMBER_WORDS.get(count_text) or int(count_text)
        per = {"day": 1, "天": 1, "week": 7, "周": 7, "个星期": 7}.get(unit, 31)
        found.append(count * per + 1)
    return min(max(found), 3650) if found else None
