"""Rewriting first-person statements into the compact fact style ("Likes cheese pizza", "住在北京")."""

from __future__ import annotations

import re
from typing import Final

from engram.actors.statements.chitchat import is_chitchat
from engram.actors.statements.text import _ZH_CONNECTIVE, _ZH_TIME, Speaker, _capitalise, _words, is_chinese

_DROP_ADVERBS: Final = _words(
    "really truly absolutely totally definitely also actually honestly just sincerely so kinda"
)
_KEEP_ADVERBS: Final = _words(
    "never always usually often sometimes rarely seldom still now currently recently already"
)
_MODALS: Final = _words("can could will would should must may might shall was")
_IRREGULAR_PAST: Final = _words(
    """was went got had made met bought took saw came began ate drank flew left lost found thought felt kept
    sold spent told wrote became gave grew knew ran said sent slept spoke stood taught understood won did quit
    broke chose drove forgot paid caught fell brought built"""
)
_THIRD_PERSON: Final = {"have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't"}
_EN_TIME_LEAD: Final = re.compile(
    r"^((?:now|today|tomorrow|tonight|yesterday|this (?:morning|afternoon|evening|weekend|week|month|year)"
    r"|(?:next|last) (?:week|weekend|month|year|\w+day)|on \w+day|this \w+day)),?\s+(?=(?:i|we)\b)",
    re.IGNORECASE,
)
_EN_LEAD_NOISE: Final = re.compile(
    r"^(?:(?:and|but|so|also|well|oh|actually|anyway|btw|by the way|plus|then|ok|okay)\b[,\s]*)+",
    re.IGNORECASE,
)
_ZH_LEAD_NOISE: Final = re.compile(f"^(?:{_ZH_CONNECTIVE}[，,\\s]*)+")


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low in _THIRD_PERSON:
        return _THIRD_PERSON[low]
    if low in _MODALS or low in _IRREGULAR_PAST or low.endswith(("ed", "n't")):
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 2 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _en_predicate(rest: str) -> str:
    """'really like cheese pizza' -> 'likes cheese pizza': the verb after "I" in the third person."""
    words = rest.split()
    kept: list[str] = []
    while words:
        word = words.pop(0)
        low = word.lower()
        if low in _DROP_ADVERBS or (low == "do" and words and words[0].lower() not in {"not", "n't"}):
            continue
        if low in _KEEP_ADVERBS:
            kept.append(word)
            continue
        if low == "no" and words and words[0].lower() == "longer":  # "no longer like" is no verb "no"
            kept += [word, words.pop(0)]
            continue
        if low == "am":
            return " ".join([*kept, *_am_predicate(words)])
        if low == "do" and words:
            words.pop(0)
            return " ".join([*kept, "does not", *words])
        return " ".join([*kept, _third_person(word), *words])
    return " ".join(kept)


def _am_predicate(words: list[str]) -> list[str]:
    # "am looking for" -> "Looking for"; "am a software engineer" -> "Is a software engineer".
    while words and words[0].lower() in _DROP_ADVERBS:
        words.pop(0)
    if words and words[0].lower().endswith("ing") and words[0].lower() not in {"thing", "king"}:
        return words
    return ["is", *words]


def _en_request(text: str) -> str | None:
    inner = re.sub(
        r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?", "", text, flags=re.IGNORECASE
    )
    if m := re.match(r"remind (?:me|us) (to|that|about)\s+(.+)", inner, re.IGNORECASE):
        return f"Wants to be reminded {m.group(1).lower()} {m.group(2)}"
    if m := re.match(r"help (?:me|us)\s+(?:to\s+)?(.+)", inner, re.IGNORECASE):
        return f"Wants to {m.group(1)}"
    if m := re.match(r"call me\s+(.+)", inner, re.IGNORECASE):
        return f"Name is {m.group(1)}"
    if m := re.match(
        r"(book|reserve|order|buy|find|get|schedule|arrange|plan)\s+(?:me|us)\s+(.+)", inner, re.I
    ):
        return f"Wants to {m.group(1).lower()} {m.group(2)}"
    return None


def _en_fact(text: str) -> str:
    request = _en_request(text)
    if request is not None:
        return request
    time_lead = ""
    if m := _EN_TIME_LEAD.match(text):
        time_lead, text = m.group(1).lower(), text[m.end() :]
    fact = _en_subject_rules(text)
    if fact is None:
        return text if not time_lead else f"{time_lead} {text}"
    return f"{fact} {time_lead}".strip()


def _en_subject_rules(text: str) -> str | None:
    if m := re.match(r"my name(?: is|'s)\s+(.+)", text, re.IGNORECASE):
        return f"Name is {m.group(1)}"
    if m := re.match(r"my\s+(.+)", text, re.IGNORECASE):
        return m.group(1)
    if m := re.match(r"i(?:'m|\s+am)\s+(?:called|named)\s+(.+)", text, re.IGNORECASE):
        return f"Name is {m.group(1)}"
    m = re.match(r"i(?:'(m|ve|ll|d)|\s+(am))?\s+(.+)", text, re.IGNORECASE)
    if m is None:
        return None
    contraction = (m.group(1) or m.group(2) or "").lower()
    rest = m.group(3)
    if contraction in {"m", "am"}:
        return " ".join(_am_predicate(rest.split()))
    auxiliary = {"ve": "has", "ll": "will", "d": "would"}.get(contraction)
    return f"{auxiliary} {rest}" if auxiliary else _en_predicate(rest)


_ZH_INTENSIFIERS: Final = re.compile(
    "(?:真的|非常|特别|很|超级|超|挺|也|确实|其实|蛮|相当|十分|一直|还|都)+(?=不?(?:喜欢|爱|讨厌))"
)


_ZH_REQUEST: Final = re.compile(
    "^(?:请|麻烦你?|能不能|可不可以|能|可以)?(?:你|您)?(?:也)?"
    "(?:(?:帮|替|给)我(?=订|买|预订|预约|找|安排|约|挂号|定|查)|帮我|(提醒|叫)我)"
    "(.+?)(?:就行|就好|好吗|可以吗|吗|吧|呢)?$"
)


def _zh_fact(text: str) -> str:
    if m := _ZH_REQUEST.match(text):
        return {"提醒": "需要记得", "叫": "名字是"}.get(m.group(1) or "", "想") + m.group(2)
    m = re.match(f"^({_ZH_TIME}*)(?:我|本人)(?!们)(.*)$", text)
    if m is None:
        return text
    time, rest = m.group(1), m.group(2)
    if (n := re.match("^的?名字(?:是|叫)(.+)$", rest)) or (n := re.match("^叫(?![了过车])(.+)$", rest)):
        rest = "名字是" + n.group(1)
    elif rest.startswith("的"):
        rest = rest[1:]
    rest = _ZH_INTENSIFIERS.sub("", rest, count=1) if not rest.startswith("最") else rest
    return time + rest


def _as_third_person_user(text: str) -> str:
    """The assistant's "you" is the user: "I'll remind you" -> "I'll remind the user"."""
    if is_chinese(text):
        return re.sub("(?:你|您)", "用户", text)
    contractions = {"you're": "the user is", "you've": "the user has", "you'll": "the user will"}
    text = re.sub(
        r"\byou(?:'re|'ve|'ll)", lambda m: contractions[m.group().lower()], text, flags=re.IGNORECASE
    )
    text = re.sub(r"\byour(?:s)?\b", "the user's", text, flags=re.IGNORECASE)
    text = re.sub(r"\byou(?:rself)?\b", "the user", text, flags=re.IGNORECASE)
    return re.sub(
        r"\bthe user (are|were|have|don't)\b",
        lambda m: (
            "the user " + {"are": "is", "were": "was", "have": "has", "don't": "doesn't"}[m.group(1).lower()]
        ),
        text,
        flags=re.IGNORECASE,
    )


def _strip_noise(statement: str) -> str:
    text = statement.replace("\u2019", "'").strip().rstrip(".!?;。！？；…~～ \t")
    for _ in range(3):
        m = re.match(r"^(.+?)[,，!！.。]\s*(.+)$", text)
        if m is None or not is_chitchat(m.group(1)):
            break
        text = m.group(2)
    text = _EN_LEAD_NOISE.sub("", text)
    return _ZH_LEAD_NOISE.sub("", text).strip()


def to_fact(statement: str, speaker: Speaker = "user") -> str:
    """Rewrite a first-person statement into the compact fact style of its language ("Name is John")."""
    text = _strip_noise(statement)
    if speaker == "assistant":
        text = _as_third_person_user(text)
    fact = _zh_fact(text) if is_chinese(text) else _en_fact(text)
    return _capitalise(fact.strip().rstrip(",，;；:：").strip())
