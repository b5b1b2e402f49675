"""Engram's data model: domain records, API models, error codes and Settings. No I/O here."""

from engram.models.domain import GLOBAL_APP, ChangeLogEntry, Memory, WriteTask, utcnow
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Role, Status, TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings, load_settings

__all__ = [
    "GLOBAL_APP",
    "ChangeLogEntry",
    "EngramError",
    "ErrorCode",
    "Level",
    "MemType",
    "Memory",
    "OpSource",
    "OpType",
    "Ownership",
    "Role",
    "Settings",
    "Status",
    "TaskStatus",
    "WriteTask",
    "load_settings",
    "utcnow",
]
