"""Identifier formats (SPEC C1) and generators."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from pydantic import BeforeValidator, StringConstraints

ID_PATTERN = r"^[A-Za-z0-9_\-.:@]{1,128}$"
MEMORY_ID_PATTERN = r"^[0-9a-f]{32}$"
_MEMORY_ID_RE = re.compile(MEMORY_ID_PATTERN)


def _int_as_decimal(value: Any) -> Any:
    # C1: an integer user id is read as its decimal string; bool is an int subclass but never an id.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


Identifier = Annotated[
    str,
    BeforeValidator(_int_as_decimal),
    StringConstraints(pattern=ID_PATTERN, min_length=1, max_length=128),
]
"""A user, app or session id: 1-128 characters of letters, digits and ``_-.:@``."""

MemoryId = Annotated[str, StringConstraints(pattern=MEMORY_ID_PATTERN)]
"""A memory or task id as Engram issues them: 32 lowercase hex digits."""


def new_id() -> str:
    """A fresh random memory or task id."""
    return uuid.uuid4().hex


def is_memory_id(value: str) -> bool:
    """True when ``value`` has the shape of an id Engram issued."""
    return bool(_MEMORY_ID_RE.match(value))
