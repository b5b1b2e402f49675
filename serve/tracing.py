"""This process's span exporter, kept equal to ``tracing`` settings (#29): OTLP/HTTP in batches.

Each Serve replica and shard actor calls ``sync_tracing`` when it starts and again after a run-time
settings change, so an operator turns tracing on or off with a ``user_config`` and no restart.
Engram keeps its own ``TracerProvider`` (never the global one, which Ray's own tracing may use);
its spans leave from a background thread, never on a request's path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from engram.models.settings import TracingSettings
from engram.models.tracing import TRACING, Attributes

T = TypeVar("T")

log = logging.getLogger(__name__)

_installed: tuple[TracerProvider, str] | None = None  # the provider and the settings it was built from


def sync_tracing(settings: TracingSettings, role: str) -> bool:
    """Install, replace or remove this process's exporter to match ``settings``; True when on.

    ``role`` names the process in its spans' resource (``ingress``, ``recall``, ``shard-0``, ...).
    """
    global _installed
    wanted = settings.model_dump_json() if settings.enabled else ""
    if _installed is not None and _installed[1] == wanted:
        return True
    if _installed is None and not wanted:
        return False
    if _installed is not None:
        provider, _installed = _installed[0], None
        TRACING.install(None)
        provider.shutdown()  # sends what it holds first
    if not wanted:
        log.info("tracing off")
        return False
    provider = build_provider(settings, role)
    TRACING.install(provider.get_tracer("engram"), record_identifiers=settings.record_identifiers)
    _installed = (provider, wanted)
    log.info("tracing on: spans to %s (sampling %.2f)", settings.otlp_endpoint, settings.sample_ratio)
    return True


def build_provider(settings: TracingSettings, role: str) -> TracerProvider:
    """A tracer provider sending to ``settings.otlp_endpoint`` in batches, sampled by trace id."""
    resource = Resource.create(
        {
            "service.name": settings.service_name,
            "service.instance.id": f"{role}-{os.getpid()}",
            "process.pid": os.getpid(),
            "engram.process": role,
        }
    )
    provider = TracerProvider(
        resource=resource,
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
        shutdown_on_exit=True,
    )
    exporter = OTLPSpanExporter(
        endpoint=settings.otlp_endpoint,
        headers={k: v.get_secret_value() for k, v in settings.otlp_headers.items()},
        timeout=10,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=settings.export_delay_ms))
    return provider


async def continue_trace(
    carrier: dict[str, str], name: str, attributes: Attributes, call: Callable[[], Awaitable[T]]
) -> T:
    """``call()`` in a server span under the caller's trace headers: the body of a ``traced`` method.

    Ray ships an actor or deployment class to its process by value, and with it a copy of every
    module-level object its methods name: a method that named ``TRACING`` itself would consult a
    copy that no ``sync_tracing`` ever installs. Functions of this module are shipped by reference.
    """
    with TRACING.continued(carrier, name, attributes):
        return await call()
