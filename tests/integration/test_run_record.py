"""storage/run_record.py: the data directory's lock and the record of the run that holds it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engram.storage.processes import read_process
from engram.storage.run_record import (
    RunLock,
    RunRecord,
    read_record,
    record_path,
    remove_record,
    write_record,
)

pytestmark = pytest.mark.integration


def test_the_lock_is_held_until_its_holder_dies_however_it_dies(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from engram.storage.run_record import RunLock;"
            " lock = RunLock(Path(sys.argv[1])); assert lock.try_acquire(); print('held', flush=True);"
            " time.sleep(600)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        lock = RunLock(tmp_path)
        assert not lock.try_acquire()
        assert not lock.acquire_within(0.3)
        holder.kill()  # no clean-up runs: the kernel lets go of the lock
        holder.wait()
        assert lock.acquire_within(5)
        lock.close()
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_record_names_live_processes_only_with_their_start_time(tmp_path: Path) -> None:
    me = read_process(os.getpid())
    assert me is not None
    record = RunRecord("r1", me.pid, me.start, 8000, 8080, server_pid=me.pid, server_start=me.start + 1)
    write_record(tmp_path, record)
    again = read_record(tmp_path)
    assert again == record
    assert again.supervisor() is not None
    assert again.server() is None, "the pid is alive, but it is not the process recorded"
    remove_record(tmp_path)
    assert read_record(tmp_path) is None
    remove_record(tmp_path)  # twice is fine


def test_an_unreadable_record_is_nothing_to_go_by(tmp_path: Path) -> None:
    record_path(tmp_path).write_text("{ not json")
    assert read_record(tmp_path) is None
    record_path(tmp_path).write_text('{"run_id": "r1"}')
    assert read_record(tmp_path) is None
