"""``superbiz gaps``, ``superbiz feedback export`` (round trip through ``eval retrieval``
and ``eval agent``), ratings in ``superbiz trace`` and the ``eval gaps`` benchmark."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from superbiz.agents.runtime import open_runtime
from superbiz.cli import app
from superbiz.config import Settings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder

runner = CliRunner()
#: answered by the small KB, and rated up
RATED_UP = {
    "up-rate": "How do I raise the API rate limit after 429 Too Many Requests?",
    "up-redis": "Redis connection pool exhausted, what should I check?",
    "up-pay": "支付回调超时怎么办？",
}
KAFKA = ("How do I rotate the Kafka TLS certificates?", "Kafka TLS certificate rotation steps")


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        yield


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def rated(
    tmp_path_factory: pytest.TempPathFactory, use_embedder: Any, kb_writer: Any
) -> dict[str, Any]:
    """A data dir with traffic: three answers rated up, one rated down, two Kafka
    questions the KB cannot answer."""
    root = tmp_path_factory.mktemp("rated")
    folder = kb_writer(root / "kb")
    settings = Settings(data_dir=root / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    with open_runtime(settings, kb=kb) as runtime:
        Ingestor(kb, domains=runtime.domains).ingest([folder])
        for session, question in RATED_UP.items():
            turn = runtime.ask(session, question).result.turn
            runtime.feedback.rate(session, turn, "up", None)
        turn = runtime.ask("down", "What does idempotency mean?").result.turn
        runtime.feedback.rate("down", turn, "down", "want the API retry rules")
        for n, question in enumerate(KAFKA):
            runtime.ask(f"kafka-{n}", question)
    return {"root": root, "data_dir": root / "data"}


def test_export_round_trips_through_eval_retrieval_and_eval_agent(
    rated: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "mine"
    exported = invoke("feedback", "export", "--out", out, "--data-dir", rated["data_dir"], "--json")
    assert exported.exit_code == 0, exported.output
    summary = json.loads(exported.stdout)
    assert summary["queries"] == 3 and summary["rated_down"] == 1 and summary["documents"] == 5
    lines = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    assert {x["query"] for x in lines} == set(RATED_UP.values())
    assert {x["id"].split("#")[0] for x in lines} == set(RATED_UP)
    gold = {x["query"]: x["gold"] for x in lines}
    assert gold[RATED_UP["up-rate"]] == ["api/rate-limit.md"]
    (down,) = [json.loads(x) for x in (out / "rated-down.jsonl").read_text().splitlines()]
    assert down["comment"] == "want the API retry rules" and "gold" not in down
    assert (out / "corpus" / "api" / "rate-limit.md").is_file()

    evaluated = invoke("eval", "retrieval", out, "--data-dir", tmp_path / "eval", "--json")
    assert evaluated.exit_code == 0, evaluated.output
    report = json.loads(evaluated.stdout)
    assert report["queries"] == summary["queries"]
    # on the unchanged knowledge base, the benchmark finds what the recorded turns found
    assert report["overall"]["recall@1"] == summary["recorded"]["recall@1"] == 1.0

    agent = invoke("eval", "agent", out, "--data-dir", tmp_path / "agent", "--json")
    assert agent.exit_code == 0, agent.output
    agent_report = json.loads(agent.stdout)
    assert agent_report["questions"] == 3
    assert agent_report["evidence_recall"] == 1.0  # the answers cite their gold again


def test_export_refuses_a_folder_that_is_not_empty(rated: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = invoke("feedback", "export", "--out", tmp_path, "--data-dir", rated["data_dir"])
    assert result.exit_code == 2
    assert "is not an empty folder" in result.output
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_gaps_lists_the_unanswered_cluster_first(rated: dict[str, Any]) -> None:
    result = invoke("gaps", "--data-dir", rated["data_dir"], "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report["clusters"][0]["examples"]) == set(KAFKA)
    listed = {q for c in report["clusters"] for q in c["examples"]}
    assert not listed & set(RATED_UP.values())
    table = invoke("gaps", "--data-dir", rated["data_dir"], "--since", "1d")
    assert table.exit_code == 0
    assert "Kafka TLS" in table.stdout and "thumbs_down 1" in table.stdout
    bad = invoke("gaps", "--data-dir", rated["data_dir"], "--since", "last week")
    assert bad.exit_code == 2 and "--since" in bad.output


def test_trace_shows_each_turns_rating(rated: dict[str, Any]) -> None:
    result = invoke("trace", "down", "--data-dir", rated["data_dir"])
    assert result.exit_code == 0, result.output
    assert "rated 👎 down" in result.stdout and "want the API retry rules" in result.stdout
    records = json.loads(invoke("trace", "down", "--data-dir", rated["data_dir"], "--json").stdout)
    assert {r["feedback"]["rating"] for r in records} == {"down"}
    assert {"trace_id"} <= set(records[0])


def test_eval_gaps_prints_numbers_and_writes_json(tmp_path: Path) -> None:
    output = tmp_path / "gaps.json"
    result = invoke("eval", "gaps", "--lookups", "3000", "--output", output)
    assert result.exit_code == 0, result.output
    assert "gaps report on 3,000 lookups" in result.stdout
    report = json.loads(output.read_text())
    assert report["lookups"] == 3000 and report["database"] == "sqlite"
    assert report["gaps"] > 0 and report["clusters"] > 0
    assert set(report["report_s"]) == {"first", "median", "max"}
    assert report["report_cpu_s"]["median"] > 0 and len(report["load_average"]) == 3
