"""Recompute the ``fused`` embedder's numbers (storage.fused_embedder) on the LoCoMo dev split.

Embeds every turn and question with USE and with e5 (query side for questions), then, for each e5
share and semantic weight of a grid, ranks the turns as recall does (calibrated cosine mapped by
``recall.cosine_floor`` / ``cosine_ceiling``, lexical coverage over each turn's words and its
context's (the turn before it, as ``engram eval locomo`` stores it), the weighted mean of
``actors.lexical.fuse``; no entity signal) and counts hit@10. Weights are chosen by
leave-one-conversation-out: each conversation is scored with the weights best on the other four.
Prints the calibration of the chosen share and every figure; takes ~2 min on 2 cores.

    python tools/fusion_weights.py ../shared/data/locomo/locomo_dev.json
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engram.actors.lexical import Bm25Index, fuse, tokenize
from engram.actors.recall import lexical_coverage
from engram.actors.snapshot import LENGTH_NORMALISATION
from engram.serve.evaluation.locomo_data import ADVERSARIAL, load_locomo, memory_contents
from engram.serve.evaluation.locomo_ingest import previous_turns
from engram.storage.e5_embedder import E5Embedder
from engram.storage.embedders import UseEmbedder

SHARES = (0.5, 0.7, 0.8, 0.9, 0.95)
SEMANTIC_WEIGHTS = (0.34, 0.38, 0.4, 0.42, 0.45, 0.5, 0.55, 0.6)
CEILING = 0.6  # recall.cosine_ceiling's default (floor 0)


@dataclass
class Conversation:
    name: str
    use: np.ndarray  # question x turn cosines
    e5: np.ndarray
    lexical: np.ndarray  # question x turn coverage
    dia_ids: np.ndarray
    evidence: list[set[str]]


async def _embedded(path: Path) -> list[Conversation]:
    use, e5 = UseEmbedder(), E5Embedder(threads=2)
    out = []
    for conv in load_locomo(path):
        turns = conv.turns()
        contents, _ = memory_contents(turns)
        questions = [q for q in conv.questions if q.category != ADVERSARIAL and q.evidence]
        texts = [q.question for q in questions]
        use_cos = (await use.embed(texts)) @ (await use.embed(contents)).T
        e5_cos = e5.queries_now(texts) @ e5.passages_now(contents).T
        before = previous_turns(conv)
        terms = [
            tokenize(c) + tokenize(before.get(t.dia_id, "")) for t, c in zip(turns, contents, strict=True)
        ]
        index = Bm25Index(terms, b=LENGTH_NORMALISATION)
        lexical = np.stack([lexical_coverage(index, tokenize(t)) for t in texts])
        evidence = [set(q.evidence) for q in questions]
        out.append(
            Conversation(
                conv.sample_id, use_cos, e5_cos, lexical, np.array([t.dia_id for t in turns]), evidence
            )
        )
        print(f"embedded {conv.sample_id}: {len(contents)} turns, {len(texts)} questions", file=sys.stderr)
    return out


def calibration(convs: list[Conversation], share: float) -> tuple[float, float]:
    """(scale, offset) sending the fused cosines' mean and spread onto USE's."""
    use = np.concatenate([c.use.ravel() for c in convs])
    fused = np.concatenate([((1 - share) * c.use + share * c.e5).ravel() for c in convs])
    scale = float(use.std() / fused.std())
    return scale, float(use.mean() - scale * fused.mean())


def hits(conv: Conversation, share: float, w_semantic: float, cal: tuple[float, float]) -> int:
    """Questions of ``conv`` with an evidence turn in the top 10."""
    cosine = cal[0] * ((1 - share) * conv.use + share * conv.e5) + cal[1]
    semantic = np.clip(cosine / CEILING, 0.0, 1.0)
    found = 0
    for row, evidence in enumerate(conv.evidence):
        lexical = conv.lexical[row]
        w_lexical = (1 - w_semantic) if lexical.any() else 0.0
        scores = fuse(
            semantic[row],
            lexical,
            np.zeros_like(lexical),
            w_semantic=w_semantic,
            w_lexical=w_lexical,
            w_entity=0.0,
        )
        top = np.argsort(-scores, kind="stable")[:10]
        found += bool(set(conv.dia_ids[top]) & evidence)
    return found


def leave_one_out(
    convs: list[Conversation],
    grid: list[tuple[float, float]],
    table: dict[tuple[tuple[float, float], str], int],
) -> None:
    """Score each conversation with the grid point best on the other four; print folds and pool."""
    sizes = {c.name: len(c.evidence) for c in convs}
    held_out = []
    for conv in convs:
        train = [c.name for c in convs if c is not conv]
        best = max(grid, key=lambda g: sum(table[(g, n)] for n in train) / sum(sizes[n] for n in train))
        rate = table[(best, conv.name)] / sizes[conv.name]
        held_out.append(rate)
        print(f"  held out {conv.name}: chosen share {best[0]}, semantic {best[1]}: hit@10 {rate:.4f}")
    pooled = sum(r * sizes[c.name] for r, c in zip(held_out, convs, strict=True)) / sum(sizes.values())
    print(f"  leave-one-out hit@10 {pooled:.4f}, spread {min(held_out):.4f}-{max(held_out):.4f}")
    for g in sorted(grid, key=lambda g: -sum(table[(g, c.name)] for c in convs))[:3]:
        rate = sum(table[(g, c.name)] for c in convs) / sum(sizes.values())
        print(f"  all five: share {g[0]}, semantic {g[1]}: hit@10 {rate:.4f}")


def main(path: Path) -> None:
    convs = asyncio.run(_embedded(path))
    cals = {s: calibration(convs, s) for s in (0.0, *SHARES)}
    for share in SHARES:
        print(f"share {share}: calibration scale {cals[share][0]:.4f}, offset {cals[share][1]:.4f}")
    for label, shares in (("USE alone", (0.0,)), ("fused", SHARES)):
        grid = [(s, w) for s in shares for w in SEMANTIC_WEIGHTS]
        table = {(g, c.name): hits(c, *g, cals[g[0]]) for g in grid for c in convs}
        print(label)
        leave_one_out(convs, grid, table)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
