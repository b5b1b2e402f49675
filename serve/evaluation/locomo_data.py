"""The LoCoMo data as the harness reads it: conversations of dated sessions of turns, questions
with their evidence turns, and the memory content each turn becomes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from engram.serve.evaluation.metrics import parse_evidence, parse_session_date

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
_SESSION_KEY = re.compile(r"^session_(\d+)$")


class HarnessError(Exception):
    """The evaluation cannot run as asked (bad data, missing pipeline, a data dir in use)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a LoCoMo conversation."""

    dia_id: str
    speaker: str
    text: str
    caption: str | None


@dataclass(frozen=True, slots=True)
class Session:
    """One dated session of a conversation; ``date`` is None when its date does not parse."""

    number: int
    date: datetime | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    """One question with its category and parsed evidence dia ids."""

    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A LoCoMo sample: its sessions in order and its questions."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    # Every dia id of the full conversation, kept when sessions are cut (``--max-sessions``).
    dia_ids: frozenset[str]

    def turns(self) -> list[Turn]:
        """Every turn, session by session."""
        return [turn for session in self.sessions for turn in session.turns]


def load_locomo(path: Path) -> list[Conversation]:
    """Parse a LoCoMo JSON file (a list of samples); HarnessError when it is not one."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot read LoCoMo data {path}: {exc}") from exc
    if not isinstance(raw, list):
        raise HarnessError(f"{path} is not a LoCoMo file (expected a JSON list of conversations)")
    try:
        return [_conversation(sample) for sample in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise HarnessError(f"{path} is not a LoCoMo file: {type(exc).__name__}: {exc}") from exc


def _conversation(sample: Mapping[str, Any]) -> Conversation:
    conv = sample["conversation"]
    sessions: list[Session] = []
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)))
    for number in numbers:
        turns = tuple(
            Turn(
                dia_id=str(t["dia_id"]),
                speaker=str(t["speaker"]),
                text=str(t["text"]),
                caption=str(t["blip_caption"]) if t.get("blip_caption") else None,
            )
            for t in conv[f"session_{number}"]
        )
        try:
            date: datetime | None = parse_session_date(str(conv.get(f"session_{number}_date_time", "")))
        except ValueError:
            date = None
        sessions.append(Session(number, date, turns))
    questions = tuple(
        Question(str(qa["question"]), int(qa["category"]), tuple(parse_evidence(qa.get("evidence", []))))
        for qa in sample.get("qa", [])
    )
    dia_ids = frozenset(t.dia_id for s in sessions for t in s.turns)
    return Conversation(
        str(sample["sample_id"]),
        str(conv["speaker_a"]),
        str(conv["speaker_b"]),
        tuple(sessions),
        questions,
        dia_ids,
    )


def select(
    conversations: Sequence[Conversation], ids: Sequence[str] | None, max_sessions: int | None
) -> list[Conversation]:
    """The conversations named by ``ids`` (all when None), cut to their first ``max_sessions``."""
    chosen = list(conversations)
    if ids:
        known = {c.sample_id: c for c in conversations}
        missing = [i for i in ids if i not in known]
        if missing:
            raise HarnessError(f"unknown conversation id(s): {', '.join(missing)}")
        chosen = [known[i] for i in dict.fromkeys(ids)]
    if max_sessions is not None:
        chosen = [replace(c, sessions=c.sessions[:max_sessions]) for c in chosen]
    return chosen


def turn_content(turn: Turn) -> str:
    """The memory content of a turn: "<speaker>: <text>", plus the image caption when there is one."""
    content = f"{turn.speaker}: {turn.text}"
    return f"{content} [image: {turn.caption}]" if turn.caption else content


def memory_contents(turns: Sequence[Turn]) -> tuple[list[str], int]:
    """One content per turn and how many repeated an earlier one (those get their dia id prefixed).

    The service deduplicates identical contents of one user, which would hide an evidence turn.
    """
    seen: set[str] = set()
    contents: list[str] = []
    duplicates = 0
    for turn in turns:
        content = turn_content(turn)
        if content in seen:
            duplicates += 1
            content = f"[{turn.dia_id}] {content}"
        seen.add(content)
        contents.append(content)
    return contents, duplicates
