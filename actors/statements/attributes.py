"""Single-valued attributes (residence, name, job...) and multi-valued preferences read from facts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from engram.actors.statements.rewriting import _DROP_ADVERBS, _ZH_INTENSIFIERS
from engram.actors.statements.text import _ZH_TIME, _fold, _words, is_chinese

_EN_SUBJECT_LEAD: Final = re.compile(r"^(?:(?:the )?user(?:'s)?\s+|i\s+|my\s+|we\s+|i've\s+|we've\s+)")
# Words that only say when: a changed value is told with them ("now I work as", "sushi anymore").
_EN_WHEN_FILLER: Final = re.compile(r"\b(?:now|currently|anymore|any more|these days|nowadays)\b")
# Clauses of one statement: the value that changed is usually told in the last one.
_EN_CLAUSE: Final = re.compile(r"\s*(?:[,;]|\bbut\b|\band\b)\s*")
_ZH_CLAUSE: Final = re.compile("[，,；;]")
# A change of job told in its own clause ("switched jobs", "换工作了"): then "I'm at X" names the employer.
_JOB_CHANGE: Final = re.compile(
    r"\b(?:switched|changed|new|changing|switching) (?:jobs?|careers?|employers?|companies)\b"
    "|换工作|换了工作|换了份工作|跳槽|离职|辞职"
)
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
_EN_STARTED_A_JOB: Final = r"^(?:started|began)\s+(?:a\s+)?(?:new\s+)?(?:job|position|role|work(?:ing)?)\s+"
_EN_GOT_A_JOB: Final = r"^(?:got|found|took|accepted|landed)\s+a\s+(?:new\s+)?(?:job|position|role)\s+"
_ZH_BECAME: Final = "^(?:是|当|做|成为|当上了?|当了|做了|转行(?:当|做|成为|去当|去做)了?)"
_AMERICAN: Final = {"colour": "color", "flavour": "flavor", "favour": "favor", "honour": "honor"}
_BRITISH: Final = re.compile(r"\b(?:" + "|".join(_AMERICAN) + r")\b")


def _en_core(fact: str) -> str:
    text = " ".join(_EN_WHEN_FILLER.sub(" ", _fold(fact)).split()).rstrip(".!?;。 ")
    while True:  # "now I'm ...": leads come in any order
        before = text
        text = _EN_SUBJECT_LEAD.sub("", _EN_IS_LEAD.sub("is ", text))
        words = text.split()
        while words and words[0] in _CORE_ADVERBS:
            words.pop(0)
        text = " ".join(words)
        if text == before:
            return text


def _zh_core(fact: str) -> str:
    text = _fold(fact).strip().rstrip(".!?;。 ")
    text = re.sub(f"^(?:用户|我们(?:全家|一家)?|我|本人)?(?:的)?(?:{_ZH_TIME})*", "", text)
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
        ("employer", r"^(?:works?|working|is working|is employed|worked)\s+(?:at|for|by)\s+(.+)"),
        ("employer", r"^(?:joined|is employed by)\s+(.+)"),
        ("employer", _EN_STARTED_A_JOB + r"(?:at|for|with)\s+(.+)"),
        ("employer", _EN_GOT_A_JOB + r"(?:at|with)\s+(.+)"),
        ("job", _EN_GOT_A_JOB + r"as\s+(?:an?\s+)?(.+)"),
        ("job", r"^(?:works? as|is working as)\s+(?:an?\s+)?(.+)"),
        ("job", r"^(?:job|occupation|profession) is\s+(?:an?\s+)?(.+)"),
        ("relationship", r"^(?:is\s+|got\s+)(single|married|divorced|engaged|widowed|in a relationship)\b"),
    )
    for attr, pattern in patterns:
        if m := re.match(pattern, core):
            value = _clean_value(m.group(1), chinese=False)
            return (attr, value) if value else None
    if m := re.match(r"^(?:favou?rite|fave|fav)\s+(.+?)\s+(?:is|are)\s+(.+)", core):
        kind = _BRITISH.sub(lambda w: _AMERICAN[w.group()], _clean_value(m.group(1), False))
        return f"favorite:{kind}", _clean_value(m.group(2), False)
    if m := re.match(r"^(?:is|became|has become|is becoming)\s+an?\s+(.+)", core):
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
        ("employer", "^(?:跳槽|转会)(?:到|去)了?(.+)"),
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
    if m := re.match(_ZH_BECAME + "(?:一名|一个|一位|个|名|位)?(.+)", core):
        value = _clean_value(m.group(1), chinese=True)
        if _OCCUPATION_ZH.search(value):
            return "job", value
    return None


def attribute(fact: str) -> tuple[str, str] | None:
    """(attribute, value) for a single-valued attribute a new value replaces: residence, name, job, age..."""
    chinese = is_chinese(fact)
    found = _zh_attribute(_zh_core(fact)) if chinese else _en_attribute(_en_core(fact))
    if found is None:
        found = _changed_in_a_clause(fact, chinese)
    if found is not None and found[0] == "name" and len(found[1]) > (8 if chinese else 40):
        return None  # a clause, not a name ("叫了一辆出租车去机场")
    return found


_EN_LEFT_JOB: Final = re.compile(
    r"^(?:quit|left|resigned from|has left|has quit|stopped working (?:at|for))\s+"
    r"(?:(?:my|the|a) (?:job|position|role) (?:at|with)\s+)?(.+)"
)


def ended(fact: str) -> tuple[str, str] | None:
    """(attribute, value) whose end the fact states: "No longer lives in Lisbon", "Quit Google",
    "不再住北京了", "从谷歌辞职了". "left" ends an employer or a residence: attribute "left"."""
    if is_chinese(fact):
        core = _zh_core(fact)
        if m := re.match("^(?:已经)?(?:不再|没再)(.+)", core):
            return _zh_attribute(m.group(1))
        if m := re.match("^(?:已经)?从(.+?)(?:辞职|离职)了?$", core):
            return "employer", _clean_value(m.group(1), chinese=True)
        if m := re.match("^(?:已经)?不在(.+?)(?:工作|上班|任职)了?$", core):
            return "employer", _clean_value(m.group(1), chinese=True)
        return None
    core = _en_core(fact)
    if m := re.match(r"^no longer\s+(.+)", core):
        return _en_attribute(m.group(1))
    if m := _EN_LEFT_JOB.match(core):
        value = _clean_value(m.group(1), chinese=False)
        return ("employer" if "job" in core or "work" in core else "left", value) if value else None
    return None


def _changed_in_a_clause(fact: str, chinese: bool) -> tuple[str, str] | None:
    """The attribute of the last clause that states one: "I left Google, now I work at Stripe"."""
    clauses = [c for c in (_ZH_CLAUSE if chinese else _EN_CLAUSE).split(fact) if c.strip()]
    if len(clauses) < 2:
        return None
    job_changed = _JOB_CHANGE.search(_fold(fact)) is not None
    for clause in reversed(clauses):
        core = _zh_core(clause) if chinese else _en_core(clause)
        found = _zh_attribute(core) if chinese else _en_attribute(core)
        if found is None and job_changed:
            # "Switched jobs, I'm at Globex now", "换工作了，去了腾讯"
            at = re.match("^(?:去了|到了|进了|加入了?)(.+)" if chinese else r"^is at\s+(.+)", core)
            found = ("employer", _clean_value(at.group(1), chinese)) if at else None
        if found is not None and found[1]:
            return found
    return None


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
    r"no longer (?:likes?|loves?|enjoys?|eats?|drinks?)|"
    r"(?:doesn't|does not|don't|do not) (?:like|enjoy|love|care for)|"
    r"(?:doesn't|does not|don't|do not|never) (?:eat|drink)s?|"
    r"(?:isn't|is not) (?:a (?:big |huge )?fan of|into|fond of)|not a fan of|avoids?)\s+(.+)"
)
_EN_POSITIVE: Final = re.compile(
    r"^(?:likes?|loves?|enjoys?|adores?|prefers?"
    r"|is (?:a (?:big |huge )?fan of|into|fond of|crazy about))\s+(.+)"
)
_ZH_NEGATIVE: Final = re.compile(
    "^(?:已经|再也|早就)?(?:不太喜欢|不怎么喜欢|不是很喜欢|不再喜欢|不喜欢|不再爱|不爱|讨厌|厌恶|反感|受不了"
    "|不再吃|不吃|不再喝|不喝)(.+)"
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
