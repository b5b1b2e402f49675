"""Handles to deployments looked up on first use, waiting a bounded time for Serve to register them.

Serve registers an application's deployments in no fixed order, and two applications deployed
together (``serve deploy`` of ``cluster/serve_config.yaml``) in no fixed order either: a shard
started by the Ingress can ask for the Extraction deployment before it exists (``KeyError``). So
nothing looks a deployment up while starting; the first call does, retrying with a logged backoff
until ``wait_s`` has passed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from engram.models.rules.retry import retry

log = logging.getLogger(__name__)

Lookup = Callable[[], Any]


class DeploymentNotRegisteredError(RuntimeError):
    """The deployment was still unknown to Serve when the wait ran out."""


def serve_lookup(deployment: str, app_name: str) -> Lookup:
    """The lookup through Serve's own API (raises ``KeyError`` while the deployment is unregistered)."""

    def lookup() -> Any:
        from ray import serve

        return serve.get_deployment_handle(deployment, app_name=app_name)

    return lookup


class LazyDeploymentHandle:
    """A deployment handle resolved on the first ``get()``; concurrent callers share one lookup."""

    def __init__(
        self,
        deployment: str,
        app_name: str,
        *,
        wait_s: float,
        lookup: Lookup | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        first_delay_s: float = 0.2,
        max_delay_s: float = 5.0,
    ) -> None:
        self.deployment = deployment
        self.app_name = app_name
        self._wait_s = wait_s
        self._lookup = lookup or serve_lookup(deployment, app_name)
        self._sleep = sleep
        self._clock = clock
        self._first_delay_s = first_delay_s
        self._max_delay_s = max_delay_s
        self._handle: Any = None
        self._pending: asyncio.Task[Any] | None = None

    @property
    def resolved(self) -> bool:
        """Whether the handle has been found (no lookup happens after that)."""
        return self._handle is not None

    async def get(self) -> Any:
        """The handle; waits up to ``wait_s`` for the deployment to be registered."""
        if self._handle is not None:
            return self._handle
        if self._pending is None:
            self._pending = asyncio.create_task(self._resolve())
        pending = self._pending
        try:
            # Shielded: one caller cancelled (a request timing out) must not cancel the others' lookup.
            self._handle = await asyncio.shield(pending)
        except Exception:
            if self._pending is pending:
                self._pending = None  # the next call starts a fresh wait
            raise
        return self._handle

    async def _resolve(self) -> Any:
        def note(attempt: int, exc: BaseException, pause: float) -> None:
            log.warning(
                "deployment %s of app %s is not registered yet (attempt %d); retrying in %.1f s",
                self.deployment,
                self.app_name,
                attempt,
                pause,
            )

        try:
            # Serve's lookup asks its controller with a blocking ray.get: keep it off the event loop.
            return await retry(
                lambda: asyncio.to_thread(self._lookup),
                retry_on=(KeyError,),
                deadline_s=self._wait_s,
                first_delay_s=self._first_delay_s,
                max_delay_s=self._max_delay_s,
                on_retry=note,
                sleep=self._sleep,
                clock=self._clock,
            )
        except KeyError:
            raise DeploymentNotRegisteredError(
                f"deployment {self.deployment!r} of app {self.app_name!r} was not registered "
                f"within {self._wait_s:g} s"
            ) from None
