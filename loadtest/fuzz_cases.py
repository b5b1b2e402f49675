"""What the contract fuzzer's edge round (issue #27) sends: bodies that are not one JSON object,
and valid bodies with one value pushed past the stores' range (far or naive date-times, integers
past 64 bits, long cursors, import lines with such values); generated date-times of every year."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from hypothesis import strategies as st

JSON = "application/json"
NAIVE = "2026-03-01T12:00:00"
FAR_TIMES = ("0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "9999-12-31T23:59:59Z", NAIVE)
HUGE_INTS = (2**31, 2**63, 10**30, -(2**63) - 1)
# The contract's integer and date-time fields, wherever they nest (messages, batch items).
INT_FIELDS = frozenset({"top_k", "limit", "timeout_ms"})
TIME_FIELDS = frozenset({"timestamp", "expire_at", "valid_at", "as_of", "since", "until"})


def date_times() -> st.SearchStrategy[str]:
    """RFC 3339 date-times of every year from 1 to 9999, naive ones, and the range's worst edges."""
    moments = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))
    offsets = st.sampled_from(["Z", "+00:00", "+05:30", "-08:00", "+23:59", ""])
    return st.one_of(
        st.builds(lambda at, offset: at.isoformat() + offset, moments, offsets), st.sampled_from(FAR_TIMES)
    )


def nested(depth: int) -> Any:
    """A JSON value ``depth`` levels deep, objects and arrays in turn."""
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def edge_bodies() -> list[tuple[str, bytes, str]]:
    """Bodies that are not one JSON object within the depth limit: (name, bytes, content type)."""
    return [
        ("malformed", b'{"user_id": "u", "query":', JSON),
        ("array", b"[]", JSON),
        ("string", b'"x"', JSON),
        ("null", b"null", JSON),
        ("empty", b"", JSON),
        ("nan", b'{"user_id": "u", "query": "q", "min_relevance": NaN}', JSON),
        ("arrays past the parser", b"[" * 100_000 + b"]" * 100_000, JSON),
        ("objects past the parser", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, JSON),
        ("past the depth limit", json.dumps({"user_id": "u", "scope": nested(40)}).encode(), JSON),
        ("5000-digit integer", b'{"user_id": "u", "top_k": ' + b"9" * 5000 + b"}", JSON),
        ("not json typed", b'{"user_id": "u", "query": "q"}', "text/plain"),
    ]


def edge_import_lines() -> list[str]:
    """Export lines with one value past the stores' range (a count, a datetime, a weight)."""
    at = "2026-01-01T12:00:00Z"
    line: dict[str, Any] = {
        "memory_id": "ab" * 16, "user_id": "u", "app_id": None, "session_id": None, "level": "GLOBAL",
        "ownership": "USER", "mem_type": "SEMANTIC", "content": "Likes tea", "weight": 0.5,
        "weight_at": at, "status": "ACTIVE", "is_important": False, "recall_count": 0, "created_at": at,
        "updated_at": at, "last_recalled_at": None, "expire_at": None, "archived_at": None,
        "deleted_at": None, "source_session_id": None, "source_msg_id": None, "custom_tags": [],
        "entities": [], "embedding_model": "m", "valid_at": at, "invalid_at": None,
        "superseded_by": None, "confidence": 1.0, "source_type": "conversation", "vector": None,
    }  # fmt: skip
    lines = [json.dumps({**line, "recall_count": n}) for n in HUGE_INTS]
    lines += [json.dumps({**line, name: when}) for name in ("valid_at", "expire_at") for when in FAR_TIMES]
    lines.append(json.dumps(line)[:-1] + ', "confidence": NaN}')
    return lines


def top_fields(document: dict[str, Any], operation: Any) -> dict[str, str]:
    """The request body's top-level fields that take a date-time, an integer or a decimal cursor."""
    content = document["paths"][operation.path]["post"].get("requestBody", {}).get("content", {})
    schema = content.get(JSON, {}).get("schema", {})
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    kinds: dict[str, str] = {}
    for name, prop in schema.get("properties", {}).items():
        for option in [prop, *prop.get("anyOf", [])]:
            if option.get("format") == "date-time" and name in TIME_FIELDS:
                kinds[name] = "time"
            elif option.get("type") == "integer" and name in INT_FIELDS:
                kinds[name] = "int"
            elif name == "cursor" and option.get("pattern", "").startswith("^[0-9]"):
                kinds[name] = "cursor"
            elif name == "lines":
                kinds[name] = "lines"
    return kinds


def spoil(body: Any, kinds: dict[str, str], edit: str, pick: int) -> bool:
    """Put one value past the range into every field of kind ``edit`` (top level, and datetimes and
    integers wherever they nest); True when something changed."""
    bad: dict[str, Any] = {
        "time": FAR_TIMES[pick % len(FAR_TIMES)],
        "int": HUGE_INTS[pick % len(HUGE_INTS)],
        "cursor": "9" * 19,
        "lines": [edge_import_lines()[pick % len(edge_import_lines())]],
    }
    changed = False
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        for name, value in list(item.items()):
            # By name: an integer user id past 64 bits, or content that reads as a date, is valid.
            if edit == "int" and name in INT_FIELDS and isinstance(value, int):
                item[name], changed = bad["int"], True
            elif edit == "time" and name in TIME_FIELDS and isinstance(value, str):
                item[name], changed = bad["time"], True
            else:
                stack.append(value)
    for name, kind in kinds.items():
        if kind == edit and isinstance(body, dict):
            body[name], changed = bad[kind], True
    return changed
