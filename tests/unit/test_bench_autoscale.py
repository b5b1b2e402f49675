"""The autoscaling benchmark's report: phases, replica timeline, scale-up and scale-down times."""

from __future__ import annotations

import pytest

from engram.loadtest.bench_autoscale import (
    Run,
    Sample,
    first_at,
    main,
    percentiles,
    phase,
    summarize,
    timeline,
)

pytestmark = pytest.mark.unit


def test_the_timeline_keeps_changes_and_the_ends() -> None:
    polls = [(0.0, 1), (0.5, 1), (1.04, 2), (1.5, 2), (2.0, 1), (2.5, 1)]
    assert timeline(polls) == [(0.0, 1), (1.0, 2), (2.0, 1), (2.5, 1)]
    assert timeline([]) == []
    assert first_at(polls, 0.0, lambda n: n >= 2) == 1.04
    assert first_at(polls, 1.5, lambda n: n <= 1) == 2.0
    assert first_at(polls, 3.0, lambda n: True) is None


def test_percentiles_are_nearest_rank_in_milliseconds() -> None:
    figures = percentiles([i / 1000 for i in range(1, 101)])
    assert figures == {"requests": 100, "p50_ms": 51.0, "p99_ms": 100.0}
    assert percentiles([]) == {"requests": 0, "p50_ms": 0.0, "p99_ms": 0.0}


def test_a_phase_counts_the_recalls_started_inside_it() -> None:
    samples = [
        Sample(0.5, 0.010),
        Sample(1.5, 0.030),
        Sample(1.6, 0.5, 50401),
        Sample(1.7, 0.040, 20001),  # no relevant memory: an answer, not an error
        Sample(2.5, 1),
    ]
    figures = phase(samples, 1.0, 2.0)
    assert figures == {"requests": 2, "p50_ms": 40.0, "p99_ms": 40.0, "per_s": 2.0, "errors": {"50401": 1}}


def test_the_summary_splits_the_load_at_the_scale_up() -> None:
    run = Run(
        samples=[Sample(t / 10, 0.020 if t < 40 else 0.010) for t in range(10, 100)],
        polls=[(0.0, 1), (2.0, 1), (4.0, 2), (8.0, 2), (10.0, 2), (13.0, 1), (14.0, 1)],
        starting=[2.0, 3.0],
    )
    report = summarize(run, load_start=1.0, load_stop=10.0, max_replicas=2)
    assert report["scale_up_s"] == 3.0 and report["scale_down_s"] == 3.0
    assert report["replica_starting_s"] == 1.0  # Serve decided after 1 s; the replica took 2 more
    assert report["replicas"] == [(0.0, 1), (4.0, 2), (13.0, 1), (14.0, 1)]
    assert report["one_replica"]["requests"] == 30 and report["one_replica"]["p99_ms"] == 20.0
    assert report["scaled"]["requests"] == 60 and report["scaled"]["p50_ms"] == 10.0
    assert report["max_running"] == 2 and report["min_running_while_scaled"] == 2


def test_a_run_that_never_scaled_says_so() -> None:
    run = Run(samples=[Sample(2.0, 0.02)], polls=[(0.0, 1), (5.0, 1), (6.0, 1)])
    report = summarize(run, load_start=1.0, load_stop=5.0, max_replicas=2)
    assert report["scale_up_s"] is None and report["scaled"] is None
    assert report["scale_down_s"] is None  # one replica all along: no scale-down to time
    assert report["replica_starting_s"] is None
    assert report["one_replica"]["requests"] == 1


def test_levels_parse_as_integers() -> None:
    with pytest.raises(SystemExit):
        main(["--levels", "1,x"])


def test_engram_bench_autoscale_hands_the_benchmark_its_options_unparsed() -> None:
    from engram.serve.cli import parse, tools

    args = parse(["bench", "autoscale", "--max-replicas", "3", "--levels", "1,2,4"])
    assert args.func is tools.run and args.tool.module == "engram.loadtest.bench_autoscale"
    assert args.extra_args == ["--max-replicas", "3", "--levels", "1,2,4"]


def test_a_scale_down_under_load_is_reported() -> None:
    run = Run(polls=[(0.0, 1), (4.0, 2), (6.0, 1), (9.0, 2), (11.0, 1)])
    report = summarize(run, load_start=1.0, load_stop=10.0, max_replicas=2)
    assert report["min_running_while_scaled"] == 1
