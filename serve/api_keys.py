"""API keys for ``auth.api_keys``: a new random key, and the SHA-256 that config may hold instead.

``engram keys new`` prints a fresh key and its hash; ``engram keys hash`` reads a key on stdin
(so it is in no shell history or process list) and prints its hash (docs/operations.md, "API keys").
"""

from __future__ import annotations

import secrets
from typing import TextIO

from engram.models.settings import key_digest

KEY_BYTES = 32  # 256 bits: no rate of guessing reaches one, and a plain SHA-256 needs no stretching


def new_key() -> str:
    """A new API key: 43 URL-safe characters from the system's random source."""
    return secrets.token_urlsafe(KEY_BYTES)


def key_sha256(key: str) -> str:
    """The hex SHA-256 of ``key``: the value of ``key_sha256`` in ``auth.api_keys``."""
    return key_digest(key).hex()


def read_key(stream: TextIO) -> str:
    """The key on ``stream``'s first line, surrounding whitespace removed; ValueError when empty."""
    key = stream.readline().strip()
    if not key:
        raise ValueError("no key on standard input")
    return key
