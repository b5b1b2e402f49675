"""storage/processes.py against the real kernel: processes found by their run's marker, pinned by
their start time, ended with SIGKILL past a grace, port holders named, parent-death signals."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from engram.storage.processes import (
    RUN_ID_ENV,
    descendants,
    end_processes,
    end_until_none,
    environment_value,
    is_alive,
    listening_pids,
    processes_marked,
    processes_of_run,
    read_process,
)

pytestmark = pytest.mark.integration

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(600)"
)


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    children: list[subprocess.Popen[bytes]] = []
    yield children
    for child in children:
        if child.poll() is None:
            child.kill()
            child.wait()


def _marked_child(run_id: str, code: str = IGNORES_SIGTERM) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        env=dict(os.environ, **{RUN_ID_ENV: run_id}),
        stdout=subprocess.PIPE,
        start_new_session=True,  # another session and group: only the marker finds it
    )
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    return child


def test_a_pid_is_trusted_only_with_its_start_time() -> None:
    me = read_process(os.getpid())
    assert me is not None and me.pid == os.getpid() and me.ppid == os.getppid()
    assert me.sid == os.getsid(0) and me.pgid == os.getpgid(0)
    assert is_alive(me)
    # The same pid with another start time is another process: never signalled as this one.
    assert not is_alive(dataclasses.replace(me, start=me.start + 1))
    assert read_process(2**22 + 7) is None


def test_the_run_marker_finds_a_process_in_any_session(spawned: list[subprocess.Popen[bytes]]) -> None:
    child = _marked_child("run-a")
    spawned.append(child)
    other = _marked_child("run-b")
    spawned.append(other)
    assert [p.pid for p in processes_of_run("run-a")] == [child.pid]
    assert environment_value(child.pid, RUN_ID_ENV) == "run-a"
    assert processes_of_run("run-a", exclude=[child.pid]) == []
    assert processes_marked(RUN_ID_ENV, "") == [], "an empty run id matches nothing"


def test_a_process_that_ignores_sigterm_is_killed_past_the_grace(
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    child = _marked_child("run-stubborn")
    spawned.append(child)
    began = time.monotonic()
    ended = end_processes(processes_of_run("run-stubborn"), grace_s=0.5)
    assert [p.pid for p in ended] == [child.pid]
    assert child.wait(timeout=10) == -signal.SIGKILL
    assert time.monotonic() - began >= 0.5
    assert end_processes(ended, grace_s=0.5) == [], "an ended process is not signalled again"


def test_the_holder_of_a_listening_port_is_named() -> None:
    with socket.socket() as four, socket.socket(socket.AF_INET6) as six:
        four.bind(("127.0.0.1", 0))
        four.listen()
        port = four.getsockname()[1]
        assert listening_pids(port) == {os.getpid(): read_process(os.getpid()).name}  # type: ignore[union-attr]
        six.bind(("::1", 0))
        six.listen()
        assert os.getpid() in listening_pids(six.getsockname()[1])
    assert listening_pids(port) == {}


def test_a_child_with_a_parent_death_signal_dies_with_its_parent() -> None:
    # A parent that starts such a child, says its pid, and waits; then the parent is SIGKILLed.
    parent_code = (
        "import subprocess, sys, time\n"
        "from engram.storage.processes import parent_death_signal\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
        " preexec_fn=parent_death_signal, start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        child = read_process(int(parent.stdout.readline()))
        assert child is not None and is_alive(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while is_alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)  # the kernel signals it at the parent's death; bounded
        assert not is_alive(child), "the child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_session_its_server_leads_finds_a_process_whose_environment_says_nothing(
    spawned: list[subprocess.Popen[bytes]],
) -> None:
    # A session leader (the run's server) whose child carries no marker: as a Ray agent whose
    # setproctitle overwrote its environment's memory.
    leader_code = (
        "import os, subprocess, sys, time\n"
        "env = {k: v for k, v in os.environ.items() if k != 'ENGRAM_RUN_ID'}\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], env=env)\n"
        "print('ready', flush=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    leader = _marked_child("run-s", leader_code)
    spawned.append(leader)
    assert leader.stdout is not None
    unmarked = int(leader.stdout.readline())
    info = read_process(leader.pid)
    assert info is not None and info.sid == leader.pid
    assert [p.pid for p in processes_of_run("run-s")] == [leader.pid]
    found = {p.pid for p in processes_of_run("run-s", leader=(leader.pid, info.start))}
    assert found == {leader.pid, unmarked}
    # The pid recorded with another start time is another process's now: its session is not the run's.
    # (pids compared: a process's state, R or S, may change between two reads)
    assert {p.pid for p in processes_of_run("run-s", leader=(leader.pid, info.start + 1))} == {leader.pid}
    end_processes(processes_of_run("run-s", leader=(leader.pid, info.start)), grace_s=1)


def test_descendants_are_the_children_and_theirs(spawned: list[subprocess.Popen[bytes]]) -> None:
    # A shell that starts a grandchild and waits: the failed Ray start's processes look like this.
    # "started" only once the forked grandchild has exec'd sleep: before that it is still named sh.
    script = 'sleep 600 & pid=$!; until [ "$(cat /proc/$pid/comm)" = sleep ]; do :; done; echo started; wait'
    child = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE)
    spawned.append(child)
    assert child.stdout is not None and child.stdout.readline() == b"started\n"
    found = descendants(os.getpid())
    shell = [p for p in found if p.pid == child.pid]
    assert shell, found
    grandchildren = [p for p in found if p.ppid == child.pid]
    assert [p.name for p in grandchildren] == ["sleep"]
    assert found.index(shell[0]) < found.index(grandchildren[0])  # parents first
    # Only this test's own: the run's session fixtures (servers) are descendants of pytest too.
    end_processes([*shell, *grandchildren], grace_s=5)
    assert not [p for p in (*shell, *grandchildren) if is_alive(p)]


def test_what_starts_while_a_run_is_ended_is_ended_too(spawned: list[subprocess.Popen[bytes]]) -> None:
    # The raylet starts a worker between the look and the signal: the next look finds it.
    first = _marked_child("run-forking")
    spawned.append(first)
    late: list[subprocess.Popen[bytes]] = []

    def find() -> list:  # type: ignore[type-arg]
        found = processes_marked(RUN_ID_ENV, "run-forking")
        if not late:  # the first look misses the late one: it starts after
            late.append(_marked_child("run-forking"))
            spawned.append(late[0])
        return found

    ended = end_until_none(find, grace_s=0.5)
    assert {p.pid for p in ended} == {first.pid, late[0].pid}
    assert first.wait(timeout=10) == -signal.SIGKILL and late[0].wait(timeout=10) == -signal.SIGKILL
    assert end_until_none(find, grace_s=0.5) == []
