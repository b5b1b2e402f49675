"""OpenTelemetry spans of add and recall (#29): the calls code makes, doing nothing until installed.

Code opens spans through ``TRACING`` (``with TRACING.span("engram.recall.rank"):``). Until a process
installs a tracer (``serve.tracing.sync_tracing``, from ``tracing.enabled``) every call returns one
shared do-nothing context and no carrier, so tracing off costs an attribute check per stage.

Across processes the context travels as W3C trace-context headers (``traceparent``): ``carrier()``
gives them to a Ray call, ``continued(carrier, name)`` opens the callee's span under them. Inside
a process, work queued for later (a task on a user's mailbox) takes ``captured()`` with it and
opens its spans ``within`` it. Span attributes are closed sets (operations, kinds, counts, codes);
user and app ids only where ``tracing.record_identifiers`` is on; content never.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from engram.models.errors import EngramError

Attributes = Mapping[str, str | int | float | bool]
Carrier = dict[str, str]

_PROPAGATOR = TraceContextTextMapPropagator()
_HEADERS = ("traceparent", "tracestate")
_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()


class Tracing:
    """This process's tracer, or none (tracing off): every method is cheap when off."""

    def __init__(self) -> None:
        self._tracer: trace.Tracer | None = None
        self.record_identifiers = False

    @property
    def enabled(self) -> bool:
        """Whether spans are being made in this process."""
        return self._tracer is not None

    def install(self, tracer: trace.Tracer | None, *, record_identifiers: bool = False) -> None:
        """Make spans with ``tracer`` from now on (None: stop making them)."""
        self._tracer = tracer
        self.record_identifiers = record_identifiers and tracer is not None

    def span(
        self,
        name: str,
        attributes: Attributes | None = None,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        start_ns: int | None = None,
    ) -> contextlib.AbstractContextManager[Any]:
        """A span around a block, child of the current one; ``start_ns`` backdates its start."""
        if self._tracer is None:
            return _OFF
        return _opened(self._tracer, name, attributes, kind, None, start_ns)

    def continued(
        self, carrier: Mapping[str, str] | None, name: str, attributes: Attributes | None = None
    ) -> contextlib.AbstractContextManager[Any]:
        """A server span under the caller's trace-context headers (a new trace without them)."""
        if self._tracer is None:
            return _OFF
        given = {k: v for k in _HEADERS if carrier is not None and (v := carrier.get(k))}
        parent = _PROPAGATOR.extract(given) if given else otel_context.Context()

        return _opened(self._tracer, name, attributes, SpanKind.SERVER, parent, None)

    def carrier(self) -> Carrier | None:
        """The current span as W3C headers for a call to another process; None when off or outside a span."""
        if self._tracer is None:
            return None
        headers: Carrier = {}
        _PROPAGATOR.inject(headers)
        return headers or None

    def captured(self) -> otel_context.Context | None:
        """The current context, for work that runs later in this process; None when off."""
        return otel_context.get_current() if self._tracer is not None else None

    @contextlib.contextmanager
    def within(self, captured: otel_context.Context | None) -> Iterator[None]:
        """Run a block in a context ``captured`` earlier (nothing when None)."""
        if captured is None:
            yield
            return
        token = otel_context.attach(captured)
        try:
            yield
        finally:
            otel_context.detach(token)

    def annotate(self, key: str, value: str | int | float | bool) -> None:
        """Set an attribute on the current span (what only the code inside it learns)."""
        if self._tracer is not None:
            trace.get_current_span().set_attribute(key, value)

    def identifiers(self, user_id: str | None, app_id: str | None = None) -> dict[str, str]:
        """The ids as attributes where the operator opted in (``tracing.record_identifiers``), else none."""
        if not self.record_identifiers:
            return {}
        named = {"engram.user_id": user_id, "engram.app_id": app_id}
        return {key: value for key, value in named.items() if isinstance(value, str)}

    def trace_id(self) -> str | None:
        """The current trace's id (32 hex digits), for the response envelope; None outside a span."""
        if self._tracer is None:
            return None
        span_context = trace.get_current_span().get_span_context()
        return format(span_context.trace_id, "032x") if span_context.is_valid else None


@contextlib.contextmanager
def _opened(
    tracer: trace.Tracer,
    name: str,
    attributes: Attributes | None,
    kind: SpanKind,
    parent: otel_context.Context | None,
    start_ns: int | None,
) -> Iterator[trace.Span]:
    span = tracer.start_span(name, context=parent, kind=kind, attributes=attributes, start_time=start_ns)
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    try:
        yield span
    except BaseException as exc:
        # The type and the error code only: an exception's message may quote what it refused.
        span.set_attribute("error.type", type(exc).__name__)
        if isinstance(exc, EngramError):
            span.set_attribute("engram.code", exc.code.value)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        otel_context.detach(token)
        span.end()


TRACING = Tracing()
"""The spans of this process (installed by ``serve.tracing.sync_tracing``)."""
