"""``superbiz ask``, ``trace`` and ``eval agent`` end to end (real USE, Milvus Lite, SQLite).

The CLI loads its embedder through ``make_embedder``; the tests hand it the session's one
real USE model instead of loading it for every command.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from superbiz import cli
from superbiz.agents.executor import Executor
from superbiz.config import Settings
from superbiz.evaluation.profiles import make_profile
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import make_tracker
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder
from superbiz.storage.invocations import InvocationRepository

PAYMENT = "payment/支付失败排查.md"
RATE_LIMIT = "api/rate-limit.md"
REDIS = "infrastructure/redis-pool.md"
LOOKUP_KEYS = {
    "arguments",
    "domain",
    "executed",
    "relevance_level",
    "dedup_reason",
    "verdict",
    "water_level",
    "budget_left",
    "documents",
    "latency_ms",
    "error",
}
AGENT_KEYS = {
    "executed_lookups_mean",
    "blocked_mean",
    "redundant_executed_mean",
    "evidence_recall",
    "steps_mean",
}

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        patch.setattr(cli.console, "_width", 200)  # table rows on one line each
        yield


def invoke(*args: str | Path) -> Result:
    return runner.invoke(cli.app, [str(a) for a in args])


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, kb_writer: Callable[..., Path]) -> Path:
    """The small KB as an evaluation dataset (it has infrastructure and api)."""
    root = tmp_path_factory.mktemp("cli-agent") / "dataset"
    kb_writer(root / "corpus")
    queries = [
        {"id": "q1", "query": "Redis 连接池耗尽", "lang": "zh", "gold": [REDIS]},
        {"id": "q2", "query": "How do I raise my API quota?", "lang": "en", "gold": [RATE_LIMIT]},
    ]
    (root / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    return root


@pytest.fixture(scope="module")
def data_dir(dataset: Path) -> Path:
    """One data directory for every command of the module: ``ingest`` fills it once, then
    ``ask``, ``trace`` and ``eval agent`` (same corpus: nothing to re-ingest) reopen it."""
    target = dataset.parent / "data"
    result = invoke("ingest", dataset / "corpus", "--data-dir", target)
    assert result.exit_code == 0, result.output
    return target


@pytest.fixture
def session() -> str:
    return f"cli-{uuid.uuid4().hex[:8]}"


def ask(data_dir: Path, question: str, session: str, *extra: str) -> Result:
    return invoke("ask", question, "--session", session, "--data-dir", data_dir, *extra)


# -- ask ---------------------------------------------------------------------------------------


def test_ask_json_prints_the_answer_citations_and_lookups(data_dir: Path, session: str) -> None:
    result = ask(data_dir, "支付回调超时怎么办？", session, "--json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["session_id"] == session and data["turn"] == 1
    assert data["question"] == "支付回调超时怎么办？"
    assert data["extractive"] is True
    assert data["answer"].startswith("【抽取式回答】")  # a Chinese question, a Chinese answer
    assert "支付渠道回调超时时" in data["answer"] and "[1]" in data["answer"]
    assert [(c["ref"], c["path"], c["domain"]) for c in data["citations"]] == [
        (1, PAYMENT, "payment")
    ]
    [lookup] = data["lookups"]
    assert set(lookup) >= LOOKUP_KEYS
    assert lookup["arguments"]["query"] == "支付回调超时怎么办？"
    assert lookup["executed"] is True and lookup["relevance_level"] == "PRECISE"
    assert lookup["documents"] == [PAYMENT] and lookup["error"] is None
    assert lookup["origin"] == "plan"  # run by code before the model's first step
    assert (data["steps"], data["stopped_by"]) == (1, "answer")
    assert (data["grounded"], data["invalid_citations"]) == (True, 0)
    assert data["answer_source"] == "extractive"  # no LLM: quoted from the start
    assert result.stderr == ""  # --json: nothing else is printed


def test_an_english_question_gets_an_english_answer(data_dir: Path, session: str) -> None:
    result = ask(data_dir, "How do I raise my API quota?", session, "--json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["answer"].startswith("[Extractive answer]")
    assert "Sources:" in data["answer"]
    assert RATE_LIMIT in [c["path"] for c in data["citations"]]


def test_ask_plain_prints_the_answer_and_each_lookup(data_dir: Path, session: str) -> None:
    result = ask(data_dir, "支付回调超时怎么办？", session)

    assert result.exit_code == 0, result.output
    assert "answer · extractive" in result.stdout
    assert "【抽取式回答】" in result.stdout
    assert "grounded · " in result.stdout and "not grounded" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.startswith("lookup")]
    assert len(lines) == 1
    assert "domain=payment" in lines[0] and "executed" in lines[0] and "PRECISE" in lines[0]


def test_a_second_ask_in_the_session_is_turn_two(data_dir: Path, session: str) -> None:
    ask(data_dir, "支付回调超时怎么办？", session, "--json")
    result = ask(data_dir, "支付回调超时怎么办？", session, "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["turn"] == 2


def test_an_ask_without_a_session_is_a_turn_one_of_its_own(data_dir: Path) -> None:
    """Asked on its own, the same question twice is answered twice the same: not as a
    follow-up that finds its runbook "shown earlier in this session"."""
    runs = [invoke("ask", "支付回调超时怎么办？", "--data-dir", data_dir, "--json") for _ in "ab"]
    assert all(run.exit_code == 0 for run in runs), runs[-1].output
    first, second = (json.loads(run.stdout) for run in runs)
    assert (first["turn"], second["turn"]) == (1, 1)
    assert first["session_id"] != second["session_id"]
    assert first["answer"] == second["answer"] and first["reused_evidence"] == []
    follow_up = ask(data_dir, "支付回调超时怎么办？", first["session_id"], "--json")
    assert json.loads(follow_up.stdout)["turn"] == 2
    plain = invoke("ask", "支付回调超时怎么办？", "--data-dir", data_dir)
    assert re.search(r"session ask-\w+ · --session ask-\w+ continues it", plain.stderr)


def test_ask_with_a_dead_llm_endpoint_exits_2_with_one_line(data_dir: Path, session: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    env = {
        "SUPERBIZ_LLM__MODEL": "some-model",
        "SUPERBIZ_LLM__BASE_URL": base_url,
        "SUPERBIZ_LLM__MAX_RETRIES": "0",
    }

    result = runner.invoke(
        cli.app,
        ["ask", "支付回调超时怎么办？", "--session", session, "--data-dir", str(data_dir)],
        env=env,
    )

    assert result.exit_code == 2
    assert "Traceback" not in result.output and result.stdout == ""
    [message] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert message == result.stderr.strip().splitlines()[-1]
    assert message.startswith("error: LLM endpoint") and base_url in message
    assert "unavailable" in message


def test_a_question_longer_than_a_turn_takes_is_refused_as_the_api_refuses_it(
    data_dir: Path, session: str
) -> None:
    result = ask(data_dir, "支付回调超时" * 700, session)  # 4,200 characters

    assert result.exit_code == 2 and "Traceback" not in result.output
    assert one_line(result.stderr).startswith(
        "error: the question is 4200 characters long; a turn takes at most 4000"
    )
    assert invoke("trace", session, "--data-dir", data_dir).exit_code == 1  # nothing recorded


@pytest.mark.parametrize("question", ["", "   ", "\x00\x07 \t"])
def test_an_empty_question_is_refused_as_the_api_refuses_it(
    data_dir: Path, session: str, question: str
) -> None:
    result = ask(data_dir, question, session)

    assert result.exit_code == 2 and "Traceback" not in result.output
    assert one_line(result.stderr).startswith("error: the question is empty")
    assert invoke("trace", session, "--data-dir", data_dir).exit_code == 1  # nothing recorded


# -- trace -------------------------------------------------------------------------------------


def test_trace_prints_one_row_per_call_executed_and_blocked(data_dir: Path, session: str) -> None:
    assert ask(data_dir, "Redis 连接池耗尽", session, "--json").exit_code == 0
    # A second turn by a model that ignores every constraint: executed and blocked calls.
    settings = Settings(data_dir=data_dir)
    kb = KnowledgeBase(settings)
    try:
        lookup = GovernedLookup(kb, make_tracker(settings.advanced.session.backend, kb.engine))
        executor = Executor(
            make_profile("defiant"),
            lookup,
            settings.governance_config,
            InvocationRepository(kb.engine),
        )
        turn = executor.run(session, "Redis 连接池耗尽", turn=2)
    finally:
        kb.close()
    assert turn.turn == 2 and turn.blocked > 0
    records = json.loads(invoke("trace", session, "--data-dir", data_dir, "--json").stdout)
    assert [r["turn"] for r in records][-len(turn.lookups) :] == [2] * len(turn.lookups)
    assert set(records[0]) >= {"relevance_level", "dedup_reason", "retrieval_details", "verdict"}
    calls, executed = len(records), sum(r["executed"] for r in records)

    result = invoke("trace", session, "--data-dir", data_dir)

    assert result.exit_code == 0, result.output
    out = result.stdout
    for column in ("id", "domain", "level", "dedup reason", "verdict", "latency ms"):
        assert column in out
    rows = [line for line in out.splitlines() if re.match(r"^\W*\d+\s*│", line)]
    assert [int(re.findall(r"\d+", row)[0]) for row in rows] == [r["id"] for r in records]
    failed = sum(1 for r in records if r["error"])
    assert sum("blocked/" in row for row in rows) == calls - executed - failed
    assert sum("DEDUPED" in row for row in rows) >= turn.blocked
    assert any("domain_retrieved" in row for row in rows)
    assert any("budget_exhausted" in row for row in rows)
    assert f"{calls} calls: {executed} executed, {calls - executed} blocked or failed" in out


def test_trace_of_an_unknown_session_exits_1(data_dir: Path) -> None:
    result = invoke("trace", "nobody-here", "--data-dir", data_dir)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert one_line(result.stderr) == "no tool calls recorded for session 'nobody-here'"


# -- eval agent ----------------------------------------------------------------------------------


def test_eval_agent_iss003_json(dataset: Path, data_dir: Path) -> None:
    result = invoke(
        "eval", "agent", dataset, "--profile", "iss003_replay", "--data-dir", data_dir, "--json"
    )

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) >= AGENT_KEYS
    assert report["dataset"] == str(dataset)  # it has both domains: no fallback
    assert "note:" not in result.stderr
    assert report["profile"] == "iss003_replay" and report["governance"] == "on"
    assert report["questions"] == 2
    # the ten calls of the log: the Redis question's planned lookup answers, so only the
    # log's api call runs beside it (2 executed, 8 blocked); the API question's planned
    # infrastructure lookup finds nothing there and shows the API runbook from the whole
    # KB, so the log's first infrastructure call runs as the turn's one named page and
    # the rest is blocked (2 / 8); no call that ran brought only what the turn had
    assert (report["executed_lookups_mean"], report["blocked_mean"]) == (2.0, 8.0)
    assert report["redundant_executed_mean"] == 0.0


def test_eval_agent_plain_prints_a_table(dataset: Path, data_dir: Path) -> None:
    result = invoke(
        "eval",
        "agent",
        dataset,
        "--profile",
        "defiant",
        "--governance",
        "off",
        "--data-dir",
        data_dir,
        "--limit",
        "1",
    )

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "defiant (defiant) · 1 questions" in out and "governance off" in out
    for metric in (
        "executed_lookups",
        "blocked",
        "redundant_executed",
        "steps",
        "evidence_recall",
        "grounded_rate",
        "invalid_citations",
        "model_calls",
        "prompt_tokens",
    ):
        assert metric in out
    assert "ms per step" in out
    # next to the turn's evidence recall: what one unscoped lookup shows on the same questions
    assert "one unscoped lookup: gold_shown" in out
    assert "scoped plans" in out


def test_eval_agent_governed_cap_and_off_in_one_table(dataset: Path, data_dir: Path) -> None:
    result = invoke(
        "eval", "agent", dataset, "--profile", "defiant", "--governance", "on,cap:3,off",
        "--data-dir", data_dir, "--limit", "1", "--json",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    runs = report["runs"]
    assert [r["governance"] for r in runs] == ["on", "cap:3", "off"]
    assert 0 <= report["one_lookup_gold_shown"] <= 1 and 0 <= report["scoped_plans"] <= 1
    # off: the plan's lookup, then one per step up to the step cap
    assert [r["executed_lookups_mean"] for r in runs] == [1.0, 3.0, 11.0]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "--profile",
            "chatty",
            "error: unknown profile 'chatty'; choose obedient, over_cautious, domain_hopper, "
            "iss003_replay, defiant",
        ),
        (
            "--governance",
            "maybe",
            "error: --governance: governance must be on, off or cap:N (e.g. cap:3), not 'maybe'",
        ),
        ("--model", "gpt", "error: --model must be 'profile' or 'llm'"),
    ],
)
def test_eval_agent_bad_options_exit_2_with_one_line(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    result = invoke("eval", "agent", tmp_path, option, value, "--data-dir", tmp_path / "data")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert one_line(result.stderr) == message
    assert "Traceback" not in result.output
    assert not (tmp_path / "data").exists()  # refused before anything was opened


def test_eval_agent_missing_dataset_is_an_error(tmp_path: Path) -> None:
    result = invoke("eval", "agent", tmp_path / "nowhere", "--data-dir", tmp_path / "data")

    assert result.exit_code == 2
    assert "does not exist: a dataset needs corpus/ and queries.jsonl" in one_line(result.stderr)
