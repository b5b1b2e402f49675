"""A Milvus standalone server and its metadata database for a test run, started as an operator
would: ``engram dev-services``, stopped with SIGTERM, nothing left behind."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import POSTGRES_URL
from tests.support.net import free_port


def _first_line(stream: object, timeout_s: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()  # type: ignore[attr-defined]
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        raise AssertionError(f"engram dev-services printed nothing within {timeout_s:.0f} s") from None


def dev_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start ``engram dev-services``, yield its Milvus URI, stop it with SIGTERM and check that
    the server went with it."""
    data = tmp_path_factory.mktemp("milvus-server")
    database = str(make_url(POSTGRES_URL).set(database="engram_dev_services_test").render_as_string(False))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engram.serve.cli",
            "dev-services",
            "--data",
            str(data),
            "--milvus-port",
            str(free_port()),
            "--database-url",
            database,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        started = json.loads(_first_line(process.stdout, 240))
        assert "error" not in started, started
        assert started["database_url"] == "postgresql+asyncpg"  # no credentials printed
        yield str(started["milvus_uri"])
    finally:
        # SIGTERM (what kill, systemd and container runtimes send) once left both running.
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    assert code == 0
    # The server binary went with it (its process group was stopped, not only the launcher).
    left = subprocess.run(["pgrep", "-f", str(data)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == ""
