"""Chit-chat detection: greetings, thanks, acknowledgements and small talk in English and Chinese."""

from __future__ import annotations

import re
from typing import Final

from engram.actors.statements.text import _CJK, _HAS_CJK, _fold, _words

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
