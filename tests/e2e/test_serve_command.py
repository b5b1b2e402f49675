"""``engram serve`` itself: a failed deployment's reason is printed, and the stop still succeeds (#19);
``engram sweep`` on a local Ray. HAProxy in front of a running service: test_embedded_run.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.own_service]


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
