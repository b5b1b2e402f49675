"""Export lines and import plans (SPEC P2, C7) as pure functions over plain records.

One export line is one memory: every metadata field, the content, the vector (float32 little-endian,
base64) and the memory's change log. The content hash is left out: it is keyed by the user's data
key, which an import into another instance does not share, so it is computed again there. After
the memories, one line ``{"profile": ...}`` per stored user profile (L7), which an import skips:
a profile is rebuilt from the memories.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import ValidationError

from engram.models.api_base import bounded_context
from engram.models.domain import GLOBAL_APP, ChangeLogEntry, Memory
from engram.models.errors import EngramError, ErrorCode
from engram.models.ids import new_id
from engram.models.privacy import ExportedChange, ExportedMemory
from engram.models.profile import UserProfile
from engram.models.provenance import source_of, trust_of

PROFILE_KEY = "profile"


def encode_vector(vector: np.ndarray) -> str:
    """Base64 of the vector as float32 little-endian."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str, dim: int) -> np.ndarray | None:
    """The vector of ``encode_vector``; None when it is not ``dim`` finite floats."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 4 * dim:
        return None
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    return vector if bool(np.all(np.isfinite(vector))) else None


def exported(memory: Memory, vector: np.ndarray | None, changes: Sequence[ChangeLogEntry]) -> ExportedMemory:
    """The export record of one memory (its content must be readable).

    Written as stored, unvalidated: a memory kept from before the ranges of ``models.bounds`` (an
    ``expire_at`` in year 9999) is still exported; an import then names that line and field (40001).
    """
    if memory.content is None:
        raise ValueError("a memory without readable content cannot be exported")
    return ExportedMemory.model_construct(
        memory_id=memory.memory_id,
        user_id=memory.user_id,
        app_id=memory.app_id or None,
        session_id=memory.session_id,
        level=memory.level,
        ownership=memory.ownership,
        mem_type=memory.mem_type,
        content=memory.content,
        weight=memory.weight,
        weight_at=memory.weight_at,
        status=memory.status,
        is_important=memory.is_important,
        recall_count=memory.recall_count,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        last_recalled_at=memory.last_recalled_at,
        expire_at=memory.expire_at,
        archived_at=memory.archived_at,
        deleted_at=memory.deleted_at,
        source_session_id=memory.source_session_id,
        source_msg_id=memory.source_msg_id,
        custom_tags=list(memory.custom_tags),
        entities=list(memory.entities),
        embedding_model=memory.embedding_model,
        valid_at=memory.valid_at,
        invalid_at=memory.invalid_at,
        superseded_by=memory.superseded_by,
        confidence=memory.confidence,
        source_type=memory.source_type,
        trust=trust_of(source_of(memory.source_type, memory.ownership)),
        context=memory.context,
        vector=None if vector is None else encode_vector(vector),
        changes=[
            ExportedChange.model_construct(
                op_type=c.op_type,
                op_source=c.op_source,
                op_time=c.op_time,
                reason=c.reason,
                content_before=c.content_before,
                content_after=c.content_after,
                sanitized=c.sanitized,
            )
            for c in changes
        ],
    )


def profile_line(profile: UserProfile) -> str:
    """The export line of one user profile."""
    return json.dumps({PROFILE_KEY: profile.model_dump(mode="json")}, ensure_ascii=False)


def is_profile_line(text: str) -> bool:
    """True for a profile line of an export (a JSON object with a profile and no memory id)."""
    if f'"{PROFILE_KEY}"' not in text:
        return False
    try:
        item = json.loads(text)
    except (ValueError, RecursionError):  # not a profile line: parse_line refuses it with 40001
        return False
    return isinstance(item, dict) and PROFILE_KEY in item and "memory_id" not in item


def parse_line(text: str, number: int) -> ExportedMemory:
    """One import line; 40001 naming the line and the fields at fault (never their values)."""
    try:
        return ExportedMemory.model_validate_json(text)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) or "line" for e in exc.errors()})
        raise EngramError(
            ErrorCode.BAD_PARAMETER, f"import line {number}: invalid {', '.join(fields[:10])}"
        ) from None


def to_memory(item: ExportedMemory, *, user_id: str, memory_id: str, content_hash: str) -> Memory:
    """The memory an import line stores for ``user_id`` (the line's own user id is not trusted)."""
    return Memory(
        memory_id=memory_id,
        user_id=user_id,
        app_id=item.app_id or GLOBAL_APP,
        session_id=item.session_id,
        level=item.level,
        ownership=item.ownership,
        mem_type=item.mem_type,
        content=item.content,
        weight=item.weight,
        weight_at=item.weight_at,
        created_at=item.created_at,
        updated_at=item.updated_at,
        valid_at=item.valid_at,
        content_hash=content_hash,
        embedding_model=item.embedding_model,
        status=item.status,
        is_important=item.is_important,
        recall_count=item.recall_count,
        last_recalled_at=item.last_recalled_at,
        expire_at=item.expire_at,
        archived_at=item.archived_at,
        deleted_at=item.deleted_at,
        source_session_id=item.source_session_id,
        source_msg_id=item.source_msg_id,
        custom_tags=tuple(item.custom_tags),
        entities=tuple(item.entities),
        context=bounded_context(item.context),
        vector_ref=memory_id,
        invalid_at=item.invalid_at,
        superseded_by=item.superseded_by,
        confidence=item.confidence,
        source_type=item.source_type,
    )


def to_changes(item: ExportedMemory, memory: Memory) -> list[ChangeLogEntry]:
    """The imported memory's change log, as exported (change ids are assigned again)."""
    return [
        ChangeLogEntry(
            change_id=0,
            memory_id=memory.memory_id,
            user_id=memory.user_id,
            app_id=memory.app_id,
            op_type=c.op_type,
            op_source=c.op_source,
            op_time=c.op_time,
            reason=c.reason,
            content_before=c.content_before,
            content_after=c.content_after,
            sanitized=c.sanitized,
        )
        for c in item.changes
    ]


class Step(enum.Enum):
    """What an import does with one line."""

    ADD = "add"
    OVERWRITE = "overwrite"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class Planned:
    """One line's step and the memory id it is stored under."""

    item: ExportedMemory
    step: Step
    memory_id: str


def plan_import(
    items: Sequence[ExportedMemory], owners: Mapping[str, str], user_id: str, on_conflict: str
) -> list[Planned]:
    """Decide each line: a new id is added; the user's own id is skipped or overwritten.

    An id held by another user is never touched: that line is added under a fresh id, so an import
    cannot reach another user's memory nor tell whether the id exists. A repeated id within one
    import counts once (the first line).
    """
    seen: set[str] = set()
    plan: list[Planned] = []
    for item in items:
        memory_id = item.memory_id
        if memory_id in seen:
            plan.append(Planned(item, Step.SKIP, memory_id))
            continue
        seen.add(memory_id)
        owner = owners.get(memory_id)
        if owner is None:
            plan.append(Planned(item, Step.ADD, memory_id))
        elif owner != user_id:
            plan.append(Planned(item, Step.ADD, new_id()))
        elif on_conflict == "overwrite":
            plan.append(Planned(item, Step.OVERWRITE, memory_id))
        else:
            plan.append(Planned(item, Step.SKIP, memory_id))
    return plan


def needs_embedding(item: ExportedMemory, model_name: str, dim: int) -> bool:
    """True when the line's vector cannot be kept: another model, or no valid vector."""
    return (
        item.embedding_model != model_name or item.vector is None or decode_vector(item.vector, dim) is None
    )
