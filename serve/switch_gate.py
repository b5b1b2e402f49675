"""The switch gate at the ingress (SPEC P1, R2): a switched-off user costs no model or vector work.

``GatedBackend`` wraps the backend the routes and handles use. Writes, session closes and recalls of a
switched-off user or app are refused (40301) or narrowed before anything is sent on, so no task is recorded,
nothing is extracted, embedded or searched. Every other operation passes through untouched: list,
delete, purge, export and the lifecycle keep working while a switch is off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar, cast

from pydantic import BaseModel

from engram.actors.switches import check_store, gate_profile, gate_recall, is_on
from engram.models.api import ProfileRequest, RecallRequest
from engram.models.errors import EngramError, ErrorCode
from engram.models.tracing import TRACING
from engram.serve.backend import BackendWrapper, EngramBackend
from engram.serve.operations import Gate, Operation

SwitchSource = Callable[[str], Awaitable[Mapping[str, bool]]]
"""Reads a user's switch map ("" = the global switch); ``storage.switch_reader.SwitchReader`` is one."""

Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res")


class GatedBackend(BackendWrapper):
    """An ``EngramBackend`` that checks switches first (each operation's ``Gate``); counts what it
    refused (no content). The helpers that are not operations pass untouched."""

    def __init__(self, inner: EngramBackend, switches: SwitchSource) -> None:
        super().__init__(inner)
        self._switches = switches
        self.refused = 0
        self.passed = 0

    def stats(self) -> dict[str, int]:
        """Gated calls refused and passed."""
        return {"refused": self.refused, "passed": self.passed}

    async def call(self, op: Operation[Req, Res], request: Req) -> Res:
        if op.gate is not Gate.NONE:
            with TRACING.span("engram.gate", {"engram.gate": op.gate.value}):
                request = await self._check(op.gate, request)
        return await self.inner.call(op, request)

    async def _check(self, gate: Gate, request: Req) -> Req:
        user_id = str(getattr(request, "user_id"))  # noqa: B009 - every gated request names its user
        try:
            switches = await self._switches(user_id)
            if gate is Gate.STORE:
                # Stores memories (add, add_structured, and session/close, which values a session's
                # memories with the engine and promotes them or writes a continuity memory).
                check_store(switches, getattr(request, "app_id", None))
            elif gate is Gate.RECALL and isinstance(request, ProfileRequest):
                # The profile is a reading of the user's memories: the recall rules apply (L7).
                request = cast(Req, gate_profile(switches, request))
            elif gate is Gate.RECALL:
                request = cast(Req, gate_recall(switches, cast(RecallRequest, request)))
            else:
                # A content update re-embeds: it is a new memory in all but id.
                _require_on(switches)
        except EngramError:
            self.refused += 1
            raise
        self.passed += 1
        return request


def _require_on(switches: Mapping[str, bool]) -> None:
    if not is_on(switches):
        raise EngramError(ErrorCode.MEMORY_SWITCHED_OFF, "memory is switched off for this user")
