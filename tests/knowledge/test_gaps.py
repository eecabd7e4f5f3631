"""The knowledge-gaps report on real traffic: a small KB (real USE, Milvus Lite), turns
the KB answers and turns it cannot, an MCP session's lookups, thumbs on some answers;
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.config import Settings
from superbiz.knowledge.coverage.gaps import gap_report, normalise, parse_since
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.mcp_server import GovernedRetrieval

#: answered at PRECISE level by the small KB
ANSWERED = {
    "rate": "How do I raise the API rate limit after 429 Too Many Requests?",
    "redis": "Redis connection pool exhausted, what should I check?",
    "pay": "支付回调超时怎么办？",
}
#: nothing in the small KB is about Kafka
KAFKA = (
    "How do I rotate the Kafka TLS certificates?",
    "How to rotate Kafka TLS certificates",
    "Kafka TLS certificate rotation steps",
)
#: found only at REFERENCE level (the glossary mentions it in passing)
WEAK = "What does idempotency mean?"


@pytest.fixture
def assistant(
    tmp_path: Path, database_url: str, use_embedder: Any, small_kb: Path
) -> Iterator[Runtime]:
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url)
    kb = KnowledgeBase(settings, embedder=use_embedder)
    runtime = open_runtime(settings, kb=kb)
    Ingestor(kb, domains=runtime.domains).ingest([small_kb])
    yield runtime
    runtime.close()


def ask(runtime: Runtime, session: str, question: str) -> dict[str, Any]:
    turn = runtime.ask(session, question).result
    return {
        "turn": turn.turn,
        "levels": {o.level.value for o in turn.lookups if o.level},
    }


def traffic(runtime: Runtime) -> dict[str, Any]:
    """Questions the KB answers (two rated up, one rated down), the Kafka question three
    ways in chat and once over MCP, and one found only at REFERENCE."""
    asked = {key: ask(runtime, f"ok-{key}", q) for key, q in ANSWERED.items()}
    for key in ("rate", "pay"):
        assert asked[key]["levels"] & {"PRECISE", "HIGHLY_RELEVANT"}, asked[key]
        runtime.feedback.rate(f"ok-{key}", asked[key]["turn"], "up", None)
    runtime.feedback.rate("ok-redis", asked["redis"]["turn"], "down", "wrong pool setting")
    for n, question in enumerate(KAFKA):
        assert not ask(runtime, f"kafka-{n}", question)["levels"] & {"PRECISE"}
    mcp = GovernedRetrieval(runtime.settings, kb=runtime.kb)
    answer = mcp.call("mcp-kafka", {"query": "Kafka TLS certificate rotation"})
    assert not answer.is_error
    weak = ask(runtime, "weak", WEAK)
    assert weak["levels"] == {"REFERENCE"}, weak
    return asked


def report(runtime: Runtime, **options: Any) -> dict[str, Any]:
    kb = runtime.kb
    found = gap_report(kb.engine, kb.embedder, kb.documents, runtime.settings.gap_config, **options)
    return found.model_dump(mode="json")


def test_the_unanswerable_cluster_comes_first_and_rated_up_answers_never_appear(
    assistant: Runtime,
) -> None:
    traffic(assistant)
    found = report(assistant)

    first = found["clusters"][0]
    assert set(first["examples"]) <= {*KAFKA, "Kafka TLS certificate rotation"}
    assert first["count"] == 4 and first["sessions"] == 4  # three chats and the MCP session
    assert first["reasons"]["no_result"] == 4
    listed = [q for c in found["clusters"] for q in c["examples"]]
    assert ANSWERED["rate"] not in listed and ANSWERED["pay"] not in listed
    # the answer rated down is a gap although its lookup was PRECISE, with the comment
    down = next(c for c in found["clusters"] if ANSWERED["redis"] in c["examples"])
    assert down["thumbs_down"] == 1 and down["comments"] == ["wrong pool setting"]
    weak = next(c for c in found["clusters"] if WEAK in c["examples"])
    assert weak["reasons"] == {"reference": 1}
    assert [d["path"] for d in weak["closest_documents"]] == ["glossary.md"]
    assert weak["closest_documents"][0]["title"] == "Glossary"


def test_domain_and_since_narrow_the_report(assistant: Runtime) -> None:
    traffic(assistant)
    everything = report(assistant)
    domain = everything["clusters"][0]["domain"]
    narrowed = report(assistant, domain=domain)
    assert narrowed["clusters"] and all(c["domain"] == domain for c in narrowed["clusters"])
    assert len(narrowed["clusters"]) < len(everything["clusters"])
    later = report(assistant, since=datetime.now(UTC) + timedelta(minutes=1))
    assert later["clusters"] == [] and later["questions"] == 0


def test_rating_a_gap_up_takes_it_out(assistant: Runtime) -> None:
    """A person found the answer good: whatever its lookups found, it is no gap."""
    weak = ask(assistant, "weak", WEAK)
    assert [c["examples"] for c in report(assistant)["clusters"]] == [[WEAK]]
    assistant.feedback.rate("weak", weak["turn"], "up", None)
    assert report(assistant)["clusters"] == []


def test_at_most_max_questions_wordings_are_embedded(assistant: Runtime) -> None:
    for n, question in enumerate(KAFKA):
        ask(assistant, f"kafka-{n}", question)
    ask(assistant, "kafka-again", KAFKA[0])
    capped = assistant.settings.gap_config.model_copy(update={"max_questions": 1})
    kb = assistant.kb
    found = gap_report(kb.engine, kb.embedder, kb.documents, capped).model_dump(mode="json")
    assert found["unclustered"] == 2  # the two wordings asked once
    assert found["clusters"][0]["examples"] == [KAFKA[0]] and found["clusters"][0]["count"] == 2


def test_since_reads_durations_and_dates() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert parse_since("30m", now) == now - timedelta(minutes=30)
    assert parse_since("2w", now) == now - timedelta(weeks=2)
    assert parse_since("2026-11-30T08:00+01:00", now) == datetime(2026, 11, 30, 7, tzinfo=UTC)
    with pytest.raises(ValueError, match="30m, 24h, 7d, 2w"):
        parse_since("last week", now)


def test_wordings_differing_in_case_space_or_final_mark_are_one_question() -> None:
    assert normalise("Kafka  TLS?") == normalise("kafka tls") == normalise("ＫＡＦＫＡ TLS。")
