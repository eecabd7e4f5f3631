"""``superbiz eval service``: the audit's checks, replicas round robin, the slow model."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.agents.simulated import SlowExtractiveModel
from superbiz.api import create_app
from superbiz.config import Settings
from superbiz.evaluation._service_audit import Audit
from superbiz.evaluation._service_load import SessionRun, Turn
from superbiz.evaluation._service_server import LiveServer
from superbiz.evaluation.service import ServiceBenchmarkError, benchmark_service
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.messages import ToolSpec, UserMessage


def lookup(path: str, executed: bool = True, query: str = "q") -> dict[str, Any]:
    return {"arguments": {"query": query}, "executed": executed, "documents": [path]}


def answer(sid: str, turn: int, lookups: list[dict[str, Any]], cites: list[str]) -> Turn:
    body = {
        "session_id": sid,
        "turn": turn,
        "lookups": lookups,
        "citations": [{"path": p} for p in cites],
        "high_mark": 2,
    }
    return Turn("http://a", answer=body, event_sessions={sid})


def rows(session: SessionRun) -> list[dict[str, Any]]:
    """What the service records for ``session`` when it works."""
    return [
        {"turn": t.answer["turn"], "arguments": lk["arguments"], "executed": lk["executed"]}
        for t in session.turns
        if t.answer
        for lk in t.answer["lookups"]
    ]


def healthy() -> SessionRun:
    return SessionRun(
        "s1",
        "q",
        [
            answer("s1", 1, [lookup("a.md")], ["a.md"]),
            answer("s1", 2, [lookup("b.md")], ["a.md", "b.md"]),  # a.md: earlier evidence
        ],
    )


def test_a_healthy_session_passes_the_audit() -> None:
    audit = Audit()
    session = healthy()
    audit.session(session, rows(session))
    assert audit.ok and audit.as_dict()["ok"]
    assert (audit.sessions, audit.lookups, audit.second_turns) == (1, 2, 1)


def test_the_audit_counts_each_kind_of_failure() -> None:
    audit = Audit()
    lost = healthy()
    audit.session(lost, rows(lost)[:1])  # a recorded call went missing
    over = SessionRun("s2", "q", [answer("s2", 1, [lookup(f"{n}.md") for n in "xyz"], [])])
    audit.session(over, rows(over))  # three executed lookups, high mark 2
    foreign = SessionRun("s3", "q", [answer("s3", 1, [lookup("a.md")], ["other.md"])])
    foreign.turns[0].event_sessions.add("s9")  # an event and a citation of another session
    audit.session(foreign, rows(foreign))
    again = SessionRun(
        "s4", "q", [answer("s4", 1, [lookup("a.md")], []), answer("s4", 2, [lookup("a.md")], [])]
    )
    audit.session(again, rows(again))  # the second turn was shown the first's document
    assert (audit.invocation_mismatches, audit.cap_overruns) == (1, 1)
    assert (audit.leaks, audit.first_turn_forgotten) == (2, 1)
    assert not audit.ok
    assert any("shown again ['a.md']" in p for p in audit.problems)


@pytest.fixture
def runtime(tmp_path: Path, use_embedder: Any, kb_writer: Callable[..., Path]) -> Iterator[Runtime]:
    """The small KB behind an extractive runtime."""
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    with open_runtime(settings, kb=kb, model=ExtractiveChatModel()) as opened:
        Ingestor(kb, domains=opened.domains).ingest([kb_writer(tmp_path / "kb")])
        opened.invalidate_map()
        yield opened


def test_two_replicas_round_robin_pass_the_audit(runtime: Runtime) -> None:
    apps = [create_app(runtime.settings, assistant=runtime, warm_up=False) for _ in range(2)]
    with LiveServer(apps[0]) as one, LiveServer(apps[1]) as two:
        report = benchmark_service(
            runtime.settings, clients=3, requests=6, sequential=2, urls=[one.url, two.url + "/"]
        )
        served = [
            sum(
                float(n)
                for n in re.findall(
                    r"^superbiz_turns_total\{[^}]*\} (\S+)$",
                    httpx.get(f"{url}/metrics").text,
                    re.MULTILINE,
                )
            )
            for url in (one.url, two.url)
        ]
    assert report["urls"] == [one.url, two.url]
    assert report["errors"] == 0 and report["audit"]["ok"], report
    assert report["audit"]["second_turns"] > 0
    assert report["chat_concurrent"]["n"] == report["stream_concurrent"]["n"] == 6
    assert all(n > 0 for n in served)  # both replicas answered turns
    with pytest.raises(ServiceBenchmarkError, match="own model"):
        benchmark_service(runtime.settings, urls=[one.url], model_latency_ms=10)


def test_the_slow_model_plays_the_extractive_policy() -> None:
    messages = [UserMessage("Redis pool exhausted")]
    tools = [ToolSpec("lookup_knowledge", "")]
    slow, plain = SlowExtractiveModel(1), ExtractiveChatModel()
    assert slow.name == "extractive+1ms"
    got, expected = slow.complete(messages, tools), plain.complete(messages, tools)
    assert got.message.tool_calls[0].arguments == expected.message.tool_calls[0].arguments
    with pytest.raises(ValueError):
        SlowExtractiveModel(-1)
