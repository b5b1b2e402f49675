"""Engram's metrics on Ray's export port after real traffic: the series exist, move by what was done,
and carry no user id or text (SPEC O3, P3)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engram.models.api import AddRequest, AddStructuredRequest, RecallRequest
from engram.models.metrics import SPECS
from engram.serve.client import EngramClient
from tests.e2e.conftest import RunningApp
from tests.e2e.test_serve_app import wait_done
from tests.support.prometheus import Sample, dashboard_series, settled, total, wait_for

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HIT_USER, MISS_USER = "metrics-e2e-hit", "metrics-e2e-miss"
FACT = "Keeps a bonsai called Kiyoshi on the balcony"
SAID = "I moved to Lisbon last year."
QUERY = "what is my bonsai called"
HITS, MISSES = 4, 3
# Ray's metrics_report_interval_ms (10 s by default): how often a process hands its values on.
REPORT_S = 10

RECALLS = "ray_engram_recall_latency_ms_count"
CANDIDATES = "ray_engram_recall_candidates_count"
ACKS = "ray_engram_write_ack_ms_count"
TASKS = "ray_engram_task_latency_ms_count"
DECISIONS = "ray_engram_evolution_decisions_total"
ENGINE = "ray_engram_engine_requests_total"
SNAPSHOTS = "ray_engram_snapshot_cache_total"


def _counts(samples: list[Sample]) -> dict[str, float]:
    return {
        "hit": total(samples, RECALLS, outcome="hit"),
        "miss": total(samples, RECALLS, outcome="miss"),
        "candidates": total(samples, CANDIDATES),
        "acks": total(samples, ACKS, kind="add"),
        "tasks": total(samples, TASKS, kind="add", status="DONE"),
        "adds": total(samples, DECISIONS, op="ADD"),
        "extractions": total(samples, ENGINE, task="extract_facts", result="ok"),
        # Recalls answered from a held snapshot, cold from candidates (#30), or by loading the
        # snapshot (a small user's: recall.cold_min_memories): every one of them, at least.
        "snapshot_answers": sum(total(samples, SNAPSHOTS, event=e) for e in ("hit", "cold", "load")),
        "snapshot_colds": total(samples, SNAPSHOTS, event="cold"),
    }


def test_traffic_moves_the_engram_series_by_what_was_done_and_no_label_is_user_data(
    engram_app: RunningApp,
) -> None:
    # Work of earlier tests may still be on its way to Ray's agent (each process reports every
    # 10 s): the baseline is taken once the series stopped moving for longer than that.
    before = _counts(settled(engram_app.metrics_url, _counts, quiet_s=REPORT_S + 2))
    client = EngramClient(engram_app.url, timeout_s=30)
    client.add_structured(
        AddStructuredRequest(user_id=HIT_USER, ownership="USER", mem_type="SEMANTIC", content=FACT, sync=True)
    )
    accepted = client.add(AddRequest(user_id=HIT_USER, messages=[{"role": "user", "content": SAID}]))
    assert wait_done(client, accepted.task_id) == "DONE"
    for _ in range(HITS):
        assert client.recall(RecallRequest(user_id=HIT_USER, query=QUERY)).hit
    for _ in range(MISSES):
        assert not client.recall(RecallRequest(user_id=MISS_USER, query=QUERY)).hit
    expected = {
        "hit": before["hit"] + HITS,
        "miss": before["miss"] + MISSES,
        "candidates": before["candidates"] + HITS + MISSES,
        "acks": before["acks"] + 1,
        "tasks": before["tasks"] + 1,
    }

    at_least = {
        "adds": before["adds"] + 1,  # the add task's fact was an ADD decision
        "extractions": before["extractions"] + 1,  # answered by the rules engine in Extraction
        "snapshot_answers": before["snapshot_answers"] + HITS + MISSES,
        "snapshot_colds": before["snapshot_colds"] + 1,  # the user without memories: nothing to load
    }

    def arrived(samples: list[Sample]) -> bool:
        now = _counts(samples)
        return all(now[key] >= value for key, value in {**expected, **at_least}.items())

    # Each process reports to Ray's agent every few seconds, on its own clock: poll, bounded.
    after = wait_for(engram_app.metrics_url, arrived)
    now = _counts(after)
    assert {key: now[key] for key in expected} == expected
    # Recorded in the Recall replica through ray.serve.metrics: Serve's labels are on the series.
    recall_series = [s for s in after if s.name == RECALLS and s.labels.get("outcome") == "hit"]
    assert {s.labels.get("deployment") for s in recall_series} == {"Recall"}
    assert total(after, "ray_engram_engine_batch_size_count", engine="rules") >= 1
    assert any(s.name == "ray_engram_tasks_pending" and s.labels.get("shard") == "0" for s in after)
    # Serve's own series come out on the same port; the dashboard's exist by those names (error
    # series appear with the first error).
    assert total(after, "ray_serve_num_http_requests_total") >= HITS + MISSES
    dashboard = json.loads((ROOT / "cluster" / "grafana" / "engram.json").read_text(encoding="utf-8"))
    serve_used = {n for n in dashboard_series(dashboard) if n.startswith("ray_serve_") and "error" not in n}
    assert serve_used - {s.name for s in after} == set()
    # Every Engram series is declared in models.metrics, and no label anywhere holds user data.
    declared = {f"ray_{s.name}" for s in SPECS}
    exported = {re.sub(r"_(bucket|count|sum)$", "", s.name) for s in after}
    assert {n for n in exported if n.startswith("ray_engram_")} <= declared
    private = {HIT_USER, MISS_USER, FACT, SAID, QUERY, "Kiyoshi", "Lisbon"}
    leaked = {(s.name, v) for s in after for v in s.labels.values() if v in private or "Kiyoshi" in v}
    assert not leaked
