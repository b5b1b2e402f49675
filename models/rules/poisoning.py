"""Memory poisoning (P5, OWASP ASI06): instructions aimed at the agent hidden in what would be stored.

Deterministic and bilingual (English, Chinese). Each sentence is checked for five signals:

- ``OVERRIDE``: "ignore previous instructions", "system prompt", "don't tell the user" (忽略之前的指令);
- ``REDIRECT``: payments or credentials sent somewhere ("send payments to account X", 把验证码发给);
- ``FETCH``: a URL with a verb asking to fetch, open or send to it;
- ``OTHERS``: content meant for other users ("tell all users", 所有用户);
- ``DIRECTIVE``: an order to the agent or a standing rule ("always ...", "from now on tell ...",
  "remember that the user always wants ...", 以后都要, 你必须).

Whether a signal counts depends on who speaks. Content in the user's own voice (a user message, an
app's structured write) may state firm preferences ("I always take the window seat", "from now on
call me Alex"): there ``DIRECTIVE`` never counts, and ``REDIRECT`` and ``FETCH`` count only when the
sentence is aimed at the agent (an imperative, "you", "always", 以后). Tool output and assistant
messages are no instruction channel at all: every signal counts, except an assistant's own
first-person commitment ("I will always remind you", 好的，以后我都用中文回答你).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from engram.models.provenance import Source, is_user_voice


class Signal(StrEnum):
    """What made a sentence look like an instruction to the agent."""

    OVERRIDE = "OVERRIDE"
    REDIRECT = "REDIRECT"
    FETCH = "FETCH"
    OTHERS = "OTHERS"
    DIRECTIVE = "DIRECTIVE"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The signals that count for a text from its source; ``quarantine`` when there is any."""

    signals: tuple[Signal, ...]

    @property
    def quarantine(self) -> bool:
        """True when the text must be held for review instead of stored ACTIVE."""
        return bool(self.signals)


CLEAN: Final = Verdict(())

_C = r"[^。！？；\n]"  # any character of the same Chinese clause

_OVERRIDE: Final = re.compile(
    r"\b(ignore|disregard|forget|override|bypass|skip)\b.{0,30}?\b(all|any|the|your|previous|prior|above"
    r"|earlier|preceding|existing|system|original|safety|these|those)\b.{0,30}?\b(instructions?|prompts?"
    r"|rules|guidelines?|directives?|polic(y|ies)|guardrails?|constraints?|programming)\b"
    r"|\bsystem prompt\b|\b(new|updated|real|hidden) instructions?\s*:|\byou are now (a|an|in|no longer|free"
    r"|unrestricted|dan)\b|\bdeveloper mode\b|\bjailbreak|\bdo anything now\b"
    r"|\b(without|don't|do not|never) (tell(ing)?|inform(ing)?|notify(ing)?|alert(ing)?|let(ting)?) (the )?"
    r"(user|them)\b|\b(keep|hide) (this|it) (secret )?from (the )?user\b"
    rf"|(忽略|无视|忘记|忘掉|不要理会|跳过|绕过|覆盖){_C}{{0,12}}(指令|指示|提示词|提示|规则|要求|设定|限制|约束)"
    r"|系统提示|新的?指令[:：]|你现在是|开发者模式|越狱|(不要|别|不必|无需|不用)(告诉|通知|提醒|让)用户|瞒着用户",
)

_MONEY_EN = (
    r"(payments?|money|funds|invoices?|refunds?|salary|salaries|wages|transfers?|deposits?|rent|bills?|crypto"
    r"|bitcoin|btc|usdt|eth|fees?)"
)
_DEST_EN = r"(account|acct|iban|wallet|address|routing|paypal|venmo|zelle|card|crypto address)"
_CREDENTIAL_EN = (
    r"(passwords?|passcodes?|credentials?|api[ -]?keys?|access tokens?|tokens|secrets?|ssh keys?"
    r"|private keys?|2fa( codes?)?|otp|one[- ]time (pass)?codes?|verification codes?|login (details|info)"
    r"|pin( codes?)?|cvv"
    r"|security codes?|seed phrases?|recovery phrases?)"
)
_MONEY_ZH = r"(付款|转账|汇款|打款|款项|货款|钱款|资金|退款|工资|账单|费用|房租|款)"
_DEST_ZH = r"(账户|账号|帐户|帐号|卡号|银行卡|钱包|地址|支付宝|微信)"
_CREDENTIAL_ZH = r"(密码|验证码|口令|密钥|令牌|凭证|登录信息|私钥|助记词|api ?key|token)"
_REDIRECT: Final = re.compile(
    rf"\b(send|transfer|wire|pay|route|forward|deposit|remit|redirect|direct|move)\w*\b.{{0,60}}?\b{_MONEY_EN}\b"
    rf".{{0,60}}?\b(to|into|via)\b.{{0,40}}?\b{_DEST_EN}\b"
    rf"|\b(send|transfer|wire|pay|deposit|remit)\w*\b.{{0,12}}?\b(to|into)\b.{{0,40}}?\b{_DEST_EN}\b"
    rf"|\b{_MONEY_EN}\b.{{0,40}}?\b(should|must|will|to|now)\b.{{0,12}}?\b(go|be (sent|paid|wired|transferred"
    rf"|routed|deposited|made|forwarded))\b.{{0,30}}?\b(to|into)\b"
    rf"|\b{_MONEY_EN}\s+(sent|paid|wired|transferred|routed|forwarded|deposited)\s+(to|into)\b"
    rf"|\buse\b.{{0,30}}?\b{_DEST_EN}\b.{{0,40}}?\b{_MONEY_EN}\b"
    rf"|\b(send|share|forward|email|e-mail|post|give|upload|reveal|provide|disclose|paste|submit|enter|type|text)"
    rf"\w*\b.{{0,50}}?\b{_CREDENTIAL_EN}\b"
    rf"|{_MONEY_ZH}{_C}{{0,15}}(转|汇|打|付|发|存|交)(到|至|入|给|进){_C}{{0,15}}{_DEST_ZH}"
    rf"|(转|汇|打|付|存)(到|至|入|进){_C}{{0,15}}{_DEST_ZH}"
    rf"|(用|使用|改用){_C}{{0,10}}{_DEST_ZH}{_C}{{0,15}}(付款|转账|支付|汇款|收款)"
    rf"|{_CREDENTIAL_ZH}{_C}{{0,12}}(发|告诉|提供|发送|上传|输入|填|贴|交)"
    rf"|(发|告诉|提供|发送|上传|输入|填写|交出){_C}{{0,10}}{_CREDENTIAL_ZH}",
    re.IGNORECASE,
)

_URL: Final = re.compile(
    r"(https?://|www\.)\S+|\b[a-z0-9-]+\.(com|net|org|io|xyz|ru|cn|top|info|biz|co|me|site|online)(/\S*)?(?![a-z])",
    re.IGNORECASE,
)
_FETCH_VERB: Final = re.compile(
    r"\b(visit|fetch|download|open|go to|navigate|load|click|curl|wget|browse|retrieve|call|post|send|upload"
    r"|follow|install|run|execute|import|check|read|get|submit|report)\b"
    r"|访问|打开|下载|点击|浏览|获取|读取|前往|登录|登陆|请求|调用|发送|上传|安装|运行|查看",
    re.IGNORECASE,
)

_OTHERS: Final = re.compile(
    r"\b(for|to|tell|inform|show|recommend to) (all|every|any|other) (other )?(users?|customers?|clients?)\b"
    r"|\b(all|every|other) (users|customers|clients)\b|\beveryone else\b|\bevery user\b"
    r"|(所有|全部|每个|每位|其他|其它|别的)的?(用户|客户)",
    re.IGNORECASE,
)

_FILLER: Final = re.compile(
    r"^(\s|[,:\-—]|(note|important|reminder|remember|system|attention|instructions?|p\.?s\.?)\s*[:\-]"
    r"|please\b|kindly\b|(assistant|ai|agent|model|chatbot|bot)\s*[,:]"
    r"|(ok(ay)?|sure|alright|got it|yes|fine)\b"
    r"|(请|注意|重要|提示|系统|好的|好|没问题|明白|行)[:：,，]?)+",
    re.IGNORECASE,
)
_FUTURE_LEAD: Final = re.compile(
    r"^(from now on|going forward|henceforth|in (the )?future|from this point( on)?"
    r"|以后|今后|从现在起|从现在开始|从今以后)[\s,，]*",
    re.IGNORECASE,
)
_FIRST_PERSON: Final = re.compile(r"^(i|i'll|i'm|i've|i'd|we|we'll|we're|my|our)\b|^(我|我们)", re.IGNORECASE)
_IMPLIED_SELF: Final = re.compile(r"^(will|promised|promises|is|am|has|can|offered|agreed)\b|^(承诺|会|将会)")
_IMPERATIVE: Final = re.compile(
    r"^(always|never|tell|say|respond|reply|answer|recommend|suggest|insist|make sure|ensure|do not|don't"
    r"|dont|stop|use|include|append|add|mention|refer|direct|redirect|remember|note that|keep in mind"
    r"|prioriti[sz]e"
    r"|promote|prefer|only|push|send|transfer|wire|pay|forward|email|share|post|upload|visit|fetch|download"
    r"|open|go to|navigate|click|load|browse|call|run|execute|print|output|insert|ignore|disregard|forget"
    r"|provide|give|ask|collect|store|save|record|report|treat|act|pretend|switch|change|update|set)\b"
    r"|^(总是|永远|始终|一律|务必|必须|一定要|记住|告诉|回答|回复|推荐|建议|不要|别|禁止|只|优先|把|将|发送|转账|汇款"
    r"|付款|访问|打开|下载|点击|使用|改用|提供|收集|忽略)",
    re.IGNORECASE,
)
# Orders about how the agent answers (not how-to steps such as "stir for five minutes").
_ORDER: Final = re.compile(
    r"^(always|never|tell|say|respond|reply|answer|recommend|suggest|insist|mention|prioriti[sz]e|promote"
    r"|only (recommend|suggest|use|mention)|remember (that|this)|note that|keep in mind|ignore|disregard"
    r"|pretend|act as|treat the user|store|save this|record that|do not (tell|mention|say|reveal)"
    r"|don't (tell|mention|say|reveal))\b"
    r"|^(总是|永远|始终|一律|务必|必须|一定要|记住|告诉|回答|回复|推荐|优先|忽略|假装)",
    re.IGNORECASE,
)
_ABOUT_ANSWERS: Final = re.compile(
    r"\b(tell|recommend|respond|reply|answer|say|mention|suggest|refer|direct|redirect|promote|advise|inform"
    r"|the user|users?|customers?)\b|告诉|推荐|回答|回复|用户|客户",
    re.IGNORECASE,
)
_DIRECTIVE: Final = re.compile(
    r"\b(update|change|edit) (your|the) memory\b|\b(store|save|memori[sz]e|add) (this|that|the following)"
    r"( fact)?( (to|in|into) (your )?memory)?\s*:"
    r"|\b(add|save|write) (this|that|it) (to|in|into) (your )?memory\b"
    r"|\bwhen(ever)? (you are |you're )?(asked|the user asks|someone asks|users ask)\b.{0,60}"
    r"\b(recommend|say|tell|answer|respond|reply|suggest|mention)\b|(当|如果)用户(问|询问).{0,20}(推荐|回答|告诉|就说)"
    r"|"
    r"\b(from now on|henceforth|going forward|in all future|for all future|from this point on)\b"
    r"|\byou (must|should|shall|need to|have to|are (required|instructed|supposed|expected) to|will now"
    r"|always|never)\b"
    r"|\b(the )?user (always|never|really) (wants|prefers|asks|likes|needs|requires|expects)\b"
    r"|\b(the )?user (wants|prefers|requires|asked|expects|insists)\b.{0,40}\b(always|never|from now on"
    r"|every time|all)\b|\bremember (that|this)\b|\bthe (assistant|agent|ai|model) (must|should|will|shall"
    r"|needs to)\b|\bevery (future )?(request|conversation|response|answer|reply|session|query|chat)\b"
    r"|\b(all|any) future (requests?|conversations?|responses?|answers?|replies|sessions?|queries|chats)\b"
    r"|从现在(起|开始)|从今以后|今后|以后(都|每次|所有|一律|要)|你(必须|应该|应当|要|需要|得|务必|一定)"
    r"|用户(总是|一直|永远|始终)(希望|想要|要求|喜欢|需要|让)|记住用户|每次(回答|回复|对话|请求)"
    r"|所有(的)?(回答|回复|请求|对话|会话)",
    re.IGNORECASE,
)
_AIMED: Final = re.compile(
    r"\b(you|your|always|never|from now on|going forward|henceforth|in future|every time|remember)\b"
    r"|你|总是|永远|一律|以后|今后|从现在|每次|记住|务必",
    re.IGNORECASE,
)
# A standing rule: what turns an assistant's own promise into a redirection that outlives the chat.
_STANDING: Final = re.compile(
    r"\b(always|never|from now on|going forward|henceforth|every time|all future|in future)\b"
    r"|总是|永远|一律|以后|今后|从现在|每次",
    re.IGNORECASE,
)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+|[。！？；;\n]+")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'").strip()


def sentences(text: str) -> list[str]:
    """The sentences of a text (a URL's dots do not end one)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def sentence_signals(sentence: str, source: Source) -> tuple[Signal, ...]:
    """The signals of one sentence that count for its source."""
    user_voice = is_user_voice(source)
    text = _fold(sentence)
    body = _FILLER.sub("", text)
    lead = _FUTURE_LEAD.match(body)
    rest = body[lead.end() :] if lead else body
    rest = _FILLER.sub("", rest)
    # Agent facts are written without their subject ("Will remind the user ..."): the assistant's own.
    own_commitment = _FIRST_PERSON.match(rest) is not None or (
        source is Source.ASSISTANT_MESSAGE and _IMPLIED_SELF.match(rest) is not None
    )
    imperative = _IMPERATIVE.match(rest) is not None or lead is not None
    aimed = imperative or _AIMED.search(text) is not None
    found: list[Signal] = []
    if _OVERRIDE.search(text):
        found.append(Signal.OVERRIDE)
    # The user redirects only when speaking to the agent; an assistant's own one-off promise ("I'll
    # send the payment tomorrow") is no redirection, tool output always is.
    redirect_counts = aimed if user_voice else not own_commitment or _STANDING.search(text) is not None
    if _REDIRECT.search(text) and redirect_counts:
        found.append(Signal.REDIRECT)
    if _URL.search(text) and _FETCH_VERB.search(_URL.sub(" ", text)) and (aimed or not user_voice):
        found.append(Signal.FETCH)
    if _OTHERS.search(text):
        found.append(Signal.OTHERS)
    # Tool output has no business giving the agent orders at all; an assistant's imperative is
    # mostly advice to the user ("always carry water"), an order only when it is about answering.
    ordered = _DIRECTIVE.search(text) is not None
    if source is Source.TOOL_OUTPUT:
        ordered = ordered or lead is not None or _ORDER.match(rest) is not None
    elif _ORDER.match(rest) is not None:
        ordered = ordered or _ABOUT_ANSWERS.search(rest) is not None
    if not user_voice and not own_commitment and ordered:
        found.append(Signal.DIRECTIVE)
    return tuple(found)


def assess(text: str, source: Source) -> Verdict:
    """The verdict on a text: every signal of its sentences that counts for its source, once each."""
    found: dict[Signal, None] = {}
    for sentence in sentences(text):
        found.update(dict.fromkeys(sentence_signals(sentence, source)))
    return Verdict(tuple(found)) if found else CLEAN


def flagged_sentences(text: str, source: Source) -> list[str]:
    """The sentences of a text that would be quarantined, verbatim, in order."""
    return [s for s in sentences(text) if sentence_signals(s, source)]
