"""Secrets and PII in text (P5): detection, and redaction or refusal by a per-category policy.

Pure functions over strings, English and Chinese alike. Digit and word boundaries are lookarounds
over ASCII letters and digits, not ``\\b``: a Chinese character counts as a word character, so
"电话13812345678" has no ``\\b`` before the number.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date

from engram.models.enums import SensitiveCategory as Cat
from engram.models.settings import SensitiveMode as Mode

_NA = r"(?<![A-Za-z0-9])"  # no ASCII letter or digit before
_NZ = r"(?![A-Za-z0-9])"  # nor after
_ND, _NDZ = r"(?<!\d)", r"(?!\d)"


@dataclass(frozen=True, slots=True)
class Finding:
    """One detected value: its category and where it sits in the text (never the value itself)."""

    category: Cat
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Screened:
    """What a policy made of a text: the text to store, the categories found and those refused."""

    text: str
    found: tuple[Cat, ...]
    refused: tuple[Cat, ...]

    @property
    def changed(self) -> bool:
        """True when something was redacted."""
        return bool(self.found) and not self.refused


def placeholder(category: Cat) -> str:
    """The typed placeholder a redacted value becomes, e.g. "[CARD]"."""
    return f"[{category.value}]"


# --- checksums -----------------------------------------------------------------------------------


def luhn_ok(digits: str) -> bool:
    """The Luhn check of payment card numbers."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def iban_ok(compact: str) -> bool:
    """ISO 13616 mod-97 check of an IBAN without spaces."""
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def cn_id_ok(number: str) -> bool:
    """GB 11643 check digit and a plausible birth date of an 18-character Chinese resident id."""
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    total = sum(int(d) * w for d, w in zip(number[:17], weights, strict=True))
    if "10X98765432"[total % 11] != number[17].upper():
        return False
    try:
        born = date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    return 1900 <= born.year <= 2100


def entropy(token: str) -> float:
    """Shannon entropy of a token in bits per character."""
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


# --- detectors -----------------------------------------------------------------------------------

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|$)"
)
_KNOWN_TOKEN = re.compile(
    _NA + r"(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
    r"|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})" + _NZ
)
_BEARER = re.compile(r"(?i:bearer)\s+([A-Za-z0-9._~+/-]{16,}=*)")
# A value stated as a password, key or token: only the value is replaced, the sentence stays.
_STATED = re.compile(
    r"(?i:pass(?:word|phrase|code)?|passwd|pwd|pin(?: code)?|api[ _-]?key|access[ _-]?key|secret(?: key)?"
    r"|(?:auth |access |api )?token|(?:licen[cs]e|product|activation|serial) (?:key|code)"
    r"|密码|密碼|口令|密钥|秘钥|令牌|支付密码|验证码|激活码|序列号)"
    r"(?:\s+(?i:is|was|=)(?:\s+(?i:now|still|currently|changed to|set to))?|\s+(?i:changed to|set to)"
    r"|\s*[:=：]|\s*(?:现在|仍然|还)?(?:是|为|為|改成了?|换成了?|改为|设为|设置为))"
    r"\s*[\"'“”]?([^\s\"'“”，。,;；、！!？?]{3,})"
)
_ENTROPY_TOKEN = re.compile(r"(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/=-]{20,}(?![A-Za-z0-9_+/=-])")
_CARD = re.compile(_ND + r"\d(?:[ -]?\d){12,18}" + _NDZ)
_IBAN = re.compile(_NA + r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}" + _NZ)
_SSN = re.compile(_ND + r"(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}" + _NDZ)
_CN_ID = re.compile(_ND + r"[1-9]\d{16}[\dXx]" + _NZ)
_STATED_ID = re.compile(
    _NA + r"(?i:passport(?: number| no\.?)?|ssn|social security number|national id(?: number)?|id number"
    r"|(?:user|customer|member|membership|employee|staff|student|patient|tax|taxpayer) (?:id|number|no\.?)"
    r"(?: number)?|driver'?s? licen[cs]e(?: number| no\.?)?"
    r"|护照号?码?|身份证号?码?|社保号码?|证件号码?|驾驶证号?码?|学号|工号|会员号|客户号|病历号)"
    r"(?:\s+(?i:is)|\s*[:：#]|\s*(?:是|为|為))?\s*([A-Z0-9][A-Z0-9-]{5,17}[A-Z0-9])" + _NZ
)
# A number the text calls a card or a bank account: redacted whatever its checksum (a checksum only
# raises confidence in a number nobody named). The name comes before the number or right after it.
_DIGITS = r"(\d(?:[ -]?\d){%d,%d})" + _NDZ
_CARD_NAME = (
    r"(?i:(?:credit |debit |bank |payment |gift )?card(?: number| no\.?| #)?)"
    r"|(?:信用卡|借记卡|储蓄卡|银行卡|卡)号?码?"
)
_ACCOUNT_NAME = (
    r"(?i:(?:bank |checking |savings |current )?account(?: number| no\.?| #)?|acct(?: no\.?)?"
    r"|routing(?: number| no\.?)?|sort code)"
    r"|(?:银行)?(?:账号|帐号|账户号?码?|帐户号?码?)"
)
_STATED_BEFORE = r"(?:\s+(?i:is|was|number is)|\s*[:：#=]|\s*(?:是|为|為))?\s*"
_STATED_AFTER = r"\s*(?:\s(?i:is|was) (?i:my|the|our|his|her|their)(?: [a-z]+)? |是我的|是他的|是她的)"
_STATED_CARD = re.compile(
    _NA
    + r"(?:"
    + _CARD_NAME
    + r")"
    + _STATED_BEFORE
    + _ND
    + _DIGITS % (11, 18)
    + r"|"
    + _ND
    + _DIGITS % (11, 18)
    + _STATED_AFTER
    + r"(?:"
    + _CARD_NAME
    + r")"
)
_STATED_ACCOUNT = re.compile(
    _NA
    + r"(?:"
    + _ACCOUNT_NAME
    + r")"
    + _STATED_BEFORE
    + _ND
    + _DIGITS % (5, 33)
    + r"|"
    + _ND
    + _DIGITS % (5, 33)
    + _STATED_AFTER
    + r"(?:"
    + _ACCOUNT_NAME
    + r")"
)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(
    "|".join(
        (
            _ND + r"(?:(?:\+|00)86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}" + _NDZ,  # Chinese mobile
            _ND + r"0\d{2,3}-\d{7,8}" + _NDZ,  # Chinese landline
            r"\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}" + _NDZ,  # international
            _ND + r"\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}" + _NDZ,  # North American
        )
    )
)


def _spans(pattern: re.Pattern[str], text: str, group: int = 0) -> Iterable[tuple[int, int, str]]:
    for m in pattern.finditer(text):
        yield m.start(group), m.end(group), m.group(group)


def _secrets(text: str) -> Iterable[tuple[int, int]]:
    for pattern, group in ((_PRIVATE_KEY, 0), (_KNOWN_TOKEN, 0), (_BEARER, 1)):
        for start, end, _ in _spans(pattern, text, group):
            yield start, end
    for start, end, value in _spans(_STATED, text, 1):
        if value.lower().rstrip(".!") not in _NOT_A_VALUE:
            yield start, end
    for start, end, token in _spans(_ENTROPY_TOKEN, text):
        if _random_looking(token):
            yield start, end


# Words that follow "the password is" in sentences stating no password ("the API key is not valid").
_NOT_A_VALUE_WORDS = (
    "not no too the a an my your his her its our their this that you we they it i he she very so"
    " still now valid invalid wrong correct incorrect expired missing required needed weak strong"
    " long short same different empty set reset changed secure safe hidden private unknown"
    " forgotten lost stolen leaked compromised good bad easy hard simple ok fine case-sensitive"
    " 什么呢 不对的 错误的 正确的 一样的"
)
_NOT_A_VALUE = frozenset(_NOT_A_VALUE_WORDS.split())
_WORDY = re.compile(r"[a-z]{4,}")


def _random_looking(token: str) -> bool:
    # Long words, paths and hyphenated phrases (mostly lowercase words), ids made of one character
    # class are not keys.
    if sum(len(w) for w in _WORDY.findall(token)) * 2 >= len(token):
        return False
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    if not (has_digit and has_alpha) or token.count("-") > len(token) // 6:
        return False
    if re.fullmatch(r"[0-9a-fA-F]+", token):
        return len(token) >= 32 and entropy(token) >= 3.0
    mixed_case = any(c.isupper() for c in token) and any(c.islower() for c in token)
    return entropy(token) >= (3.5 if mixed_case else 3.8)


def _stated(pattern: re.Pattern[str], text: str) -> Iterable[tuple[int, int]]:
    # Two alternatives (name first, number first), one group each: the number is the one that took part.
    for m in pattern.finditer(text):
        group = 1 if m.group(1) is not None else 2
        if len(set(re.sub(r"\D", "", m.group(group)))) > 1:
            yield m.start(group), m.end(group)


def _cards(text: str) -> Iterable[tuple[int, int]]:
    for start, end, value in _spans(_CARD, text):
        digits = re.sub(r"\D", "", value)
        if 13 <= len(digits) <= 19 and luhn_ok(digits) and len(set(digits)) > 1:
            yield start, end
    yield from _stated(_STATED_CARD, text)


def _accounts(text: str) -> Iterable[tuple[int, int]]:
    yield from _stated(_STATED_ACCOUNT, text)


def _ibans(text: str) -> Iterable[tuple[int, int]]:
    for start, end, value in _spans(_IBAN, text):
        if iban_ok(value.replace(" ", "")):
            yield start, end


def _gov_ids(text: str) -> Iterable[tuple[int, int]]:
    for start, end, _ in _spans(_SSN, text):
        yield start, end
    for start, end, value in _spans(_CN_ID, text):
        if cn_id_ok(value):
            yield start, end
    for start, end, value in _spans(_STATED_ID, text, 1):
        if any(c.isdigit() for c in value):
            yield start, end


def _emails(text: str) -> Iterable[tuple[int, int]]:
    for start, end, _ in _spans(_EMAIL, text):
        yield start, end


def _phones(text: str) -> Iterable[tuple[int, int]]:
    for start, end, value in _spans(_PHONE, text):
        if 7 <= sum(c.isdigit() for c in value) <= 15:
            yield start, end


# Earlier detectors win an overlap: a private key holds digits, a Chinese id 18 of them.
_DETECTORS: tuple[tuple[Cat, Callable[[str], Iterable[tuple[int, int]]]], ...] = (
    (Cat.SECRET, _secrets),
    (Cat.GOV_ID, _gov_ids),
    (Cat.IBAN, _ibans),
    (Cat.CARD, _cards),
    (Cat.ACCOUNT, _accounts),
    (Cat.EMAIL, _emails),
    (Cat.PHONE, _phones),
)


def detect(text: str) -> list[Finding]:
    """Every secret or PII value in ``text``, non-overlapping, in text order."""
    taken: list[Finding] = []
    for category, detector in _DETECTORS:
        for start, end in detector(text):
            if start < end and all(end <= f.start or start >= f.end for f in taken):
                taken.append(Finding(category, start, end))
    return sorted(taken, key=lambda f: f.start)


def screen(text: str, modes: Mapping[Cat, Mode]) -> Screened:
    """Apply a policy: values of ``redact`` categories become placeholders, ``allow`` ones stay; any
    ``refuse`` category found refuses the whole text (``refused`` non-empty, ``text`` unchanged)."""
    findings = [f for f in detect(text) if modes.get(f.category, "redact") != "allow"]
    found = tuple(dict.fromkeys(f.category for f in findings))
    refused = tuple(c for c in found if modes.get(c, "redact") == "refuse")
    if refused or not findings:
        return Screened(text, found, refused)
    return Screened(redact(text, findings), found, ())


def redact(text: str, findings: Iterable[Finding]) -> str:
    """``text`` with every finding replaced by its placeholder."""
    out: list[str] = []
    at = 0
    for f in sorted(findings, key=lambda f: f.start):
        out += [text[at : f.start], placeholder(f.category)]
        at = f.end
    return "".join([*out, text[at:]])


def scrub(text: str, modes: Mapping[Cat, Mode]) -> str:
    """``text`` with every value not allowed replaced (refuse counts as redact): for texts that are
    kept whatever they hold, such as an imported change log."""
    return redact(text, [f for f in detect(text) if modes.get(f.category, "redact") != "allow"])


def refusal_message(refused: Iterable[Cat]) -> str:
    """The caller-safe reason of a refusal: the categories, never the values."""
    return "content holds " + ", ".join(c.name.lower() for c in refused) + " (sensitive policy: refuse)"
