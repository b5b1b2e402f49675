"""A store of notes in random scopes and random recall requests over it: what a cold recall must
see exactly as a warm one does (tests/integration/test_cold_recall.py, test_cold_index.py)."""

from __future__ import annotations

import random
from datetime import timedelta

from engram.actors.memory_service import MemoryService
from engram.models.api import DeleteRequest, RecallRequest
from engram.models.enums import Level, MemType, Ownership
from tests.conftest import ManualClock
from tests.support.service import remember

TOPICS = ["tea", "coffee", "Lisbon", "the violin", "chess", "sushi", "hiking", "Python", "jazz", "Kyoto"]


async def scattered_notes(service: MemoryService, rng: random.Random, clock: ManualClock) -> None:
    """60 notes of two users in random apps, sessions, ownerships and types, some expiring within
    the hour and 8 deleted; the clock then moves past the expiries."""
    owners: dict[str, str] = {}
    for i in range(60):
        app = rng.choice([None, "shop", "clinic"])
        session = rng.choice([None, "s1", "s2"]) if app is not None or rng.random() < 0.3 else None
        level = Level.SESSION if session else (Level.APP if app else Level.GLOBAL)
        expires = clock.now + timedelta(hours=1) if rng.random() < 0.15 else None
        user = rng.choice(["u1", "u1", "u1", "u2"])
        owners[
            await remember(
                service,
                f"Note {i}: talks about {rng.choice(TOPICS)} with {rng.choice(TOPICS)}",
                user,
                app_id=app,
                session_id=session,
                level=level,
                ownership=rng.choice([Ownership.USER, Ownership.AGENT]),
                mem_type=rng.choice([MemType.SEMANTIC, MemType.EPISODIC]),
                expire_at=expires,
            )
        ] = user
    # By the order written, not by id: ids are random, and which 8 go must not change between runs.
    for memory_id in rng.sample(list(owners), 8):
        await service.delete(DeleteRequest(user_id=owners[memory_id], memory_id=memory_id))
    clock.advance(hours=2)  # the expiring ones are past their time


def scattered_request(rng: random.Random, clock: ManualClock) -> RecallRequest:
    """A recall of u1, u2 or a user without memories in a random scope, filter and instant."""
    return RecallRequest.model_validate(
        {
            "user_id": rng.choice(["u1", "u2", "nobody"]),
            "query": f"what about {rng.choice(TOPICS)}",
            "scope": {
                "include_global": rng.random() < 0.7,
                "app_id": rng.choice([None, "shop", "clinic"]),
                "session_id": rng.choice([None, "s1", "s2"]),
            },
            "filter": {
                "ownership": rng.choice([[], ["USER"], ["AGENT"]]),
                "mem_type": rng.choice([[], ["SEMANTIC"]]),
            },
            "include_archived": rng.random() < 0.3,
            "as_of": rng.choice([None, clock.now - timedelta(days=1), clock.now]),
            "min_relevance": 0,
            "top_k": 100,
        }
    )
