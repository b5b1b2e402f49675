"""Engram's metrics through Ray's metrics API, exported on Ray's metrics export port (SPEC O3).

Inside a Serve replica the instruments come from ``ray.serve.metrics`` (Serve adds the
deployment, replica and application labels), in plain actors from ``ray.util.metrics``. Ray
exports each as ``ray_<name>`` with its own series (``ray_serve_*``) on every node's export port.
"""

from __future__ import annotations

from types import ModuleType

from ray import serve
from ray.serve import metrics as serve_metrics
from ray.util import metrics as util_metrics

from engram.models.metrics import METRICS, Counter, Gauge, Histogram, MetricSpec, install


class RayInstruments:
    """Instruments of Ray's metrics API, for the process they are created in."""

    def __init__(self) -> None:
        self.module: ModuleType = serve_metrics if _in_replica() else util_metrics

    def counter(self, spec: MetricSpec) -> Counter:
        counter: Counter = self.module.Counter(
            spec.name, description=spec.description, tag_keys=spec.tag_keys
        )
        return counter

    def histogram(self, spec: MetricSpec) -> Histogram:
        histogram: Histogram = self.module.Histogram(
            spec.name, description=spec.description, boundaries=list(spec.boundaries), tag_keys=spec.tag_keys
        )
        return histogram

    def gauge(self, spec: MetricSpec) -> Gauge:
        gauge: Gauge = self.module.Gauge(spec.name, description=spec.description, tag_keys=spec.tag_keys)
        return gauge


def install_ray_metrics() -> None:
    """Record this process's Engram metrics through Ray (a replica or actor constructor calls it;
    a second call in the same process keeps the instruments it has)."""
    if not isinstance(METRICS.instruments, RayInstruments):
        install(RayInstruments())


def _in_replica() -> bool:
    try:
        serve.get_replica_context()
    except Exception:  # RayServeException: not inside a replica
        return False
    return True
