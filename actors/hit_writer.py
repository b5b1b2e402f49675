"""Recall-hit bookkeeping (R4) of many users in one transaction (#11).

At 60 recalls/s every recall's hits were a transaction of their own on the user's mailbox: ~40%
of a core in the shard, beside the writes whose acknowledgements waited for it. Each user's
bookkeeping still runs from that user's mailbox turn (the turn waits for it, so per-user order
holds), but every turn handed in while one transaction is written goes into the next one
(``actors.group_commit``). A group whose transaction fails is retried one user at a time, so one
bad row fails alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from engram.actors.group_commit import GroupCommit


@dataclass(frozen=True)
class HitTurn:
    """One user's hits of one recall-hit message (one mailbox turn)."""

    user_id: str
    memory_ids: list[str]
    at: datetime


GroupWrite = Callable[[Sequence[HitTurn]], Awaitable[None]]


class HitWriter(GroupCommit[HitTurn]):
    """Commits the recall hits of many users' mailbox turns together; ``record`` returns once its
    own are committed (or raises what writing them alone raised)."""

    def __init__(self, write: GroupWrite, *, max_group: int = 256) -> None:
        """``write``: stores the turns in one transaction (``MemoryService.record_recall_hit_turns``)."""
        super().__init__(write, what="recall-hit turns", max_group=max_group)

    async def record(self, user_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        """Store this user's hits with whatever other turns are waiting (called on their mailbox)."""
        await self.submit(HitTurn(user_id, list(memory_ids), at))

    def stats(self) -> dict[str, int]:
        """Transactions written and mailbox turns they held (counts only)."""
        return {"hit_groups": self.groups, "hit_turns": self.items}
