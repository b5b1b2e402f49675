"""Enumerations of the data model (SPEC D1-D4, C3)."""

from __future__ import annotations

from enum import StrEnum


class Level(StrEnum):
    """Scope level of a memory: visible to every app, to one app, or to one session."""

    GLOBAL = "GLOBAL"
    APP = "APP"
    SESSION = "SESSION"


class Ownership(StrEnum):
    """Who a memory is about: the user, or the agent itself."""

    USER = "USER"
    AGENT = "AGENT"


class MemType(StrEnum):
    """Cognitive type of a memory; drives its initial weight (W7)."""

    SEMANTIC = "SEMANTIC"
    EPISODIC = "EPISODIC"
    PROCEDURAL = "PROCEDURAL"


class Status(StrEnum):
    """Lifecycle state. SUPERSEDED facts stay for history and ``as_of`` recall (R6)."""

    ACTIVE = "ACTIVE"
    SUPERSEDED = "SUPERSEDED"
    ARCHIVED = "ARCHIVED"
    DELETED = "DELETED"
    # Held for review (P5, C12): never recalled, evolved against or counted; an admin releases it
    # (it becomes ACTIVE through normal admission) or deletes it.
    QUARANTINED = "QUARANTINED"


class OpType(StrEnum):
    """Kind of change recorded in the change log (D2)."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    MERGE = "MERGE"
    SUPERSEDE = "SUPERSEDE"
    ARCHIVE = "ARCHIVE"
    RESTORE = "RESTORE"
    PURGE = "PURGE"
    # Many similar memories summarised into one (L5): logged on the summary and on each original.
    COMPRESS = "COMPRESS"
    # Evolution saw a fact it already holds: logged against that memory, nothing changes (W4).
    NONE = "NONE"


class OpSource(StrEnum):
    """Who caused a change."""

    SYSTEM = "SYSTEM"
    USER = "USER"
    ADMIN = "ADMIN"


class TaskStatus(StrEnum):
    """State of an accepted asynchronous write (W2, C3)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    FAILED = "FAILED"


class Role(StrEnum):
    """Author of a conversation message."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    # Output of a tool the agent called (a web page, an API answer): never a USER memory (C2+, P5).
    TOOL = "tool"


class SensitiveCategory(StrEnum):
    """Kinds of secrets and PII the write path detects (P5); the value is its placeholder's word."""

    SECRET = "SECRET"  # noqa: S105 - a category name, not a password
    CARD = "CARD"
    IBAN = "IBAN"
    GOV_ID = "ID"
    ACCOUNT = "ACCOUNT"  # a bank account (or routing) number stated as such, in no checked format
    EMAIL = "EMAIL"
    PHONE = "PHONE"
