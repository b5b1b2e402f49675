"""Initial weights (W7), lazy decay (L1, R3), recall recovery (R4) and merge weights."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.models.enums import MemType, Ownership
from engram.models.rules.decay import (
    decayed_weight,
    initial_weight,
    is_decay_exempt,
    merged_weight,
    recovered_weight,
)
from engram.models.settings import DecaySettings, InitialWeights, Settings

pytestmark = pytest.mark.unit

T0 = datetime(2025, 1, 1, tzinfo=UTC)
DECAY = Settings().decay
WEIGHTS = Settings().weights


def _decay(weight: float, days: float, *, important: bool = False, exempt: bool = False) -> float:
    return decayed_weight(
        weight, T0, T0 + timedelta(days=days), is_important=important, exempt=exempt, settings=DECAY
    )


def test_unrecalled_user_semantic_memory_reaches_0_10_at_day_90() -> None:
    w0 = initial_weight(WEIGHTS, Ownership.USER, MemType.SEMANTIC)
    assert w0 == pytest.approx(0.80)
    assert _decay(w0, 90) == pytest.approx(0.10, abs=0.005)
    assert _decay(w0, 89) > 0.10


def test_lambda_matches_spec() -> None:
    assert pytest.approx(0.0231, abs=0.0001) == DECAY.lambda_per_day


def test_important_memory_decays_ten_times_slower() -> None:
    w0 = 0.90
    days = 30.0
    ordinary_exponent = math.log(_decay(w0, days) / w0)
    important_exponent = math.log(_decay(w0, days, important=True) / w0)
    assert important_exponent == pytest.approx(ordinary_exponent * DECAY.important_alpha)
    assert _decay(0.80, 900, important=True) == pytest.approx(0.10, abs=0.005)
    assert _decay(0.80, 90, important=True) == pytest.approx(0.80 * 8**-0.1)


def test_exempt_memory_is_unchanged() -> None:
    assert _decay(0.7, 10_000, exempt=True) == 0.7
    assert _decay(0.7, 10_000, important=True, exempt=True) == 0.7


def test_no_growth_when_now_is_before_weight_at() -> None:
    assert _decay(0.6, -5) == 0.6
    assert _decay(0.6, 0) == 0.6


def test_fractional_days_count() -> None:
    half_day = decayed_weight(
        0.8, T0, T0 + timedelta(hours=12), is_important=False, exempt=False, settings=DECAY
    )
    assert half_day == pytest.approx(0.8 * math.exp(-DECAY.lambda_per_day * 0.5))


@pytest.mark.parametrize("important", [False, True])
def test_lazy_catch_up_in_steps_equals_one_step(important: bool) -> None:
    steps = [T0 + timedelta(days=d) for d in (0, 3.5, 10, 41.25, 90)]
    weight = 0.8
    for start, end in itertools.pairwise(steps):
        weight = decayed_weight(weight, start, end, is_important=important, exempt=False, settings=DECAY)
    once = decayed_weight(0.8, steps[0], steps[-1], is_important=important, exempt=False, settings=DECAY)
    assert weight == pytest.approx(once, rel=1e-12)


def test_lambda_and_alpha_come_from_settings() -> None:
    fast = DecaySettings(lambda_per_day=1.0, important_alpha=0.5)
    later = T0 + timedelta(days=2)
    assert decayed_weight(1.0, T0, later, is_important=False, exempt=False, settings=fast) == pytest.approx(
        math.exp(-2)
    )
    assert decayed_weight(1.0, T0, later, is_important=True, exempt=False, settings=fast) == pytest.approx(
        math.exp(-1)
    )


@pytest.mark.parametrize(
    ("tags", "exempt"),
    [(["persona"], True), (["work", "Persona"], True), ([], False), (["personal"], False)],
)
def test_persona_tag_is_exempt(tags: list[str], exempt: bool) -> None:
    assert is_decay_exempt(tags, DECAY) is exempt


def test_exempt_tags_come_from_settings() -> None:
    settings = DecaySettings(exempt_tags=["core"])
    assert is_decay_exempt(iter(["core"]), settings)
    assert not is_decay_exempt(["persona"], settings)


@pytest.mark.parametrize(
    ("ownership", "mem_type", "expected"),
    [
        (Ownership.USER, MemType.SEMANTIC, 0.80),
        (Ownership.USER, MemType.EPISODIC, 0.60),
        (Ownership.USER, MemType.PROCEDURAL, 0.70),
        (Ownership.AGENT, MemType.SEMANTIC, 0.70),
        (Ownership.AGENT, MemType.EPISODIC, 0.50),
        (Ownership.AGENT, MemType.PROCEDURAL, 0.60),
    ],
)
def test_initial_weight_table(ownership: Ownership, mem_type: MemType, expected: float) -> None:
    assert initial_weight(WEIGHTS, ownership, mem_type) == pytest.approx(expected)
    assert initial_weight(WEIGHTS, ownership, mem_type, time_bound=True) == pytest.approx(0.85)
    assert initial_weight(WEIGHTS, ownership, mem_type, is_important=True) == pytest.approx(0.90)
    assert initial_weight(WEIGHTS, ownership, mem_type, is_important=True, time_bound=True) == pytest.approx(
        0.90
    )


def test_initial_weight_important_keeps_a_higher_weight() -> None:
    weights = InitialWeights(user_semantic=0.95, time_bound=0.97)
    assert initial_weight(weights, Ownership.USER, MemType.SEMANTIC, is_important=True) == 0.95
    assert initial_weight(
        weights, Ownership.USER, MemType.SEMANTIC, is_important=True, time_bound=True
    ) == pytest.approx(0.97)


def test_recovery_adds_delta_up_to_the_type_cap() -> None:
    cap = initial_weight(WEIGHTS, Ownership.USER, MemType.SEMANTIC)
    assert recovered_weight(0.30, 0.05, cap) == pytest.approx(0.35)
    assert recovered_weight(0.78, 0.05, cap) == pytest.approx(cap)
    assert recovered_weight(0.80, 0.05, cap) == pytest.approx(cap)


def test_recovery_never_lowers_a_weight_above_the_cap() -> None:
    # An important memory starts at 0.90, above its type's 0.80 cap.
    assert recovered_weight(0.90, 0.05, 0.80) == 0.90


def test_merged_weight() -> None:
    assert merged_weight(0.3, 0.5, initial=0.8) == 0.8
    assert merged_weight(0.9, 0.5, initial=0.8) == 0.9
    assert merged_weight(0.5, 0.95, initial=0.8) == 0.95


weights_st = st.floats(min_value=0.0, max_value=1.0)
days_st = st.floats(min_value=0.0, max_value=36_500.0)


@given(w0=weights_st, first=days_st, second=days_st, important=st.booleans())
def test_decay_is_non_increasing_and_bounded(w0: float, first: float, second: float, important: bool) -> None:
    earlier, later = sorted((first, second))
    at_earlier = _decay(w0, earlier, important=important)
    at_later = _decay(w0, later, important=important)
    assert 0.0 <= at_later <= at_earlier <= w0


@given(current=weights_st, delta=weights_st, cap=weights_st)
def test_recovered_weight_stays_between_current_and_cap(current: float, delta: float, cap: float) -> None:
    recovered = recovered_weight(current, delta, cap)
    assert current <= recovered <= max(current, cap)
    assert recovered <= current + delta
