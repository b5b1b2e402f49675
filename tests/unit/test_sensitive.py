"""The sensitive-content detector and policy (P5) over the adversarial set, without I/O."""

from __future__ import annotations

import pytest

from engram.loadtest.bench_sensitive import measure, report
from engram.loadtest.sensitive_cases import BENIGN, SENSITIVE, Case
from engram.models.enums import SensitiveCategory as Cat
from engram.models.rules.sensitive import cn_id_ok, detect, iban_ok, luhn_ok, screen, scrub
from engram.models.settings import SensitivePolicy, Settings

pytestmark = pytest.mark.unit

REDACT_ALL = dict.fromkeys(Cat, "redact")


@pytest.mark.parametrize("case", SENSITIVE, ids=lambda c: f"{c.category}:{c.text[:24]}")
def test_every_sensitive_value_is_detected_and_redacted(case: Case) -> None:
    assert case.category in [f.category for f in detect(case.text)]
    result = screen(case.text, REDACT_ALL)
    assert case.value not in result.text and f"[{case.category.value}]" in result.text


def test_no_benign_look_alike_is_flagged() -> None:
    flagged = [c.text for c in BENIGN if detect(c.text)]
    assert flagged == []


def test_the_set_is_large_and_bilingual() -> None:
    cases = SENSITIVE + BENIGN
    assert len(cases) >= 60
    assert {c.category for c in SENSITIVE} == set(Cat)
    for group in (SENSITIVE, BENIGN):
        assert any(any("\u4e00" <= ch <= "\u9fff" for ch in c.text) for c in group)


def test_checksums() -> None:
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert iban_ok("DE89370400440532013000") and not iban_ok("DE89370400440532013001")
    assert cn_id_ok("11010519491231002X") and not cn_id_ok("110105194912310021")


def test_a_number_failing_its_checksum_is_not_a_card_nor_an_id() -> None:
    assert detect("ref 4111 1111 1111 1112 and 110105194912310021") == []


def test_a_number_the_text_calls_a_card_or_an_account_is_redacted_whatever_its_checksum() -> None:
    # #31: a stated card number that fails the Luhn check came back verbatim from recall.
    assert not luhn_ok("4111111111111112")
    assert screen("my card number is 4111 1111 1111 1112", REDACT_ALL).text == "my card number is [CARD]"
    assert screen("4111111111111112 是我的卡号", REDACT_ALL).text == "[CARD] 是我的卡号"
    assert screen("savings account: 00-1234-5678", REDACT_ALL).text == "savings account: [ACCOUNT]"
    # Unnamed, the same digits stay: the checksum is what says "card" then, and "paid" is no "id".
    assert detect("ref 4111 1111 1111 1112") == [] and detect("I paid 88231907 for it") == []


def test_redaction_keeps_the_rest_of_the_sentence_and_is_idempotent() -> None:
    once = screen("Pay with 4111111111111111 and mail bob@example.com", REDACT_ALL).text
    assert once == "Pay with [CARD] and mail [EMAIL]"
    assert screen(once, REDACT_ALL).text == once and detect(once) == []


def test_refuse_refuses_the_text_and_allow_keeps_the_value() -> None:
    modes = {**REDACT_ALL, Cat.CARD: "refuse", Cat.EMAIL: "allow"}
    refused = screen("card 4111111111111111, mail bob@example.com", modes)
    assert refused.refused == (Cat.CARD,)
    kept = screen("mail bob@example.com, phone 13812345678", modes)
    assert kept.text == "mail bob@example.com, phone [PHONE]" and not kept.refused
    assert scrub("card 4111111111111111", modes) == "card [CARD]"


def test_the_policy_defaults_to_redact_and_apps_override_categories() -> None:
    policy = SensitivePolicy(apps={"billing": {Cat.EMAIL: "allow"}}, default={Cat.CARD: "refuse"})
    assert policy.for_app("billing") == {**REDACT_ALL, Cat.CARD: "refuse", Cat.EMAIL: "allow"}
    assert policy.for_app(None) == {**REDACT_ALL, Cat.CARD: "refuse"}
    assert Settings().privacy.sensitive.for_app("any") == REDACT_ALL


def test_the_policy_reads_from_plain_settings() -> None:
    settings = Settings(privacy={"sensitive": {"apps": {"crm": {"PHONE": "allow", "ID": "refuse"}}}})
    modes = settings.privacy.sensitive.for_app("crm")
    assert (modes[Cat.PHONE], modes[Cat.GOV_ID], modes[Cat.CARD]) == ("allow", "refuse", "redact")
    with pytest.raises(ValueError, match="redact"):
        Settings(privacy={"sensitive": {"default": {"CARD": "encrypt"}}})


def test_the_benchmark_reports_every_category_and_the_false_positive_rate() -> None:
    figures = measure(repeat=1)
    assert set(figures.per_category) == set(Cat)
    assert all(detected == redacted == cases for cases, detected, redacted in figures.per_category.values())
    assert figures.false_positive_rate <= 0.05
    assert "false-positive rate" in report(figures)
