"""How a LangGraph store item lives in Engram (#29): pure functions, no I/O.

An item ``(namespace, key, value)`` is one memory of the user its namespace names. The value is
the memory's content, as JSON (what LangGraph embeds by default, the whole value, is what Engram
embeds). Namespace and key travel as custom tags: readable ones (``lg.ns.0:memories``,
``lg.key:a1``) to rebuild the item, and digest tags that name exactly one item (``lg.id:``) or
one namespace prefix (``lg.in:``), because a recall's tag filter admits a memory that carries any
of the tags asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.store.base import InvalidNamespaceError, MatchCondition

ITEM_TAG = "lg.item"
USER = "{user_id}"
MAX_LABEL = 48  # a tag holds 64 characters; the longest prefix, "lg.ns.11:", leaves 55
MAX_DEPTH = 12  # tags per item: 3 + 2 per label, within the 32 a memory may carry

_NS = "lg.ns."
_KEY = "lg.key:"
_ID = "lg.id:"
_IN = "lg.in:"


def _checked(label: str, what: str) -> str:
    if not label or len(label) > MAX_LABEL or label != label.strip():
        raise InvalidNamespaceError(
            f"{what} {label!r}: 1 to {MAX_LABEL} characters, no surrounding spaces (Engram keeps it in a tag)"
        )
    return label


def _digest(parts: object) -> str:
    # JSON keeps the parts apart whatever characters the labels hold.
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:40]


def id_tag(namespace: Sequence[str], key: str) -> str:
    """The tag only the item ``(namespace, key)`` carries."""
    return _ID + _digest([list(namespace), key])


def prefix_tag(prefix: Sequence[str]) -> str:
    """The tag every item under ``prefix`` carries (``lg.item`` for the empty prefix)."""
    return _IN + _digest(list(prefix)) if prefix else ITEM_TAG


def tags_for(namespace: Sequence[str], key: str) -> list[str]:
    """Every tag the item's memory carries; refuses labels and keys a tag cannot hold."""
    if len(namespace) > MAX_DEPTH:
        raise InvalidNamespaceError(f"namespace {tuple(namespace)} is deeper than {MAX_DEPTH} labels")
    readable = [f"{_NS}{i}:{_checked(label, 'namespace label')}" for i, label in enumerate(namespace)]
    prefixes = [prefix_tag(namespace[: depth + 1]) for depth in range(len(namespace))]
    return [ITEM_TAG, id_tag(namespace, key), _KEY + _checked(key, "key"), *readable, *prefixes]


def namespace_of(tags: Sequence[str]) -> tuple[str, ...]:
    """The namespace written into ``tags`` by ``tags_for``."""
    labels: dict[int, str] = {}
    for tag in tags:
        if tag.startswith(_NS):
            index, _, label = tag.removeprefix(_NS).partition(":")
            if index.isdigit():
                labels[int(index)] = label
    return tuple(labels[i] for i in sorted(labels))


def key_of(tags: Sequence[str]) -> str | None:
    """The key written into ``tags``; None for a memory that is not a store item."""
    return next((tag.removeprefix(_KEY) for tag in tags if tag.startswith(_KEY)), None)


def user_of(namespace: Sequence[str], template: Sequence[str]) -> str:
    """The user id a namespace names, by the store's template (literals and one ``{user_id}``)."""
    if len(namespace) < len(template):
        raise InvalidNamespaceError(
            f"namespace {tuple(namespace)} stops before the user label of the template {tuple(template)}"
        )
    for label, expected in zip(namespace, template, strict=False):
        if expected != USER and label != expected:
            raise InvalidNamespaceError(
                f"namespace {tuple(namespace)} does not match the template {tuple(template)}"
            )
    return namespace[template.index(USER)]


def check_template(template: Sequence[str]) -> tuple[str, ...]:
    """A template names the user exactly once."""
    if list(template).count(USER) != 1:
        raise ValueError(f"the namespace template needs {USER!r} exactly once, got {tuple(template)}")
    return tuple(template)


def encode_value(value: Mapping[str, Any]) -> str:
    """The memory content that holds ``value``."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def decode_value(content: str) -> dict[str, Any]:
    """The value back from a memory's content; content that is no JSON object (redacted where a
    secret stood outside a string, or not written by the store) comes back as ``{"content": ...}``."""
    try:
        value = json.loads(content)
    except ValueError:
        return {"content": content}
    return value if isinstance(value, dict) else {"content": content}


def _at_path(value: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    current: Any = value
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return False, None
        current = current[part]
    return True, current


def _compare(actual: Any, operator: str, expected: Any) -> bool:
    if operator == "$eq":
        return bool(actual == expected)
    if operator == "$ne":
        return bool(actual != expected)
    try:
        if operator == "$gt":
            return bool(actual > expected)
        if operator == "$gte":
            return bool(actual >= expected)
        if operator == "$lt":
            return bool(actual < expected)
        if operator == "$lte":
            return bool(actual <= expected)
    except TypeError:
        return False
    raise ValueError(f"unknown filter operator {operator!r} (use $eq, $ne, $gt, $gte, $lt, $lte)")


def matches_filter(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """LangGraph's search filter: every field (a dotted path) equals, or passes each operator."""
    for path, expected in (conditions or {}).items():
        present, actual = _at_path(value, path)
        if isinstance(expected, Mapping) and expected and all(str(k).startswith("$") for k in expected):
            if not present and any(op != "$ne" for op in expected):
                return False
            if not all(_compare(actual, str(op), wanted) for op, wanted in expected.items()):
                return False
        elif not present or actual != expected:
            return False
    return True


def _matches(namespace: tuple[str, ...], path: Sequence[str]) -> bool:
    return len(namespace) >= len(path) and all(
        p in ("*", label) for p, label in zip(path, namespace, strict=False)
    )


def namespace_matches(namespace: tuple[str, ...], conditions: Sequence[MatchCondition]) -> bool:
    """True when the namespace meets every prefix/suffix condition ("*" matches any one label)."""
    for condition in conditions:
        path = tuple(condition.path)
        if condition.match_type == "prefix" and not _matches(namespace, path):
            return False
        if condition.match_type == "suffix" and not _matches(namespace[::-1], path[::-1]):
            return False
    return True


def user_of_conditions(conditions: Sequence[MatchCondition], template: Sequence[str]) -> str:
    """The user a namespace listing is about: a prefix condition must name it (Engram lists one
    user's memories at a time, never every user's)."""
    position = list(template).index(USER)
    for condition in conditions:
        path = tuple(condition.path)
        if condition.match_type == "prefix" and len(path) > position and path[position] != "*":
            literals = [
                (label, expected) for label, expected in zip(path, template, strict=False) if expected != USER
            ]
            if any(label not in ("*", expected) for label, expected in literals):
                raise InvalidNamespaceError(f"prefix {path} does not match the template {tuple(template)}")
            return path[position]
    raise InvalidNamespaceError(
        f"list_namespaces needs a prefix condition that names the user (label {position} of {template})"
    )
