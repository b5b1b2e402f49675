"""Content normalisation and keyed hashing for exact dedup (W5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.models.hashing import content_hash, normalise_content

pytestmark = pytest.mark.unit

KEY = b"k" * 32


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("Likes pizza.", " likes  PIZZA"),
        ("Likes pizza!", "likes pizza?!"),
        ("likes\tpizza\n", "LIKES PIZZA ..."),
        ("用户喜欢披萨。", "用户喜欢披萨"),
        ("用户喜欢披萨！", "用户喜欢披萨？"),
        ("用户喜欢披萨｡", "用户喜欢披萨；"),
        ("ＬＩＫＥＳ　ｐｉｚｚａ", "likes pizza"),
        ("Straße", "STRASSE"),
        ("Wait…", "wait"),
    ],
)
def test_equivalent_texts_normalise_equal(left: str, right: str) -> None:
    assert normalise_content(left) == normalise_content(right)
    assert content_hash(left, KEY) == content_hash(right, KEY)


def test_normalised_form() -> None:
    assert normalise_content("  Likes   Pizza. ") == "likes pizza"
    assert normalise_content("...") == ""


def test_inner_punctuation_and_words_matter() -> None:
    assert normalise_content("Likes pizza. Hates olives") != normalise_content("Likes pizza hates olives")
    assert content_hash("likes pizza", KEY) != content_hash("likes pasta", KEY)


def test_hash_is_hex_hmac_sha256_and_depends_on_the_key() -> None:
    digest = content_hash("likes pizza", KEY)
    assert len(digest) == 64
    int(digest, 16)
    assert digest != content_hash("likes pizza", b"another key")


def test_empty_key_is_refused() -> None:
    with pytest.raises(ValueError, match="key"):
        content_hash("likes pizza", b"")


@given(st.text())
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalise_content(text)
    assert normalise_content(once) == once
