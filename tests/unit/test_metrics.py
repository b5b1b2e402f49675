"""Engram's metric declarations, the in-memory backend, and the recorders that need no stores."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from engram.actors.engine_outputs import EVOLVE_TASK, EXTRACT_TASK, EvolutionOutput, ExtractionOutput
from engram.actors.engines.base import ChatMessage, EngineError, StructuredRequest
from engram.actors.engines.metered import MeteredEngine, metered
from engram.actors.engines.rules import RulesEngine
from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import (
    METRICS,
    SPECS,
    MemoryInstruments,
    NoopInstruments,
    app_label,
    install,
)
from engram.models.settings import LimitSettings, MetricsSettings
from engram.serve.rate_limit import RateLimitedBackend, RateLimiter
from tests.conftest import ManualMonotonic
from tests.support.metrics import recorded_metrics
from tests.support.prometheus import dashboard_series

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# Serve adds these to every metric made in a replica, and refuses them as user labels.
SERVE_RESERVED = {"deployment", "replica", "application", "route"}


def test_every_metric_is_well_formed_and_labelled_by_closed_sets_only() -> None:
    names = [s.name for s in SPECS]
    assert len(names) == len(set(names))
    for spec in SPECS:
        assert re.fullmatch(r"engram_[a-z_]+", spec.name), spec.name
        assert spec.name.endswith("_total") == (spec.kind == "counter"), spec.name
        assert not SERVE_RESERVED & set(spec.tag_keys), spec.name
        assert not {"user", "user_id", "content", "query", "memory_id"} & set(spec.tag_keys), spec.name
        if spec.kind == "histogram":
            assert spec.boundaries and all(b > 0 for b in spec.boundaries)
            assert list(spec.boundaries) == sorted(set(spec.boundaries)), spec.name
        else:
            assert spec.boundaries == ()


def test_operations_doc_lists_every_metric_with_its_type_and_labels() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    rows = {m[1]: m[0] for m in re.finditer(r"^\|\s*`ray_(engram_[a-z_]+)`\s*\|.*$", doc, re.MULTILINE)}
    assert set(rows) == {s.name for s in SPECS}, "docs/operations.md, Metrics: one row per metric"
    for spec in SPECS:
        cells = [c.strip() for c in rows[spec.name].strip("|").split("|")]
        assert cells[1] == spec.kind, spec.name
        assert set(re.findall(r"`([a-z_]+)`", cells[2])) == set(spec.tag_keys), spec.name


def test_memory_instruments_check_labels_and_values_as_ray_does() -> None:
    memory = MemoryInstruments()
    counter = memory.counter(SPECS[2])  # engram_snapshot_cache_total {event}
    counter.inc(2, {"event": "hit"})
    with pytest.raises(ValueError, match="labels"):
        counter.inc(1, {"event": "hit", "user": "u1"})
    with pytest.raises(ValueError, match="labels"):
        counter.inc(1)
    with pytest.raises(ValueError, match="positive"):
        counter.inc(0, {"event": "hit"})
    with pytest.raises(TypeError):
        counter.inc(1, {"event": 3})  # type: ignore[dict-item]
    assert memory.total("engram_snapshot_cache_total", event="hit") == 2


def test_install_swaps_the_backend_and_puts_it_back() -> None:
    with recorded_metrics() as memory:
        METRICS.rate_limited.inc(1, {"op": "add"})
        METRICS.counts(METRICS.sweep_actions, "action", {"decayed": 3, "purged_deleted": 0})
        assert memory.total("engram_rate_limited_total", op="add") == 1
        assert memory.values("engram_sweep_actions_total") == [3], "zero counts are not recorded"
    assert not isinstance(METRICS.instruments, MemoryInstruments)
    METRICS.rate_limited.inc(1, {"op": "add"})  # the no-op backend takes anything
    assert memory.total("engram_rate_limited_total") == 1
    previous = install(NoopInstruments())
    assert install(previous).__class__ is NoopInstruments


def test_task_latency_is_measured_from_acceptance_and_a_naive_clock_never_fails_a_task() -> None:
    accepted = datetime(2026, 1, 1, tzinfo=UTC)
    with recorded_metrics() as memory:
        METRICS.task_ended("add", "DONE", accepted, accepted + timedelta(seconds=2))
        METRICS.task_ended("add", "FAILED", accepted, datetime(2026, 1, 1, 0, 0, 1))  # naive: skipped
    assert memory.values("engram_task_latency_ms", kind="add", status="DONE") == [2000.0]
    assert memory.count("engram_task_latency_ms", status="FAILED") == 0


def test_app_ids_become_labels_only_where_the_operator_opted_in() -> None:
    assert app_label(MetricsSettings(), "shop") == ""
    assert app_label(MetricsSettings(app_id_labels=True), "shop") == "shop"
    assert app_label(MetricsSettings(app_id_labels=True), None) == ""


def _request(task: str, output: type[BaseModel], payload: dict[str, Any]) -> StructuredRequest:
    return StructuredRequest(task, (ChatMessage("user", "hi"),), output, payload)


async def test_metered_engine_counts_requests_by_result_and_batches_by_size() -> None:
    engine = metered(RulesEngine())
    assert isinstance(engine, MeteredEngine) and metered(engine) is engine
    assert (engine.name, engine.is_llm) == ("rules", False)
    payload = {
        "ownership": "USER",
        "today": "2026-01-01",
        "messages": [{"role": "user", "content": "I live in Porto."}],
    }
    requests = [_request(EXTRACT_TASK, ExtractionOutput, payload), _request(EVOLVE_TASK, EvolutionOutput, {})]
    with recorded_metrics() as memory:
        results = await engine.generate(requests)
    assert isinstance(results[0], ExtractionOutput) and isinstance(results[1], EngineError)
    ok = memory.total("engram_engine_requests_total", engine="rules", task=EXTRACT_TASK, result="ok")
    error = memory.total("engram_engine_requests_total", engine="rules", task=EVOLVE_TASK, result="error")
    assert (ok, error) == (1, 1)
    assert memory.values("engram_engine_batch_size", engine="rules") == [2]
    assert memory.count("engram_engine_batch_ms", engine="rules") == 1


async def test_an_engine_call_that_raises_counts_every_request_as_an_error() -> None:
    class Broken(RulesEngine):
        async def generate(self, requests: Any) -> list[BaseModel | EngineError]:
            raise ConnectionError("the server went away")

    with recorded_metrics() as memory, pytest.raises(ConnectionError):
        await MeteredEngine(Broken()).generate([_request(EXTRACT_TASK, ExtractionOutput, {})] * 3)
    assert memory.total("engram_engine_requests_total", result="error") == 3


async def test_rate_limited_requests_are_counted_by_operation_never_by_user() -> None:
    class Answering:
        async def call(self, op: Any, request: Any) -> str:
            return "ok"

    class Op:
        name = "recall"

    class Request:
        user_id = "user-secret-1"

    limiter = RateLimiter(LimitSettings(user_rate_per_s=1, user_burst=1), monotonic=ManualMonotonic())
    backend = RateLimitedBackend(Answering(), limiter)
    with recorded_metrics() as memory:
        assert await backend.call(Op(), Request()) == "ok"
        with pytest.raises(EngramError) as refused:
            await backend.call(Op(), Request())
    assert refused.value.code is ErrorCode.RATE_LIMITED
    assert memory.total("engram_rate_limited_total", op="recall") == 1
    assert "user-secret-1" not in memory.label_values()


# Serve's series the dashboard reads (Ray 2.60 names; tests/e2e/test_metrics.py finds the ones that
# exist without errors on the live app's port).
SERVE_SERIES = {
    "ray_serve_num_http_requests_total",
    "ray_serve_http_request_latency_ms_bucket",
    "ray_serve_num_http_error_requests_total",
    "ray_serve_deployment_error_counter_total",
    "ray_serve_deployment_replica_healthy",
    "ray_serve_deployment_queued_queries",
    "ray_serve_replica_processing_queries",
    "ray_serve_deployment_processing_latency_ms_bucket",
}


def _exported(spec: Any) -> set[str]:
    base = f"ray_{spec.name}"
    return {f"{base}_bucket", f"{base}_count", f"{base}_sum"} if spec.kind == "histogram" else {base}


def test_the_dashboard_reads_every_engram_series_and_serves_and_nothing_undeclared() -> None:
    dashboard = json.loads((ROOT / "cluster" / "grafana" / "engram.json").read_text(encoding="utf-8"))
    used = dashboard_series(dashboard)
    engram = {name for spec in SPECS for name in _exported(spec)}
    assert used <= engram | SERVE_SERIES, used - engram - SERVE_SERIES
    for spec in SPECS:
        assert used & _exported(spec), f"no panel shows {spec.name}"
    assert used >= SERVE_SERIES, "request rate, p50/p99 by route, errors, replicas, queues"
    # Importable: the data source is an input, every panel has a unique id and a place.
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and all("gridPos" in p for p in dashboard["panels"])


def test_the_scrape_config_targets_the_default_export_port() -> None:
    config = yaml.safe_load((ROOT / "cluster" / "prometheus.yaml").read_text(encoding="utf-8"))
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = [t for c in jobs["engram"]["static_configs"] for t in c["targets"]]
    assert targets == [f"127.0.0.1:{MetricsSettings().export_port}"]
    assert {"ray-nodes", "engram-kuberay"} <= set(jobs)
