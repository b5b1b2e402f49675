"""Ports chosen for servers lie outside the kernel's ephemeral range (serve/http_front.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from engram.serve.http_front import ephemeral_range, free_port

pytestmark = pytest.mark.unit


def test_chosen_ports_avoid_the_ephemeral_range_and_are_free(tmp_path: Path) -> None:
    # A CI run lost HAProxy's stats port: chosen free from the ephemeral range, it was taken by
    # another connection before HAProxy bound it a minute later.
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("20000\t60999\n")
    ports = {free_port(range_file) for _ in range(50)}
    assert all(10000 <= p < 20000 or 61000 <= p <= 65535 for p in ports), sorted(ports)
    assert len(ports) > 1
    for port in list(ports)[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_the_machines_range_is_read_and_a_missing_file_means_linuxs_default(tmp_path: Path) -> None:
    low, high = ephemeral_range()
    assert 0 < low <= high <= 65535
    assert ephemeral_range(tmp_path / "absent") == (32768, 60999)
    low, high = ephemeral_range()
    assert not low <= free_port() <= high
