"""The server process without Ray, for the supervisor's tests (tests/integration/test_supervisor.py).

It uses serve/server_process.py's own stop machinery (the Stopper, the supervisor watch, the sweep
of leftovers) and starts one grandchild in a session of its own, which only the run's marker can
find. ``--mode``:

- ``obedient``: stops on the first signal, ends its leftovers, exits 0;
- ``careless``: stops on the first signal but leaves the grandchild for the supervisor to end;
- ``stubborn``: ignores SIGTERM (a server wedged in its stop);
- ``lingering``: as obedient, with a thread that never ends still running when it exits (as Ray's
  native threads can be after its shutdown);
- ``hidden``: as careless, but the grandchild carries no marker (as a Ray agent that wrote over its
  environment): only its ancestry makes it the run's. Its pid is written to ``<data_dir>/hidden``;
- ``deaf``: as obedient, with the stop signals blocked in the main thread, so that the kernel hands
  every one to another thread (as it may whenever the main thread has a signal pending).

Each signal it receives is appended to ``<data_dir>/signals`` so a test can count them.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import NoReturn

from engram.models.settings import Settings
from engram.serve.server_process import (
    STOP_SIGNALS,
    Stopper,
    StopRequested,
    _end_leftovers,
    exit_now,
    wait_for_stop,
    watch_parent,
)


def main() -> NoReturn:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parent-fd", type=int, required=True)
    modes = ("obedient", "careless", "stubborn", "hidden", "lingering", "deaf")
    parser.add_argument("--mode", choices=modes, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings(storage={"data_dir": args.data_dir}, serve={"stop_grace_s": 0, "stop_timeout_s": 9})
    stopper = Stopper(os.environ["ENGRAM_RUN_ID"], settings.serve.stop_timeout_s)
    log = args.data_dir / "signals"

    def on_signal(signum: int, frame: FrameType | None) -> None:
        with log.open("a") as out:
            out.write(f"{signal.Signals(signum).name}\n")
        if args.mode != "stubborn":
            stopper._on_signal(signum, frame)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    watch_parent(args.parent_fd)
    env = dict(os.environ)
    if args.mode == "hidden":
        env.pop("ENGRAM_RUN_ID")
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    grandchild = subprocess.Popen(sleeper, start_new_session=True, env=env)
    (args.data_dir / "hidden").write_text(str(grandchild.pid))
    if args.mode == "deaf":  # after the watch thread and the grandchild started: neither inherits it
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        # Inside the try, as in the real server: a stop signal can arrive the moment it is printed.
        print("Engram listens on stub", flush=True)
        wait_for_stop()
    except StopRequested:
        pass
    stopper.begin()
    print("stopping Engram ...", file=sys.stderr, flush=True)
    if args.mode in ("obedient", "lingering", "deaf"):
        _end_leftovers(settings, stopper)
    if args.mode == "lingering":
        threading.Thread(target=threading.Event().wait, name="never-ends").start()
    stopper.finished()
    exit_now(0)


if __name__ == "__main__":
    main()
