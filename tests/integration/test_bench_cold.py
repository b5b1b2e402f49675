"""``engram bench cold`` runs end to end on a tiny store: figures for each size, every recall counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.loadtest.bench_cold import main, percentile

pytestmark = pytest.mark.integration


def test_cold_and_warm_recalls_are_reported_for_each_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--sizes", "3,6", "--users", "2", "--rounds", "2", "--seed-cache", str(tmp_path)]
    assert main([*args, "--cold-min-memories", "3"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["memories"] for line in lines] == [3, 6]
    for figures in lines:
        assert figures["recalls_each"] == 4  # 2 users x 2 rounds, each recalled cold, warm, loading
        assert figures["answered_warm"] == figures["loaded_first"] == 4
        for kind in ("cold", "warm", "load"):
            assert 0 < figures[f"{kind}_p50_ms"] <= figures[f"{kind}_p99_ms"]
    # Three memories are few enough to load (recall.cold_min_memories 3), six are answered cold.
    assert [(f["answered_cold"], f["first_loaded"]) for f in lines] == [(0, 4), (4, 0)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cold-2x3", "cold-2x6"]  # seeded once, kept


def test_a_sample_of_the_seeded_users_can_be_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--sizes", "6", "--users", "3", "--measure-users", "1", "--rounds", "2"]
    assert main([*args, "--seed-cache", str(tmp_path), "--cold-min-memories", "0"]) == 0
    (figures,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert figures["recalls_each"] == 2  # one user of three, 2 rounds
    assert [p.name for p in tmp_path.iterdir()] == ["cold-3x6"]  # all three seeded


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile([7.0], 0.99)) == (50.0, 99.0, 7.0)
