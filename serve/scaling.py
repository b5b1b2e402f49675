"""How many replicas a deployment runs: a fixed count, or Serve's autoscaling between bounds."""

from __future__ import annotations

from typing import Any

from engram.models.settings import AutoscalingSettings


def replica_options(autoscaling: AutoscalingSettings | None, fixed: int | None = None) -> dict[str, Any]:
    """Serve deployment options for ``autoscaling`` when set, else ``fixed`` replicas (None: Serve's one).

    Serve refuses ``num_replicas`` beside ``autoscaling_config``: exactly one of them is given.
    """
    if autoscaling is not None:
        return {"autoscaling_config": autoscaling.serve_config()}
    return {} if fixed is None else {"num_replicas": fixed}
