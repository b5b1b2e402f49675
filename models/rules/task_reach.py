"""Which keys may read a write task (SPEC P9): the task's user, its app and whether it touches the
user's global memories, decided from what the task was asked to write.

Stored beside each task (``write_tasks.app_id`` / ``reach``, migration 0008) when it is recorded,
so the check never needs the payload (finished tasks drop theirs). ``reach`` is one of:
``app`` (a key bound to the task's app reads it), ``global`` (the key also needs the user's
global memories) and ``admin`` (an admin key only: exports, and old tasks whose payload could not
be read any more).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REACH_APP = "app"
REACH_GLOBAL = "global"
REACH_ADMIN = "admin"

# The task kinds an app's key can create (add, add_structured, batch_add_structured); every other
# kind (export, ...) comes from an admin operation.
APP_KINDS = frozenset({"add", "add_structured", "batch_add_structured"})


@dataclass(frozen=True, slots=True)
class TaskOwner:
    """Whose a task is: enough to decide who may read it, nothing of its content."""

    user_id: str
    kind: str
    app_id: str
    reach: str


def task_reach(kind: str, payload: Mapping[str, Any] | None) -> tuple[str, str]:
    """(app_id, reach) of a task of ``kind`` asked with ``payload`` (None: unreadable)."""
    if kind not in APP_KINDS or payload is None:
        return "", REACH_ADMIN
    app_id = payload.get("app_id")
    app = app_id if isinstance(app_id, str) else ""
    levels = [payload.get("level")]
    items = payload.get("items")
    if isinstance(items, list):
        levels += [item.get("level") for item in items if isinstance(item, Mapping)]
    # As the auth rule for the request itself: no app, or any GLOBAL write, is the user's global.
    if not app or "GLOBAL" in levels:
        return app, REACH_GLOBAL
    return app, REACH_APP
