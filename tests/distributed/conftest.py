"""The distributed profile, for real, on this machine: a 2-node Ray cluster on loopback, PostgreSQL,
a Milvus standalone server, 4 shard actors spread over both nodes and 2 Recall replicas.

One cluster for the whole run (``pytest --distributed tests/distributed``, a run of its own: a
process holds one Ray session, and the rest of the suite runs on a local one). The e2e subset
(``test_e2e_subset.py``) runs the e2e suite's own tests against it through the ``engram_app``
fixture defined here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from engram.models.settings import Settings, load_settings
from engram.serve.ray_start import LOCAL_SYSTEM_CONFIG, init_with_retries
from engram.storage.milvus_server import MilvusServerProcess, start_milvus_server
from engram.storage.processes import end_processes
from tests.conftest import POSTGRES_URL
from tests.e2e.conftest import RunningApp
from tests.support.machine_lock import machine_lock
from tests.support.net import free_port
from tests.support.processes import started_since

DATABASE = os.environ.get("ENGRAM_TEST_DISTRIBUTED_DB", "engram_distributed")
SHARDS = 4  # cluster/distributed.yaml's serve.shard_count (checked when the app starts)
RECALL_REPLICAS = 2  # its recall_autoscaling.min_replicas
# Each node claims more logical CPUs than the machine has cores: placement counts them, the
# actors mostly wait on I/O, and two nodes of 2 could not hold 4 shards, 2 replicas and the rest.
NODE_CPUS = 6
# Nodes joining on a loaded 2-core machine (Ray's default wait is 30 s).
NODE_START_S = 180


@dataclass
class DistributedCluster:
    """The running profile: the Ray test cluster, its worker node, the services and the app."""

    cluster: Any
    worker: Any
    milvus: MilvusServerProcess
    database_url: str
    app: RunningApp
    master_key_env: str
    extra_nodes: list[Any] = field(default_factory=list)


def _fresh_database() -> str:
    """A PostgreSQL database of the profile's own, emptied; returns its SQLAlchemy async URL."""

    async def reset() -> None:
        engine = create_async_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
        async with engine.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'))
            await conn.execute(text(f'CREATE DATABASE "{DATABASE}"'))
        await engine.dispose()

    asyncio.run(reset())
    return str(make_url(POSTGRES_URL).set(database=DATABASE).render_as_string(hide_password=False))


PROFILE = Path(__file__).resolve().parents[2] / "cluster" / "distributed.yaml"


def distributed_settings(data_dir: Path, database_url: str, milvus_uri: str, port: int) -> Settings:
    """cluster/distributed.yaml itself, pointed at this run's services and a test's tolerances."""
    profile = load_settings(PROFILE)
    storage = profile.storage.model_copy(
        update={"data_dir": data_dir, "database_url": database_url, "milvus_uri": milvus_uri}
    )
    # The profile's Ray wants token authentication; this one runs both nodes on one machine with it
    # off (as the rest of the suite's Ray), which a cluster profile allows only when told so.
    serve = profile.serve.model_copy(
        update={"port": port, "app_name": "engram-dist", "allow_unauthenticated_ray": True}
    )
    return profile.model_copy(
        update={
            "storage": storage,
            "serve": serve,
            "recall": profile.recall.model_copy(update={"timeout_ms": 30_000}),
            "limits": profile.limits.model_copy(update={"user_rate_per_s": 0}),
            "lifecycle": profile.lifecycle.model_copy(update={"scheduler_enabled": False}),
        }
    )


@pytest.fixture(scope="session")
def distributed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DistributedCluster]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with machine_lock("milvus-server"):
        yield from _run_profile(tmp_path_factory)


def _run_profile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DistributedCluster]:
    import ray

    from engram.serve.app import deploy

    root = tmp_path_factory.mktemp("engram-distributed")
    database_url = _fresh_database()
    # Each resource is handed to the stack the moment it exists, so a start that fails half way
    # (a cluster that times out on a loaded machine) still stops the Milvus server and the rest.
    with contextlib.ExitStack() as undo:
        milvus = start_milvus_server(root / "milvus", port=free_port())
        undo.callback(milvus.stop)
        # The one master key of the cluster, given to every node's processes through their
        # environment (storage.key_provider: secret), as a Kubernetes Secret would be.
        key_env = "ENGRAM_MASTER_KEY"
        os.environ[key_env] = base64.b64encode(secrets.token_bytes(32)).decode()
        cluster, worker = _start_cluster()
        undo.callback(cluster.shutdown)
        settings = distributed_settings(root / "data", database_url, milvus.uri, free_port())
        autoscaling = settings.serve.recall_autoscaling
        assert settings.serve.shard_count == SHARDS and settings.storage.key_provider == "secret"
        assert autoscaling is not None and autoscaling.min_replicas == RECALL_REPLICAS
        ray.init(address=cluster.address, namespace="serve", log_to_driver=False)
        undo.callback(ray.shutdown)
        undo.callback(_kill_shards, settings)
        undo.callback(_shutdown_serve)
        _start_serve(settings.serve.port)
        deploy(settings)
        _wait_for_proxy(settings.serve.port)
        yield DistributedCluster(
            cluster,
            worker,
            milvus,
            database_url,
            RunningApp(f"http://127.0.0.1:{settings.serve.port}", settings),
            key_env,
        )


def _start_cluster() -> tuple[Any, Any]:
    """The 2-node cluster (head, worker); started again when a node timed out starting on a busy
    machine (as ``engram serve`` does, serve/ray_start.py), ending that try's processes but
    never the Milvus server."""
    from ray.cluster_utils import Cluster

    tries: list[Any] = []
    started: list[Any] = []

    def start() -> None:
        cluster = Cluster()
        tries.append(cluster)
        started.clear()
        # The head's system config reaches every node (workers at this process's priority).
        cluster.add_node(
            num_cpus=NODE_CPUS, include_dashboard=False, wait=False, _system_config=LOCAL_SYSTEM_CONFIG
        )
        started.append(cluster.add_node(num_cpus=NODE_CPUS, wait=False))
        cluster.wait_for_nodes(timeout=NODE_START_S)

    leftovers = started_since()  # never the Milvus server, started before
    try:
        init_with_retries(
            start, shutdown=lambda: tries[-1].shutdown(), leftovers=leftovers, end=end_processes
        )
    except BaseException:
        if tries:
            tries[-1].shutdown()
        end_processes(leftovers(), grace_s=2.0)
        raise
    return tries[-1], started[0]


def _start_serve(port: int, tries: int = 3) -> None:
    """Serve with one HTTP proxy, on the head (two nodes on one machine cannot both bind the port).

    ``serve.start`` waits a fixed 60 s (Ray's HTTP_PROXY_TIMEOUT) for the proxy; under two busy
    loops the controller gave up on a proxy still starting and killed it (ActorDiedError in the
    session's setup, #26). The controller lives on and starts another: a later call finds it and
    returns, and ``_wait_for_proxy`` waits for that proxy, as long as a loaded machine needs."""
    import ray
    from ray import serve

    for attempt in range(1, tries + 1):
        try:
            serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
            return
        except (ray.exceptions.ActorDiedError, TimeoutError):
            if attempt == tries:
                raise


def _wait_for_proxy(port: int, timeout_s: float = 300.0) -> None:
    """Until the app answers through the head's HTTP proxy (its /healthz)."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"Serve's HTTP proxy did not answer on port {port} within {timeout_s:.0f} s")
        time.sleep(0.5)  # polls a proxy that Serve's controller is (re)starting


def _shutdown_serve() -> None:
    from ray import serve

    with contextlib.suppress(Exception):
        serve.shutdown()


def _kill_shards(settings: Settings) -> None:
    import ray

    from engram.serve.shard import shard_options

    for i in range(settings.serve.shard_count):
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(shard_options(settings, i)["name"], namespace="serve"))


@pytest.fixture(scope="session")
def engram_app(distributed: DistributedCluster) -> RunningApp:
    """The e2e suite's app fixture, here the distributed profile's app."""
    return distributed.app
