"""The user profile (SPEC L7, C11): built from the user's memories, stored sealed, kept fresh.

``Profiles`` builds a profile from one read of the user's ACTIVE facts (``profile_kinds`` sorts
them into sections, ``models.profile`` keeps the strongest), stores it with the user's change
version, and answers reads: a stored profile whose version is the user's current one is served as
it is; an older one is rebuilt first. So a refresh lost to a crash costs nothing but a rebuild at
the next read or sweep.

``ProfileRefresher`` coalesces the refreshes that writes ask for: while the shard has write tasks
pending it only notes whose profile changed; once idle (or ``max_delay_s`` after the oldest
note) it queues one refresh per user on the user's mailbox, which is FIFO and so sees every write
queued before it. A write that finishes after the refresh started notes the user again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from engram.actors.mailbox import MailboxClosedError, MailboxHost
from engram.actors.profile_kinds import profile_kind
from engram.models.domain import GLOBAL_APP, Memory
from engram.models.profile import Classified, ProfileKind, UserProfile, build_profile, eligible
from engram.models.settings import Settings
from engram.storage import profiles as stored
from engram.storage.metadata import MetadataStore

log = logging.getLogger(__name__)


Kind = tuple[ProfileKind, str | None] | None
KIND_CACHE_ENTRIES = 50_000


def classify_memories(
    memories: list[Memory],
    app_id: str | None,
    now: datetime,
    known: dict[tuple[str, str], Kind] | None = None,
) -> list[Classified]:
    """The eligible memories of a profile of ``app_id`` with their section and attribute slot.

    ``known`` caches each memory's kind by (id, content hash): the statement analysis is most of a
    rebuild's cost (~0.6 ms a memory here), and a memory's kind changes only with its content.
    """
    classified: list[Classified] = []
    for memory in memories:
        if memory.content is None or not eligible(memory, app_id, now):
            continue
        key = (memory.memory_id, memory.content_hash)
        if known is not None and key in known:
            found = known[key]
        else:
            found = profile_kind(memory.content)
            if known is not None:
                if len(known) >= KIND_CACHE_ENTRIES:
                    del known[next(iter(known))]  # the oldest entry: dicts keep insertion order
                known[key] = found
        if found is not None:
            classified.append(Classified(memory, found[0], found[1]))
    return classified


class Profiles:
    """Builds, stores and reads user profiles over one metadata store."""

    def __init__(self, settings: Settings, metadata: MetadataStore, clock: Callable[[], datetime]) -> None:
        self.settings = settings
        self.metadata = metadata
        self.clock = clock
        self.refreshes = 0  # profiles rebuilt and stored (a count, for tests and metrics)
        self._kinds: dict[tuple[str, str], Kind] = {}

    def _build(self, user_id: str, app_id: str | None, memories: list[Memory], now: datetime) -> UserProfile:
        return build_profile(
            user_id,
            app_id,
            classify_memories(memories, app_id, now, self._kinds),
            now,
            self.settings.decay,
            self.settings.profile.max_facts_per_kind,
        )

    async def build(self, user_id: str, app_id: str | None) -> UserProfile:
        """A fresh profile from the stores, not stored (read-only: recall replicas)."""
        now = self.clock()
        async with self.metadata.transaction(readonly=True) as tx:
            if await tx.keys.existing(user_id) is None:
                return UserProfile(user_id=user_id, app_id=app_id, refreshed_at=now)
            memories = await stored.profile_memories(tx, user_id)
        return self._build(user_id, app_id, memories, now)

    async def stored_if_fresh(self, user_id: str, app_id: str | None) -> UserProfile | None:
        """The stored profile when it was built from the user's current version, else None."""
        async with self.metadata.transaction(readonly=True) as tx:
            found = await stored.read_profile(tx, user_id, app_id or GLOBAL_APP)
            version = await tx.versions.read(user_id)
        return found.profile if found is not None and found.source_version == version else None

    async def current(self, user_id: str, app_id: str | None) -> UserProfile:
        """The stored profile when it is up to date with the user's changes, else a fresh build."""
        return await self.stored_if_fresh(user_id, app_id) or await self.build(user_id, app_id)

    async def refresh(self, user_id: str, app_id: str | None = None, *, rebuild: bool = False) -> int:
        """Bring the user's stored profiles (the global one, every app one stored, and ``app_id``'s)
        up to date; returns how many were stored. A profile built from the current version is kept
        unless ``rebuild`` (the sweep: weights decayed), and then stored only if its facts changed.

        Runs on the user's mailbox (it writes). A user without a data key (purged) has none.
        """
        now = self.clock()
        async with self.metadata.transaction() as tx:
            cipher = await tx.keys.existing(user_id)
            if cipher is None:
                await stored.delete_profiles(tx, user_id)
                return 0
            version = await tx.versions.read(user_id)
            apps = {GLOBAL_APP, *(await stored.profile_apps(tx, user_id))}
            if app_id:
                apps.add(app_id)
            memories: list[Memory] | None = None
            written = 0
            for app in sorted(apps):
                found = await stored.read_profile(tx, user_id, app)
                current = found is not None and found.source_version == version
                if current and not rebuild:
                    continue
                if memories is None:
                    memories = await stored.profile_memories(tx, user_id)
                profile = self._build(user_id, app or None, memories, now)
                if current and found is not None and found.profile.same_facts(profile):
                    continue
                await stored.write_profile(tx, cipher, profile, app, version)
                written += 1
        self.refreshes += written
        return written

    async def sweep(self, user_id: str) -> int:
        """The sweep's refresh: every stored profile rebuilt, stored where its facts changed."""
        return await self.refresh(user_id, rebuild=True)

    async def refreshed(self, user_id: str, app_id: str | None) -> UserProfile:
        """The profile of ``app_id``, rebuilt and stored first when stale (on the user's mailbox)."""
        await self.refresh(user_id, app_id)
        async with self.metadata.transaction(readonly=True) as tx:
            found = await stored.read_profile(tx, user_id, app_id or GLOBAL_APP)
        if found is not None:
            return found.profile
        return UserProfile(user_id=user_id, app_id=app_id, refreshed_at=self.clock())

    async def exported(self, user_id: str) -> list[UserProfile]:
        """Every stored profile of the user, refreshed first (export, on the user's mailbox)."""
        await self.refresh(user_id)
        async with self.metadata.transaction(readonly=True) as tx:
            found = [
                await stored.read_profile(tx, user_id, app) for app in await stored.profile_apps(tx, user_id)
            ]
        return [f.profile for f in found if f is not None]


class ProfileRefresher:
    """Profile refreshes after writes, deferred while the shard has write tasks pending: a burst of
    writes, of any number of users, ends in one refresh per user written, queued on its mailbox.

    Under a load that never lets the shard go idle, a user's refresh waits at most
    ``max_delay_s`` (checked as writes end; no timer). A read of a stale profile rebuilds it
    meanwhile, so deferring costs freshness of nothing a caller sees, only where the work is done.
    """

    def __init__(
        self,
        profiles: Profiles,
        host: MailboxHost,
        *,
        busy: Callable[[], bool] = lambda: False,
        max_delay_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.profiles = profiles
        self.host = host
        self._busy = busy
        self._max_delay_s = max_delay_s
        self._clock = clock
        self._queued: set[str] = set()
        self._dirty: dict[str, float] = {}  # user id -> when their first deferred write ended

    @property
    def deferred(self) -> int:
        """Users whose refresh waits for the shard to go idle."""
        return len(self._dirty)

    def changed(self, user_id: str) -> None:
        """A write of ``user_id`` ended: refresh now if the shard is idle, else once it is."""
        if not self.profiles.settings.profile.refresh_after_writes:
            return
        now = self._clock()
        self._dirty.setdefault(user_id, now)
        oldest = next(iter(self._dirty.values()))
        if self._busy() and now - oldest < self._max_delay_s:
            return
        dirty, self._dirty = list(self._dirty), {}
        for user in dirty:
            self._queue(user)

    def _queue(self, user_id: str) -> None:
        if user_id in self._queued:
            return
        self._queued.add(user_id)

        async def run() -> None:
            # Cleared before the work: a write finishing from here on queues the next refresh.
            self._queued.discard(user_id)
            await self.profiles.refresh(user_id)

        try:
            self.host.submit_nowait(user_id, run)
        except MailboxClosedError:
            # Shutting down: the stored profile is older than the user's version, so the next
            # read or sweep rebuilds it.
            self._queued.discard(user_id)
