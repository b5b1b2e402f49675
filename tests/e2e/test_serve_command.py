"""``engram serve`` itself: a failed deployment's reason is printed, and the stop still succeeds (#19)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.net import free_port

pytestmark = pytest.mark.e2e


def test_a_failed_start_prints_the_reason_and_stops_cleanly(tmp_path: Path) -> None:
    # Nothing listens on port 1: every shard start fails, so every Ingress replica fails with it.
    config = tmp_path / "engram.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {
                    "data_dir": str(tmp_path / "data"),
                    "database_url": "postgresql+asyncpg://postgres@127.0.0.1:1/nowhere",
                },
                "serve": {"app_name": "engram-broken", "stop_grace_s": 5},
                "metrics": {"export_port": 0},  # 8080 may be taken on a shared machine
            }
        )
    )
    env = dict(os.environ, ENGRAM_CONFIG=str(config), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "engram.serve.cli", "serve", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
        check=False,
    )
    err = done.stderr
    assert done.returncode == 1, err[-3000:]
    assert "Engram listens" not in done.stdout
    assert "Engram failed to start" in err
    # Serve's reason, which before only reached Ray's log files: the failed deployment and its error.
    # The Recall replica checks the master key against the database at start, so it may be the
    # one that reports the dead database first.
    assert "deployment Ingress: DEPLOY_FAILED" in err or "deployment Recall: DEPLOY_FAILED" in err, err[
        -3000:
    ]
    assert "ConnectionRefusedError" in err or "Connect call failed" in err, err[-3000:]
    # The stop ran to the end although the start never got anywhere.
    assert "stopping Engram" in err
    assert "closing a shard failed" not in err and "stopping Serve failed" not in err, err[-3000:]


def test_engram_sweep_runs_the_job_on_a_local_ray_and_reports(tmp_path: Path) -> None:
    # The job's entry in serve (serve.sweep_job) starts the shards when no app runs, and closes them.
    config = tmp_path / "engram.yaml"
    config.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    env = dict(os.environ, ENGRAM_CONFIG=str(config), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "engram.serve.cli", "sweep", "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["dry_run"] is True and report["totals"]["failed_users"] == 0


def _listeners() -> dict[int, set[str]]:
    """Listening TCP sockets of this machine: port -> the IPv4 addresses bound (``/proc/net/tcp``)."""
    found: dict[int, set[str]] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state != "0A":  # LISTEN
            continue
        address, port = local.split(":")
        ip = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
        found.setdefault(int(port, 16), set()).add(ip)
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


def test_engram_serve_fronts_the_replicas_with_haproxy_on_loopback_and_stops_it(tmp_path: Path) -> None:
    # The embedded default as `make run` starts it, with its HTTP front (serve.http_front: haproxy).
    config = tmp_path / "engram.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"data_dir": str(tmp_path / "data")},
                "serve": {"app_name": "engram-front", "stop_grace_s": 5},
                "metrics": {"export_port": 0},
                "lifecycle": {"scheduler_enabled": False},
            }
        )
    )
    env = dict(os.environ, ENGRAM_CONFIG=str(config), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "engram.serve.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # A start that hangs must fail the test, not the run: the reads below return once it is killed.
    watchdog = threading.Timer(400, server.kill)
    watchdog.start()
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # the first line is printed once both apps are deployed
        while line and "Engram listens" not in line:  # Ray's own notices may come first
            line = server.stdout.readline()
        assert "Engram listens" in line, "engram serve exited before it listened"
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=60) as http:
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
            found = http.post(
                "/memory/v1/recall", json={"user_id": "front-u1", "query": "front door code"}
            ).json()
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
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=180)
        watchdog.cancel()
    assert server.returncode == 0, err[-3000:]
    assert "stopping Engram" in err
    # Nothing left behind: no HAProxy process, no directory of its files.
    assert not _haproxy_pids(haproxy_config)
    assert not haproxy_config.parent.parent.exists()
