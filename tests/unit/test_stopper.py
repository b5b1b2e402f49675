"""The server's stop signals (serve/server_process.py ``Stopper``): the first one interrupts, once."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from engram.serve.server_process import STOP_SIGNALS, Stopper, StopRequested

pytestmark = pytest.mark.unit


@pytest.fixture
def stopper() -> Iterator[Stopper]:
    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    stopper = Stopper("a-run", bound_s=60)
    stopper.install()
    try:
        yield stopper
    finally:
        stopper.finished()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_the_first_signal_interrupts_and_a_second_before_the_stop_began_does_not(stopper: Stopper) -> None:
    with pytest.raises(StopRequested):
        signal.raise_signal(signal.SIGTERM)  # its handler runs before raise_signal returns
    # Another stop signal while the first one is being handled (the supervisor's forward, the
    # watch of its pipe): before this was once-only it escaped the ``except`` that starts the stop.
    signal.raise_signal(signal.SIGINT)
    signal.raise_signal(signal.SIGTERM)
    assert stopper.began is None
    stopper.begin()
    signal.raise_signal(signal.SIGHUP)
    assert stopper.began is not None
