"""The embedded default listens on loopback only, every process and port (SPEC P7, issue #27),
and runs its Ray workers at the priority it was started with (issue #26).

The README's first command (``make run``) on a fresh data directory: once it listens, every
listening socket (TCP and UDP, IPv4 and IPv6) held by a process of the run, the supervisor, its
descendants and Ray's processes in sessions of their own (found by the run's id and its server's
session, as a stop finds them), is bound to a loopback address. One run serves both tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from engram.loadtest.stops import ServeRun
from tests.e2e.make_run import run_config, start, stop_cleanly
from tests.support.sockets import listeners_of

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeRun]:
    config, data_dir, ports = run_config(tmp_path_factory.mktemp("embedded"))
    started = start(config, data_dir, ports)
    try:
        yield started
        stop_cleanly(started)
    finally:
        started.kill_everything()


def test_every_socket_of_the_embedded_default_is_on_loopback(run: ServeRun) -> None:
    processes = run.snapshot()
    listeners = listeners_of((p.pid, p.name) for p in processes)
    report = "\n".join(str(listener) for listener in listeners)
    print(f"{len(processes)} processes of the run listen on:\n{report}")
    # The scan sees the run: the HTTP front and the metrics exporter are among its sockets.
    held = {listener.port for listener in listeners}
    assert set(run.ports) <= held, f"ports {run.ports} not found among the run's sockets:\n{report}"
    assert len(listeners) > len(run.ports), report  # Ray's own (GCS, raylet, workers) are there too
    exposed = [str(listener) for listener in listeners if not listener.is_loopback()]
    assert not exposed, "listening beyond loopback:\n" + "\n".join(exposed)


def test_the_replicas_and_shards_run_at_the_priority_the_service_was_started_with(run: ServeRun) -> None:
    """Ray nices its workers by 15 unless told otherwise: beside any busy process the service then
    gets a sliver of the CPU (serve/ray_start.py, ``LOCAL_SYSTEM_CONFIG``)."""
    processes = run.snapshot()
    started_at = os.getpriority(os.PRIO_PROCESS, 0)  # make run inherits this process's niceness
    workers = {p.pid: p.name for p in processes if p.name.startswith("ray::")}
    assert any("Shard" in name for name in workers.values()), workers  # the scan sees the workers
    niced = {}
    for pid, name in workers.items():
        try:
            niceness = os.getpriority(os.PRIO_PROCESS, pid)
        except ProcessLookupError:
            continue  # a worker that ended since the scan
        if niceness != started_at:
            niced[name] = niceness
    assert not niced, f"workers not at the starter's niceness {started_at}: {niced}"
