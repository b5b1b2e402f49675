"""Content hashing for exact dedup (W5): normalised text, keyed per user so hashes reveal nothing."""

from __future__ import annotations

import hashlib
import hmac
import unicodedata

# NFKC turns fullwidth ！？．； and the ellipsis into ASCII, and ｡ into 。, so these cover both languages.
TRAILING_PUNCTUATION = ".!?;。"


def normalise_content(text: str) -> str:
    """Canonical form of a fact for dedup: NFKC, casefolded, whitespace collapsed, no final punctuation."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    collapsed = " ".join(folded.split())
    # Spaces are stripped with the punctuation so "pizza . !" ends as "pizza".
    return collapsed.rstrip(TRAILING_PUNCTUATION + " ")


def content_hash(text: str, key: bytes) -> str:
    """Hex HMAC-SHA256 of the normalised text under the user's ``key``."""
    if not key:
        # An empty key would make the hash a plain SHA-256, open to dictionary attacks.
        raise ValueError("content_hash needs a non-empty key")
    return hmac.new(key, normalise_content(text).encode("utf-8"), hashlib.sha256).hexdigest()
