"""The load-test tooling: the locustfile loads and the seed produces varied texts."""

from __future__ import annotations

import ast
import itertools
import random

import pytest

from tests.conftest import ManualMonotonic

pytestmark = pytest.mark.unit


def test_locustfile_defines_the_mix() -> None:
    # Parsed, not imported: importing locust monkey-patches the process (gevent) under pytest.
    from engram.loadtest.run import LOCUSTFILE

    tree = ast.parse(LOCUSTFILE.read_text())
    [agent] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EngramAgent"]
    methods = {n.name for n in agent.body if isinstance(n, ast.FunctionDef)}
    from engram.loadtest.mix import ROUTES

    assert {*ROUTES, "healthz"} <= methods  # every route a mix may name has its request


def test_a_mix_is_parsed_checked_and_sets_the_offered_rate() -> None:
    from engram.loadtest.mix import DEFAULT_MIX, format_mix, parse_mix, total_rate

    default = parse_mix(DEFAULT_MIX)
    assert default == {"recall": 18, "add": 1, "add_structured": 1}
    assert format_mix(default) == DEFAULT_MIX
    # 30 recall/s at weight 18 of 21 (healthz 1 included): 35 req/s in all.
    assert total_rate(default, 30) == pytest.approx(35.0)
    writes = parse_mix("add_structured=3,batch_add_structured=1")
    assert total_rate(writes, 8) == pytest.approx(10.0)  # without recall the rate is the writes'
    for bad in ("recall", "recall=x", "forget=1", "recall=0", ""):
        with pytest.raises(ValueError, match=r"mix|weight"):
            parse_mix(bad)


def test_seed_texts_are_varied() -> None:
    from engram.loadtest.seed import fact

    rng = random.Random(1)
    texts = {fact(rng, n) for n in range(100)}
    assert len(texts) == 100


def test_poisson_pacing_keeps_the_offered_rate_and_its_schedule() -> None:
    from engram.loadtest.arrivals import PoissonPacing

    clock = ManualMonotonic()
    pacing = PoissonPacing(2.0, rng=random.Random(5), clock=clock)
    starts = []
    for _ in range(4000):
        clock.now += pacing.wait()
        starts.append(clock.now)
        clock.now += 0.05  # the request's own latency must not delay the schedule
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    mean = sum(gaps) / len(gaps)
    assert 0.47 < mean < 0.53  # 1 / rate
    # Exponential gaps: about e^-1 of them exceed the mean (constant pacing would give none or all).
    longer = sum(g > 0.5 for g in gaps) / len(gaps)
    assert 0.33 < longer < 0.41


def test_poisson_pacing_starts_clients_apart_and_catches_up_without_negative_waits() -> None:
    from engram.loadtest.arrivals import PoissonPacing

    clock = ManualMonotonic()
    firsts = {PoissonPacing(1.0, rng=random.Random(seed), clock=clock).wait() for seed in range(20)}
    assert len(firsts) == 20 and all(w >= 0 for w in firsts)
    pacing = PoissonPacing(10.0, rng=random.Random(1), clock=clock)
    pacing.wait()
    clock.now += 60  # a very slow answer: the schedule is behind, the next start goes at once
    assert pacing.wait() == 0.0
    with pytest.raises(ValueError, match="positive"):
        PoissonPacing(0)


def test_the_fuzz_report_is_json_with_its_counts() -> None:
    # Regression: dataclasses.asdict rebuilt each Counter from its (key, count) pairs, so the
    # long run's report died in json.dumps on tuple keys after every request had been sent.
    import json

    from engram.loadtest.fuzz import FuzzReport

    report = FuzzReport(requests=3, operations=1)
    report.by_operation["POST /memory/v1/add"] += 3
    report.statuses[200] += 2
    report.statuses[400] += 1
    report.linked_ok["add_to_task"] += 1
    data = json.loads(json.dumps(report.as_dict()))
    assert data["by_operation"] == {"POST /memory/v1/add": 3}
    assert data["statuses"] == {"200": 2, "400": 1}
    assert data["linked_ok"] == {"add_to_task": 1}


def test_users_are_drawn_uniformly_or_with_a_zipf_hot_set() -> None:
    from collections import Counter

    from engram.loadtest.user_draw import UserDraw, parse_skew

    rng = random.Random(3)
    uniform = Counter(UserDraw(100).draw(rng) for _ in range(20_000))
    assert set(uniform) == set(range(100)) and max(uniform.values()) < 3 * min(uniform.values())
    zipf = UserDraw(10_000, "zipf:1.1")
    drawn = Counter(zipf.draw(rng) for _ in range(20_000))
    assert all(0 <= user < 10_000 for user in drawn)
    # s = 1.1 over 10,000 users: the 100 hottest take 64.8% of the requests (sum of 1/k^1.1).
    hot = sum(count for _, count in drawn.most_common(100)) / 20_000
    assert 0.60 < hot < 0.70
    assert drawn.most_common(1)[0][0] != 0  # the hot order is shuffled, not the seeding order
    assert parse_skew("uniform") is None and parse_skew("zipf:0.8") == 0.8
    for bad in ("zipf", "zipf:0", "zipf:-1", "zipf:x", "pareto:1"):
        with pytest.raises(ValueError, match="skew"):
            parse_skew(bad)


def test_the_cold_share_counts_the_snapshot_loads_among_the_runs_recalls() -> None:
    from engram.loadtest.recall_replicas import snapshot_figures

    before = {"hits": 100.0, "loads": 1000.0, "cached_bytes": 0.0, "cached_users": 0.0, "rss_bytes": 0.0}
    after = {
        "hits": 160.0,
        "loads": 1040.0,
        "cached_bytes": 3 * 2**20,
        "cached_users": 7.0,
        "rss_bytes": 2**30,
    }
    assert snapshot_figures([before], [after]) == {
        "cold_share": 0.4,  # 40 loads among the run's 100 recalls; the warm-up's 1,000 do not count
        "snapshot_mib": 3.0,
        "cached_users": 7.0,
        "recall_rss_mib": 1024.0,
        "recall_replicas": 1.0,
        "full_collections": 0.0,
        "full_collection_ms": 0.0,
    }
    assert snapshot_figures([], [])["cold_share"] is None  # an app the run did not start
    # Cold recalls count; the loads they started in the background answered no recall.
    after |= {"colds": 50.0, "loads": 1060.0, "background_loads": 20.0}
    assert snapshot_figures([before], [after])["cold_share"] == 0.6  # (50 + 40) of 150


def test_the_figures_of_several_recall_replicas_are_summed_by_replica_and_bounded_by_the_largest() -> None:
    from engram.loadtest.recall_replicas import snapshot_figures

    def state(
        pid: float, hits: float, loads: float, mib: float, users: float, rss: float
    ) -> dict[str, float]:
        return {
            "pid": pid,
            "hits": hits,
            "loads": loads,
            "cached_bytes": mib * 2**20,
            "cached_users": users,
            "rss_bytes": rss * 2**20,
        }

    # Listed in another order after the run: each replica is matched with itself, by process id.
    before = [state(11, 0, 500, 200, 500, 600), state(12, 0, 400, 150, 400, 550)]
    after = [state(12, 30, 430, 160, 410, 560), state(11, 50, 520, 210, 505, 610)]
    before[0] |= {"full_collections": 1.0, "full_collection_ms": 150.0}  # the warm-up's own
    after[1] |= {"full_collections": 4.0, "full_collection_ms": 210.5}
    after[0] |= {"full_collections": 2.0, "full_collection_ms": 20.0}
    assert snapshot_figures(before, after) == {
        "cold_share": 0.385,  # (20 + 30) loads among the run's 130 recalls on both replicas
        "snapshot_mib": 210.0,  # the bounds are each replica's: the largest is reported
        "cached_users": 505.0,
        "recall_rss_mib": 610.0,
        "recall_replicas": 2.0,
        "full_collections": 5.0,  # 3 + 2 during the run
        "full_collection_ms": 80.5,
    }
