"""The README's first command (``make run``) as the stop and crash tests start it: a fresh data
directory, its own ports, a process group of its own as a terminal gives it (issue #26)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from engram.loadtest.stops import ServeRun
from tests.support.net import free_port

REPO = Path(__file__).resolve().parents[2]
START_LIMIT_S = 400  # a start on a loaded 2-core machine; a hang fails the test, not the run
GONE_WITHIN_S = 30  # the bar


def run_config(tmp_path: Path) -> tuple[Path, Path, list[int]]:
    """A settings file for a run in ``tmp_path``: (its path, the data directory, [port, metrics port])."""
    data_dir = tmp_path / "data"
    ports = [free_port(), free_port()]
    config = tmp_path / "engram.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"data_dir": str(data_dir)},
                "serve": {"port": ports[0]},
                "metrics": {"export_port": ports[1]},
                "limits": {"user_rate_per_s": 0},  # bursts of writes for one user
                "lifecycle": {"scheduler_enabled": False},
            }
        )
    )
    return config, data_dir, ports


def make_run(config: Path, data_dir: Path, ports: list[int]) -> ServeRun:
    """``make run`` with the test's venv, in a process group of its own."""
    env = dict(os.environ, ENGRAM_CONFIG=str(config), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    argv = ["make", "--no-print-directory", "-C", str(REPO), "run", f"VENV={sys.prefix}"]
    return ServeRun(argv, data_dir, ports, env)


def start(config: Path, data_dir: Path, ports: list[int]) -> ServeRun:
    """``make run`` until it listens; a start that never does fails the test, leaving nothing."""
    run = make_run(config, data_dir, ports)
    if not run.wait_listening(START_LIMIT_S):
        run.kill_everything()
        raise AssertionError("make run never listened:\n" + run.output.text()[-4000:])
    return run


def stop_cleanly(run: ServeRun) -> None:
    """SIGTERM to the group; nothing of the run may be left within the bar."""
    run.snapshot()
    run.stop("sigterm-group")
    left = run.wait_gone(GONE_WITHIN_S)
    assert not left, f"{left}\n{run.output.text()[-3000:]}"
