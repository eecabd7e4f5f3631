"""``evaluate_agent``: the executor loop over a dataset under a behaviour profile.

Real KBs (USE + Milvus Lite + SQLite). The module's workspace holds a dataset without an
``api`` domain and its data directory, in which the built-in example KB (the
iss003_replay fallback, ``data_dir/builtin``) is ingested once up front, so every run
here finds it unchanged.

Each Milvus Lite file is reopened only by tests of this module, close together in time:
pymilvus keeps a closed client's channel to Lite's in-process server alive, and after
about 30 s idle the server answers its keep-alive pings with GOAWAY, which makes the next
open of that file fail (see the report on ``MilvusChunkStore``).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fakes.openai_server import FakeOpenAIServer
from fakes.real_transcripts import QWEN_LIVE_TURN3, load_transcript, write_transcript_dataset
from superbiz.agents.executor import Executor
from superbiz.config import GovernanceConfig, GovernanceSettings, LLMSettings, Settings
from superbiz.evaluation.agent import builtin_dataset, evaluate_agent, render_agent_report
from superbiz.evaluation.profiles import ISS003_SCRIPT, make_profile
from superbiz.exceptions import SuperbizError
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
NUMBER_KEYS = {
    "executed_lookups_mean",
    "executed_lookups_p95",
    "blocked_mean",
    "blocked_p95",
    "redundant_executed_mean",
    "redundant_executed_p95",
    "steps_mean",
    "steps_p95",
    "evidence_recall",
    "ms_per_step_p50",
    "seconds",
}
REPORT_KEYS = NUMBER_KEYS | {
    "copies",
    "relabelled",
    "dataset",
    "profile",
    "governance",
    "questions",
    "blocked_call_ms",
    "governance_ms_per_step",
}


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        yield


@pytest.fixture(scope="module")
def workspace(
    tmp_path_factory: pytest.TempPathFactory,
    use_embedder: Embedder,
    kb_writer: Callable[..., Path],
) -> dict[str, Path]:
    """``no_api``: a dataset with payment and infrastructure only; ``data_dir``: its data
    directory; ``builtin``: ``data_dir/builtin`` with the example KB already ingested."""
    root = tmp_path_factory.mktemp("agent-eval")
    no_api = root / "no-api"
    corpus = kb_writer(no_api / "corpus")  # the small KB, then keep payment + infrastructure
    for other in ("api", "ops"):
        shutil.rmtree(corpus / other)
    (corpus / "glossary.md").unlink()
    assert sorted(str(p.relative_to(corpus)) for p in corpus.rglob("*.md")) == [REDIS, PAYMENT]
    queries = [
        {"id": "q1", "query": "支付回调超时怎么办", "lang": "zh", "gold": [PAYMENT]},
        {"id": "q2", "query": "Redis connection pool exhausted", "lang": "en", "gold": [REDIS]},
    ]
    (no_api / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    builtin = root / "data" / "builtin"
    kb = KnowledgeBase(Settings(data_dir=builtin), embedder=use_embedder)
    try:
        report = Ingestor(kb).ingest([builtin_dataset() / "corpus"], prune=True)
        assert report.added and not report.skipped
    finally:
        kb.close()
    return {"no_api": no_api, "data_dir": root / "data", "builtin": builtin}


def evaluate(
    workspace: dict[str, Path], profile: str, *, max_steps: int = 10, **options: Any
) -> dict[str, Any]:
    settings = Settings(
        data_dir=workspace["data_dir"], governance=GovernanceSettings(max_steps=max_steps)
    )
    return evaluate_agent(workspace["no_api"], settings, profile=profile, **options)


def check_report(report: dict[str, Any]) -> None:
    assert set(report) >= REPORT_KEYS
    for key in NUMBER_KEYS:
        assert isinstance(report[key], int | float) and math.isfinite(report[key]), key
    assert set(report["blocked_call_ms"]) == {"p50", "p95"}
    assert set(report["governance_ms_per_step"]) == {"p50", "p95"}
    assert 0 <= report["evidence_recall"] <= 1


def test_governed_and_ungoverned_side_by_side(workspace: dict[str, Path]) -> None:
    progress: list[str] = []
    totals: list[int] = []

    governed = evaluate(
        workspace,
        "over_cautious",
        max_steps=5,
        on_total=totals.append,
        on_progress=progress.append,
    )
    ungoverned = evaluate(workspace, "over_cautious", max_steps=5, governance="off")

    for report in (governed, ungoverned):
        check_report(report)
        assert report["dataset"] == str(workspace["no_api"])
        assert report["profile"] == "over_cautious" and report["questions"] == 2
        assert report["evidence_recall"] == 1.0
        assert report["redundant_executed_mean"] == (0 if report is governed else 5)
        assert report["grounded_rate"] == 1.0 and report["invalid_citations_mean"] == 0
        assert report["model_calls_mean"] == report["steps_mean"]  # the map plans, no model
        assert report["prompt_tokens_mean"] == 0  # a profile reports no usage
    assert (governed["governance"], ungoverned["governance"]) == ("on", "off")
    assert totals == [2] and progress == ["q1", "q2"]

    # the plan's lookup runs before the first step: governed, the first model step is
    # already blocked; ungoverned, it is one more lookup within the same step cap
    assert governed["executed_lookups_mean"] == 1.0
    assert governed["blocked_mean"] == 3.0
    assert governed["steps_mean"] == 4.0
    assert governed["blocked_call_ms"]["p50"] is not None
    assert ungoverned["executed_lookups_mean"] == 6.0  # the plan's, then one per step
    assert ungoverned["blocked_mean"] == 0.0 and ungoverned["steps_mean"] == 6.0
    assert ungoverned["blocked_call_ms"] == {"p50": None, "p95": None}
    assert governed["executed_lookups_mean"] <= 0.3 * ungoverned["executed_lookups_mean"]
    assert governed["evidence_recall"] >= 0.98 * ungoverned["evidence_recall"]


def test_governed_cap_and_off_as_one_report_over_the_same_plans(
    workspace: dict[str, Path],
) -> None:
    report = evaluate(workspace, "over_cautious", max_steps=5, governance=["on", "cap:3", "off"])

    assert [run["governance"] for run in report["runs"]] == ["on", "cap:3", "off"]
    # one unscoped lookup of each question shows its gold runbook; so does the turn
    assert report["one_lookup_gold_shown"] == 1.0
    assert (report["scoped_plans"], report["scoped_plan_domain_recall"]) == (0.0, None)
    on, cap, off = report["runs"]
    for run in report["runs"]:
        check_report(run)
        assert run["plan_domain_recall"] == report["plan_domain_recall"]
    assert [r["executed_lookups_mean"] for r in (on, cap, off)] == [1.0, 3.0, 6.0]
    assert cap["blocked_mean"] == 0.0  # at the cap the tool is withdrawn: it answers
    assert on["evidence_recall"] >= cap["evidence_recall"]
    # per question, what each lookup did: where two variants differ
    for run in report["runs"]:
        traces = run["per_question"]
        assert [t["id"] for t in traces] == ["q1", "q2"]
        executed = [sum(lookup["executed"] for lookup in t["lookups"]) for t in traces]
        assert sum(executed) / len(traces) == run["executed_lookups_mean"]
        assert sum(t["evidence_recall"] for t in traces) / 2 == run["evidence_recall"]
        for trace in traces:
            first = trace["lookups"][0]
            # the map of two one-document domains cannot be measured: the plan's lookup
            # names no domain, it searches the whole KB
            assert (first["origin"], first["named"], first["executed"]) == ("plan", False, True)
            assert set(first) >= {"domain", "query", "level", "dedup_reason", "gold"}
    blocked = [lookup for t in on["per_question"] for lookup in t["lookups"][1:]]
    assert blocked and not any(lookup["executed"] for lookup in blocked)
    assert {lookup["dedup_reason"] for lookup in blocked} <= {
        "domain_retrieved",
        "supplement_needs_dimension",
        "budget_exhausted",
    }


def test_questions_asked_in_one_running_session_find_what_fresh_ones_do(
    workspace: dict[str, Path],
) -> None:
    """Both questions in one session per variant: the second is planned with, and shown,
    what the first kept, and still finds its own runbook, governed as under the cap."""
    fresh = evaluate(workspace, "over_cautious", max_steps=5, governance=["on", "cap:3"])
    running = evaluate(
        workspace, "over_cautious", max_steps=5, governance=["on", "cap:3"], running=2
    )

    assert (fresh["running"], running["running"]) == (None, 2)
    on, cap = running["runs"]
    for before, after in zip(fresh["runs"], running["runs"], strict=True):
        check_report(after)
        assert len(after["per_question"]) == 2
        assert after["evidence_recall"] >= before["evidence_recall"] == 1.0
    assert on["evidence_recall"] >= cap["evidence_recall"]
    assert on["executed_lookups_mean"] <= cap["executed_lookups_mean"]


def test_an_unknown_governance_variant_is_a_config_error(workspace: dict[str, Path]) -> None:
    with pytest.raises(SuperbizError, match="cap:N"):
        evaluate(workspace, "obedient", governance="cap:")


def test_iss003_replay_falls_back_to_the_builtin_kb_with_a_notice(
    workspace: dict[str, Path],
) -> None:
    notices: list[str] = []

    governed = evaluate(workspace, "iss003_replay", limit=2, on_notice=notices.append)
    ungoverned = evaluate(workspace, "iss003_replay", limit=2, governance="off")

    [notice] = notices
    assert str(workspace["no_api"]) in notice
    assert "no 'infrastructure' and 'api' domains" in notice
    assert "built-in example knowledge base" in notice
    for report in (governed, ungoverned):
        check_report(report)
        assert report["dataset"] == str(builtin_dataset())
        assert report["questions"] == 2
    # design §5.4: two or three executed lookups of the log's ten. The example KB's two
    # payment questions are not answered by the replay's planned infrastructure lookup:
    # each runs it, the turn's one named page and the log's first api call
    assert governed["executed_lookups_mean"] == 3.0
    assert governed["blocked_mean"] == 7.0
    assert governed["redundant_executed_mean"] == 0.0
    assert ungoverned["executed_lookups_mean"] == 10.0
    assert ungoverned["blocked_mean"] == 0.0


def test_iss003_replay_without_fallback_when_the_dataset_has_both_domains(
    workspace: dict[str, Path],
) -> None:
    notices: list[str] = []
    report = evaluate_agent(
        builtin_dataset(),
        Settings(data_dir=workspace["builtin"]),
        profile="iss003_replay",
        limit=1,
        on_notice=notices.append,
    )

    assert notices == []
    assert report["dataset"] == str(builtin_dataset())
    assert (report["executed_lookups_mean"], report["blocked_mean"]) == (3.0, 7.0)


@pytest.mark.parametrize("governed", [True, False], ids=["governed", "ungoverned"])
def test_iss003_replay_call_by_call_on_the_example_kb(
    workspace: dict[str, Path], use_embedder: Embedder, governed: bool
) -> None:
    kb = KnowledgeBase(Settings(data_dir=workspace["builtin"]), embedder=use_embedder)
    try:
        assert {"infrastructure", "api"} <= set(kb.domains())
        model = make_profile("iss003_replay", list(kb.domains()))
        lookup = GovernedLookup(kb, InMemorySessionTracker())
        executor = Executor(model, lookup, GovernanceConfig(enabled=governed))
        result = executor.run(
            "iss003", "日志报 Could not get a resource from the pool 是什么原因", turn=1
        )
    finally:
        kb.close()

    assert [o.arguments["domain"] for o in result.lookups] == [d for d, _ in ISS003_SCRIPT]
    assert result.lookups[0].shown  # the first infrastructure lookup found the runbook
    if governed:  # only the first infrastructure and the first api call run
        assert [o.executed for o in result.lookups] == [i in (0, 3) for i in range(10)]
        assert (result.executed, result.blocked) == (2, 8)
        assert sum(o.redundant for o in result.lookups) == 0
    else:  # seed 002: 10 executed
        assert (result.executed, result.blocked) == (10, 0)


def test_a_dataset_without_queries_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    with pytest.raises(SuperbizError, match=r"queries\.jsonl"):
        evaluate_agent(tmp_path, Settings(data_dir=tmp_path / "data"), profile="obedient")


def test_the_kb_is_closed_when_the_queries_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[KnowledgeBase] = []
    closed: list[KnowledgeBase] = []
    original_init, original_close = KnowledgeBase.__init__, KnowledgeBase.close

    def init(self: KnowledgeBase, *args: Any, **kwargs: Any) -> None:
        opened.append(self)
        original_init(self, *args, **kwargs)

    def close(self: KnowledgeBase) -> None:
        closed.append(self)
        original_close(self)

    monkeypatch.setattr(KnowledgeBase, "__init__", init)
    monkeypatch.setattr(KnowledgeBase, "close", close)
    (tmp_path / "corpus").mkdir()
    try:
        with pytest.raises(SuperbizError, match=r"queries\.jsonl"):
            evaluate_agent(tmp_path, Settings(data_dir=tmp_path / "data"), profile="obedient")
        leaked = [kb for kb in opened if not any(kb is c for c in closed)]
    finally:
        for kb in opened:
            if not any(kb is c for c in closed):
                original_close(kb)

    assert opened and leaked == []


# -- a real model plays the agent (replayed) ------------------------------------------------

TRANSCRIPT_QUERIES = [
    ("支付回调超时，是不是 Redis 连接池的问题？", "infrastructure/redis-pool-and-eviction.md"),
    (
        "Pod keeps restarting with exit code 137, what should I check?",
        "infrastructure/k8s-crashloopbackoff.md",
    ),
    (
        "日志报 Could not get a resource from the pool 是什么原因",
        "infrastructure/redis-pool-and-eviction.md",
    ),
]


def test_the_configured_model_plays_the_agent_replayed(
    workspace: dict[str, Path], tmp_path: Path
) -> None:
    dataset = tmp_path / "transcript"
    shutil.copytree(builtin_dataset() / "corpus", dataset / "corpus")
    lines = [
        {"id": f"t{i}", "query": q, "lang": "zh" if i != 1 else "en", "gold": [gold]}
        for i, (q, gold) in enumerate(TRANSCRIPT_QUERIES)
    ]
    (dataset / "queries.jsonl").write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
    )
    with FakeOpenAIServer() as server:
        server.replay(load_transcript())
        llm = LLMSettings(base_url=server.base_url, model="qwen2.5-coder-1.5b", max_retries=0)
        settings = Settings(data_dir=workspace["data_dir"] / "transcript", llm=llm)
        report = evaluate_agent(dataset, settings, use_llm=True, governance=["on", "cap:3"])

    assert (report["profile"], report["model"], report["questions"]) == (
        "llm",
        "qwen2.5-coder-1.5b",
        3,
    )
    for run in report["runs"]:
        check_report(run)
        # every answer is grounded: the model's own, repaired, or the extractive one
        assert run["grounded_rate"] == 1.0
        # ...and the replayed answers, all prompt copies or memory, were all replaced
        assert run["answer_sources"] == {
            "model": 0,
            "repaired": 0,
            "extractive": 3,
            "no_evidence": 0,
        }
        assert run["executed_lookups_mean"] >= 1.0  # the plan's lookup, at least
        assert run["model_calls_mean"] >= 2.0  # planner and executor
        assert run["prompt_tokens_mean"] > 2000  # the recorded usage: the planner's 2 000+


def test_copies_and_relabelled_answers_are_counted_next_to_grounded_rate(
    workspace: dict[str, Path], tmp_path: Path
) -> None:
    """The live run replayed: the follow-up, asked alone, still writes back the earlier
    turn's extractive answer (its label included); the model's own-memory answers are
    replaced. Both counts stand next to grounded_rate, in the JSON and the table."""
    dataset = write_transcript_dataset(tmp_path / "live")
    with FakeOpenAIServer() as server:
        server.replay(load_transcript(QWEN_LIVE_TURN3))
        llm = LLMSettings(base_url=server.base_url, model="qwen2.5-coder-1.5b", max_retries=0)
        settings = Settings(data_dir=workspace["data_dir"] / "live", llm=llm)
        report = evaluate_agent(dataset, settings, use_llm=True)

    check_report(report)
    assert report["questions"] == 7
    assert report["copies"] == {"turn": 1, "documents": 0}
    [copy] = [q for q in report["per_question"] if q["copied"]]
    assert copy["id"] == "live-1b" and copy["answer_source"] == "extractive"
    sources = report["answer_sources"]
    assert report["relabelled"] == sources["extractive"] >= 5  # as many as the live run
    console = Console(record=True, width=120)
    render_agent_report(report, console)
    table = console.export_text()
    assert re.search(r"grounded_rate.*\n.*copies: earlier turn/documents\s+│\s+1/0", table)
    assert re.search(rf"relabelled extractive\s+│\s+{report['relabelled']}", table)


def test_the_llm_player_needs_a_configured_model(workspace: dict[str, Path]) -> None:
    with pytest.raises(SuperbizError, match=r"llm\.model"):
        evaluate(workspace, "obedient", use_llm=True)
