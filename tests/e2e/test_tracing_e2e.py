"""Traces across the Serve app's processes (#29): tracing turned on with a ``user_config`` (no restart),
spans sent over OTLP/HTTP to a receiver in this process.

One add, called with the caller's ``traceparent``, leaves one trace across the Ingress, the shard
actor and the Extraction replica; a recall through the Ingress's handle continues into the Recall
replica. No span names the user or quotes what was said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from ray import serve

from engram.loadtest.otlp_sink import ReceivedSpan, TraceReceiver, trace_receiver
from engram.models.api import RecallRequest, RecallResponse
from engram.serve.app import deploy, recall_app_name
from engram.serve.client import EngramClient
from tests.e2e.conftest import RunningApp
from tests.e2e.test_serve_app import wait_done

pytestmark = pytest.mark.e2e

USER = "trace-e2e-user"
SAID = "I keep bees on the roof of my flat in Ghent."
ADD_TRACE = "0af7651916cd43dd8448eb211c80319c"
RECALL_TRACE = "1bf7651916cd43dd8448eb211c80319d"
# Where each stage of an add runs: the Ingress replica, the user's shard actor, the Extraction replica.
ADD_STAGES = {
    "engram.add": "ingress",
    "engram.gate": "ingress",
    "engram.shard.add": "shard-0",
    "engram.task.record": "shard-0",
    "engram.task.mailbox_wait": "shard-0",
    "engram.task.run": "shard-0",
    "engram.extract": "shard-0",
    "engram.engine.call": "shard-0",
    "engram.extraction.generate": "extraction",
    "engram.embed": "shard-0",
    "engram.evolve": "shard-0",
    "engram.commit": "shard-0",
}
RECALL_STAGES = {
    "engram.recall": "ingress",
    "engram.gate": "ingress",
    "engram.recall.replica": "recall",
    "engram.recall.embed": "recall",
    "engram.recall.snapshot": "recall",
    "engram.recall.rank": "recall",
}


def _parent(trace_id: str, span_id: str = "00f067aa0ba902b7") -> str:
    return f"00-{trace_id}-{span_id}-01"


@pytest.fixture(scope="module")
def traced_app(engram_app: RunningApp) -> Iterator[TraceReceiver]:
    """The session's app with tracing on (by user_config, as an operator turns it on), off after;
    once for the module (each deploy restarts the replicas: ~15 s on a loaded machine), the tests
    telling their spans apart by trace id."""
    with trace_receiver() as receiver:
        on = {"enabled": True, "otlp_endpoint": receiver.endpoint, "export_delay_ms": 100}
        deploy(engram_app.settings, {"tracing": on})
        try:
            yield receiver
        finally:
            deploy(engram_app.settings, {"tracing": {"enabled": False}})


def _stages(spans: list[ReceivedSpan], trace_id: str) -> dict[str, str]:
    return {s.name: str(s.resource.get("engram.process")) for s in spans if s.trace_id == trace_id}


def _has(trace_id: str, expected: dict[str, str]) -> Callable[[list[ReceivedSpan]], bool]:
    def holds(spans: list[ReceivedSpan]) -> bool:
        return set(expected) <= set(_stages(spans, trace_id))

    return holds


def test_one_adds_spans_form_a_single_trace_across_the_processes(
    engram_app: RunningApp, traced_app: TraceReceiver
) -> None:
    body = {"user_id": USER, "messages": [{"role": "user", "content": SAID}]}
    answer = httpx.post(
        f"{engram_app.url}/memory/v1/add", json=body, headers={"traceparent": _parent(ADD_TRACE)}, timeout=60
    ).json()
    assert answer["code"] == 0 and answer["trace_id"] == ADD_TRACE
    client = EngramClient(engram_app.url, timeout_s=60)
    assert wait_done(client, answer["data"]["task_id"], deadline_s=120) == "DONE"
    spans = traced_app.wait_for(_has(ADD_TRACE, ADD_STAGES), timeout_s=60)
    assert _stages(spans, ADD_TRACE) == ADD_STAGES
    trace = {s.name: s for s in spans if s.trace_id == ADD_TRACE}
    # One tree: the Ingress span under the caller's, every other under a span of the same trace.
    assert trace["engram.add"].parent_id == "00f067aa0ba902b7"
    ids = {s.span_id for s in trace.values()}
    assert all(s.parent_id in ids for name, s in trace.items() if name != "engram.add")
    assert trace["engram.shard.add"].parent_id == trace["engram.add"].span_id
    calls = {s.span_id for s in spans if s.trace_id == ADD_TRACE and s.name == "engram.engine.call"}
    served = [s for s in spans if s.trace_id == ADD_TRACE and s.name == "engram.extraction.generate"]
    assert served and all(s.parent_id in calls for s in served)
    assert len({s.resource["process.pid"] for s in trace.values()}) == 3
    values = [str(v) for s in spans for v in s.attributes.values()]
    assert not [v for v in values if USER in v or "bees" in v or "Ghent" in v]


def test_a_handle_callers_recall_continues_into_the_recall_replica(
    engram_app: RunningApp, traced_app: TraceReceiver
) -> None:
    handle = serve.get_app_handle(engram_app.settings.serve.app_name)
    request = RecallRequest(user_id=USER, query="where are the bees", min_relevance=0)
    carrier = {"traceparent": _parent(RECALL_TRACE)}
    result = handle.traced.remote("recall", request, carrier).result(timeout_s=60)
    assert isinstance(result, RecallResponse)
    spans = traced_app.wait_for(_has(RECALL_TRACE, RECALL_STAGES), timeout_s=60)
    assert _stages(spans, RECALL_TRACE) == RECALL_STAGES
    # The recall app itself refuses what is not a recall.
    recall_handle = serve.get_app_handle(recall_app_name(engram_app.settings))
    refused = recall_handle.traced.remote("add", request, carrier).result(timeout_s=60)
    assert getattr(refused, "code", None) is not None
