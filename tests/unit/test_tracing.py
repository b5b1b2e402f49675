"""Spans through ``models.tracing`` (#29): nothing when off, one trace across a carrier when on."""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import ValidationError

from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings, TracingSettings
from engram.models.tracing import Tracing
from engram.serve.settings_update import apply_overrides

pytestmark = pytest.mark.unit


def _on(record_identifiers: bool = False) -> tuple[Tracing, InMemorySpanExporter]:
    """A Tracing of its own (another process, in effect) keeping its spans in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing()
    tracing.install(provider.get_tracer("test"), record_identifiers=record_identifiers)
    return tracing, exporter


def _by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in exporter.get_finished_spans()}


def test_off_every_call_is_the_same_do_nothing() -> None:
    tracing = Tracing()
    assert not tracing.enabled
    first = tracing.span("a", {"k": 1})
    assert first is tracing.span("b") is tracing.continued({"traceparent": "x"}, "c")
    with first:
        tracing.annotate("k", 1)
        assert tracing.carrier() is None
        assert tracing.captured() is None
        assert tracing.trace_id() is None
    assert tracing.identifiers("user-1", "app") == {}


def test_spans_nest_and_a_carrier_continues_the_trace_in_another_tracer() -> None:
    caller, caller_spans = _on()
    callee, callee_spans = _on()
    with caller.span("engram.add"):
        carrier = caller.carrier()
        trace_id = caller.trace_id()
        with caller.span("engram.gate"):
            pass
    assert carrier is not None and set(carrier) == {"traceparent"}
    with (
        callee.continued(carrier, "engram.shard.add", {"engram.op": "add"}),
        callee.span("engram.task.record"),
    ):
        callee.annotate("engram.facts", 2)
    sent, gate = _by_name(caller_spans)["engram.add"], _by_name(caller_spans)["engram.gate"]
    served, record = _by_name(callee_spans)["engram.shard.add"], _by_name(callee_spans)["engram.task.record"]
    assert {format(s.context.trace_id, "032x") for s in (sent, gate, served, record)} == {trace_id}
    assert gate.parent is not None and gate.parent.span_id == sent.context.span_id
    assert served.parent is not None and served.parent.span_id == sent.context.span_id
    assert served.parent.is_remote
    assert record.parent is not None and record.parent.span_id == served.context.span_id
    assert record.attributes == {"engram.facts": 2}


def test_without_a_carrier_a_served_span_starts_a_new_trace() -> None:
    tracing, spans = _on()
    with tracing.continued(None, "one"):
        pass
    with tracing.continued({"traceparent": "not a traceparent"}, "two"):
        pass
    one, two = _by_name(spans)["one"], _by_name(spans)["two"]
    assert one.parent is None and two.parent is None
    assert one.context.trace_id != two.context.trace_id


def test_an_error_is_recorded_by_type_and_code_never_by_message() -> None:
    tracing, spans = _on()
    with pytest.raises(EngramError), tracing.span("engram.add"):
        raise EngramError(ErrorCode.BAD_PARAMETER, "card 4111 1111 1111 1111 refused")
    span = _by_name(spans)["engram.add"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes == {"error.type": "EngramError", "engram.code": 40001}
    assert "4111" not in str(span.to_json())


async def test_work_queued_for_later_continues_the_trace_it_was_queued_in() -> None:
    tracing, spans = _on()
    queue: asyncio.Queue[tuple[object, int]] = asyncio.Queue()

    async def consumer() -> None:  # a mailbox's consumer: a task created outside any request
        captured, queued_ns = await queue.get()
        with tracing.within(captured):  # type: ignore[arg-type]
            with tracing.span("engram.task.mailbox_wait", start_ns=queued_ns):
                pass
            with tracing.span("engram.task.run"):
                pass

    running = asyncio.create_task(consumer())
    with tracing.span("engram.shard.add"):
        queued_ns = time.time_ns() - 5_000_000
        await queue.put((tracing.captured(), queued_ns))
    await running
    found = _by_name(spans)
    accept = found["engram.shard.add"]
    for name in ("engram.task.mailbox_wait", "engram.task.run"):
        assert found[name].parent is not None and found[name].parent.span_id == accept.context.span_id
    assert found["engram.task.mailbox_wait"].start_time == queued_ns


def test_identifiers_are_attributes_only_where_the_operator_opted_in() -> None:
    assert _on()[0].identifiers("u-1", "app-1") == {}
    assert _on(record_identifiers=True)[0].identifiers("u-1", "app-1") == {
        "engram.user_id": "u-1",
        "engram.app_id": "app-1",
    }


def test_tracing_is_off_by_default_and_changes_at_run_time_without_headers() -> None:
    settings = Settings()
    assert not settings.tracing.enabled
    apply_overrides(settings, {"tracing": {"enabled": True, "sample_ratio": 0.5}})
    assert settings.tracing.enabled and settings.tracing.sample_ratio == 0.5
    with pytest.raises(ValueError, match="otlp_headers"):
        apply_overrides(settings, {"tracing": {"otlp_headers": {"x-api-key": "secret"}}})
    with pytest.raises(ValidationError):
        TracingSettings(otlp_endpoint="grpc://collector:4317")
    with pytest.raises(ValidationError):
        TracingSettings(sample_ratio=1.5)


SINGLETONS = {"TRACING", "METRICS"}


def _ray_classes(path: Path) -> list[ast.ClassDef]:
    """The classes of a module that Ray ships to other processes (``@serve.deployment``, ``@ray.remote``)."""
    shipped = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            decorators = [ast.unparse(d) for d in node.decorator_list]
            if any(d.startswith(("serve.deployment", "ray.remote")) for d in decorators):
                shipped.append(node)
    return shipped


def test_no_class_ray_ships_names_a_process_singleton_itself() -> None:
    # Ray sends these classes to their processes by value, with a copy of every module-level object
    # their methods name: a method naming TRACING would consult a copy no sync_tracing installs
    # (the e2e trace lost its shard and Extraction spans that way). They call module functions.
    root = Path(__file__).resolve().parents[2]
    found = []
    for module in sorted((root / "serve").glob("*.py")):
        for cls in _ray_classes(module):
            names = {n.id for n in ast.walk(cls) if isinstance(n, ast.Name)}
            found += [f"{module.name}:{cls.name} names {name}" for name in sorted(names & SINGLETONS)]
    assert found == []
    assert len([c for m in (root / "serve").glob("*.py") for c in _ray_classes(m)]) >= 4
