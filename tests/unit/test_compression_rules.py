"""Compression's pure rules (L5): who may be compressed, which memories form a group, the merge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engram.models.domain import Memory
from engram.models.enums import Level, MemType, Ownership, Status
from engram.models.rules.compression import (
    SUMMARY_SOURCE,
    Candidate,
    GroupKey,
    eligible,
    merged_statement,
    select_groups,
    without_dates,
)
from engram.models.settings import CompressionSettings

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
KEY: GroupKey = ("", Level.GLOBAL, Ownership.USER, MemType.EPISODIC)
CONFIG = CompressionSettings(min_group=3, max_group=5, similarity=0.9, max_weight=0.5)


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def candidate(i: int, vector: np.ndarray, key: GroupKey = KEY) -> Candidate:
    return Candidate(f"m{i:02d}", key, 0.3, T0 + timedelta(days=i), vector)


def memory(**fields: object) -> Memory:
    base: dict[str, object] = {
        "memory_id": "m1",
        "user_id": "u1",
        "app_id": "",
        "level": Level.GLOBAL,
        "ownership": Ownership.USER,
        "mem_type": MemType.EPISODIC,
        "content": "Ordered coffee",
        "weight": 0.3,
        "weight_at": T0,
        "created_at": T0,
        "updated_at": T0,
        "valid_at": T0,
        "content_hash": "h",
        "embedding_model": "m",
    }
    base.update(fields)
    return Memory(**base)  # type: ignore[arg-type]


def test_a_cluster_of_at_least_min_group_becomes_one_group_and_strangers_stay_out() -> None:
    near = [candidate(i, unit(1, 0.01 * i, 0)) for i in range(4)]
    far = [candidate(10, unit(0, 1, 0)), candidate(11, unit(0, 0, 1))]
    groups = select_groups(near + far, CONFIG)
    assert len(groups) == 1
    assert sorted(groups[0]) == ["m00", "m01", "m02", "m03"]


def test_fewer_than_min_group_similar_memories_are_no_group() -> None:
    assert select_groups([candidate(i, unit(1, 0.01 * i, 0)) for i in range(2)], CONFIG) == []


def test_groups_never_span_dimensions_or_types() -> None:
    app_key: GroupKey = ("shop", Level.APP, Ownership.USER, MemType.EPISODIC)
    semantic: GroupKey = ("", Level.GLOBAL, Ownership.USER, MemType.SEMANTIC)
    same = unit(1, 0, 0)
    mixed = [candidate(0, same), candidate(1, same, app_key), candidate(2, same, semantic)]
    assert select_groups(mixed, CONFIG) == []


def test_a_large_cluster_is_cut_at_max_group_and_the_rest_forms_its_own_group() -> None:
    groups = select_groups([candidate(i, unit(1, 0.001 * i, 0)) for i in range(9)], CONFIG)
    assert [len(g) for g in groups] == [5, 4]
    assert len({m for g in groups for m in g}) == 9  # nobody twice


def test_the_most_central_member_leads_and_grouping_is_deterministic() -> None:
    # m01 sits between the others: similar to both, while the two ends are similar only to it.
    members = [candidate(0, unit(1, 0.3, 0)), candidate(1, unit(1, 0, 0)), candidate(2, unit(1, -0.3, 0))]
    config = CompressionSettings(min_group=3, max_group=5, similarity=0.95, max_weight=0.5)
    assert select_groups(members, config) == [["m01", "m00", "m02"]]
    assert select_groups(list(reversed(members)), config) == [["m01", "m00", "m02"]]


def test_eligibility_keeps_important_session_expiring_persona_heavy_and_summaries_out() -> None:
    assert eligible(memory(), 0.3, CONFIG)
    assert not eligible(memory(), 0.6, CONFIG)  # above max_weight
    assert not eligible(memory(is_important=True), 0.3, CONFIG)
    assert not eligible(memory(level=Level.SESSION, session_id="s1"), 0.3, CONFIG)
    assert not eligible(memory(expire_at=T0 + timedelta(days=3)), 0.3, CONFIG)
    assert not eligible(memory(status=Status.ARCHIVED), 0.3, CONFIG)
    assert not eligible(memory(content=None), 0.3, CONFIG)
    assert not eligible(memory(source_type=SUMMARY_SOURCE), 0.3, CONFIG)
    assert not eligible(memory(custom_tags=["persona"]), 0.3, CONFIG, exempt_tags=["persona"])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Ordered coffee at the station cafe on 2026-01-03", "Ordered coffee at the station cafe"),
        ("Ordered coffee at the station cafe on January 3rd, 2026.", "Ordered coffee at the station cafe"),
        ("On Monday ordered coffee at the station cafe", "ordered coffee at the station cafe"),
        ("Went to the gym on 3/1/2026 after work", "Went to the gym after work"),
        ("在2026年1月3日在车站咖啡馆点了咖啡", "在车站咖啡馆点了咖啡"),
        ("周一在车站咖啡馆点了咖啡", "在车站咖啡馆点了咖啡"),
        ("Likes the station cafe", "Likes the station cafe"),
    ],
)
def test_dates_are_taken_out_of_a_statement(content: str, expected: str) -> None:
    assert without_dates(content) == expected


def test_the_merge_keeps_the_common_statement_with_count_and_span() -> None:
    contents = [f"Ordered coffee at the station cafe on 2026-01-{d:02d}" for d in range(1, 31)]
    dates = [T0 + timedelta(days=d) for d in range(30)]
    assert merged_statement(contents, dates) == (
        "Ordered coffee at the station cafe (regularly: 30 times from 2026-01-01 to 2026-01-30)"
    )


def test_the_merge_takes_the_most_frequent_statement_and_writes_chinese_spans_in_chinese() -> None:
    contents = ["1月3日在车站咖啡馆点了咖啡", "1月4日在车站咖啡馆点了咖啡", "1月5日在车站咖啡馆点了拿铁"]
    dates = [T0 + timedelta(days=d) for d in (2, 3, 4)]
    expected = "在车站咖啡馆点了咖啡（经常：共 3 次，2026-01-03 至 2026-01-05）"
    assert merged_statement(contents, dates) == expected


def test_a_merge_of_one_day_says_on_that_day() -> None:
    text = merged_statement(["Drank water", "Drank water"], [T0, T0 + timedelta(hours=2)])
    assert text == "Drank water (regularly: 2 times on 2026-01-01)"


def test_group_size_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_group"):
        CompressionSettings(min_group=10, max_group=5)
