"""Lexical relevance: tokenizer (English, Chinese, mixed), BM25, entity overlap and score fusion."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.actors.lexical import (
    Bm25Index,
    entity_overlap,
    fold,
    fuse,
    language,
    search_terms,
    stem,
    tokenize,
)

pytestmark = pytest.mark.unit


# --- tokenizer ---------------------------------------------------------------------------------


def test_english_is_lowercased_stemmed_and_without_stopwords() -> None:
    assert tokenize("The cats were RUNNING to the parties") == ["cat", "run", "parti"]


@pytest.mark.parametrize(
    ("words", "stem_"),
    [
        (["paint", "paints", "painted", "painting"], "paint"),
        (["hike", "hikes", "hiked", "hiking"], "hik"),
        (["party", "parties"], "parti"),
        (["box", "boxes"], "box"),
        (["class", "classes"], "class"),
        (["wed", "wedding"], "wed"),
    ],
)
def test_inflections_share_a_stem(words: list[str], stem_: str) -> None:
    assert {stem(w) for w in words} == {stem_}


@pytest.mark.parametrize("word", ["thing", "bring", "need", "bus", "tennis", "red", "tree", "2023"])
def test_words_that_only_look_inflected_are_kept(word: str) -> None:
    assert stem(word) == word


def test_numbers_possessives_and_contractions() -> None:
    assert tokenize("Caroline's talk on 8 May, 2023 at 1:56 pm") == [
        "carolin",
        "talk",
        "8",
        "may",
        "2023",
        "1",
        "56",
        "pm",
    ]
    assert tokenize("I'm sure they don't know") == ["sur", "know"]


def test_chinese_gives_unigrams_and_bigrams_of_each_run() -> None:
    assert tokenize("四川火锅") == ["四", "川", "火", "锅", "四川", "川火", "火锅"]
    # Pronouns and particles are no evidence (issue #13): neither they nor a bigram holding one is kept.
    assert tokenize("我的猫") == ["猫"]


def test_chinese_function_characters_and_words_are_dropped() -> None:
    # "帮我叫个车" once matched "我住在杭州西湖区" on "我".
    assert not set(tokenize("帮我叫个车")) & set(tokenize("我住在杭州西湖区。"))
    assert tokenize("帮我叫个车") == ["叫", "车"]
    # A function character's unigram goes, the content words it builds stay.
    assert tokenize("要开会议") == ["开", "议", "要开", "开会", "会议"]
    assert "什么" not in tokenize("什么是火锅") and "火锅" in tokenize("什么是火锅")


def test_mixed_chinese_and_english() -> None:
    tokens = tokenize("我喜欢Python编程, especially testing")
    assert tokens == ["喜", "欢", "喜欢", "python", "编", "程", "编程", "especialli", "test"]


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("帮我叫个车", "cjk"),
        ("I prefer taking a taxi", "latin"),
        ("我在Google工作", "cjk"),
        ("Works at 阿里巴巴", "latin"),
        ("2023 10:30", None),
        ("", None),
    ],
)
def test_language_is_the_main_script(text: str, script: str | None) -> None:
    assert language(text) == script


def test_full_width_and_empty_input() -> None:
    assert tokenize("ＰＹＴＨＯＮ　２０２５") == ["python", "2025"]
    assert tokenize("") == []
    assert tokenize("the and of , . !") == []


@given(st.text(max_size=200))
def test_tokens_are_non_empty_lowercase_and_deterministic(text: str) -> None:
    tokens = tokenize(text)
    assert tokens == tokenize(text)
    assert all(t and t == t.casefold() and not t.isspace() for t in tokens)


@given(st.from_regex(r"[a-z]{1,14}", fullmatch=True))
def test_stemming_is_idempotent_and_never_lengthens(word: str) -> None:
    stemmed = stem(word)
    assert stem(stemmed) == stemmed
    assert len(stemmed) <= len(word)


# --- BM25 --------------------------------------------------------------------------------------

DOCS = [
    "Melanie likes painting landscapes and sunsets",
    "Caroline went to a support group meeting",
    "Caroline adopted a dog named Zephyr",
    "Melanie went camping with her kids",
    "Caroline and Melanie talked about painting",
]


def _index(docs: list[str] = DOCS) -> Bm25Index:
    return Bm25Index([tokenize(d) for d in docs])


def test_exact_rare_word_match_comes_first() -> None:
    scores = _index().scores(tokenize("What is the name of Caroline's dog Zephyr?"))
    assert int(np.argmax(scores)) == 2
    assert scores.dtype == np.float64 and scores.shape == (len(DOCS),)


def test_rare_terms_weigh_more_than_common_ones() -> None:
    index = _index()
    assert index.idf("zephyr") > index.idf("carolin") > 0
    assert index.idf("unknown") == 0.0
    # One rare word outweighs one word shared by most documents.
    scores = index.scores(["carolin", "camp"])
    assert int(np.argmax(scores)) == 3


def test_documents_without_query_terms_score_zero() -> None:
    scores = _index().scores(tokenize("zephyr"))
    assert np.count_nonzero(scores) == 1
    assert not _index().scores([]).any()


def test_shorter_documents_win_on_equal_term_frequency() -> None:
    index = _index(["kayak", "kayak trip across the long lake with friends and family"])
    scores = index.scores(["kayak"])
    assert scores[0] > scores[1] > 0


def test_repeated_query_terms_count_once() -> None:
    index = _index()
    np.testing.assert_allclose(index.scores(["zephyr", "zephyr"]), index.scores(["zephyr"]))


def test_normalised_scores_lie_in_unit_range_with_best_at_one() -> None:
    scores = _index().normalised_scores(tokenize("Melanie painting"))
    assert scores.max() == pytest.approx(1.0)
    assert scores.min() >= 0.0
    assert not _index().normalised_scores(["nothing"]).any()


def test_empty_index_and_empty_documents() -> None:
    assert Bm25Index([]).scores(["a"]).shape == (0,)
    assert Bm25Index([]).normalised_scores(["a"]).shape == (0,)
    assert not Bm25Index([[], []]).normalised_scores(["a"]).any()
    with pytest.raises(ValueError, match="k1"):
        Bm25Index([], b=2.0)


def test_matches_the_textbook_formula() -> None:
    docs = [["a", "b", "a"], ["b", "c"], ["d"]]
    index = Bm25Index(docs, k1=1.2, b=0.75)
    avgdl = 2.0
    n = 3

    def expected(doc: list[str], terms: list[str]) -> float:
        total = 0.0
        for term in terms:
            df = sum(term in d for d in docs)
            idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = doc.count(term)
            total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / avgdl))
        return total

    np.testing.assert_allclose(index.scores(["a", "b"]), [expected(d, ["a", "b"]) for d in docs])


def test_two_thousand_short_documents_index_and_score() -> None:
    # The size of a full user (capacity 2,000); its speed is measured by loadtest/bench_lexical.py.
    words = [f"word{i}" for i in range(3000)]
    rng = np.random.default_rng(7)
    docs = [[words[j] for j in rng.integers(0, len(words), 15)] for _ in range(2000)]
    scores = Bm25Index(docs).normalised_scores(docs[0])
    assert scores.shape == (2000,)
    assert int(np.argmax(scores)) == 0 and scores[0] == pytest.approx(1.0)


@given(
    st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=8), min_size=1, max_size=12),
    st.lists(st.sampled_from("abcdefghij"), max_size=5),
)
def test_scores_are_non_negative_and_normalised_in_unit_range(
    docs: list[list[str]], query: list[str]
) -> None:
    index = Bm25Index(docs)
    raw = index.scores(query)
    assert (raw >= 0).all()
    normalised = index.normalised_scores(query)
    assert ((normalised >= 0) & (normalised <= 1 + 1e-12)).all()
    if raw.max() > 0:
        assert normalised.max() == pytest.approx(1.0)
        assert list(np.argsort(-raw, kind="stable")) == list(np.argsort(-normalised, kind="stable"))


# --- entity overlap ----------------------------------------------------------------------------


def test_entity_overlap_is_the_share_of_entities_named_by_the_query() -> None:
    query = "Where did Caroline go hiking with Melanie?"
    assert entity_overlap(query, ["Caroline", "Melanie"]) == 1.0
    assert entity_overlap(query, ["caroline", "Zephyr"]) == 0.5
    assert entity_overlap(query, ["Zephyr"]) == 0.0
    assert entity_overlap(query, []) == 0.0
    # A multi-word entity counts by the share of its tokens present.
    assert entity_overlap("the LGBTQ group", ["LGBTQ support group"]) == pytest.approx(2 / 3)


def test_entity_overlap_accepts_tokens_or_raw_entity_names() -> None:
    assert entity_overlap(tokenize("Caroline's hiking trip"), ["Caroline"]) == 1.0
    assert entity_overlap(["Caroline", "Hangzhou"], ["hangzhou"]) == 1.0
    assert entity_overlap(["杭州"], ["杭州"]) == 1.0


# --- fusion ------------------------------------------------------------------------------------


def test_fuse_is_the_weighted_mean() -> None:
    fused = fuse(
        np.array([1.0, 0.0, 0.5]),
        np.array([0.0, 1.0, 0.5]),
        np.array([0.0, 0.0, 1.0]),
        w_semantic=0.6,
        w_lexical=0.3,
        w_entity=0.1,
    )
    np.testing.assert_allclose(fused, [0.6, 0.3, 0.55])


def test_fuse_with_only_one_weight_returns_that_signal_clipped() -> None:
    semantic = np.array([1.4, -0.2, 0.3])
    fused = fuse(semantic, np.zeros(3), np.zeros(3), w_semantic=2.0, w_lexical=0.0, w_entity=0.0)
    np.testing.assert_allclose(fused, [1.0, 0.0, 0.3])


def test_fuse_leaves_an_absent_signal_out_of_that_items_mean() -> None:
    semantic = np.array([0.8, 0.8])
    lexical = np.array([np.nan, 0.0])
    fused = fuse(semantic, lexical, np.zeros(2), w_semantic=0.4, w_lexical=0.6, w_entity=0.0)
    # Absent: the semantic signal decides alone; present but zero: it pulls the mean down.
    np.testing.assert_allclose(fused, [0.8, 0.32])
    all_absent = fuse(
        np.array([np.nan]), np.array([np.nan]), np.array([np.nan]), w_semantic=1, w_lexical=1, w_entity=1
    )
    np.testing.assert_allclose(all_absent, [0.0])


def test_fuse_rejects_bad_weights_and_nan() -> None:
    zeros = np.zeros(2)
    with pytest.raises(ValueError, match="weights"):
        fuse(zeros, zeros, zeros, w_semantic=0, w_lexical=0, w_entity=0)
    with pytest.raises(ValueError, match="weights"):
        fuse(zeros, zeros, zeros, w_semantic=-1, w_lexical=1, w_entity=1)
    fused = fuse(np.array([np.nan, 1.0]), zeros, zeros, w_semantic=1, w_lexical=1, w_entity=1)
    np.testing.assert_allclose(fused, [0.0, 1 / 3])


@given(
    st.lists(st.floats(0, 1), min_size=3, max_size=3),
    st.lists(st.floats(0, 10), min_size=3, max_size=3).filter(lambda w: sum(w) > 1e-6),
)
def test_fused_scores_stay_within_the_signals(signals: list[float], weights: list[float]) -> None:
    fused = fuse(
        np.array([signals[0]]),
        np.array([signals[1]]),
        np.array([signals[2]]),
        w_semantic=weights[0],
        w_lexical=weights[1],
        w_entity=weights[2],
    )
    assert 0.0 <= fused[0] <= 1.0
    assert min(signals) - 1e-9 <= fused[0] <= max(signals) + 1e-9


def test_search_terms_are_what_a_words_inflections_share() -> None:
    assert search_terms("Where did I go HIKING, and to which parties?") == ["go", "hik", "parti"]
    assert search_terms("the party") == ["part"]  # "parti" does not begin "party": the word less a letter
    assert "杭州" in search_terms("我住在杭州") and "我" not in search_terms("我住在杭州")
    assert all(
        t in fold("Went hiking after the party in Hangzhou 杭州") for t in search_terms("hikes, party, 杭州")
    )
