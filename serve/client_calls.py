"""What the typed clients send and read: one ``Call`` per operation, ``EngramApiError`` for an
error envelope. A leaf module, shared by ``client`` and the route groups mixed into it."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
from opentelemetry import propagate
from pydantic import BaseModel, TypeAdapter

from engram.models.errors import ErrorCode

T = TypeVar("T")


class EngramApiError(Exception):
    """An envelope with a non-zero code (other than 20001 on recall, which is an empty result)."""

    def __init__(self, code: int, msg: str, trace_id: str) -> None:
        super().__init__(f"{code} {msg} (trace {trace_id})")
        self.code = code
        self.msg = msg
        self.trace_id = trace_id


@dataclass(frozen=True)
class Call(Generic[T]):
    """One operation: where it goes, what it sends, how its data is read."""

    path: str
    request: BaseModel
    result: TypeAdapter[T]

    def body(self) -> dict[str, Any]:
        """The JSON body (unset defaults left out, so the server's configured defaults apply)."""
        return self.request.model_dump(mode="json", exclude_unset=True)

    def parse(self, response: httpx.Response) -> T:
        """The data of a success envelope; EngramApiError otherwise."""
        try:
            payload = response.json()
        except ValueError as exc:
            raise EngramApiError(int(ErrorCode.DEPENDENCY_UNAVAILABLE), "not an Engram answer", "") from exc
        code = int(payload.get("code", -1))
        if code not in (0, int(ErrorCode.NO_RELEVANT_MEMORY)):
            raise EngramApiError(code, str(payload.get("msg", "")), str(payload.get("trace_id", "")))
        return self.result.validate_python(payload.get("data"))


def trace_headers() -> dict[str, str]:
    """The caller's current OpenTelemetry trace as W3C headers (``traceparent``), so that Engram's
    spans of the call continue it; empty when the caller has no span (or no tracing at all)."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


class SyncSender:
    """A blocking client: sends a ``Call`` and returns its data (``serve.operations`` binds to it)."""

    def send(self, call: Call[T]) -> T:
        """Send one operation and return its data."""
        raise NotImplementedError


class AsyncSender:
    """An asyncio client: sends a ``Call`` and returns its data."""

    def send(self, call: Call[T]) -> Awaitable[T]:
        """Send one operation; await its data."""
        raise NotImplementedError
