"""cluster/systemd/engram.service runs Engram and stops it within its timeout (issue #26).

Where systemd runs (PID 1), the unit's own settings go to ``systemd-run`` and ``systemctl stop``.
Elsewhere (this kind of machine, containers) a stand-in does what the unit tells systemd to do:
start ``ExecStart`` with the unit's environment, send ``KillSignal`` to the main process only
(``KillMode=mixed``), wait up to ``TimeoutStopSec``; the test then checks that nothing of the run
was left for systemd's final SIGKILL of the unit.
"""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from engram.loadtest.stops import ServeRun
from engram.models.settings import Settings
from engram.serve.supervisor import FORCE_MARGIN_S
from tests.support.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.own_service]

UNIT = Path(__file__).resolve().parents[2] / "cluster" / "systemd" / "engram.service"
INSTALLED_VENV = "/opt/engram/.venv"


def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd's keys are case-sensitive
    unit.read(UNIT)
    return unit


def _seconds(value: str) -> float:
    return float(value.removesuffix("s"))


def test_the_unit_stops_engram_alone_and_waits_longer_than_its_stop() -> None:
    service = _unit()["Service"]
    assert service["KillMode"] == "mixed", "SIGTERM must reach engram serve only, never Ray's processes"
    assert service["KillSignal"] == "SIGTERM"
    bound = Settings().serve.stop_timeout_s + FORCE_MARGIN_S
    assert _seconds(service["TimeoutStopSec"]) > bound
    assert service["ExecStart"].endswith("/bin/engram serve")
    assert "2" in service["RestartPreventExitStatus"].split(), "a refused start is not retried"


def _config(tmp_path: Path) -> tuple[Path, list[int]]:
    ports = [free_port(), free_port()]
    config = tmp_path / "engram.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"data_dir": str(tmp_path / "data")},
                "serve": {"port": ports[0]},
                "metrics": {"export_port": ports[1]},
                "lifecycle": {"scheduler_enabled": False},
            }
        )
    )
    return config, ports


def _exec_start(service: configparser.SectionProxy) -> list[str]:
    return [a.replace(INSTALLED_VENV, sys.prefix) for a in shlex.split(service["ExecStart"])]


def _systemd_runs() -> bool:
    return Path("/run/systemd/system").is_dir() and shutil.which("systemd-run") is not None


def test_engram_runs_and_stops_cleanly_under_the_unit(tmp_path: Path) -> None:
    service = _unit()["Service"]
    config, ports = _config(tmp_path)
    timeout_s = _seconds(service["TimeoutStopSec"])
    if _systemd_runs():
        _under_systemd(service, config, ports, timeout_s)
        return
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    for assignment in service.get("Environment", "").split():
        name, value = assignment.split("=", 1)
        env[name] = str(config) if name == "ENGRAM_CONFIG" else value
    run = ServeRun(_exec_start(service), tmp_path / "data", ports, env)
    try:
        assert run.wait_listening(400), run.output.text()[-3000:]
        assert run.supervisor_pid() == run.process.pid, "ExecStart's process is engram serve itself"
        run.snapshot()
        stopped_at = time.monotonic()
        run.stop("sigterm-serve")  # KillMode=mixed: KillSignal to the main process only
        left = run.wait_gone(timeout_s)
        took = time.monotonic() - stopped_at
        assert not left, f"left for systemd's SIGKILL after {took:.0f} s: {left}\n{run.output.text()[-3000:]}"
        assert run.process.returncode == 0, "systemd would record the stop as a failure"
    finally:
        run.kill_everything()


def _under_systemd(
    service: configparser.SectionProxy, config: Path, ports: list[int], timeout_s: float
) -> None:
    name = f"engram-test-{uuid.uuid4().hex[:8]}"
    properties = [
        f"--property={key}={service[key]}" for key in ("Type", "KillMode", "KillSignal", "TimeoutStopSec")
    ]
    environment = [f"--setenv=ENGRAM_CONFIG={config}", "--setenv=RAY_AUTH_MODE=disabled"]
    subprocess.run(
        [
            "systemd-run",
            f"--unit={name}",
            "--property=CollectMode=inactive-or-failed",
            *properties,
            *environment,
            *_exec_start(service),
        ],
        check=True,
    )
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{ports[0]}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)  # polling the start, bounded
        else:
            raise AssertionError("the unit never answered")
        subprocess.run(["systemctl", "stop", name], check=True, timeout=timeout_s + 30)
        result = subprocess.run(
            ["systemctl", "show", "-p", "Result", "--value", name],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        assert result in ("success", ""), result  # "": already collected after a clean stop
    finally:
        subprocess.run(["systemctl", "kill", "--signal=SIGKILL", name], check=False, capture_output=True)
