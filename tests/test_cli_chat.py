"""``superbiz ask`` through the Supervisor, the ``chat`` REPL, ``map`` and the planner
numbers of ``eval agent``, end to end (real USE, Milvus Lite, SQLite; extractive mode).

The CLI loads its embedder through ``make_embedder``; the tests hand it the session's one
real USE model instead of loading it for every command.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from conftest import SMALL_KB_DOMAINS
from superbiz import cli
from superbiz.api.responses.chat import AnswerPlan, ChatAnswer, LookupSummary
from superbiz.retrieval.embedders import Embedder

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
RATE_LIMIT = "api/rate-limit.md"
PAY_Q = "支付回调超时怎么办？"
REFUND_Q = "退款失败通常是什么原因？"

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        for console in (cli.console, cli.err):
            patch.setattr(console, "_width", 200)  # one line per plan or lookup
        yield


def invoke(*args: str | Path, input: str | None = None) -> Result:
    return runner.invoke(cli.app, [str(a) for a in args], input=input)


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, kb_writer: Callable[..., Path]) -> Path:
    """The small KB as a tiny evaluation dataset."""
    root = tmp_path_factory.mktemp("cli-chat") / "dataset"
    kb_writer(root / "corpus")
    queries = [
        {"id": "q1", "query": "支付回调超时怎么办", "lang": "zh", "gold": [PAYMENT]},
        {"id": "q2", "query": "Redis connection pool exhausted", "lang": "en", "gold": [REDIS]},
        {"id": "q3", "query": "How do I raise my API quota?", "lang": "en", "gold": [RATE_LIMIT]},
    ]
    (root / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    return root


@pytest.fixture(scope="module")
def data_dir(dataset: Path) -> Path:
    target = dataset.parent / "data"
    result = invoke("ingest", dataset / "corpus", "--data-dir", target)
    assert result.exit_code == 0, result.output
    return target


def chat(data_dir: Path, session: str, *lines: str) -> Result:
    """``superbiz chat`` with ``lines`` typed in, one after the other."""
    return invoke(
        "chat", "--session", session, "--data-dir", data_dir, input="\n".join(lines) + "\n"
    )


def lines_of(out: str, kind: str) -> list[str]:
    """The REPL's ``plan ...`` or ``lookup ...`` lines (after the ``you>`` prompt, whose
    input is not echoed)."""
    return re.findall(rf"^(?:you> )?({kind} .*)$", out, re.M)


@pytest.fixture
def session() -> str:
    return f"chat-{uuid.uuid4().hex[:8]}"


# -- ask -------------------------------------------------------------------------------------


def test_ask_json_has_the_plan(data_dir: Path, session: str) -> None:
    result = invoke("ask", PAY_Q, "--session", session, "--data-dir", data_dir, "--json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["plan"] == {
        "need_retrieval": True,
        "domains": [{"domain": "payment", "sub_question": PAY_Q}],
        "direct_answer": None,
        "source": "map",
        "note": None,
        "scoped": False,  # a map of one document a domain cannot measure its margins
    }
    assert "replan" not in data and data["reused_evidence"] == []
    assert [lookup["domain"] for lookup in data["lookups"]] == ["payment"]
    assert result.stderr == ""


def test_ask_json_is_the_api_answer_less_the_service_fields(data_dir: Path, session: str) -> None:
    result = invoke("ask", PAY_Q, "--session", session, "--data-dir", data_dir, "--json")

    data = json.loads(result.stdout)
    documented = set(ChatAnswer.model_fields) - ChatAnswer.SERVICE_FIELDS - {"replan"}
    assert list(data) == [name for name in ChatAnswer.model_fields if name in documented]
    assert [list(lookup) for lookup in data["lookups"]] == [list(LookupSummary.model_fields)]
    # the plan whole: the API's AnswerPlan leaves ``scoped`` out
    assert set(data["plan"]) == set(AnswerPlan.model_fields) | {"scoped"}


def test_a_follow_up_ask_in_the_session_finds_its_document_held(
    data_dir: Path, session: str
) -> None:
    first = invoke("ask", PAY_Q, "--session", session, "--data-dir", data_dir, "--json")
    assert first.exit_code == 0, first.output

    result = invoke("ask", REFUND_Q, "--session", session, "--data-dir", data_dir, "--json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["turn"] == 2
    assert data["plan"]["need_retrieval"] is False and data["plan"]["source"] == "evidence"
    [lookup] = data["lookups"]  # the question's own, run by code: nothing new to show
    assert lookup["relevance_level"] == "DEDUPED" and lookup["documents"] == []
    assert data["reused_evidence"] == [PAYMENT] and "商户余额不足" in data["answer"]
    trace = json.loads(invoke("trace", session, "--data-dir", data_dir, "--json").stdout)
    assert [row["turn"] for row in trace] == [1, 2]


def test_ask_plain_shows_the_plan_then_the_lookups(data_dir: Path, session: str) -> None:
    result = invoke(
        "ask", "How do I raise my API quota?", "--session", session, "--data-dir", data_dir
    )

    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "plan search every domain, nearest api (map)"  # unscoped
    assert lines[1].startswith("lookup How do I raise my API quota? domain=api executed")
    assert "verdict=" in lines[1] and "water=low" in lines[1]
    assert "answer · extractive" in result.stdout and "[Extractive answer]" in result.stdout


def test_an_unscoped_plan_says_its_lookup_searches_every_domain(
    data_dir: Path, session: str
) -> None:
    """A plan that cannot tell one domain from the next lists its nearest as candidates
    and its lookup searches them all: the line had said "consult api" above a lookup
    that found its document in another domain."""
    result = invoke("ask", "And what then?", "--session", session, "--data-dir", data_dir, "--json")
    plan = json.loads(result.stdout)["plan"]
    assert plan["need_retrieval"] and plan["scoped"] is False, plan
    result = invoke("ask", "And what then?", "--session", f"{session}-2", "--data-dir", data_dir)
    [line] = lines_of(result.stderr, "plan")
    candidates = ", ".join(d["domain"] for d in plan["domains"])
    assert line == f"plan search every domain, nearest {candidates} (map)"


# -- chat ------------------------------------------------------------------------------------


def test_the_chat_repl_plans_looks_up_answers_and_clears(data_dir: Path, session: str) -> None:
    result = chat(data_dir, session, PAY_Q, REFUND_Q, "/clear", "/quit")

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"session {session} · model extractive · /clear to forget, /quit to leave" in out
    plans = lines_of(out, "plan")
    assert plans == [
        "plan search every domain, nearest payment (map)",
        "plan answer from session evidence (evidence)",
    ]
    lookups = lines_of(out, "lookup")
    assert len(lookups) == 2
    assert re.match(
        rf"lookup {re.escape(PAY_Q)} domain=payment executed PRECISE verdict=\w+ water=low$",
        lookups[0],
    )
    assert re.match(
        rf"lookup {re.escape(REFUND_Q)} .*executed DEDUPED \(doc_retrieved\)", lookups[1]
    )
    flat = one_line(out)
    assert flat.count("【抽取式回答】") == 2
    assert "支付渠道回调超时时" in flat and "商户余额不足" in flat
    assert out.count("superbiz") >= 2  # one answer panel per question
    assert out.index("商户余额不足") > out.index(plans[1])
    assert "session cleared" in out
    # /clear forgot the recorded calls too
    trace = invoke("trace", session, "--data-dir", data_dir)
    assert trace.exit_code == 1
    assert one_line(trace.stderr) == f"no tool calls recorded for session '{session}'"


def test_after_clear_the_same_question_retrieves_again(data_dir: Path, session: str) -> None:
    result = invoke(
        "chat",
        "--session",
        session,
        "--data-dir",
        data_dir,
        input=f"{PAY_Q}\n\n/clear\n{REFUND_Q}\n",  # a blank line is ignored; EOF leaves
    )

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert lines_of(out, "plan") == [
        "plan search every domain, nearest payment (map)",
        "plan search every domain, nearest payment (map)",
    ]
    lookups = lines_of(out, "lookup")
    assert len(lookups) == 2 and all("executed" in line for line in lookups)
    assert "DEDUPED" not in out
    trace = json.loads(invoke("trace", session, "--data-dir", data_dir, "--json").stdout)
    assert [(row["turn"], row["executed"]) for row in trace] == [(1, True)]


# -- map -------------------------------------------------------------------------------------


def test_map_prints_the_knowledge_map(data_dir: Path) -> None:
    result = invoke("map", "--data-dir", data_dir)

    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.stdout)
    domains = {d["domain_id"]: d for d in data["available_knowledge_domains"]}
    assert set(domains) == SMALL_KB_DOMAINS
    assert domains["payment"]["documents"] == [
        {"title": "支付失败排查", "covers": ["支付回调超时", "退款失败"]}
    ]
    assert domains["payment"]["when_to_retrieve"] == "用户支付失败或回调异常时"
    assert "note" not in data


def test_map_with_a_tiny_budget_says_it_was_summarised(data_dir: Path) -> None:
    result = invoke("map", "--data-dir", data_dir, "--budget", "250")

    assert result.exit_code == 0, result.output
    note = yaml.safe_load(result.stdout)["note"]
    assert "250-token budget" in note


# -- eval agent: the planner's numbers ----------------------------------------------------------


def test_eval_agent_reports_plan_domain_recall_and_map_build_time(
    dataset: Path, data_dir: Path
) -> None:
    result = invoke(
        "eval", "agent", dataset, "--profile", "obedient", "--data-dir", data_dir, "--json"
    )

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["questions"] == 3
    assert report["plan_domain_recall"] == 1.0
    assert isinstance(report["map_build_s"], float) and 0 <= report["map_build_s"] < 5
    assert 1 <= report["planned_domains_mean"] <= 3


def test_eval_agent_table_shows_plan_domain_recall(dataset: Path, data_dir: Path) -> None:
    result = invoke(
        "eval", "agent", dataset, "--profile", "obedient", "--data-dir", data_dir, "--limit", "1"
    )

    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if "plan_domain_recall" in line)
    assert "1.000" in row and "domains/plan" in row


def test_the_chat_repl_refuses_a_too_long_question_and_goes_on(
    data_dir: Path, session: str
) -> None:
    long_question = "支付回调超时" * 700
    result = chat(data_dir, session, long_question, PAY_Q, "/quit")

    assert result.exit_code == 0, result.output
    assert "error: the question is 4200 characters long" in one_line(result.stderr)
    # the next question ran (the error went to stderr, so two prompts share a line)
    assert "you> you> plan search every domain, nearest payment (map)" in result.stdout


#: what a terminal set to GBK sends for 支付回调超时, and what Python makes of it in argv
GBK_BYTES = "支付回调超时".encode("gbk")
GBK_FIX = (
    "is not UTF-8 text (byte 2: 0xB8); it looks like GB18030/GBK Chinese: set the terminal "
    "to UTF-8, or convert the text with `iconv -f GB18030 -t UTF-8`"
)


def test_ask_with_a_question_that_is_not_utf8_is_one_red_line(data_dir: Path, session: str) -> None:
    question = os.fsdecode(GBK_BYTES)  # how Python hands over such an argument

    result = invoke("ask", question, "--session", session, "--data-dir", data_dir)

    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stdout == ""
    assert one_line(result.stderr) == f"error: the question {GBK_FIX}"


def test_the_chat_repl_says_how_to_fix_a_line_that_is_not_utf8_and_goes_on(
    data_dir: Path, session: str
) -> None:
    typed = GBK_BYTES + b"\n" + f"{PAY_Q}\n/quit\n".encode()

    result = runner.invoke(
        cli.app, ["chat", "--session", session, "--data-dir", str(data_dir)], input=typed
    )

    assert result.exit_code == 0, result.output
    assert one_line(result.stderr) == f"error: the question {GBK_FIX}"
    # the next one ran
    assert "you> you> plan search every domain, nearest payment (map)" in result.stdout


def test_a_chat_without_a_session_is_a_new_one_and_says_how_to_go_on(data_dir: Path) -> None:
    runs = [invoke("chat", "--data-dir", data_dir, input=f"{PAY_Q}\n/quit\n") for _ in range(2)]
    ids = []
    for result in runs:
        assert result.exit_code == 0, result.output
        header = re.search(r"^session (chat-\w+) · model extractive", result.stdout, re.M)
        assert header, result.stdout
        ids.append(header.group(1))
        assert f"session {ids[-1]} · --session {ids[-1]} continues it" in result.stderr
        # a new session: its first question finds its runbook, not one withheld as seen
        assert re.search(r"^(?:you> )?lookup .* executed PRECISE", result.stdout, re.M)
    assert ids[0] != ids[1]


def test_sessions_lists_the_latest_first_with_the_id_that_continues_each(
    tmp_path: Path, dataset: Path
) -> None:
    """Each ``ask`` is a session of its own: ``sessions`` finds its id again."""
    data_dir = tmp_path / "data"
    assert invoke("sessions", "--data-dir", data_dir).stderr.startswith("no sessions yet")
    assert invoke("ingest", dataset / "corpus", "--data-dir", data_dir).exit_code == 0
    asked = []
    for question in (PAY_Q, "How do I raise my API quota?"):
        result = invoke("ask", question, "--data-dir", data_dir, "--json")
        asked.append(json.loads(result.stdout)["session_id"])
    listed = json.loads(invoke("sessions", "--data-dir", data_dir, "--json").stdout)
    assert [(s["session_id"], s["turns"]) for s in listed] == [(asked[1], 1), (asked[0], 1)]
    assert listed[1]["first_question"] == PAY_Q
    [latest] = json.loads(invoke("sessions", "-n", "1", "--data-dir", data_dir, "--json").stdout)
    assert latest["session_id"] == asked[1]
    table = invoke("sessions", "--data-dir", data_dir).stdout
    assert asked[0] in table and asked[1] in table and "last used (UTC)" in table
