"""Bilingual (English + Chinese) statement analysis shared by rule-based extraction and evolution.

Pure functions over plain strings (word lists and regexes, no models). Facts follow the seeds' compact
style with the subject dropped: "Likes cheese pizza", "Name is John", "住在北京".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from datetime import date
from typing import Final, Literal

from actors.tasks import FactKind

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


# --- chit-chat -------------------------------------------------------------------------------------

_CHITCHAT_WORDS: Final = _words(
    """
    hi hello hey hiya howdy yo greetings morning afternoon evening night good great nice cool awesome fine
    ok okay kk sure yes yeah yep yup no nope nah thanks thank thx ty tysm you so much very lot a bye goodbye
    cya see later soon take care welcome you're youre np problem alright right got it i i'm im am sorry
    understand hmm um uh oh ah wow please pleasure glad happy to help be i'd would and too all how are doing
    it's is was dear sir madam friend everyone guys again well cheers appreciate appreciated perfect noted
    indeed absolutely certainly of course exactly agreed true that's what's up sup there the same for that
    this bro buddy mate man lovely wonderful fantastic excellent amazing gotcha understood makes sense meet
    """
)
_LAUGH: Final = re.compile(
    r"a*(?:ha)+h?|(?:he)+h?|(?:hi){2,}|lo+l|lmf?ao+|rofl|x+d+|hm+|u+m+|u+h+|o+h+|a+h+|wo+w|ye+s+|o+k+|no+"
    r"|ya+y+|heh|bye+|hey+|hi+|thx+|ty+"
)
_ZH_CHITCHAT_PHRASES: Final = _words(
    "你好 您好 大家好 早上好 上午好 中午好 下午好 晚上好 早安 午安 晚安 早 嗨 哈喽 哈啰 嘿 喂 在吗 在不在 "
    "谢谢 谢谢你 谢谢您 谢啦 谢了 多谢 感谢 非常感谢 十分感谢 不客气 不用谢 没事 没关系 没问题 "
    "好的 好吧 好啊 好哒 好嘞 好滴 好 行 行吧 可以 嗯 哦 噢 喔 啊 呀 哇 哈 呵 嘿 嘻 "
    "拜拜 再见 回头见 明天见 下次见 辛苦了 "
    "辛苦 了 啦 呢 吧 嘛 太好了 太棒了 真棒 对 对的 是的 是 收到 明白 明白了 知道了 懂了 了解 好嘞 你 您 很 "
    "非常 真 太 棒 厉害 谢 我很好 我挺好 我还好 我也好 我明白 我知道了 我懂了 我明白了 也 都 还 挺"
)
_ZH_CHITCHAT_LONGEST: Final = max(len(phrase) for phrase in _ZH_CHITCHAT_PHRASES)
_TOKENS: Final = re.compile(rf"[a-z]+(?:'[a-z]+)*|[{_CJK}]+|[^\W_]+")


def _zh_chitchat_run(run: str) -> bool:
    # Word-break over the phrase list; a regex of overlapping alternatives backtracks exponentially.
    reachable = [True] + [False] * len(run)
    for start in range(len(run)):
        if reachable[start]:
            for end in range(start + 1, min(len(run), start + _ZH_CHITCHAT_LONGEST) + 1):
                if run[start:end] in _ZH_CHITCHAT_PHRASES:
                    reachable[end] = True
    return reachable[-1]


def is_chitchat(text: str) -> bool:
    """True for greetings, thanks, acknowledgements and small talk ("Hi.", "Thanks, bye", "好的")."""
    for token in _TOKENS.findall(_fold(text)):
        if _HAS_CJK.match(token):
            if not _zh_chitchat_run(token):
                return False
        elif token not in _CHITCHAT_WORDS and not _LAUGH.fullmatch(token):
            return False
    return True


# --- splitting -------------------------------------------------------------------------------------

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


_EN_CONNECTIVE: Final = r"(?:(?:and|but|so|also|then|plus|well|oh|actually|anyway|btw)\s+)*"
_EN_SUBJECT: Final = re.compile(
    rf"^{_EN_CONNECTIVE}(?:i|i'm|im|i've|i'll|i'd|my|we|we're|we've|we'll|we'd|our)(?![\w'])"
)
_EN_QUESTION_START: Final = re.compile(
    r"^(?:what|where|when|why|how|who|which|whose|is|are|do|does|did|can|could|would|will|should|any)\s"
)
_ZH_CONNECTIVE: Final = "(?:而且|并且|但是|但|不过|所以|然后|还有|另外|其实|对了|同时|可是|因为|因此)"
_ZH_TIME: Final = (
    "(?:今天|明天|后天|大后天|昨天|前天|今晚|明晚|今早|明早|下周[一二三四五六日天末]?|这周末?|本周|上周|"
    "下个?月|这个?月|本月|上个?月|明年|今年|去年|周末|现在|目前|最近|每天|平时|以前|之前|后来|刚才|"
    "(?:星期|周|礼拜)[一二三四五六日天])"
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


# --- rewriting into the compact fact style -----------------------------------------------------------

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
    r"^((?:today|tomorrow|tonight|yesterday|this (?:morning|afternoon|evening|weekend|week|month|year)"
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


# --- single-valued attributes and multi-valued preferences --------------------------------------------

_EN_SUBJECT_LEAD: Final = re.compile(r"^(?:(?:the )?user(?:'s)?\s+|i\s+|my\s+)")
_EN_IS_LEAD: Final = re.compile(r"^(?:i'm|im|i am|the user is|user is)\s+")
_EN_VALUE_END: Final = re.compile(
    r"[,;(]| (?:with|since|for|because|as|at|in|near|and now|now|recently|currently|last|next|this|ago|"
    r"a while|when|where|who|which|but)\b"
)
_ZH_VALUE_END: Final = re.compile(
    "[，,、；;（(]|(?:\\d+|[一二三四五六七八九十两几]+)(?:年|个月|天|周)|(?:了|啦|呢|的|啊)+$"
)
_OCCUPATION_EXCLUDED: Final = _words(
    """father mother brother sister daughter lover member beginner fan vegetarian vegan person owner
    introvert extrovert other another leader reader runner swimmer gamer foodie"""
)
_OCCUPATION_EN: Final = re.compile(
    r"(?:er|or|ist|ian|ant|ent|eer|ary|ive|nurse|chef|pilot|student|cook|intern)$"
)
_OCCUPATION_ZH: Final = re.compile(
    "(?:师|员|生|家|工|长|者|手|官|医|匠|警|兵|编辑|记者|老板|经理|主管|总监|司机|护士|模特|主播|博主|会计|老师)$"
)
_RELATIONSHIP_ZH: Final = {
    "单身": "single",
    "已婚": "married",
    "结婚": "married",
    "离婚": "divorced",
    "离异": "divorced",
    "订婚": "engaged",
    "恋爱": "in a relationship",
    "有女朋友": "in a relationship",
    "有男朋友": "in a relationship",
}
# Known cities in both scripts, so "Lives in Beijing" and "住在北京" name one residence.
_CITIES: Final = {
    "北京": "beijing", "上海": "shanghai", "天津": "tianjin", "重庆": "chongqing", "广州": "guangzhou",
    "深圳": "shenzhen", "杭州": "hangzhou", "南京": "nanjing", "苏州": "suzhou", "成都": "chengdu",
    "武汉": "wuhan", "西安": "xi'an", "长沙": "changsha", "郑州": "zhengzhou", "青岛": "qingdao",
    "大连": "dalian", "厦门": "xiamen", "宁波": "ningbo", "济南": "jinan", "沈阳": "shenyang",
    "哈尔滨": "harbin", "长春": "changchun", "昆明": "kunming", "合肥": "hefei", "福州": "fuzhou",
    "南昌": "nanchang", "贵阳": "guiyang", "南宁": "nanning", "海口": "haikou", "三亚": "sanya",
    "兰州": "lanzhou", "太原": "taiyuan", "石家庄": "shijiazhuang", "无锡": "wuxi", "东莞": "dongguan",
    "佛山": "foshan", "珠海": "zhuhai", "香港": "hong kong", "澳门": "macau", "台北": "taipei",
    "东京": "tokyo", "纽约": "new york", "伦敦": "london", "巴黎": "paris", "新加坡": "singapore",
    "首尔": "seoul", "旧金山": "san francisco", "洛杉矶": "los angeles", "悉尼": "sydney", "柏林": "berlin",
}  # fmt: skip


_CORE_ADVERBS: Final = _DROP_ADVERBS | _words("now currently still recently already")


def _en_core(fact: str) -> str:
    text = _fold(fact).strip().rstrip(".!?;。 ")
    text = _EN_IS_LEAD.sub("is ", text)
    text = _EN_SUBJECT_LEAD.sub("", text)
    words = text.split()
    while words and words[0] in _CORE_ADVERBS:
        words.pop(0)
    return " ".join(words)


def _zh_core(fact: str) -> str:
    text = _fold(fact).strip().rstrip(".!?;。 ")
    text = re.sub(f"^(?:用户|我|本人)?(?:的)?(?:{_ZH_TIME})*", "", text)
    return _ZH_INTENSIFIERS.sub("", text, count=1)


def _clean_value(value: str, chinese: bool) -> str:
    cut = (_ZH_VALUE_END if chinese else _EN_VALUE_END).search(value)
    value = value[: cut.start()] if cut else value
    value = re.sub(r"^(?:the|a|an)\s+", "", value.strip())
    return " ".join(value.strip(" .!?;:\"'“”").split())


def _en_attribute(core: str) -> tuple[str, str] | None:
    patterns: tuple[tuple[str, str], ...] = (
        ("name", r"^(?:name is|name's|is called|is named|goes by|call me)\s+(.+)"),
        ("age", r"^(?:is|age is)\s+(\d{1,3})(?:\s+(?:years? old|years of age|yo))?$"),
        ("residence", r"^(?:lives?|living|resides?|residing|is based|is living)\s+(?:in|at)\s+(.+)"),
        ("residence", r"^(?:moved|has moved|relocated|has relocated|just moved)\s+to\s+(.+)"),
        ("hometown", r"^(?:is|comes?|came|is originally)\s+from\s+(.+)"),
        ("employer", r"^(?:works?|is working|is employed|worked)\s+(?:at|for|by)\s+(.+)"),
        ("employer", r"^(?:joined|is employed by)\s+(.+)"),
        ("job", r"^(?:works? as|is working as)\s+(?:an?\s+)?(.+)"),
        ("job", r"^(?:job|occupation|profession) is\s+(?:an?\s+)?(.+)"),
        ("relationship", r"^(?:is\s+|got\s+)(single|married|divorced|engaged|widowed|in a relationship)\b"),
    )
    for attr, pattern in patterns:
        if m := re.match(pattern, core):
            value = _clean_value(m.group(1), chinese=False)
            return (attr, value) if value else None
    if m := re.match(r"^(?:favou?rite|fave|fav)\s+(.+?)\s+(?:is|are)\s+(.+)", core):
        return f"favorite:{_clean_value(m.group(1), False)}", _clean_value(m.group(2), False)
    if m := re.match(r"^is\s+an?\s+(.+)", core):
        value = _clean_value(m.group(1), chinese=False)
        last = value.split()[-1] if value else ""
        if " of " not in f" {value} " and last not in _OCCUPATION_EXCLUDED and _OCCUPATION_EN.search(last):
            return "job", value
    return None


def _zh_attribute(core: str) -> tuple[str, str] | None:
    patterns: tuple[tuple[str, str], ...] = (
        ("name", "^(?:名字(?:是|叫)|叫|姓名是)(?![了过车外])(.+)"),
        ("age", "^(?:年龄是|今年|现在)?(\\d{1,3}|[一二三四五六七八九十]+)岁"),
        ("residence", "^(?:住在|居住在|住(?![院宿了过])|定居在|定居于|生活在|家在)(.+)"),
        ("residence", "^(?:已经|刚刚|刚)?搬(?:家)?(?:到|去)了?(.+)"),
        ("hometown", "^(?:来自|老家(?:在|是)|家乡(?:在|是)|出生在|出生于)(.+)"),
        ("employer", "^在(.+?)(?:工作|上班|任职|实习)"),
        ("employer", "^(?:就职于|任职于|供职于)(.+)"),
        ("job", "^(?:职业|工作)是(?:一名|一个|一位)?(.+)"),
    )
    for attr, pattern in patterns:
        if m := re.match(pattern, core):
            value = _clean_value(m.group(1), chinese=True)
            return (attr, value) if value else None
    if m := re.match("^最(?:喜欢|爱)的(.+?)是(.+)", core):
        return f"favorite:{_clean_value(m.group(1), True)}", _clean_value(m.group(2), True)
    for word, status in _RELATIONSHIP_ZH.items():
        if re.match(f"^(?:已经|刚刚|刚|现在|目前|还是)?{word}", core):
            return "relationship", status
    if m := re.match("^(?:是|当|做)(?:一名|一个|一位|个|名|位)?(.+)", core):
        value = _clean_value(m.group(1), chinese=True)
        if _OCCUPATION_ZH.search(value):
            return "job", value
    return None


def attribute(fact: str) -> tuple[str, str] | None:
    """(attribute, value) for a single-valued attribute a new value replaces: residence, name, job, age..."""
    chinese = is_chinese(fact)
    found = _zh_attribute(_zh_core(fact)) if chinese else _en_attribute(_en_core(fact))
    if found is not None and found[0] == "name" and len(found[1]) > (8 if chinese else 40):
        return None  # a clause, not a name ("叫了一辆出租车去机场")
    return found


def same_value(left: str, right: str) -> bool:
    """Whether two attribute values name the same thing (casefold, 市 suffix, known city names)."""

    def canonical(value: str) -> str:
        value = _fold(value).strip().removesuffix("市")
        return _CITIES.get(value, value)

    return canonical(left) == canonical(right)


SAME_MEANING_VERBS: Final[Mapping[str, int]] = {
    **dict.fromkeys(_words("like likes love loves enjoy enjoys adore adores prefer prefers"), 1),
    **dict.fromkeys(_words("喜欢 爱 热爱 喜爱 偏爱 偏好 钟爱"), 1),
    **dict.fromkeys(_words("dislike dislikes hate hates detest detests loathe loathes"), -1),
    **dict.fromkeys(_words("不喜欢 讨厌 厌恶 反感"), -1),
}
"""Preference verbs by polarity: likes ~ loves ~ enjoys all say +1, so they state one preference."""


def same_meaning_verbs(left: str, right: str) -> bool:
    """True when two preference verbs carry the same polarity ("likes" and "loves")."""
    a, b = SAME_MEANING_VERBS.get(_fold(left)), SAME_MEANING_VERBS.get(_fold(right))
    return a is not None and a == b


_EN_NEGATIVE: Final = re.compile(
    r"^(?:dislikes?|hates?|detests?|loathes?|can't stand|cannot stand|can not stand|"
    r"(?:doesn't|does not|don't|do not) (?:like|enjoy|love|care for)|"
    r"(?:doesn't|does not|don't|do not|never) (?:eat|drink)s?|"
    r"(?:isn't|is not) (?:a (?:big |huge )?fan of|into|fond of)|not a fan of|avoids?)\s+(.+)"
)
_EN_POSITIVE: Final = re.compile(
    r"^(?:likes?|loves?|enjoys?|adores?|prefers?"
    r"|is (?:a (?:big |huge )?fan of|into|fond of|crazy about))\s+(.+)"
)
_ZH_NEGATIVE: Final = re.compile(
    "^(?:不太喜欢|不怎么喜欢|不是很喜欢|不喜欢|不爱|讨厌|厌恶|反感|受不了|不吃|不喝)(.+)"
)
_ZH_POSITIVE: Final = re.compile("^(?:最)?(?:喜欢|热爱|喜爱|偏爱|偏好|钟爱|爱(?!人)|迷上了?)(?!的)(.+)")


def _norm_object(obj: str, chinese: bool) -> str:
    obj = _fold(obj).strip(" .!?;:,\"'“”。！？；，")
    if chinese:
        obj = re.sub("^[吃喝看听玩]", "", obj)
        return re.sub("[了的啊呀哦]+$", "", obj).strip()
    obj = re.split(r"\s+(?:over|rather than|instead of|more than)\s+", obj)[0]
    obj = re.sub(r"\s+(?:a lot|very much|so much|too|as well|a little|a bit)$", "", obj)
    obj = re.sub(
        r"^(?:to\s+)?(?:eat|eating|drink|drinking|watch|watching|play|playing|listen(?:ing)? to)\s+", "", obj
    )
    obj = re.sub(r"^(?:the|a|an|some)\s+", "", obj)
    return " ".join(obj.split())


def preference(fact: str) -> tuple[int, str] | None:
    """(+1 or -1, object) for a like or dislike ("Loves cheese pizza" -> (1, "cheese pizza"))."""
    chinese = is_chinese(fact)
    core = _zh_core(fact) if chinese else _en_core(fact)
    negative, positive = (_ZH_NEGATIVE, _ZH_POSITIVE) if chinese else (_EN_NEGATIVE, _EN_POSITIVE)
    for polarity, pattern in ((-1, negative), (1, positive)):
        if m := pattern.match(core):
            obj = _norm_object(m.group(1), chinese)
            return (polarity, obj) if obj else None
    return None


# --- kind, importance, expiry, entities ---------------------------------------------------------------

_HEALTH: Final = re.compile(
    r"allerg|asthma|diabet|pregnan|medication|medicine|prescription|blood pressure|disease|illness|injur"
    r"|surgery|therapy|symptom|migraine|intoleran|gluten|lactose|cholesterol|heart condition|cancer"
    r"|depress|anxiety|\bsick\b|hospital|see a doctor|dentist|insomnia"
    "|过敏|哮喘|糖尿病|怀孕|药|看医生|医院|病|血压|手术|症状|偏头痛|不耐受|乳糖|忌口|体检|牙医|失眠|抑郁|焦虑|胆固醇"
)
# Dietary choices are preferences, if firm ones (importance scores them as hard constraints).
_DIET: Final = re.compile(r"\b(?:vegan|vegetarian|halal|kosher|pescatarian)\b|素食|吃素|清真")
_HARD_CONSTRAINT: Final = re.compile(
    r"allerg|intoleran|never eats?|can't eat|cannot eat|must not|mustn't|must never|vegan|vegetarian|halal"
    r"|kosher|pregnan|过敏|不能吃|不能喝|忌口|千万不要|绝对不|一定不要|不耐受|素食|吃素|清真|怀孕"
)
_PLAN: Final = re.compile(
    r"\b(?:will|going to|gonna|plans? to|planning|intends? to|wants? to|would like to|looking for|needs? to"
    r"|hoping to|about to|upcoming|book|reserve|trip|appointment|deadline|wants to be reminded)\b"
    "|要去|要做|要交|要参加|要买|要见|要开|将要|打算|计划|准备|想去|想要|想订|想买|想找|需要记得|出差|旅行|旅游|行程|预订|预约|截止"
)
_PROCEDURE: Final = re.compile(
    r"\b(?:every (?:day|morning|evening|night|week|month)|daily|weekly|routine|habit|usually|always|steps?"
    r"|workflow|process|whenever)\b|\bfirst\b.+\bthen\b|每天|每周|每晚|每早|每次|习惯|通常|总是|步骤|流程|先.+再|一般都"
)
_PROFESSIONAL: Final = re.compile(
    r"\b(?:works?|worked|working|job|career|company|employer|office|colleagues?|coworkers?|boss|manager|engineer"
    r"|developer|programmer|designer|teacher|professor|lawyer|nurse|doctor|accountant|consultant|scientist"
    r"|researcher|startup|project|promotion|salary|clients?|profession|occupation|intern)\b"
    "|工作|上班|公司|职业|工程师|程序员|设计师|老师|教师|律师|医生|护士|经理|同事|老板|客户|项目|加班|升职|工资|实习|职位"
)
_EVENT: Final = re.compile(
    r"\b(?:yesterday|last (?:week|night|month|year|weekend)|ago|went|visited|attended|met|celebrated|finished"
    r"|started|bought|won|lost|graduated|got|had|was|were|has been|has booked)\b"
    "|昨天|前天|上周|上个月|去年|刚才|刚刚|去了|参加了|见了|买了|完成了|毕业了"
)
_PERSONAL: Final = re.compile(
    r"\b(?:name|years old|age|born|birthday|lives?|lived|living|moved|hometown|from|married|wife|husband"
    r"|partner|girlfriend|boyfriend|sons?|daughters?|kids?|children|child|family|mother|father|mom|dad|parents?"
    r"|brothers?|sisters?|dogs?|cats?|pets?|single|divorced|engaged)\b"
    "|名字|岁|生日|出生|住|搬|老家|家乡|结婚|已婚|单身|妻子|老婆|丈夫|老公|儿子|女儿|孩子|家人|父母|爸爸|妈妈|哥哥|姐姐|弟弟|妹妹|宠物|狗|猫|男朋友|女朋友"
)
_ATTRIBUTE_KINDS: Final[Mapping[str, FactKind]] = {
    "name": "personal",
    "age": "personal",
    "residence": "personal",
    "hometown": "personal",
    "relationship": "personal",
    "job": "professional",
    "employer": "professional",
}


def classify(fact: str) -> FactKind:
    """The fact's kind, from bilingual keyword lists (health first, misc when nothing matches)."""
    folded = _fold(fact)
    if _HEALTH.search(folded):
        return "health"
    found = attribute(fact)
    if found is not None:
        return _ATTRIBUTE_KINDS.get(found[0], "preference")
    if preference(fact) is not None or _DIET.search(folded):
        return "preference"
    if _PLAN.search(folded) or (expiry_days(fact) is not None and not _EVENT.search(folded)):
        return "plan"
    for kind, pattern in (
        ("procedure", _PROCEDURE),
        ("professional", _PROFESSIONAL),
        ("event", _EVENT),
        ("personal", _PERSONAL),
    ):
        if pattern.search(folded):
            return kind  # type: ignore[return-value]
    return "misc"


_BASE_IMPORTANCE: Final[Mapping[FactKind, float]] = {
    "health": 0.9,
    "personal": 0.7,
    "professional": 0.65,
    "plan": 0.6,
    "procedure": 0.6,
    "preference": 0.5,
    "event": 0.45,
    "misc": 0.3,
}


def importance(fact: str, kind: FactKind) -> float:
    """A score in [0, 1]: health, names and hard constraints high, casual preferences medium, misc low."""
    score = _BASE_IMPORTANCE[kind]
    found = attribute(fact)
    if found is not None and found[0] == "name":
        score = max(score, 0.85)
    if _HARD_CONSTRAINT.search(_fold(fact)):
        score = max(score, 0.9)
    return round(min(1.0, max(0.0, score)), 2)


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
    r"(?<!every )(?<!each )\b(?:on |this |next )?(" + "|".join(_WEEKDAYS_EN) + r")\b"
)
_ZH_WEEKDAY: Final = re.compile(f"(?<!每)(?:星期|周|礼拜)([{_WEEKDAYS_ZH}天])")
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
