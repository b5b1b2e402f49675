"""Write-path defenses end to end (P5): ``python -m engram.loadtest.bench_poisoning``
(``engram bench poisoning``).

Runs the adversarial sets through a real service in a fresh data directory (SQLite, milvus-lite,
the configured engine, the rules engine by default) and prints:

- poisoning (``loadtest.poisoning_cases``): each case sent to ``add`` as a message of its role;
  held for review (a QUARANTINE decision, in ``quarantine/list``) and never returned by recall;
- benign look-alikes: false positives, i.e. any of them held (must stay <= 5%);
- secrets and PII (``loadtest.sensitive_cases``): each value written through ``add`` (a user
  message) and ``add_structured``; whether it is retrievable verbatim through recall, history,
  ``user/list``, the change log, export or the task decisions (must be none).

It prints a Markdown table and one JSON line; the exit status is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from engram.loadtest.poisoning_cases import BENIGN, POISONING, Case
from engram.loadtest.sensitive_cases import SENSITIVE
from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    ChangeLogRequest,
    HistoryRequest,
    Message,
    RecallRequest,
    TaskRequest,
    UserExportRequest,
    UserListRequest,
)
from engram.models.enums import MemType, Ownership, TaskStatus
from engram.models.errors import EngramError
from engram.models.quarantine import QuarantineListRequest
from engram.models.settings import Settings
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import build_core
from engram.storage.stores import open_stores

MAX_FALSE_POSITIVE_RATE = 0.05


@dataclass(frozen=True, slots=True)
class Figures:
    """What the run measured."""

    poisoning: int
    held: int
    recalled_while_held: int
    benign: int
    false_positives: int
    sensitive: int
    leaked: int
    engine: str

    @property
    def false_positive_rate(self) -> float:
        """Benign cases held, over all benign cases."""
        return self.false_positives / self.benign if self.benign else 0.0

    @property
    def passed(self) -> bool:
        """Every target met: all poisoning held and never recalled, few false positives, no leak."""
        return (
            self.held == self.poisoning
            and self.recalled_while_held == 0
            and self.false_positive_rate <= MAX_FALSE_POSITIVE_RATE
            and self.leaked == 0
        )


async def _add(backend: LocalBackend, user_id: str, case: Case) -> list[str]:
    """Send one case to ``add``; the ids of the memories it put in quarantine."""
    request = AddRequest(user_id=user_id, messages=[Message(role=case.role, content=case.text)])
    accepted = await backend.add(request)
    await backend.write_path.drain()
    task = await backend.task(TaskRequest(task_id=accepted.task_id))
    if task.status is not TaskStatus.DONE:
        raise RuntimeError(f"task {task.task_id} ended {task.status}: {task.error}")
    return [d.memory_id for d in task.decisions if d.op == "QUARANTINE" and d.memory_id]


async def _recalled(backend: LocalBackend, user_id: str, query: str) -> set[str]:
    request = RecallRequest(user_id=user_id, query=query[:4000], min_relevance=0.0, top_k=100)
    try:
        return {m.memory_id for m in (await backend.recall(request)).memories}
    except EngramError:
        return set()


async def _poisoning(backend: LocalBackend) -> tuple[int, int, int]:
    held = recalled = 0
    for index, case in enumerate(POISONING):
        user_id = f"poison-{index:03d}"
        ids = await _add(backend, user_id, case)
        page = await backend.quarantine_list(QuarantineListRequest(user_id=user_id))
        listed = {m.memory_id for m in page.memories}
        held += bool(ids) and set(ids) <= listed
        recalled += bool(set(ids) & await _recalled(backend, user_id, case.text))
    false_positives = 0
    for index, case in enumerate(BENIGN):
        false_positives += bool(await _add(backend, f"benign-{index:03d}", case))
    return held, recalled, false_positives


async def _visible(backend: LocalBackend, user_id: str, queries: list[str]) -> str:
    """All that recall, user/list, history, the change log and export show of a user, as one text."""
    seen: list[str] = []
    for query in queries:
        request = RecallRequest(user_id=user_id, query=query, min_relevance=0.0, top_k=100)
        seen.append((await backend.recall(request)).model_dump_json())
    listed = await backend.user_list(UserListRequest(user_id=user_id, limit=500))
    seen.append(listed.model_dump_json())
    for memory in listed.memories:
        history = await backend.history(HistoryRequest(user_id=user_id, memory_id=memory.memory_id))
        seen.append(history.model_dump_json())
    seen.append((await backend.change_log(ChangeLogRequest(user_id=user_id, limit=500))).model_dump_json())
    accepted = await backend.user_export(UserExportRequest(user_id=user_id))
    await backend.write_path.drain()
    offset: int | None = 0
    while offset is not None:
        chunk, offset = await backend.privacy.export_chunk(user_id, accepted.task_id, offset, 1 << 20)
        seen.append(chunk.decode())
    return "\n".join(seen)


async def _sensitive(backend: LocalBackend) -> int:
    user_id = "p5-user"
    decisions: list[str] = []
    for case in SENSITIVE:
        request = AddRequest(user_id=user_id, messages=[Message(role="user", content=case.text)])
        accepted = await backend.add(request)
        await backend.write_path.drain()
        decisions.append((await backend.task(TaskRequest(task_id=accepted.task_id))).model_dump_json())
        structured = AddStructuredRequest(
            user_id=user_id, ownership=Ownership.USER, mem_type=MemType.SEMANTIC, content=case.text, sync=True
        )
        with contextlib.suppress(EngramError):  # a refusing policy stores nothing (the default redacts)
            await backend.add_structured(structured)
    visible = await _visible(backend, user_id, [c.text for c in SENSITIVE]) + "\n".join(decisions)
    return sum(case.value in visible for case in SENSITIVE)


async def measure(data_dir: Path, settings: Settings | None = None) -> Figures:
    """Run the sets through a fresh service in ``data_dir``."""
    settings = settings or Settings()
    settings.storage.data_dir = data_dir
    settings.recall.timeout_ms = 60_000
    stores = await open_stores(settings)
    core = build_core(settings, stores)
    service, write_path = core.service, core.write_path
    backend = LocalBackend(core)
    try:
        held, recalled, false_positives = await _poisoning(backend)
        leaked = await _sensitive(backend)
    finally:
        await write_path.close()
        await service.drain()
        await stores.close()
    return Figures(
        poisoning=len(POISONING),
        held=held,
        recalled_while_held=recalled,
        benign=len(BENIGN),
        false_positives=false_positives,
        sensitive=len(SENSITIVE),
        leaked=leaked,
        engine=settings.engine.name,
    )


def report(figures: Figures) -> str:
    """The figures as a Markdown table."""
    return "\n".join(
        [
            f"engine: {figures.engine}; cases: {figures.poisoning + figures.benign + figures.sensitive}",
            "",
            "| check | figure |",
            "|---|---|",
            f"| poisoning cases quarantined | {figures.held}/{figures.poisoning} |",
            f"| quarantined memories returned by recall | {figures.recalled_while_held} |",
            f"| benign look-alikes quarantined (false positives) | "
            f"{figures.false_positives}/{figures.benign} ({figures.false_positive_rate:.1%}) |",
            f"| secret / PII values retrievable verbatim (recall, list, history, change log, export, task) "
            f"| {figures.leaked}/{figures.sensitive} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(
        prog="engram bench poisoning",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="where the fresh stores go (a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engram-bench-poisoning-") as tmp:
        figures = asyncio.run(measure(args.data_dir or Path(tmp)))
    print(report(figures))
    print(json.dumps({**asdict(figures), "false_positive_rate": figures.false_positive_rate}))
    return 0 if figures.passed else 1


if __name__ == "__main__":
    sys.exit(main())
