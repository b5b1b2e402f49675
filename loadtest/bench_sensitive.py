"""Detection figures of the sensitive-content detector (P5) on the adversarial set:
``python -m engram.loadtest.bench_sensitive``. Prints detection per category, the false-positive
rate on the benign look-alikes and the detector's throughput."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from engram.loadtest.sensitive_cases import BENIGN, SENSITIVE
from engram.models.enums import SensitiveCategory
from engram.models.rules.sensitive import detect, screen
from engram.models.settings import SensitivePolicy

_REDACT = SensitivePolicy().for_app(None)  # the default: every category redacted


@dataclass(frozen=True, slots=True)
class Figures:
    """Per category (cases, detected as that category, value gone after redaction), benign ones."""

    per_category: dict[SensitiveCategory, tuple[int, int, int]]
    benign: int
    false_positives: int
    texts_per_s: float

    @property
    def false_positive_rate(self) -> float:
        """Benign texts with any finding, over all benign texts."""
        return self.false_positives / self.benign if self.benign else 0.0


def measure(repeat: int = 200) -> Figures:
    """Run the detector over the whole set; the throughput over ``repeat`` passes."""
    per: dict[SensitiveCategory, list[int]] = {c: [0, 0, 0] for c in SensitiveCategory}
    for case in SENSITIVE:
        assert case.category is not None
        row = per[case.category]
        row[0] += 1
        row[1] += case.category in {f.category for f in detect(case.text)}
        row[2] += case.value not in screen(case.text, _REDACT).text
    false_positives = sum(bool(detect(c.text)) for c in BENIGN)
    texts = [c.text for c in SENSITIVE + BENIGN]
    started = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            screen(text, _REDACT)
    elapsed = time.perf_counter() - started
    return Figures(
        {c: (r[0], r[1], r[2]) for c, r in per.items()},
        len(BENIGN),
        false_positives,
        repeat * len(texts) / elapsed,
    )


def report(figures: Figures) -> str:
    """The figures as a Markdown table and two lines."""
    lines = ["| category | cases | detected | redacted |", "|---|---|---|---|"]
    for category, (cases, detected, redacted) in figures.per_category.items():
        lines.append(f"| {category.name.lower()} | {cases} | {detected} | {redacted} |")
    fp = figures.false_positive_rate
    lines += [
        "",
        f"benign look-alikes: {figures.benign}, flagged: {figures.false_positives} "
        f"(false-positive rate {fp:.1%})",
        f"throughput: {figures.texts_per_s:,.0f} texts/s (one core)",
    ]
    return "\n".join(lines)


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200, help="passes for the throughput figure")
    print(report(measure(parser.parse_args().repeat)))


if __name__ == "__main__":
    main()
