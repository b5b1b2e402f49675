"""Spans of add and recall through the real HTTP app over real stores, and the OTLP exporter (#29).

In one process: the caller's traceparent continues through the route, the switch gate, the durable
record, the user's mailbox and the task's stages; the envelope's trace_id is the trace's. Across
processes (the Serve app) the same is checked by tests/e2e/test_tracing_e2e.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engram.loadtest.otlp_sink import trace_receiver
from engram.models.api import RecallRequest
from engram.models.settings import Settings, TracingSettings
from engram.models.tracing import TRACING
from engram.serve.client import AsyncEngramClient
from engram.serve.tracing import sync_tracing
from engram.storage.stores import Stores
from tests.support.privacy_app import privacy_app

pytestmark = pytest.mark.integration

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
USER = "trace-user-7"
SAID = "My sister Ines lives in Porto and teaches the violin."
ADD_STAGES = {
    "engram.add",
    "engram.gate",
    "engram.task.record",
    "engram.task.mailbox_wait",
    "engram.task.run",
    "engram.extract",
    "engram.embed",
    "engram.evolve",
    "engram.commit",
}
RECALL_STAGES = {
    "engram.recall",
    "engram.gate",
    "engram.recall.embed",
    "engram.recall.snapshot",
    "engram.recall.rank",
}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans of this process kept in memory (tracing on for the test, off after it)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    TRACING.install(provider.get_tracer("test"))
    try:
        yield exporter
    finally:
        TRACING.install(None)


def _names(found: list[ReadableSpan]) -> set[str]:
    return {s.name for s in found}


def _leaks(found: list[ReadableSpan], *secrets: str) -> list[str]:
    """Attribute values of ``found`` that carry any of ``secrets`` (a user id, words of content)."""
    return [
        f"{s.name}.{k}"
        for s in found
        for k, v in (s.attributes or {}).items()
        if any(secret.lower() in str(v).lower() for secret in secrets)
    ]


async def test_an_add_and_a_recall_continue_the_callers_trace_through_every_stage(
    settings: Settings, stores: Stores, clock: object, spans: InMemorySpanExporter
) -> None:
    async with privacy_app(settings, stores, clock) as app:
        answer = await app.http.post(
            "/memory/v1/add",
            json={"user_id": USER, "messages": [{"role": "user", "content": SAID}]},
            headers={"traceparent": PARENT},
        )
        assert answer.json()["code"] == 0 and answer.json()["trace_id"] == TRACE_ID
        await app.write_path.drain()
        recalled = await app.http.post(
            "/memory/v1/recall", json={"user_id": USER, "query": "where does Ines live"}
        )
        assert recalled.json()["code"] == 0
    found = spans.get_finished_spans()
    add = [s for s in found if format(s.context.trace_id, "032x") == TRACE_ID]
    assert _names(add) == ADD_STAGES
    by_name = {s.name: s for s in add}
    root = by_name["engram.add"]
    assert root.parent is not None and root.parent.is_remote  # the caller's span
    # The task's stages hang under the request that accepted it, though they ran after its answer.
    for stage in ("engram.task.mailbox_wait", "engram.task.run"):
        assert by_name[stage].parent is not None and by_name[stage].parent.span_id == root.context.span_id
    run = by_name["engram.task.run"].context.span_id
    for stage in ("engram.extract", "engram.embed", "engram.evolve", "engram.commit"):
        assert by_name[stage].parent is not None and by_name[stage].parent.span_id == run
    assert (by_name["engram.extract"].attributes or {})["engram.facts"] >= 1
    # The recall had no traceparent: a trace of its own, its answer's trace_id.
    recall = [s for s in found if format(s.context.trace_id, "032x") == recalled.json()["trace_id"]]
    assert _names(recall) == RECALL_STAGES
    snapshot = next(s for s in recall if s.name == "engram.recall.snapshot")
    assert (snapshot.attributes or {})["engram.snapshot"] in {"hit", "load", "cold"}
    assert _leaks(found, USER, "Ines", "Porto", "violin") == []


async def test_identifiers_are_span_attributes_only_when_the_operator_opted_in(
    settings: Settings, stores: Stores, clock: object, spans: InMemorySpanExporter
) -> None:
    body = {"user_id": USER, "query": "violin", "scope": {"app_id": "tutor"}}
    async with privacy_app(settings, stores, clock) as app:
        await app.http.post("/memory/v1/recall", json=body)
        TRACING.record_identifiers = True
        await app.http.post("/memory/v1/recall", json=body)
    first, second = (s for s in spans.get_finished_spans() if s.name == "engram.recall")
    assert "engram.user_id" not in (first.attributes or {})
    assert (second.attributes or {})["engram.user_id"] == USER


async def test_the_python_client_carries_the_callers_span_into_engrams_trace(
    settings: Settings, stores: Stores, clock: object, spans: InMemorySpanExporter
) -> None:
    agent_spans = InMemorySpanExporter()
    agent = TracerProvider()
    agent.add_span_processor(SimpleSpanProcessor(agent_spans))
    async with privacy_app(settings, stores, clock) as app:
        client = AsyncEngramClient("http://127.0.0.1", client=app.http)
        with agent.get_tracer("agent").start_as_current_span("agent.turn") as turn:
            await client.recall(RecallRequest(user_id=USER, query="violin"))
        await client.recall(RecallRequest(user_id=USER, query="violin"))  # outside any span
    served = [s for s in spans.get_finished_spans() if s.name == "engram.recall"]
    assert served[0].parent is not None and served[0].parent.span_id == turn.get_span_context().span_id
    assert served[0].context.trace_id == turn.get_span_context().trace_id
    assert served[1].parent is None  # no caller span: a trace of its own


def test_the_exporter_sends_batches_over_otlp_and_stops_when_turned_off() -> None:
    with trace_receiver() as receiver:
        settings = TracingSettings(enabled=True, otlp_endpoint=receiver.endpoint, export_delay_ms=50)
        try:
            assert sync_tracing(settings, "test-process")
            assert sync_tracing(settings, "test-process")  # unchanged: kept as it is
            with TRACING.span("engram.first"):
                pass
            got = receiver.wait_for(lambda s: any(x.name == "engram.first" for x in s), timeout_s=30)
            first = next(s for s in got if s.name == "engram.first")
            assert first.resource["engram.process"] == "test-process"
            assert first.resource["service.name"] == "engram"
            # A changed setting replaces the exporter (what was queued is sent first).
            renamed = settings.model_copy(update={"service_name": "engram-b"})
            assert sync_tracing(renamed, "test-process")
            with TRACING.span("engram.second"):
                pass
            got = receiver.wait_for(lambda s: any(x.name == "engram.second" for x in s), timeout_s=30)
            assert next(s for s in got if s.name == "engram.second").resource["service.name"] == "engram-b"
        finally:
            assert not sync_tracing(TracingSettings(), "test-process")
        assert not TRACING.enabled
        with TRACING.span("engram.after"):
            pass
        assert TRACING.carrier() is None
        assert all(s.name != "engram.after" for s in receiver.spans)
