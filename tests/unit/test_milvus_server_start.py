"""The start loop of the local Milvus server: a start that never answers is stopped and made again,
and a stop asked for during the start stops what was started (the binary itself runs in
tests/integration/test_milvus_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.storage import milvus_server
from engram.storage.milvus_server import MilvusServerError, MilvusServerProcess, start_milvus_server

pytestmark = pytest.mark.unit


class FakeProcess:
    """A launcher process that keeps running until stopped."""

    def __init__(self) -> None:
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


class Launches:
    """Stands in for ``_launch`` and ``_ready``: launch ``answering`` is the first that answers."""

    def __init__(self, answering: int) -> None:
        self.answering = answering
        self.made: list[MilvusServerProcess] = []
        self.stopped: list[int] = []

    def launch(self, data_dir: Path, port: int) -> MilvusServerProcess:
        server = MilvusServerProcess(f"http://127.0.0.1:{port}", data_dir, FakeProcess())  # type: ignore[arg-type]
        index = len(self.made)
        server.stop = lambda grace_s=10.0: self.stopped.append(index)  # type: ignore[method-assign]
        self.made.append(server)
        return server

    def ready(self, port: int) -> bool:
        return len(self.made) - 1 >= self.answering


def patched(monkeypatch: pytest.MonkeyPatch, answering: int) -> Launches:
    """Launches that stand in for the binary; the first to answer is number ``answering``."""
    launches = Launches(answering)
    monkeypatch.setattr(milvus_server, "_launch", launches.launch)
    monkeypatch.setattr(milvus_server, "_ready", launches.ready)
    return launches


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(milvus_server, "_pause", lambda _s: None)
    ticks = iter(range(0, 10_000))
    monkeypatch.setattr(milvus_server, "_clock", lambda: float(next(ticks)))


def test_a_start_that_never_answers_is_stopped_and_made_again(
    fast: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    launches = patched(monkeypatch, answering=1)
    server = start_milvus_server(tmp_path, 19999, timeout_s=500, attempt_s=20)
    assert server is launches.made[1]
    assert launches.stopped == [0]  # the silent first launch went before the second was made


def test_no_answer_within_the_timeout_is_an_error_and_leaves_nothing_running(
    fast: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    launches = patched(monkeypatch, answering=99)
    with pytest.raises(MilvusServerError, match="did not answer on port 19999"):
        start_milvus_server(tmp_path, 19999, timeout_s=100, attempt_s=30)
    assert len(launches.made) >= 2
    assert launches.stopped == list(range(len(launches.made)))


def test_a_stop_asked_for_during_the_start_stops_the_server(
    fast: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    launches = patched(monkeypatch, answering=99)
    asked = iter([False, False, True])
    with pytest.raises(MilvusServerError, match="stopped while"):
        start_milvus_server(tmp_path, 19999, should_stop=lambda: next(asked))
    assert launches.stopped == [0]
