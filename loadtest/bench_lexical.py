"""The lexical index at the size of a full user (2,000 short memories): build and query times.

    python -m engram.loadtest.bench_lexical

Prints one JSON line: median build and query milliseconds over repeated runs, beside the cost of
an exact cosine search over the same number of 512-d vectors (the semantic half of recall), and
their ratio. A benchmark, not a test: the machine is shared and noisy.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import numpy as np

from engram.actors.lexical import Bm25Index


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    """Measure and print the figures."""
    words = [f"word{i}" for i in range(3000)]
    rng = np.random.default_rng(7)
    docs = [[words[j] for j in rng.integers(0, len(words), 15)] for _ in range(2000)]
    index = Bm25Index(docs)
    matrix = rng.standard_normal((2000, 512)).astype(np.float32)
    query = rng.standard_normal(512).astype(np.float32)
    build_ms = _median_ms(lambda: Bm25Index(docs), 20)
    query_ms = _median_ms(lambda: index.normalised_scores(docs[0]), 200)
    cosine_ms = _median_ms(lambda: matrix @ query, 200)
    print(
        json.dumps(
            {
                "documents": len(docs),
                "build_ms": round(build_ms, 3),
                "query_ms": round(query_ms, 4),
                "cosine_ms": round(cosine_ms, 4),
                "query_over_cosine": round(query_ms / cosine_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
