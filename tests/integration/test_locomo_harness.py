"""The LoCoMo harness end to end on a slice: one conversation, two sessions, real stores and embedder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from engram.models.settings import Settings
from engram.serve import cli
from engram.serve.evaluation import locomo
from engram.serve.evaluation.locomo import EvalOptions, evaluate
from engram.serve.evaluation.locomo_data import HarnessError, load_locomo, memory_contents, select
from engram.storage.embedders import Embedder

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"
needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"LoCoMo development split not found at {DATA}")

FIGURES = ["hit@5", "hit@10", "recall@10", "baseline_hit@5", "baseline_hit@10", "baseline_recall@10"]


@needs_data
async def test_harness_on_two_sessions_reports_every_figure(tmp_path: Path, embedder: Embedder) -> None:
    progress = io.StringIO()
    options = EvalOptions(data=DATA, convs=["conv-30"], max_sessions=2, data_dir=tmp_path / "eval")
    report = await evaluate(options, settings=Settings(), embedder=embedder, progress=progress)

    assert report["mode"] == "turns" and report["conversations"] == ["conv-30"]
    assert report["embedder"] == embedder.model_name
    turns = sum(len(s.turns) for s in load_locomo(DATA)[1].sessions[:2])
    assert report["turns"] == report["memories"] == turns
    assert report["duplicate_contents"] == 0
    assert report["questions"] > 0
    assert report["skipped_questions"]["outside_sessions"] > 0
    for key in FIGURES:
        assert 0.0 <= report[key] <= 1.0, key
    assert report["hit@5"] <= report["hit@10"]
    # Two sessions are a few dozen turns: ten of them find most evidence.
    assert report["hit@10"] >= 0.5
    assert 0 < report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"]
    assert report["timeouts"] == 0
    for figures in report["per_category"].values():
        assert figures["questions"] > 0
        assert 0.0 <= figures["hit@10"] <= 1.0 and 0.0 <= figures["baseline_hit@10"] <= 1.0
    assert report["settings_overrides"]["capacity.total_limit"] >= 100_000
    assert "[1/1] conv-30" in progress.getvalue() and "answered" in progress.getvalue()


@needs_data
async def test_a_used_data_dir_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    options = EvalOptions(data=DATA, convs=["conv-30"], max_sessions=1, data_dir=tmp_path / "eval")
    await evaluate(options, settings=Settings(), embedder=embedder, progress=io.StringIO())
    with pytest.raises(HarnessError, match="already has memories"):
        await evaluate(options, settings=Settings(), embedder=embedder, progress=io.StringIO())


@needs_data
async def test_extract_mode_hands_sessions_to_the_pipeline(tmp_path: Path, embedder: Embedder) -> None:
    options = EvalOptions(data=DATA, convs=["conv-30"], mode="extract", max_sessions=1, data_dir=tmp_path)
    report = await evaluate(options, settings=Settings(), embedder=embedder, progress=io.StringIO())
    assert report["mode"] == "extract" and report["engine"] == "default"
    assert report["turns"] == len(load_locomo(DATA)[1].sessions[0].turns)
    assert report["questions"] > 0
    for key in FIGURES:
        assert 0.0 <= report[key] <= 1.0, key


@needs_data
async def test_an_unknown_engine_is_a_harness_error(tmp_path: Path, embedder: Embedder) -> None:
    options = EvalOptions(
        data=DATA,
        convs=["conv-30"],
        mode="extract",
        engine="no-such-engine",
        max_sessions=1,
        data_dir=tmp_path,
    )
    with pytest.raises(HarnessError, match="engine 'no-such-engine'"):
        await evaluate(options, settings=Settings(), embedder=embedder, progress=io.StringIO())


@needs_data
def test_duplicate_turns_keep_their_own_memory() -> None:
    [conversation] = select(load_locomo(DATA), ["conv-30"], 1)
    turns = [*conversation.turns(), conversation.turns()[0]]
    contents, duplicates = memory_contents(turns)
    assert duplicates == 1
    assert contents[-1] == f"[{turns[0].dia_id}] {contents[0]}"


def test_cli_reports_bad_input_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    assert cli.main(["eval", "locomo", "--data", str(bad)]) == 2
    assert "not a LoCoMo file" in capsys.readouterr().err


@needs_data
def test_cli_rejects_unknown_conversations(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "locomo", "--data", str(DATA), "--convs", "conv-99"]) == 2
    assert "unknown conversation id(s): conv-99" in capsys.readouterr().err


@needs_data
def test_cli_prints_one_json_line_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, embedder: Embedder
) -> None:
    real_evaluate = locomo.evaluate

    async def with_test_embedder(options: EvalOptions, **kwargs: object) -> dict[str, object]:
        return await real_evaluate(options, embedder=embedder, progress=io.StringIO())

    monkeypatch.setattr(locomo, "evaluate", with_test_embedder)
    out = tmp_path / "result.json"
    argv = ["eval", "locomo", "--data", str(DATA), "--convs", "conv-30", "--max-sessions", "1"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    report = json.loads(lines[-1])
    assert json.loads(out.read_text(encoding="utf-8")) == report
    for key in ["hit@5", "hit@10", "recall@10", "baseline_hit@10", "p50_ms", "p95_ms", "p99_ms"]:
        assert key in report
