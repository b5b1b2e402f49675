"""Bilingual (English + Chinese) statement analysis shared by rule-based extraction and evolution: pure
functions over plain strings (word lists and regexes, no models), split by job into `text` (shared helpers),
`chitchat`, `splitting` (statements, clauses, about the speaker), `rewriting` (the fact style), `attributes`
(single-valued attributes and preferences), `claims` (any attribute's value, and the values a fact
names), `kinds` (kind and importance), `expiry`, `mentions` (entities) and `speakers` (transcripts of
named people). Facts follow the seeds' compact style with the subject dropped: "Likes cheese pizza",
"Name is John", "住在北京".
"""

from engram.actors.statements.attributes import (
    SAME_MEANING_VERBS,
    attribute,
    ended,
    preference,
    same_meaning_verbs,
    same_value,
)
from engram.actors.statements.chitchat import is_chitchat
from engram.actors.statements.claims import claim, value_tokens, values_differ
from engram.actors.statements.expiry import expiry_days
from engram.actors.statements.kinds import classify, importance
from engram.actors.statements.mentions import entities
from engram.actors.statements.rewriting import to_fact
from engram.actors.statements.speakers import is_informative, speaker_label
from engram.actors.statements.splitting import is_personal, split_clauses, split_statements
from engram.actors.statements.text import Speaker, is_chinese

__all__ = [
    "SAME_MEANING_VERBS",
    "Speaker",
    "attribute",
    "claim",
    "classify",
    "ended",
    "entities",
    "expiry_days",
    "importance",
    "is_chinese",
    "is_chitchat",
    "is_informative",
    "is_personal",
    "preference",
    "same_meaning_verbs",
    "same_value",
    "speaker_label",
    "split_clauses",
    "split_statements",
    "to_fact",
    "value_tokens",
    "values_differ",
]
