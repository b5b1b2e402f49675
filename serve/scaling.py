"""How many replicas a deployment runs (a fixed count, or Serve's autoscaling between bounds) and how
they stop."""

from __future__ import annotations

from typing import Any

from engram.models.settings import AutoscalingSettings

# How a replica stops (Serve's defaults: polls every 2 s for up to 20 s). Engram's stop runs the
# shards' grace first with Serve still answering, so a replica's own requests have had that time
# already; Serve's defaults alone could outlast serve.stop_timeout_s on a loaded machine.
REPLICA_STOP: dict[str, float] = {"graceful_shutdown_wait_loop_s": 0.5, "graceful_shutdown_timeout_s": 3.0}


def replica_options(autoscaling: AutoscalingSettings | None, fixed: int | None = None) -> dict[str, Any]:
    """Serve deployment options for ``autoscaling`` when set, else ``fixed`` replicas (None: Serve's one).

    Serve refuses ``num_replicas`` beside ``autoscaling_config``: exactly one of them is given.
    """
    stop = dict(REPLICA_STOP)
    if autoscaling is not None:
        return {"autoscaling_config": autoscaling.serve_config(), **stop}
    return stop if fixed is None else {"num_replicas": fixed, **stop}
