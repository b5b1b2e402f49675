"""Bilingual recall in one mixed store (#31): one person's 65 facts, about half in Chinese, half in
English, each asked about in the other language against the whole store.

The issue's bar is 90% in the top 3 (at most 6 misses); the embedded default reaches 59 of 65 (0.908,
docs/evaluation.md says which miss and why).
"""

from __future__ import annotations

import pytest

from engram.actors.memory_service import MemoryService
from tests.support.bilingual_store import ALL_ASKED, EN_FACTS_ZH_QUERIES, ZH_FACTS_EN_QUERIES
from tests.support.service import recall_ids, remember

pytestmark = pytest.mark.integration

MAX_MISSES = 6  # the bar of #31: 0.9 of 65 in the top 3; 59 of 65 measured 2026-12-07


def test_the_set_is_large_both_ways_and_holds_inferences() -> None:
    assert len(ALL_ASKED) >= 60 and min(len(ZH_FACTS_EN_QUERIES), len(EN_FACTS_ZH_QUERIES)) >= 30
    assert (
        sum(a.inference for a in ZH_FACTS_EN_QUERIES) >= 5
        and sum(a.inference for a in EN_FACTS_ZH_QUERIES) >= 5
    )
    assert len({a.fact for a in ALL_ASKED}) == len(ALL_ASKED)


async def test_each_fact_is_in_the_top_3_for_its_question_in_the_other_language(
    service: MemoryService,
) -> None:
    ids = {a.fact: await remember(service, a.fact, "bilingual") for a in ALL_ASKED}
    misses = []
    for asked in ALL_ASKED:
        # Default min_relevance: what a caller would see, not what a relaxed threshold lets through.
        if ids[asked.fact] not in await recall_ids(service, asked.query, "bilingual", top_k=3):
            misses.append(asked.query)
    rate = 1 - len(misses) / len(ALL_ASKED)
    print(f"top-3 rate {rate:.3f} of {len(ALL_ASKED)}; missed {misses}")
    assert len(misses) <= MAX_MISSES, f"top-3 rate {rate:.3f}; missed {misses}"
