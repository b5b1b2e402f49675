"""Evaluation metrics: evidence and date parsing, hit@k, recall@k, percentiles and score cards."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.serve.evaluation.metrics import (
    ScoreCard,
    hit_at_k,
    latency_summary,
    parse_evidence,
    parse_session_date,
    percentile,
    recall_at_k,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D1:3"], ["D1:3"]),
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),
        (["D1:18", "D", "D1:20"], ["D1:18", "D1:20"]),
        (["D:11:26"], ["D11:26"]),
        (["D1:3", "D1:3", " D2:4 "], ["D1:3", "D2:4"]),
        (["D3:1,D3:2", "D4:01"], ["D3:1", "D3:2", "D4:1"]),
        ([], []),
        (["", "x", 7], []),
    ],
)
def test_parse_evidence_repairs_or_drops_malformed_entries(raw: list[object], expected: list[str]) -> None:
    assert parse_evidence(raw) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:48 am on 1 February, 2023", datetime(2023, 2, 1, 0, 48, tzinfo=UTC)),
        ("11:01 AM on 17 December, 2022", datetime(2022, 12, 17, 11, 1, tzinfo=UTC)),
        ("  7:31 pm  on 21 January, 2022 ", datetime(2022, 1, 21, 19, 31, tzinfo=UTC)),
        ("4:04 pm on 20 January 2023", datetime(2023, 1, 20, 16, 4, tzinfo=UTC)),
    ],
)
def test_parse_session_date(text: str, expected: datetime) -> None:
    assert parse_session_date(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "25:00 pm on 8 May, 2023"])
def test_parse_session_date_rejects_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="not a LoCoMo session date"):
        parse_session_date(text)


def test_hit_at_k_looks_only_at_the_first_k() -> None:
    retrieved = ["D1:1", None, "D1:2", "D2:5"]
    assert hit_at_k(retrieved, {"D2:5"}, 4)
    assert not hit_at_k(retrieved, {"D2:5"}, 3)
    assert not hit_at_k([], {"D1:1"}, 10)
    assert not hit_at_k(retrieved, set(), 10)


def test_recall_at_k_is_the_share_of_evidence_found() -> None:
    retrieved = ["D1:1", "D1:2", "D1:1", None]
    assert recall_at_k(retrieved, ["D1:1", "D3:3"], 10) == 0.5
    assert recall_at_k(retrieved, ["D1:1", "D1:2"], 2) == 1.0
    assert recall_at_k(retrieved, ["D1:2"], 1) == 0.0
    assert recall_at_k(retrieved, [], 10) == 0.0


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", None]), max_size=12),
    st.sets(st.sampled_from(["a", "b", "c", "x"]), min_size=1),
    st.integers(1, 12),
)
def test_hit_and_recall_agree(retrieved: list[str | None], evidence: set[str], k: int) -> None:
    recall = recall_at_k(retrieved, evidence, k)
    assert 0.0 <= recall <= 1.0
    assert hit_at_k(retrieved, evidence, k) == (recall > 0)
    assert recall_at_k(retrieved, evidence, k + 1) >= recall


@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-9)


def test_percentile_edges() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    with pytest.raises(ValueError, match="percentile"):
        percentile([1.0], 101)


def test_latency_summary() -> None:
    summary = latency_summary([float(v) for v in range(1, 101)])
    assert summary == {"p50_ms": 50.5, "p95_ms": 95.05, "p99_ms": 99.01, "mean_ms": 50.5, "max_ms": 100.0}
    assert latency_summary([])["p99_ms"] == 0.0


def test_score_card_overall_and_per_category() -> None:
    card = ScoreCard()
    top10 = [f"D1:{i}" for i in range(1, 11)]
    assert card.add(1, top10, {"D1:1"})
    assert card.add(1, top10, {"D1:7", "D9:9"})
    assert not card.add(4, top10, {"D9:9"})
    assert card.questions == 3
    assert card.figures() == {"hit@5": 0.3333, "hit@10": 0.6667, "recall@10": 0.5}
    assert card.figures("baseline_")["baseline_hit@10"] == 0.6667
    assert card.category_figures() == {
        1: {"hit@5": 0.5, "hit@10": 1.0, "recall@10": 0.75},
        4: {"hit@5": 0.0, "hit@10": 0.0, "recall@10": 0.0},
    }
    assert ScoreCard().figures() == {"hit@5": 0.0, "hit@10": 0.0, "recall@10": 0.0}
