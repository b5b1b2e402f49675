"""Claims (subject + attribute -> value) and the values a fact names, for evolution (issue #13).

``claim`` reads any "<attribute> is <value>" statement ("Locker code at the Lisbon office is K001",
"手机号码换成了139...") besides the fixed attributes of ``attributes``; ``values_differ`` says whether
two facts name different identifiers, numbers, dates, amounts or names: then neither repeats the other.
"""

from __future__ import annotations

import re
from typing import Final

from engram.actors.lexical import tokenize
from engram.actors.statements.attributes import _en_core, _zh_core, attribute
from engram.actors.statements.text import _fold, _words, is_chinese

# Nouns that name a single-valued attribute of someone: a new value replaces the old one.
_EN_ATTRIBUTE_NOUNS: Final = _words(
    """code password passcode passphrase pin hint number phone mobile cell email e-mail address name
    nickname username handle id time date day appointment meeting deadline flight gate seat room plate
    account iban balance budget rent salary wage price cost fee size height weight score goal target
    color colour version major grade level birthday anniversary age schedule reservation booking
    ticket locker key combination extension zip zipcode postcode floor title role position timezone"""
)
# People ("boss", "doctor"), places ("office") and things ("dog", "car") are described as often as
# named: "Boss is strict" adds to "Boss is Anna". They make a claim only when the value names someone
# or something (a value token), so they are not listed.
_ZH_ATTRIBUTE_NOUNS: Final = re.compile(
    "(?:码|号|密码|口令|号码|电话|手机|地址|邮箱|时间|日期|预约|生日|名字|编号|车牌|座位|房间|门牌|工资|薪水|房租|"
    "预算|价格|颜色|专业|级别|职位|职务|航班|登机口|车次|账号|账户|用户名|昵称|身高|体重)$"
)
_EN_DETERMINER_LEAD: Final = re.compile(r"^(?:the|a|an|new|current|updated|latest|present)\s+")
_EN_NOT_AN_ATTRIBUTE: Final = _words(
    "it this that there here he she they we you everything something nothing which what who one all"
)
_EN_CLAIM: Final = re.compile(
    r"^(?P<attr>[^,;:!?]{2,60}?)\s+(?:is now|are now|is|are|was|were|has changed to|have changed to"
    r"|changed to|was changed to|has been changed to|has moved to|was moved to|moved to|got moved to"
    r"|is set to|was set to|has been set to|was updated to|has been updated to|updated to"
    r"|(?:now )?(?:starts|begins|ends|leaves|departs|opens|closes|arrives) (?:at|on))\s+(?P<value>.+)$"
)
_EN_CHANGE_VERB: Final = re.compile(
    r"^(?:has |have )?(?:changed|moved|rescheduled|updated|switched|reset|set)\s+"
    r"(?:my |the |his |her |their )?(?P<attr>[^,;:!?]{2,60}?)\s+to\s+(?P<value>.+)$"
)
_EN_PREPOSITION: Final = re.compile(r"\s(?:at|in|for|of|on|with|from|to|by)\s")
_EN_CLAIM_VALUE_END: Final = re.compile(r"[;(]|,\s|\s(?:because|since|but|so that|which|who)\b")
_ZH_CLAIM: Final = re.compile(
    "^(?P<attr>[^，,。；;是为]{1,14}?)(?:已经|现在|目前)?"
    "(?P<verb>换成了?|改成了?|改为|变成了?|改到了?|调到了?|更新为|更新成|定在|定为|是|为|在)(?P<value>.+)$"
)
_ZH_CLAIM_VALUE_END: Final = re.compile("[，,。；;！？!?（(]|因为|所以|但是")
_ZH_PRONOUN_LEAD: Final = re.compile("^(?:这|那|它|这个|那个|什么|哪)")
# One attribute under its everyday names: "my new number" is the phone number it replaces.
_EN_SAME_ATTRIBUTE: Final = {
    **dict.fromkeys(
        ("number", "phone", "mobile", "mobile number", "cell", "cell number", "cell phone",
         "cell phone number", "telephone", "telephone number", "phone no", "contact number"),
        "phone number",
    ),
    **dict.fromkeys(("e-mail", "email address", "e-mail address", "mail address", "mail"), "email"),
}  # fmt: skip
_ZH_SAME_ATTRIBUTE: Final = {
    **dict.fromkeys(("号", "新号", "手机", "电话", "电话号", "手机号", "联系电话", "联系方式"), "手机号"),
    **dict.fromkeys(("邮箱", "电子邮箱", "邮件地址", "邮箱地址", "email"), "邮箱"),
}
_ZH_NEW_VALUE: Final = re.compile(
    "^(?:换了|换成了?|改了|用了)(?:个|一个)?(?:新的?)?(?P<attr>号码|手机号码?|电话号码?|手机|电话|邮箱|地址)"
    "(?:是|为|：|:)?(?P<value>.+)$"
)
_ADDITIVE: Final = re.compile(r"\b(?:also|too|as well|another|one more)\b|还有|也是|另一个|又一个")


def claim(fact: str) -> tuple[str, str] | None:
    """(subject and attribute, value) when the fact states a value of a single-valued attribute."""
    known = attribute(fact)
    if known is not None:
        return known
    if _ADDITIVE.search(_fold(fact)):
        return None  # "also has a second locker": one more value, not a replacement
    if is_chinese(fact):
        core = _zh_core(fact)
        return _zh_claim(core) or _zh_new_value(core)
    return _en_claim(_en_core(fact))


def _en_claim(core: str) -> tuple[str, str] | None:
    match = _EN_CLAIM.match(core) or _EN_CHANGE_VERB.match(core)
    if match is None:
        return None
    attr = match.group("attr").strip()
    while (stripped := _EN_DETERMINER_LEAD.sub("", attr)) != attr:
        attr = stripped
    words = attr.split()
    if not words or len(words) > 8 or words[0] in _EN_NOT_AN_ATTRIBUTE:
        return None
    value = _en_value(match.group("value"))
    if not value:
        return None
    head = _EN_PREPOSITION.split(f" {attr} ".replace("'s ", " "), maxsplit=1)[0].split()
    if not (head and head[-1] in _EN_ATTRIBUTE_NOUNS) and not value_tokens(value):
        return None  # "Dog is very playful" describes; it does not replace "Dog is a retriever"
    key = " ".join(tokenize(_EN_SAME_ATTRIBUTE.get(attr, attr))) or attr
    return f"claim:{key}", value


def _en_value(raw: str) -> str:
    cut = _EN_CLAIM_VALUE_END.search(raw)
    value = raw[: cut.start()] if cut else raw
    value = re.sub(r"^(?:now|currently)\s+", "", value.strip())
    return " ".join(value.strip(" .!?;:\"'“”").split())


def _zh_new_value(core: str) -> tuple[str, str] | None:
    """ "换了新号码139...": the attribute named after the change, then its value."""
    match = _ZH_NEW_VALUE.match(core)
    if match is None:
        return None
    cut = _ZH_CLAIM_VALUE_END.search(match.group("value"))
    value = (match.group("value")[: cut.start()] if cut else match.group("value")).strip(" 了啦呢的")
    key = match.group("attr").replace("号码", "号")
    return (f"claim:{_ZH_SAME_ATTRIBUTE.get(key, key)}", value) if value_tokens(value) else None


def _zh_claim(core: str) -> tuple[str, str] | None:
    match = _ZH_CLAIM.match(core)
    if match is None:
        return None
    attr = match.group("attr").strip().removesuffix("的")
    if not attr or _ZH_PRONOUN_LEAD.match(attr):
        return None
    cut = _ZH_CLAIM_VALUE_END.search(match.group("value"))
    value = (match.group("value")[: cut.start()] if cut else match.group("value")).strip(" 了啦呢的")
    if not value:
        return None
    named = _ZH_ATTRIBUTE_NOUNS.search(attr) is not None
    # "在" is a claim only after an attribute noun ("预约在周四"), never after anyone ("朋友在周五来").
    if not named and (match.group("verb") == "在" or not value_tokens(value)):
        return None
    # "手机号码" and "手机号", "电话号码" and "电话号" name one attribute.
    key = _fold(attr).replace("号码", "号")
    return f"claim:{_ZH_SAME_ATTRIBUTE.get(key, key)}", value


# Identifiers, numbers, dates, times and amounts: any run holding a digit ("K001a2b3", "555-0199",
# "3pm", "$1,200"), Chinese numerals with their unit ("三月十二号", "下午三点"), and capitalised names.
_DIGIT_RUN: Final = re.compile(r"[A-Za-z0-9$€£¥@.+\-/:]*\d(?:[A-Za-z0-9$€£¥@.+\-/:]|,(?=\d{3}))*")
_ZH_WEEKDAY: Final = re.compile("(?:周|星期|礼拜)[一二三四五六日天]")
_ZH_NUMBER: Final = re.compile(
    "[零〇一二三四五六七八九十百千万两]+(?:月|号|日|点|岁|元|块|楼|层|分|号线|路)?"
)
_EMAIL: Final = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NAME: Final = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+(?:[A-Z][a-z]+)*\b")
_WEEKDAYS_MONTHS: Final = _words(
    """monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december"""
)


def value_tokens(text: str) -> frozenset[str]:
    """The identifiers, numbers, dates, amounts and names a text names, normalised for comparison."""
    folded = _fold(text)
    found = {m.group().strip(".,:/-").casefold() for m in _DIGIT_RUN.finditer(folded)}
    found.update(m.group() for m in _EMAIL.finditer(folded))
    found.update(m.group() for m in _ZH_WEEKDAY.finditer(text))
    found.update(m.group() for m in _ZH_NUMBER.finditer(_ZH_WEEKDAY.sub(" ", text)) if m.group() != "一")
    found.update(w for w in re.findall(r"[a-z]+", folded) if w in _WEEKDAYS_MONTHS)
    found.update(m.group().casefold() for m in _NAME.finditer(text))
    return frozenset(v for v in found if v)


def values_differ(left: str, right: str) -> bool:
    """True when the two facts name different identifiers, numbers, dates, amounts or names."""
    return value_tokens(left) != value_tokens(right)
