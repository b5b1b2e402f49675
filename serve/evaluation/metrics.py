"""Pure helpers of the evaluation harness: evidence and date parsing, hit@k, recall@k, percentiles."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

_EVIDENCE_RE = re.compile(r"^D:?(\d+):(\d+)$")
_EVIDENCE_SPLIT_RE = re.compile(r"[;,\s]+")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y")


def parse_evidence(raw: Iterable[object]) -> list[str]:
    """Well-formed dia ids ("D8:6") of an evidence list, in order, without repeats.

    Malformed entries are repaired where the intent is clear ("D8:6; D9:17" -> two ids,
    "D:11:26" -> "D11:26") and dropped otherwise ("D").
    """
    ids: list[str] = []
    for entry in raw:
        for part in _EVIDENCE_SPLIT_RE.split(str(entry).strip()):
            match = _EVIDENCE_RE.match(part)
            if match:
                ids.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return list(dict.fromkeys(ids))


def parse_session_date(text: str) -> datetime:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") as an aware UTC datetime; ValueError if not one."""
    cleaned = " ".join(text.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"not a LoCoMo session date: {text!r}")


def hit_at_k(retrieved: Sequence[str | None], evidence: Collection[str], k: int) -> bool:
    """True when one of the first ``k`` retrieved source ids is an evidence id."""
    return any(source in evidence for source in retrieved[:k] if source is not None)


def recall_at_k(retrieved: Sequence[str | None], evidence: Collection[str], k: int) -> float:
    """Share of the evidence ids found among the first ``k`` retrieved source ids (0.0 without evidence)."""
    if not evidence:
        return 0.0
    found = {source for source in retrieved[:k] if source is not None}
    return sum(1 for e in set(evidence) if e in found) / len(set(evidence))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation, as numpy's default; 0.0 when empty."""
    if not 0 <= q <= 100:
        raise ValueError("percentile q must lie in [0, 100]")
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def latency_summary(milliseconds: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99, mean and max of latencies in milliseconds, rounded to 0.01 ms."""
    mean = math.fsum(milliseconds) / len(milliseconds) if milliseconds else 0.0
    return {
        "p50_ms": round(percentile(milliseconds, 50), 2),
        "p95_ms": round(percentile(milliseconds, 95), 2),
        "p99_ms": round(percentile(milliseconds, 99), 2),
        "mean_ms": round(mean, 2),
        "max_ms": round(max(milliseconds, default=0.0), 2),
    }


@dataclass
class _Tally:
    questions: int = 0
    hit5: int = 0
    hit10: int = 0
    recall10: float = 0.0

    def add(self, hit5: bool, hit10: bool, recall10: float) -> None:
        self.questions += 1
        self.hit5 += hit5
        self.hit10 += hit10
        self.recall10 += recall10

    def figures(self, prefix: str) -> dict[str, float]:
        n = self.questions or 1
        return {
            f"{prefix}hit@5": round(self.hit5 / n, 4),
            f"{prefix}hit@10": round(self.hit10 / n, 4),
            f"{prefix}recall@10": round(self.recall10 / n, 4),
        }


@dataclass
class ScoreCard:
    """Evidence hit@5, hit@10 and recall@10 of one retrieval method, overall and per category."""

    overall: _Tally = field(default_factory=_Tally)
    by_category: dict[int, _Tally] = field(default_factory=dict)

    def add(self, category: int, retrieved: Sequence[str | None], evidence: Collection[str]) -> bool:
        """Score one question's ranked source ids; returns whether it was a hit@10."""
        hit5 = hit_at_k(retrieved, evidence, 5)
        hit10 = hit_at_k(retrieved, evidence, 10)
        recall10 = recall_at_k(retrieved, evidence, 10)
        self.overall.add(hit5, hit10, recall10)
        self.by_category.setdefault(category, _Tally()).add(hit5, hit10, recall10)
        return hit10

    @property
    def questions(self) -> int:
        """Questions scored so far."""
        return self.overall.questions

    def figures(self, prefix: str = "") -> dict[str, float]:
        """Overall figures, keys prefixed (e.g. "baseline_hit@10")."""
        return self.overall.figures(prefix)

    def category_figures(self, prefix: str = "") -> dict[int, dict[str, float]]:
        """Figures per category, keys prefixed."""
        return {c: t.figures(prefix) for c, t in sorted(self.by_category.items())}
