"""One Ray + Serve session for the whole e2e run (DESIGN: Ray starts once per test session)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engram.models.settings import Settings
from engram.serve.http_front import prepare_local_front
from engram.serve.ray_start import LOCAL_SYSTEM_CONFIG, init_with_retries
from engram.storage.processes import end_processes
from tests.support.net import free_port
from tests.support.processes import started_since


@dataclass
class RunningApp:
    """The app under test: its base URL and the settings it was built with."""

    url: str
    settings: Settings
    # Ray's metrics export (Engram's, Ray's and Serve's series): tests/e2e/test_metrics.py.
    metrics_url: str = ""


@pytest.fixture(scope="session")
def engram_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningApp]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    data_dir: Path = tmp_path_factory.mktemp("engram-e2e")
    settings = Settings(
        storage={"data_dir": data_dir},
        serve={"port": free_port(), "app_name": "engram-e2e"},
        recall={"timeout_ms": 30_000},  # noisy shared machine; 50401 is tested deterministically
        # Bursts of hundreds of writes for one user are part of these tests; 42903 is tested
        # through the HTTP app (tests/integration/test_rate_limit.py).
        limits={"user_rate_per_s": 0},
        # A run that spans 03:00 UTC must not sweep under the tests; the job is run by the tests
        # themselves (test_lifecycle_e2e.py), the daily loop is tested with a pinned clock.
        lifecycle={"scheduler_enabled": False},
    )
    # The embedded default's HTTP front (HAProxy; tests/distributed runs Ray's proxy), chosen
    # before Ray and Serve start: their processes read it from the environment.
    front = prepare_local_front(settings.serve)
    import ray
    from ray import serve

    from engram.serve.app import deploy

    # Every step is undone on every path: a start that fails half way stops what it started.
    with contextlib.ExitStack() as undo:
        undo.callback(front.close)
        # As many CPUs as the machines this runs on (2): replicas must fit there too.
        metrics_port = free_port()

        def start_ray() -> None:
            ray.init(
                # Always a Ray of its own: never a cluster another run started here (tests/distributed).
                address="local",
                num_cpus=2,
                include_dashboard=False,
                log_to_driver=False,
                namespace="serve",
                _metrics_export_port=metrics_port,
                _system_config=LOCAL_SYSTEM_CONFIG,  # workers at this process's priority, as engram serve's
            )

        # As engram serve does (serve/ray_start.py): a node that timed out starting on a busy
        # machine is ended (what came below this process since) and started again.
        undo.callback(ray.shutdown)
        init_with_retries(start_ray, shutdown=ray.shutdown, leftovers=started_since(), end=end_processes)
        undo.callback(_kill_shards, settings)
        undo.callback(serve.shutdown)
        serve.start(http_options={"host": "127.0.0.1", "port": settings.serve.port})
        deploy(settings)
        yield RunningApp(
            f"http://127.0.0.1:{settings.serve.port}", settings, f"http://127.0.0.1:{metrics_port}/metrics"
        )


def _kill_shards(settings: Settings) -> None:
    import ray

    from engram.models.rules.sharding import shard_name

    for i in range(settings.serve.shard_count):
        with contextlib.suppress(ValueError):  # already gone
            ray.kill(ray.get_actor(shard_name(settings.serve.app_name, i), namespace="serve"))


@contextlib.contextmanager
def redeployed_with_keys(app: RunningApp, keys: Sequence[dict[str, Any]]) -> Iterator[RunningApp]:
    """The session's app updated in place with API keys (no second Ray session), put back after."""
    from engram.serve.app import deploy

    settings = app.settings.model_copy(deep=True)
    settings.auth = settings.auth.model_validate({"api_keys": list(keys)})
    deploy(settings)
    try:
        yield RunningApp(app.url, settings)
    finally:
        deploy(app.settings)
