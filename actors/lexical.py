"""Lexical relevance for hybrid recall (seed 004): a bilingual tokenizer, BM25 and an entity boost.

Pure functions and in-memory structures only; the recall pipeline builds one ``Bm25Index`` per user
from that user's memories and fuses its scores with vector similarity.
"""

from __future__ import annotations

import math
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

__all__ = ["Bm25Index", "entity_overlap", "fold", "fuse", "language", "search_terms", "stem", "tokenize"]

# Han (incl. extension A and compatibility ideographs), kana and Hangul: scripts written without
# spaces, so they are split into character unigrams and bigrams instead of words.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+(?:['\u2019][^\W_{_CJK}]+)*)")
_VOWELS = frozenset("aeiouy")

_STOPWORD_TEXT = """
a about above after again against all am an and any are aren arent as at be because been before
being below between both but by can cant could couldnt did didnt do does doesnt doing dont down
during each few for from further had hadnt has hasnt have havent having he hed hell hes her here
heres hers herself him himself his how hows i id ill im ive if in into is isnt it its itself
just lets me more most my myself no nor not of off on once only or other ought our ours
ourselves out over own same shant she shed shell shes should shouldnt so some such than that
thats the their theirs them themselves then there theres these they theyd theyll theyre theyve
this those through to too under until up very was wasnt we wed well were weve werent what whats
when whens where wheres which while who whos whom why whys will with wont would wouldnt you youd
youll youre youve your yours yourself yourselves
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# Chinese function characters. Pronouns, particles and measure words carry no evidence at all: they
# are dropped as unigrams and every bigram holding one is dropped too ("帮我叫个车" and "我住在杭州"
# must not match on "我"). The second set are function characters whose unigram says nothing but
# which also build content words ("会议", "重要", "有名"), so their bigrams stay.
_CJK_FUNCTION_CHARS = frozenset("的了吗呢吧啊呀么哦嘛啦呗哈嗯我你您他她它们这那哪个")
_CJK_STOP_CHARS = _CJK_FUNCTION_CHARS | frozenset(
    "什是在和与及或也都就很还又把被给让帮请要会能想有没不去来到说做对从向于为以而但如若之其此一上下中里时后前得地着过再才只更最太挺真"
)
# Function words of two characters (conjunctions, question words, fillers): no evidence either.
_CJK_STOP_BIGRAM_TEXT = """
什么 怎么 为什 因为 所以 但是 如果 还是 已经 就是 不是 没有 可以 可能 应该 知道 觉得 现在 时候
一下 一些 一起 一直 然后 而且 并且 不过 可是 其实 还有 另外 对了 同时 因此 只是 真的 非常 特别
比较 有点 一点 之前 之后 以后 以前 帮忙 告诉 记得 记住 请问 是否 有没 能不 可不 要不
"""
_CJK_STOP_BIGRAMS = frozenset(_CJK_STOP_BIGRAM_TEXT.split())


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Light, deterministic English suffix stripping (plurals, -ing, -ed, final -e), to a fixed point."""
    while True:
        stemmed = _stem_once(word)
        if stemmed == word:
            return word
        word = stemmed


def _stem_once(word: str) -> str:
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith(("ies", "ied")) and len(word) > 4:
        return word[:-2]
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and not word.endswith("eed"):
            base = word[: -len(suffix)]
            # "thing", "bring", "red" and "need" keep their ending: no vowel or too short a stem.
            if len(base) >= 3 and any(c in _VOWELS for c in base):
                if len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lszaeiou":
                    base = base[:-1]
                return base
            return word
    # As in Porter's stemmer: "party"/"parties" and "movie"/"movies" meet at "parti" and "movi",
    # and "hike"/"hiked"/"hiking" at "hik".
    if word.endswith("y") and any(c in _VOWELS for c in word[:-1]):
        return word[:-1] + "i"
    if word.endswith("e") and not word.endswith("ee"):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lowercased, stemmed English words without stopwords (numbers kept) and CJK uni- and bigrams.

    Chinese function characters and words are left out: they are evidence of nothing.
    """
    tokens: list[str] = []
    # findall hands back (cjk, word) pairs without a match object per token: ~13% of a snapshot's
    # tokenizing, which is most of loading one.
    for run, word in _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).casefold()):
        if run:
            tokens.extend(c for c in run if c not in _CJK_STOP_CHARS)
            tokens.extend(
                pair
                for pair in (run[i : i + 2] for i in range(len(run) - 1))
                if pair not in _CJK_STOP_BIGRAMS and not _CJK_FUNCTION_CHARS.intersection(pair)
            )
            continue
        if "'" in word or "\u2019" in word:
            word = word.replace("'", "").replace("\u2019", "")
        if word not in _STOPWORDS:
            tokens.append(stem(word))
    return tokens


def fold(text: str) -> str:
    """The text as ``tokenize`` reads it (NFKC, case-folded), for ``search_terms`` to be found in."""
    return unicodedata.normalize("NFKC", text).casefold()


def search_terms(text: str) -> list[str]:
    """The query's evidence as substrings of a ``fold``-ed memory: CJK tokens as ``tokenize`` makes
    them, and each English word cut to what its inflections share (its stem where the stem begins
    it: "hiking" -> "hik"; else the word less its last letter: "party" -> "part").

    A cheap stand-in for BM25 where a text is not tokenized (a cold recall's candidates)."""
    terms: list[str] = []
    for match in _TOKEN_RE.finditer(fold(text)):
        run = match.group("cjk")
        if run is not None:
            terms.extend(tokenize(run))
            continue
        word = match.group("word").replace("'", "").replace("\u2019", "")
        if word in _STOPWORDS:
            continue
        stemmed = stem(word)
        terms.append(stemmed if word.startswith(stemmed) else word[:-1] if len(word) > 4 else word)
    return list(dict.fromkeys(terms))


_CJK_CHAR_RE = re.compile(f"[{_CJK}]")
_LATIN_WORD_RE = re.compile(r"[^\W\d_]+")


def language(text: str) -> str | None:
    """``"cjk"`` or ``"latin"``, by the script most of the text is written in; None without either.

    A CJK character counts as half a word ("我在Google工作" is Chinese, "Works at 阿里巴巴" English).
    """
    cjk = len(_CJK_CHAR_RE.findall(text))
    latin = sum(1 for w in _LATIN_WORD_RE.findall(_CJK_CHAR_RE.sub(" ", text)))
    if cjk == 0 and latin == 0:
        return None
    return "cjk" if cjk > 2 * latin else "latin"


class Bm25Index:
    """Okapi BM25 over one user's documents (token lists); rebuilt whenever those documents change."""

    def __init__(self, documents: Sequence[Sequence[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError("BM25 needs k1 >= 0 and 0 <= b <= 1")
        self.k1 = k1
        self.b = b
        self.size = len(documents)
        vocabulary: dict[str, int] = {}
        term_ids: list[int] = []
        doc_ids: list[int] = []
        freqs: list[int] = []
        lengths = np.zeros(self.size, dtype=np.float64)
        for doc, tokens in enumerate(documents):
            lengths[doc] = len(tokens)
            for term, tf in Counter(tokens).items():
                term_ids.append(vocabulary.setdefault(term, len(vocabulary)))
                doc_ids.append(doc)
                freqs.append(tf)
        self._vocabulary = vocabulary
        terms = np.asarray(term_ids, dtype=np.int64)
        # Postings grouped by term (CSC layout): term t's documents are _docs[_start[t]:_start[t+1]].
        order = np.argsort(terms, kind="stable")
        self._docs = np.asarray(doc_ids, dtype=np.int64)[order]
        doc_freq = np.bincount(terms, minlength=len(vocabulary))
        self._start = np.concatenate(([0], np.cumsum(doc_freq))).astype(np.int64)
        term_freq = np.asarray(freqs, dtype=np.float64)[order]
        mean_length = float(lengths.mean()) if self.size and lengths.any() else 1.0
        norm = k1 * (1.0 - b + b * lengths[self._docs] / mean_length)
        # The query-independent part of each posting's score, so a query is one gather and add per term.
        self._partial = term_freq * (k1 + 1.0) / (term_freq + norm)
        self._idf = np.log1p((self.size - doc_freq + 0.5) / (doc_freq + 0.5))

    def __len__(self) -> int:
        return self.size

    def nbytes(self) -> int:
        """The memory the index holds: its arrays, and its vocabulary's dict and strings."""
        arrays = self._docs.nbytes + self._start.nbytes + self._partial.nbytes + self._idf.nbytes
        return arrays + sys.getsizeof(self._vocabulary) + sum(sys.getsizeof(t) for t in self._vocabulary)

    def idf(self, term: str) -> float:
        """Inverse document frequency of ``term`` (0.0 for a term no document holds)."""
        term_id = self._vocabulary.get(term)
        return 0.0 if term_id is None else float(self._idf[term_id])

    def unseen_idf(self) -> float:
        """The idf a term would have if no document held it (the largest possible)."""
        return math.log1p((self.size + 0.5) / 0.5)

    def scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for the query (each distinct query term counted once)."""
        scores = np.zeros(self.size, dtype=np.float64)
        for term in dict.fromkeys(query_tokens):
            term_id = self._vocabulary.get(term)
            if term_id is None:
                continue
            lo, hi = self._start[term_id], self._start[term_id + 1]
            # Each document appears once in a term's postings, so fancy-index += is safe here.
            scores[self._docs[lo:hi]] += self._idf[term_id] * self._partial[lo:hi]
        return scores

    def normalised_scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        """Scores divided by the best one, so in [0, 1]; all zeros when no document matches."""
        scores = self.scores(query_tokens)
        best = float(scores.max()) if scores.size else 0.0
        if best > 0:
            scores /= best
        return scores


def entity_overlap(query: str | Iterable[str], memory_entities: Iterable[str]) -> float:
    """Mean share of each memory entity's tokens found in the query: 1.0 when every entity is named."""
    if isinstance(query, str):
        present = set(tokenize(query))
    else:
        present = set()
        for item in query:
            # Accept both tokenize() output and raw entity names: keep the item and its tokens.
            present.add(item.casefold())
            present.update(tokenize(item))
    coverages: list[float] = []
    for entity in memory_entities:
        tokens = set(tokenize(entity))
        if tokens:
            coverages.append(len(tokens & present) / len(tokens))
    return math.fsum(coverages) / len(coverages) if coverages else 0.0


def fuse(
    semantic: np.ndarray,
    lexical: np.ndarray,
    entity: np.ndarray,
    *,
    w_semantic: float,
    w_lexical: float,
    w_entity: float,
) -> np.ndarray:
    """Weighted mean of the three relevance signals (each in [0, 1]), clipped to [0, 1].

    A NaN marks a signal absent for that item (no evidence either way, e.g. lexical overlap between
    texts in different languages): its weight is left out of that item's mean, not counted as a zero.
    """
    weights = (w_semantic, w_lexical, w_entity)
    if any(w < 0 or not math.isfinite(w) for w in weights) or sum(weights) <= 0:
        raise ValueError("fusion weights must be finite, non-negative and not all zero")
    signals = np.stack(
        np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (semantic, lexical, entity)))
    )
    present = ~np.isnan(signals)
    weighted = np.asarray(weights, dtype=np.float64).reshape((3,) + (1,) * (signals.ndim - 1)) * present
    total = weighted.sum(axis=0)
    summed = (weighted * np.nan_to_num(signals, nan=0.0)).sum(axis=0)
    fused = np.divide(summed, total, out=np.zeros_like(summed), where=total > 0)
    result: np.ndarray = np.clip(fused, 0.0, 1.0)
    return result
