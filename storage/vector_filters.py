"""Milvus filter expressions over hashed scope keys: the only place strings enter one (SPEC P4).

Scope ids never reach an expression: they are stored and matched as hashes (``scope_key``), and
the only literals are those hashes and Engram's own enum values, so a crafted user, app or
session id cannot change what a search sees.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from engram.models.enums import Level, MemType, Ownership
from engram.models.ids import is_memory_id

# The stored width of a scope key (hex digits of the digest): the collection schema uses it too.
KEY_LEN = 32


@dataclass(frozen=True, slots=True)
class VectorScope:
    """What a search may see: the user's rows at the allowed levels; empty filter sets mean any."""

    user_id: str
    include_global: bool
    app_id: str | None
    session_id: str | None
    ownerships: frozenset[Ownership] = frozenset()
    mem_types: frozenset[MemType] = frozenset()


def scope_key(value: str) -> str:
    """The hash under which a user, app or session id is stored and matched in the vector store.

    A domain-separated SHA-256, not keyed: it keeps raw ids out of filter expressions (nothing to
    inject) and out of the index, but whoever holds the vector store and guesses an id can confirm
    the guess. Keying it (a server secret every searching process holds) would need the index
    rewritten on every change of that secret; see docs/privacy.md.
    """
    return hashlib.sha256(b"engram-scope:" + value.encode()).hexdigest()[:KEY_LEN]


def optional_key(value: str | None) -> str:
    """The scope key of an optional id; "" stands for none (a global app, no session)."""
    return scope_key(value) if value else ""


def checked_ids(memory_ids: Iterable[str]) -> list[str]:
    """The ids without repeats, each checked to be a memory id (they reach Milvus requests)."""
    ids = list(dict.fromkeys(memory_ids))
    for memory_id in ids:
        if not is_memory_id(memory_id):
            raise ValueError("invalid memory id (expected 32 lowercase hex digits)")
    return ids


_SAFE_LITERAL = re.compile(r"[0-9A-Za-z_]*")


def _lit(value: str) -> str:
    # Only hex digests and our own enum values ever get here; anything else is a bug, never quoted.
    if not _SAFE_LITERAL.fullmatch(value):
        raise ValueError("refusing an unsafe literal in a filter expression")
    return f'"{value}"'


def eq(field: str, value: str) -> str:
    """``field == "value"`` for a safe literal."""
    return f"{field} == {_lit(value)}"


def _in(field: str, values: Iterable[str]) -> str:
    return f"{field} in [{', '.join(_lit(v) for v in sorted(values))}]"


def _all(*parts: str) -> str:
    return " and ".join(f"({part})" for part in parts)


def _any(*parts: str) -> str:
    return " or ".join(f"({part})" for part in parts)


def scope_filter(scope: VectorScope) -> str | None:
    """Filter for ``scope``, or None when no level is visible at all."""
    levels: list[str] = []
    if scope.include_global:
        levels.append(eq("level", Level.GLOBAL.value))
    app_key = optional_key(scope.app_id)
    if app_key:
        levels.append(_all(eq("level", Level.APP.value), eq("app_key", app_key)))
    # A session's memories: those of its app, and those without an app only with the user's global
    # memories (P4, as actors.isolation.in_scope).
    session_apps = ([eq("app_key", "")] if scope.include_global else []) + (
        [eq("app_key", app_key)] if app_key else []
    )
    if scope.session_id and session_apps:
        session_app = _any(*session_apps)
        levels.append(
            _all(
                eq("level", Level.SESSION.value),
                eq("session_key", scope_key(scope.session_id)),
                session_app,
            )
        )
    if not levels:
        return None
    parts = [eq("user_key", user_key(scope.user_id)), _any(*levels)]
    if scope.ownerships:
        parts.append(_in("ownership", (o.value for o in scope.ownerships)))
    if scope.mem_types:
        parts.append(_in("mem_type", (t.value for t in scope.mem_types)))
    return _all(*parts)


def user_key(user_id: str) -> str:
    """The scope key of a user; an empty user id is a bug, never "everyone"."""
    if not user_id:
        raise ValueError("user_id must not be empty")
    return scope_key(user_id)
