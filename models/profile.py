"""The user profile (SPEC L7, C11): the strongest current facts of a user grouped by kind.

Pure derivation over plain data: which memories may be in a profile (``eligible``), and, once each
is classified into a kind (``actors.profile_kinds``), the strongest per kind (``select_facts``). A
single-valued attribute (residence, job, ...) keeps one fact, the newest, so a fact that was
superseded but somehow left ACTIVE still never stands beside its successor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from engram.models.domain import GLOBAL_APP, Memory
from engram.models.enums import Level, Ownership, Status
from engram.models.rules.decay import weight_now
from engram.models.settings import DecaySettings


class ProfileKind(StrEnum):
    """The sections of a profile, in the order they are shown."""

    IDENTITY = "identity"
    PREFERENCES = "preferences"
    RELATIONSHIPS = "relationships"
    ROUTINES = "routines"
    PLANS = "plans"


class ProfileFact(BaseModel):
    """One fact of a profile: the memory it comes from, its content and its strength now."""

    memory_id: str
    content: str
    weight: float
    is_important: bool
    level: Level
    valid_at: datetime


class UserProfile(BaseModel):
    """A user's derived profile (C11): global facts, plus one app's when ``app_id`` is given."""

    user_id: str
    app_id: str | None = None
    refreshed_at: datetime
    identity: list[ProfileFact] = Field(default_factory=list)
    preferences: list[ProfileFact] = Field(default_factory=list)
    relationships: list[ProfileFact] = Field(default_factory=list)
    routines: list[ProfileFact] = Field(default_factory=list)
    plans: list[ProfileFact] = Field(default_factory=list)

    def facts(self) -> list[ProfileFact]:
        """Every fact of every section, in section order."""
        return [fact for kind in ProfileKind for fact in getattr(self, kind.value)]

    def same_facts(self, other: UserProfile) -> bool:
        """True when both hold the same memories with the same contents, section by section."""

        def key(profile: UserProfile) -> list[list[tuple[str, str]]]:
            return [[(f.memory_id, f.content) for f in getattr(profile, k.value)] for k in ProfileKind]

        return key(self) == key(other)


@dataclass(frozen=True, slots=True)
class Classified:
    """A memory and what its content says: the profile section, and the attribute it sets, if any."""

    memory: Memory
    kind: ProfileKind
    slot: str | None = None  # e.g. "residence": one value at a time


def eligible(memory: Memory, app_id: str | None, now: datetime) -> bool:
    """True for a current, ACTIVE fact about the user, global or of ``app_id`` (never a session's)."""
    if memory.status is not Status.ACTIVE or memory.content is None or memory.ownership is not Ownership.USER:
        return False
    if memory.invalid_at is not None and memory.invalid_at <= now:
        return False
    if memory.expire_at is not None and memory.expire_at <= now:
        return False
    if memory.level is Level.GLOBAL:
        return True
    return memory.level is Level.APP and app_id is not None and memory.app_id == app_id != GLOBAL_APP


def select_facts(
    classified: Iterable[Classified], now: datetime, decay: DecaySettings, max_per_kind: int
) -> Mapping[ProfileKind, list[ProfileFact]]:
    """The strongest facts per kind, at most ``max_per_kind`` each; one per attribute slot (the newest)."""
    newest: dict[tuple[ProfileKind, str], Classified] = {}
    loose: list[Classified] = []
    for item in classified:
        if item.slot is None:
            loose.append(item)
            continue
        key = (item.kind, item.slot)
        kept = newest.get(key)
        if kept is None or (item.memory.valid_at, item.memory.created_at) > (
            kept.memory.valid_at,
            kept.memory.created_at,
        ):
            newest[key] = item
    by_kind: dict[ProfileKind, list[ProfileFact]] = {kind: [] for kind in ProfileKind}
    for item in [*newest.values(), *loose]:
        memory = item.memory
        assert memory.content is not None
        by_kind[item.kind].append(
            ProfileFact(
                memory_id=memory.memory_id,
                content=memory.content,
                weight=round(weight_now(memory, now, decay), 6),
                is_important=memory.is_important,
                level=memory.level,
                valid_at=memory.valid_at,
            )
        )
    for kind, facts in by_kind.items():
        # Strongest first: important marks, then the decayed weight, then the newer fact; ids break ties.
        facts.sort(key=lambda f: (not f.is_important, -f.weight, -f.valid_at.timestamp(), f.memory_id))
        by_kind[kind] = facts[:max_per_kind]
    return by_kind


def build_profile(
    user_id: str,
    app_id: str | None,
    classified: Iterable[Classified],
    now: datetime,
    decay: DecaySettings,
    max_per_kind: int,
) -> UserProfile:
    """The profile of ``user_id`` (and ``app_id``) from its classified eligible memories, as of ``now``."""
    sections = select_facts(classified, now, decay, max_per_kind)
    return UserProfile(
        user_id=user_id,
        app_id=app_id,
        refreshed_at=now,
        **{kind.value: facts for kind, facts in sections.items()},
    )
