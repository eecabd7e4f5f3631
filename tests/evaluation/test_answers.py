"""``superbiz eval answers``: the answer a user reads, scored against the gold documents,
on the example knowledge base (a dataset grouping two questions into one session)."""

from __future__ import annotations

import io
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from superbiz.agents.context import Citation
from superbiz.agents.turn_result import TurnResult
from superbiz.config import Settings
from superbiz.evaluation.answers import evaluate_answers, render_reports, score_answer, summarise

QUESTIONS = [
    # a session of two turns: the follow-up names no subject of its own
    {"id": "w1", "query": "商户说 webhook 一直没收到，我们这边要查什么？", "lang": "zh",
     "gold": ["api/webhook-delivery-retries.md"], "session": "webhook"},
    {"id": "w2", "query": "重试几次之后会放弃？", "lang": "zh",
     "gold": ["api/webhook-delivery-retries.md"], "session": "webhook"},
    {"id": "m1", "query": "主库挂了以后应用一直报 ERROR 1290 read-only，怎么恢复？", "lang": "zh",
     "gold": ["database/mysql-failover.md"]},
    {"id": "c1", "query": "Who won the 2018 World Cup?", "lang": "en",
     "gold": ["payment/not-in-the-kb.md"]},
]  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("answers")
    corpus = Path(str(resources.files("superbiz") / "examples" / "corpus"))
    shutil.copytree(corpus, root / "set" / "corpus")
    lines = [json.dumps(q, ensure_ascii=False) for q in QUESTIONS]
    (root / "set" / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return evaluate_answers(root / "set", Settings(data_dir=root / "data"))


def test_each_answer_is_scored_on_what_it_quotes_and_lists(report: dict[str, Any]) -> None:
    rows = {row["id"]: row for row in report["per_question"]}
    assert report["questions"] == 4 and report["sessions"] == 3
    assert report["player"] == "extractive"
    # the follow-up is the second turn of its session and quotes the webhook runbook first
    assert (rows["w1"]["turn"], rows["w2"]["turn"], rows["m1"]["turn"]) == (1, 2, 1)
    assert rows["w2"]["quoted_paths"][0] == "api/webhook-delivery-retries.md"
    assert rows["w2"]["first_quoted_gold"] and rows["w2"]["gold_in_answer"]
    assert rows["m1"]["quoted_paths"][0] == "database/mysql-failover.md"
    # nothing in the KB answers the World Cup: nothing quoted, no_evidence
    assert rows["c1"]["quoted"] == 0 and rows["c1"]["answer_source"] == "no_evidence"
    assert rows["c1"]["quoted_gold_share"] == 0.0
    for row in rows.values():
        assert row["quoted"] <= 2


def test_the_figures_by_language_and_by_turn(report: dict[str, Any]) -> None:
    overall = report["overall"]
    assert overall["answers"] == 4 and overall["nothing_quoted"] == 1
    assert overall["gold_in_answer"] == 0.75  # three of four; the World Cup has no gold
    assert overall["first_gold_when_held"] == 1.0
    assert set(report["by_lang"]) == {"en", "zh"} and report["by_lang"]["zh"]["answers"] == 3
    assert report["by_turn"]["2"]["answers"] == 1
    assert report["by_turn"]["2"]["first_quoted_gold"] == 1.0
    out = io.StringIO()
    render_reports({"datasets": [report, report]}, Console(file=out, width=200))
    text = out.getvalue()
    assert "first quoted document is gold" in text and "turn 2 (1)" in text
    assert "side by side" in text


def test_score_and_summary_of_answers() -> None:
    quoted = [Citation(1, "A", "a.md"), Citation(2, "B", "b.md")]
    turn = TurnResult("s", 1, "q", "en", citations=quoted, related=[Citation(3, "C", "c.md")])
    held_related = score_answer(turn, ["c.md"])
    assert held_related["gold_in_answer"] and not held_related["gold_quoted"]
    first = score_answer(turn, ["a.md"])
    assert first["first_quoted_gold"] and first["quoted_gold_share"] == 0.5
    summary = summarise(
        [{**held_related, "lang": "en"}, {**first, "lang": "en"}]  # two answers hold gold
    )
    assert summary["gold_in_answer"] == 1.0 and summary["first_gold_when_held"] == 0.5
    assert summary["quoted_per_answer"] == 2.0 and summary["related_per_answer"] == 1.0
    assert summary["quoted_gold_share"] == 0.25
    assert summary["only_earlier_quoted"] == 0.0


def test_an_answer_quoting_only_earlier_turns_documents_is_counted() -> None:
    """In a running session of unrelated questions, an answer from another question's
    documents (the follow-up reading of a question nothing answers) is counted apart."""
    quoted = [Citation(1, "A", "a.md"), Citation(2, "B", "b.md")]
    held = TurnResult("s", 2, "q", "en", citations=quoted, reused=["a.md", "b.md"])
    mixed = TurnResult("s", 3, "q", "en", citations=quoted, reused=["a.md"])
    rows = [{**score_answer(t, []), "lang": "en"} for t in (held, mixed)]
    assert [r["only_earlier_quoted"] for r in rows] == [True, False]
    assert summarise(rows)["only_earlier_quoted"] == 0.5


def test_running_sessions_answer_as_well_as_fresh_ones(tmp_path: Path) -> None:
    """The example set's 16 questions asked 4 to a session, in a seeded shuffle: what
    each session already holds never makes a later question's answer worse."""
    examples = Path(str(resources.files("superbiz") / "examples"))
    shutil.copytree(examples / "corpus", tmp_path / "set" / "corpus")
    shutil.copy(examples / "queries.jsonl", tmp_path / "set" / "queries.jsonl")
    settings = Settings(data_dir=tmp_path / "data")

    fresh = evaluate_answers(tmp_path / "set", settings)
    running = evaluate_answers(tmp_path / "set", settings, running=4)

    assert (fresh["sessions"], running["sessions"], running["running"]) == (16, 4, 4)
    assert sorted(running["by_turn"]) == ["1", "2", "3", "4"]
    first = {row["id"]: row["first_quoted_gold"] for row in fresh["per_question"]}
    for row in running["per_question"]:
        assert row["first_quoted_gold"] or not first[row["id"]], row["id"]
    assert running["overall"]["gold_in_answer"] >= fresh["overall"]["gold_in_answer"]
