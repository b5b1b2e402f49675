"""One run of the README's first command (``make run``) on a fresh data directory, beside the
session's app, looked at from every side; one start serves every test here (each start costs the
suite about a minute, and CI's whole run is bounded, .ci/run).

- Every listening socket (TCP and UDP, IPv4 and IPv6) held by a process of the run (the supervisor,
  its descendants, Ray's processes in sessions of their own, found by the run's id and its server's
  session, as a stop finds them) is bound to a loopback address (SPEC P7, issue #27).
- Ray's workers run at the priority the service was started with (issue #26).
- Two runs on one machine take none of each other's traffic (issue #26). Serve's fallback proxy
  binds a fixed port (8500) with SO_REUSEPORT: while both instances had it, the kernel handed a
  request that HAProxy sent there to either instance, and a task one of them acknowledged was "no
  such task" at the other.
- HAProxy fronts the replicas, on loopback, and the stop ends it and removes its files (#19).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engram.loadtest.stops import ServeRun
from engram.storage.processes import all_processes
from tests.e2e.conftest import RunningApp
from tests.e2e.make_run import run_config, start, stop_cleanly
from tests.support.sockets import listeners_of, socket_table

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def run(engram_app: RunningApp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeRun]:
    """The run, started while the session's app is up (the side-by-side case needs both)."""
    config, data_dir, ports = run_config(tmp_path_factory.mktemp("embedded"))
    started = start(config, data_dir, ports)
    try:
        yield started
        if started.process.poll() is None:  # the last test stops it; run alone, a test may not
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


def test_a_second_run_listens_on_no_port_of_the_first(engram_app: RunningApp, run: ServeRun) -> None:
    # Everyone first, the run's own after: a process the run starts in between (HAProxy's graceful
    # reload starts a new HAProxy, for a moment still named python3 by its wrapper) is then its own,
    # not another's holding its ports.
    everyone = all_processes()
    ours = run.snapshot()
    pids = {p.pid for p in ours}
    mine = listeners_of((p.pid, p.name) for p in ours)
    others = listeners_of((p.pid, p.name) for p in everyone if p.pid not in pids)
    # Both instances are seen: each one's HTTP front is among its listeners.
    assert run.ports[0] in {m.port for m in mine}, "\n".join(map(str, mine))
    assert engram_app.settings.serve.port in {o.port for o in others}, "\n".join(map(str, others))
    shared = [f"{m}  and  {o}" for m in mine for o in others if m.shares_port_with(o)]
    assert not shared, "the run listens where another process does:\n" + "\n".join(shared)


def _listeners() -> dict[int, set[str]]:
    """Listening IPv4 TCP sockets of this machine: port -> the addresses bound."""
    found: dict[int, set[str]] = {}
    for table, address, port in socket_table().values():
        if table == "tcp":
            found.setdefault(port, set()).add(address)
    return found


def _haproxy_pids(config: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            # HAProxy runs on the loopback copy of Serve's file (serve/haproxy_loopback.py), named after it.
            if args and args[0].endswith(b"haproxy") and any(a.startswith(bytes(config)) for a in args):
                pids.append(int(proc.name))
    return pids


def test_haproxy_fronts_the_replicas_on_loopback_and_the_stop_ends_it(run: ServeRun) -> None:
    """Last here: it stops the run."""
    port = run.ports[0]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        assert http.get("/healthz").status_code == 200
        added = http.post(
            "/memory/v1/add_structured",
            json={
                "user_id": "front-u1",
                "ownership": "USER",
                "mem_type": "SEMANTIC",
                "content": "The front door code is 4417.",
                "sync": True,
            },
        ).json()
        assert added["code"] == 0, added
        # Recall is its own application behind the same front (its own route prefix).
        query = {"user_id": "front-u1", "query": "front door code"}
        found = http.post("/memory/v1/recall", json=query).json()
        assert found["code"] == 0, found
        assert added["data"]["memory_id"] in [m["memory_id"] for m in found["data"]["memories"]]
        bad = http.post("/memory/v1/recall", json={"user_id": "front-u1"})
        assert bad.status_code == 400 and bad.json()["code"] == 40001
    # Ray writes each node's HAProxy files in a directory named by the node.
    configs = list(Path("/tmp").glob("engram-hp-*/*/haproxy.cfg"))
    mine = [c for c in configs if f"127.0.0.1:{port}" in c.read_text()]
    assert len(mine) == 1, configs
    haproxy_config = mine[0]
    assert _haproxy_pids(haproxy_config), "HAProxy is the process answering"
    # Each replica's own HTTP server (HAProxy's servers) listens on loopback only, as serve.host says.
    servers = re.findall(r"server \S+ 127\.0\.0\.1:(\d+)", haproxy_config.read_text())
    replica_ports = {int(p) for p in servers}
    assert len(replica_ports) >= 2, haproxy_config.read_text()  # the Ingress and the Recall replica
    listening = _listeners()
    assert all(listening.get(p) == {"127.0.0.1"} for p in replica_ports), (replica_ports, listening)
    assert listening.get(port) == {"127.0.0.1"}

    stop_cleanly(run)
    assert "stopping Engram" in run.output.text()
    # Nothing left behind: no HAProxy process, no directory of its files.
    assert not _haproxy_pids(haproxy_config)
    assert not haproxy_config.parent.parent.exists()
