"""The load-test tooling: the locustfile loads and the seed produces varied texts."""

from __future__ import annotations

import ast
import random

import pytest

pytestmark = pytest.mark.unit


def test_locustfile_defines_the_mix() -> None:
    # Parsed, not imported: importing locust monkey-patches the process (gevent) under pytest.
    from loadtest.run import LOCUSTFILE

    tree = ast.parse(LOCUSTFILE.read_text())
    [agent] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EngramAgent"]
    methods = {n.name for n in agent.body if isinstance(n, ast.FunctionDef)}
    assert {"recall", "add", "healthz"} <= methods


def test_seed_texts_are_varied() -> None:
    from loadtest.seed import fact

    rng = random.Random(1)
    texts = {fact(rng, n) for n in range(100)}
    assert len(texts) == 100
