"""``EngramBackend`` over Ray: each operation goes where its ``Dispatch`` says (``serve.operations``).

Writes and reads go to the user's shard actor, recall to the recall deployment, a task lookup to
each shard in turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel
from ray.actor import ActorHandle

from engram.models.errors import EngramError, ErrorCode
from engram.models.rules.sharding import shard_of
from engram.models.tracing import TRACING
from engram.serve.handle_lookup import LazyDeploymentHandle
from engram.serve.operations import Dispatch, Operation
from engram.serve.privacy_backend import RayPrivacyHelpers
from engram.serve.remote_errors import unwrap

Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res")


class RayBackend(RayPrivacyHelpers):
    """Routes every operation: by user to its shard (stable hash), recall to the recall deployment."""

    def __init__(self, shards: Sequence[ActorHandle[Any]], recall: LazyDeploymentHandle) -> None:
        self._shards = list(shards)
        self._recall = recall

    def shard(self, user_id: str) -> ActorHandle[Any]:
        """The shard actor that owns ``user_id``."""
        return self._shards[shard_of(user_id, len(self._shards))]

    def all_shards(self) -> Sequence[ActorHandle[Any]]:
        """Every shard actor."""
        return self._shards

    async def call(self, op: Operation[Req, Res], request: Req) -> Res:
        if op.dispatch is Dispatch.RECALL:
            recall = await self._recall.get()
            result: Res = await unwrap(sent(recall, op.name, request))
            return result
        if op.dispatch is Dispatch.ANY_SHARD:
            # The request names no user (a task id): ask the shards in turn (there are few).
            missing = EngramError(ErrorCode.NOT_FOUND, "not found")
            for shard in self._shards:
                try:
                    found: Res = await unwrap(sent(shard, op.name, request))
                    return found
                except EngramError as exc:
                    if exc.code is not ErrorCode.NOT_FOUND:
                        raise
                    missing = exc
            raise missing
        shard = self.shard(str(getattr(request, "user_id")))  # noqa: B009 - every USER_SHARD request has one
        answer: Res = await unwrap(sent(shard, op.name, request))
        return answer


def sent(target: Any, name: str, request: BaseModel) -> Any:
    """``target.<name>.remote(request)``; with tracing on, ``target.traced`` with the current trace
    (a shard actor or a recall replica continues it: ``serve.tracing.continue_trace``)."""
    carrier = TRACING.carrier()
    if carrier is None:
        return getattr(target, name).remote(request)
    return target.traced.remote(name, request, carrier)
