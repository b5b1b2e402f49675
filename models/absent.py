"""The answers for an object that does not exist (40401), shared by the routes and the tenancy
check (SPEC P9): an object out of a key's reach gets exactly the answer of an unknown one."""

from __future__ import annotations

from engram.models.errors import EngramError, ErrorCode

# A task id is the handle that reads the task: never echoed, so no log downstream can carry it.
NO_TASK = "no such task"
NO_MEMORY = "no memory {}"
NO_ACTIVE_MEMORY = "no active memory {}"
NO_MEMORY_TO_DELETE = "no memory {} to delete"
NO_ARCHIVED_MEMORY = "no archived memory {}"


def not_found(template: str, object_id: str) -> EngramError:
    """40401 with ``template`` naming ``object_id``."""
    return EngramError(ErrorCode.NOT_FOUND, template.format(object_id))
