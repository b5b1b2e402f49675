"""A local Ray start that ran out of Ray's wait for its raylet or its GCS is ended and tried again (#26)."""

from __future__ import annotations

import pytest

from engram.serve.ray_start import init_with_retries
from engram.storage.processes import ProcessInfo

pytestmark = pytest.mark.unit

RAY_TIMEOUT = Exception(
    "The current node timed out during startup. This could happen because some of the raylet "
    "failed to startup or the GCS has become overloaded."
)
# The GCS did not publish its port within RAY_gcs_server_port_wait_time_s (#26's distributed setup
# beside two busy loops).
GCS_TIMEOUT = RuntimeError(
    "Timed out waiting for file /tmp/ray/session_2026-12-06_10-25-23_065096_5880/gcs_server_port_e7ad1"
)
LEFT = [ProcessInfo(pid=4242, ppid=1, pgid=4242, sid=4242, start=1, state="S", name="gcs_server")]


class Tries:
    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls: list[str] = []

    def init(self) -> None:
        self.calls.append("init")
        if self.failures:
            raise self.failures.pop(0)

    def retries(self, attempts: int = 3) -> None:
        init_with_retries(
            self.init,
            shutdown=lambda: self.calls.append("shutdown"),
            leftovers=lambda: LEFT,
            end=lambda processes: self.calls.append(f"end {[p.pid for p in processes]}"),
            attempts=attempts,
        )


def test_a_raylet_timeout_ends_that_try_and_starts_again(capsys: pytest.CaptureFixture[str]) -> None:
    tries = Tries(RAY_TIMEOUT, RAY_TIMEOUT)
    tries.retries()
    assert tries.calls == ["init", "shutdown", "end [4242]", "init", "shutdown", "end [4242]", "init"]
    assert "starting it again (2 of 3)" in capsys.readouterr().err


def test_the_last_timeout_and_any_other_error_are_raised() -> None:
    tries = Tries(RAY_TIMEOUT, RAY_TIMEOUT)
    with pytest.raises(Exception, match="timed out during startup"):
        tries.retries(attempts=2)
    assert tries.calls.count("init") == 2
    other = Tries(RuntimeError("port in use"))
    with pytest.raises(RuntimeError, match="port in use"):
        other.retries()
    assert other.calls == ["init"]


def test_a_gcs_that_never_published_its_port_is_started_again() -> None:
    tries = Tries(GCS_TIMEOUT, RAY_TIMEOUT)
    tries.retries()
    assert tries.calls == ["init", "shutdown", "end [4242]", "init", "shutdown", "end [4242]", "init"]
