"""Engram's own metrics (SPEC O3): one declaration of every series, and the recorder code calls.

``SPECS`` names each metric with its type, labels and meaning (docs/operations.md lists them; a
test keeps the two equal). Code records through ``METRICS``; its instruments do nothing until the
process installs a backend with ``install``: Serve replicas and shard actors install Ray's
(``serve.metrics``), unit tests the in-memory ``MemoryInstruments``. Instruments are created once
per install, never per call. Label values are closed sets (outcomes, ops, kinds, engine names,
shard numbers), plus app ids only where ``metrics.app_id_labels`` is on: never a user id or text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from engram.models.settings import MetricsSettings

Tags = dict[str, str]
Kind = Literal["counter", "histogram", "gauge"]

# Milliseconds, from a warm recall (~1 ms) to a write task that waited out an LLM (minutes).
LATENCY_MS = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0)
TASK_MS = (10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0, 300000.0)
# Memories per user are capped at 2,000 by default (W8); batches at engine.batch_max_size.
CANDIDATES = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2000.0, 5000.0)
BATCH = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One series family: its name (Ray exports it as ``ray_<name>``), type, labels and meaning."""

    name: str
    kind: Kind
    description: str
    tag_keys: tuple[str, ...] = ()
    boundaries: tuple[float, ...] = ()


def _spec(name: str, kind: Kind, description: str, *tags: str, buckets: tuple[float, ...] = ()) -> MetricSpec:
    return MetricSpec(name, kind, description, tags, buckets)


RECALL_LATENCY = _spec(
    "engram_recall_latency_ms",
    "histogram",
    "Recall pipeline time in a recall replica, by outcome (hit, miss, timeout, error).",
    "outcome",
    "app",
    buckets=LATENCY_MS,
)
RECALL_CANDIDATES = _spec(
    "engram_recall_candidates",
    "histogram",
    "Memories scored per recall (those of the user's snapshot visible in the request's scope).",
    buckets=CANDIDATES,
)
SNAPSHOT_CACHE = _spec(
    "engram_snapshot_cache_total",
    "counter",
    "Per-user snapshot cache events: hit, miss (absent or stale), load (built), eviction (LRU), "
    "cold (a recall answered from candidates, without the snapshot).",
    "event",
)
SNAPSHOT_LOAD = _spec(
    "engram_snapshot_load_ms",
    "histogram",
    "Time to load one user's snapshot from the stores.",
    buckets=LATENCY_MS,
)
SNAPSHOT_BYTES = _spec(
    "engram_snapshot_cache_bytes",
    "gauge",
    "Bytes held by one process's per-user snapshots (an estimate: vectors, lexical index, texts, "
    "records), bounded by recall.snapshot_cache_bytes.",
)
WRITE_ACK = _spec(
    "engram_write_ack_ms",
    "histogram",
    "Time to acknowledge an accepted write task (durable task row committed), by task kind; "
    "its _count is the acknowledgements.",
    "kind",
    "app",
    buckets=LATENCY_MS,
)
TASK_LATENCY = _spec(
    "engram_task_latency_ms",
    "histogram",
    "Write task time from acceptance to its end, by task kind and final status (DONE, FAILED).",
    "kind",
    "status",
    buckets=TASK_MS,
)
TASKS_PENDING = _spec(
    "engram_tasks_pending",
    "gauge",
    "Write tasks queued or running on a shard's mailboxes (accepted or resumed, not yet ended).",
    "shard",
)
EVOLUTION_DECISIONS = _spec(
    "engram_evolution_decisions_total",
    "counter",
    "Committed decisions of add tasks, by op (ADD, UPDATE, MERGE, SUPERSEDE, NONE; SKIPPED, QUARANTINE).",
    "op",
)
ENGINE_REQUESTS = _spec(
    "engram_engine_requests_total",
    "counter",
    "Requests answered by an extraction/evolution engine, by engine, task and result (ok, error).",
    "engine",
    "task",
    "result",
)
ENGINE_LATENCY = _spec(
    "engram_engine_batch_ms",
    "histogram",
    "Time of one engine call (one batch), by engine.",
    "engine",
    buckets=LATENCY_MS,
)
ENGINE_BATCH = _spec(
    "engram_engine_batch_size",
    "histogram",
    "Requests per engine call (the batch @serve.batch gathered), by engine.",
    "engine",
    buckets=BATCH,
)
DEGRADED = _spec(
    "engram_degraded_fallbacks_total",
    "counter",
    "Work done by the deterministic rules because the LLM failed (W5), by stage (evolution: facts "
    "decided; extraction: add tasks extracted) and reason (timeout, engine_error).",
    "stage",
    "reason",
)
CAPACITY_EVICTIONS = _spec(
    "engram_capacity_evictions_total",
    "counter",
    "Memories evicted to make room (W8), by action (archived, deleted).",
    "action",
)
CAPACITY_REFUSALS = _spec(
    "engram_capacity_refusals_total",
    "counter",
    "Memories refused for capacity, by code (42901 full after eviction, 42902 important limit).",
    "code",
)
RATE_LIMITED = _spec(
    "engram_rate_limited_total",
    "counter",
    "Requests refused with 42903 by the per-user rate limit, by operation.",
    "op",
)
SWEEP_ACTIONS = _spec(
    "engram_sweep_actions_total",
    "counter",
    "Memories changed by the lifecycle sweep, by action (decayed, archived_faded, archived_expired, "
    "purged_archived, purged_deleted, sanitized_changes, compression_summaries, compressed_memories).",
    "action",
)
SWEEP_DURATION = _spec(
    "engram_sweep_user_ms",
    "histogram",
    "Time to sweep one user (retries included), by result (ok, failed).",
    "result",
    buckets=TASK_MS,
)
RECONCILE_REPAIRS = _spec(
    "engram_reconcile_repairs_total",
    "counter",
    "Drift repaired by reconcile, by kind (vectors_restored, orphan_vectors_removed, counters_fixed, "
    "archive_objects_fixed, vector_copies_fixed).",
    "kind",
)

SPECS: tuple[MetricSpec, ...] = (
    RECALL_LATENCY,
    RECALL_CANDIDATES,
    SNAPSHOT_CACHE,
    SNAPSHOT_LOAD,
    SNAPSHOT_BYTES,
    WRITE_ACK,
    TASK_LATENCY,
    TASKS_PENDING,
    EVOLUTION_DECISIONS,
    ENGINE_REQUESTS,
    ENGINE_LATENCY,
    ENGINE_BATCH,
    DEGRADED,
    CAPACITY_EVICTIONS,
    CAPACITY_REFUSALS,
    RATE_LIMITED,
    SWEEP_ACTIONS,
    SWEEP_DURATION,
    RECONCILE_REPAIRS,
)


class Counter(Protocol):
    """A monotonically increasing count (``value`` > 0)."""

    def inc(self, value: float = 1.0, tags: Tags | None = None) -> None:
        """Add ``value``."""
        ...


class Histogram(Protocol):
    """A distribution of observations in fixed buckets."""

    def observe(self, value: float, tags: Tags | None = None) -> None:
        """Record one observation."""
        ...


class Gauge(Protocol):
    """The last value set."""

    def set(self, value: float, tags: Tags | None = None) -> None:
        """Replace the value."""
        ...


class Instruments(Protocol):
    """Creates the instrument of a spec (Ray's metrics, in memory, or nothing)."""

    def counter(self, spec: MetricSpec) -> Counter:
        """The counter of ``spec``."""
        ...

    def histogram(self, spec: MetricSpec) -> Histogram:
        """The histogram of ``spec``."""
        ...

    def gauge(self, spec: MetricSpec) -> Gauge:
        """The gauge of ``spec``."""
        ...


class _Noop:
    def inc(self, value: float = 1.0, tags: Tags | None = None) -> None:
        pass

    def observe(self, value: float, tags: Tags | None = None) -> None:
        pass

    def set(self, value: float, tags: Tags | None = None) -> None:
        pass


class NoopInstruments:
    """Instruments that record nothing: every process until it installs a backend."""

    def counter(self, spec: MetricSpec) -> Counter:
        return _Noop()

    def histogram(self, spec: MetricSpec) -> Histogram:
        return _Noop()

    def gauge(self, spec: MetricSpec) -> Gauge:
        return _Noop()


@dataclass
class _Recorded:
    """One instrument of ``MemoryInstruments``: values by label set, labels checked like Ray does."""

    spec: MetricSpec
    values: dict[tuple[tuple[str, str], ...], list[float]] = field(default_factory=dict)

    def _key(self, tags: Tags | None) -> tuple[tuple[str, str], ...]:
        given = dict(tags or {})
        if set(given) != set(self.spec.tag_keys):
            raise ValueError(f"{self.spec.name}: labels {sorted(given)} != {sorted(self.spec.tag_keys)}")
        if not all(isinstance(v, str) for v in given.values()):
            raise TypeError(f"{self.spec.name}: label values must be str")
        return tuple(sorted(given.items()))

    def inc(self, value: float = 1.0, tags: Tags | None = None) -> None:
        if value <= 0:  # Ray refuses it too (ValueError)
            raise ValueError(f"{self.spec.name}: a counter moves by a positive value, not {value}")
        self.values.setdefault(self._key(tags), []).append(value)

    def observe(self, value: float, tags: Tags | None = None) -> None:
        self.values.setdefault(self._key(tags), []).append(value)

    def set(self, value: float, tags: Tags | None = None) -> None:
        self.values[self._key(tags)] = [value]


class MemoryInstruments:
    """Instruments that keep every value in memory (unit tests, no Ray)."""

    def __init__(self) -> None:
        self.by_name: dict[str, _Recorded] = {}

    def _make(self, spec: MetricSpec) -> _Recorded:
        recorded = _Recorded(spec)
        self.by_name[spec.name] = recorded
        return recorded

    counter = _make
    histogram = _make
    gauge = _make

    def values(self, name: str, **tags: str) -> list[float]:
        """Every value recorded under ``name`` whose labels include ``tags``."""
        wanted = set(tags.items())
        recorded = self.by_name[name].values
        return [v for key, vs in recorded.items() if wanted <= set(key) for v in vs]

    def total(self, name: str, **tags: str) -> float:
        """Sum of a counter (or of a histogram's observations) over the matching label sets."""
        return sum(self.values(name, **tags))

    def count(self, name: str, **tags: str) -> int:
        """How many observations a histogram holds over the matching label sets."""
        return len(self.values(name, **tags))

    def label_values(self) -> set[str]:
        """Every label value recorded by any instrument (to check that none is a user id or text)."""
        return {v for r in self.by_name.values() for key in r.values for _, v in key}


class EngramMetrics:
    """Engram's instruments, bound to the installed backend; the helpers keep labels to their sets."""

    def __init__(self, instruments: Instruments | None = None) -> None:
        self.bind(instruments or NoopInstruments())

    def bind(self, instruments: Instruments) -> None:
        """Create every instrument once with ``instruments``."""
        self.instruments = instruments
        self.recall_latency = instruments.histogram(RECALL_LATENCY)
        self.recall_candidates = instruments.histogram(RECALL_CANDIDATES)
        self.snapshot_cache = instruments.counter(SNAPSHOT_CACHE)
        self.snapshot_load = instruments.histogram(SNAPSHOT_LOAD)
        self.snapshot_bytes = instruments.gauge(SNAPSHOT_BYTES)
        self.write_ack = instruments.histogram(WRITE_ACK)
        self.task_latency = instruments.histogram(TASK_LATENCY)
        self.tasks_pending = instruments.gauge(TASKS_PENDING)
        self.evolution_decisions = instruments.counter(EVOLUTION_DECISIONS)
        self.engine_requests = instruments.counter(ENGINE_REQUESTS)
        self.engine_latency = instruments.histogram(ENGINE_LATENCY)
        self.engine_batch = instruments.histogram(ENGINE_BATCH)
        self.degraded = instruments.counter(DEGRADED)
        self.capacity_evictions = instruments.counter(CAPACITY_EVICTIONS)
        self.capacity_refusals = instruments.counter(CAPACITY_REFUSALS)
        self.rate_limited = instruments.counter(RATE_LIMITED)
        self.sweep_actions = instruments.counter(SWEEP_ACTIONS)
        self.sweep_duration = instruments.histogram(SWEEP_DURATION)
        self.reconcile_repairs = instruments.counter(RECONCILE_REPAIRS)

    def task_ended(self, kind: str, status: str, accepted_at: datetime, now: datetime) -> None:
        """Record a write task's time from acceptance to its end (``status``: DONE or FAILED)."""
        try:
            elapsed_s = (now - accepted_at).total_seconds()
        except TypeError:  # a naive test clock: a metric never fails the task it measures
            return
        self.task_latency.observe(max(0.0, elapsed_s * 1000), {"kind": kind, "status": str(status)})

    def counts(self, counter: Counter, label: str, counts: Mapping[str, int]) -> None:
        """Add each non-zero count under its label value (a counter never moves by 0)."""
        for value, n in counts.items():
            if n > 0:
                counter.inc(n, {label: value})


METRICS = EngramMetrics()


def install(instruments: Instruments) -> Instruments:
    """Record this process's metrics with ``instruments`` from now on; returns the previous backend."""
    previous = METRICS.instruments
    METRICS.bind(instruments)
    return previous


def app_label(settings: MetricsSettings, app_id: str | None) -> str:
    """The ``app`` label: the app id where the operator opted in (``metrics.app_id_labels``), else ""."""
    return (app_id or "") if settings.app_id_labels else ""
