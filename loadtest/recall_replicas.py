"""The Recall replicas of an app a load test started, as their ``warm_status`` tells: whether
their snapshots are warm, and the run's cold share, snapshot bytes and resident memory (#30)."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence

from engram.models.settings import Settings


def snapshot_figures(
    before: Sequence[Mapping[str, float]], after: Sequence[Mapping[str, float]]
) -> dict[str, float | None]:
    """The run's cold share over every Recall replica (recalls without their user's snapshot held:
    answered cold, or after loading it), what the largest replica held at the end and its resident
    memory (the bounds are per replica), and how many replicas answered; None for an app this run
    did not start. ``before`` and ``after``: each replica's ``warm_status``, matched by ``pid``."""
    if not after:
        return {
            "cold_share": None,
            "snapshot_mib": None,
            "cached_users": None,
            "recall_rss_mib": None,
            "recall_replicas": None,
            "full_collections": None,
            "full_collection_ms": None,
        }
    earlier = {state.get("pid"): state for state in before}

    def moved(key: str) -> float:
        return sum(state.get(key, 0.0) - earlier.get(state.get("pid"), {}).get(key, 0.0) for state in after)

    cold = moved("colds") + moved("loads") - moved("background_loads")
    answered = cold + moved("hits")
    return {
        "cold_share": round(cold / answered, 3) if answered else 0.0,
        "snapshot_mib": round(max(state["cached_bytes"] for state in after) / 2**20, 1),
        "cached_users": max(state["cached_users"] for state in after),
        "recall_rss_mib": round(max(state["rss_bytes"] for state in after) / 2**20, 1),
        "recall_replicas": float(len(after)),
        # The garbage collector's full collections in the replicas during the run, and their time.
        "full_collections": moved("full_collections"),
        "full_collection_ms": round(moved("full_collection_ms"), 1),
    }


def recall_states(settings: Settings, calls_per_replica: int = 50) -> list[dict[str, float]]:
    """Each Recall replica's ``warm_status`` (snapshots held, hits and loads, resident memory): a
    handle sends each call to one replica, so it asks until every replica has answered once."""
    from ray import serve

    from engram.serve.app import RecallDeployment, recall_app_name

    name = RecallDeployment.name  # type: ignore[attr-defined]
    handle = serve.get_deployment_handle(name, app_name=recall_app_name(settings))
    # Autoscaled replicas come and go; the runs that read these figures fix their number.
    wanted = settings.serve.recall_replicas if settings.serve.recall_autoscaling is None else 1
    by_pid: dict[float, dict[str, float]] = {}
    for _ in range(calls_per_replica * wanted):
        state: dict[str, float] = handle.warm_status.remote().result()
        by_pid[state["pid"]] = state
        if len(by_pid) >= wanted:
            return [by_pid[pid] for pid in sorted(by_pid)]
    raise RuntimeError(f"heard from {len(by_pid)} of {wanted} recall replicas")


def wait_for_warm_snapshots(settings: Settings, limit_s: float = 600.0) -> None:
    """Offer load once every recall replica has warmed its snapshots (steady state, not cold start)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        states = recall_states(settings)
        if all(state["done"] for state in states):
            print(
                f"recall snapshots warm on {len(states)} replica(s): "
                f"{sum(state['users'] for state in states):.0f} users in "
                f"{max(state['seconds'] for state in states):.1f} s, "
                f"{sum(state['cached_bytes'] for state in states) / 2**20:.0f} MiB held",
                file=sys.stderr,
                flush=True,
            )
            return
        time.sleep(1.0)  # a progress poll of a background warm-up, not a correctness wait
    print(f"recall warm-up not finished after {limit_s:.0f} s; load starts anyway", file=sys.stderr)
