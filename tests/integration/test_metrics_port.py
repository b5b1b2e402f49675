"""``engram serve`` refuses a taken metrics export port up front (Ray would stall its start on it)."""

from __future__ import annotations

import socket

import pytest

from engram.serve.supervisor import export_port_refusal
from tests.support.net import free_port

pytestmark = pytest.mark.integration


def test_a_taken_port_is_refused_with_the_setting_to_change_and_a_free_one_passes() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        refusal = export_port_refusal(taken.getsockname()[1])
    assert refusal is not None and "metrics.export_port" in refusal
    assert export_port_refusal(free_port()) is None
    assert export_port_refusal(0) is None, "0: Ray picks a free port"
