"""``superbiz ask`` with a model that drips, hangs, fails or sends garbage: one red
line and exit code 2, never a traceback or a hang."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes.openai_server import (
    FakeOpenAIServer,
    Reply,
    drip_reply,
    error_reply,
    garbage_reply,
    hang_reply,
)
from superbiz import cli
from superbiz.retrieval.embedders import Embedder

runner = CliRunner()
FAILURES: dict[str, tuple[Reply, str]] = {
    "drip": (drip_reply("x" * 400, every_s=0.05), "did not answer in time"),
    "hang": (hang_reply(4), "did not answer in time"),
    "5xx": (error_reply(500, "upstream exploded"), "upstream exploded"),
    "not-json": (garbage_reply(), "not JSON"),
    "wrong-shape": (garbage_reply(b'{"choices": [{"index": 0}]}'), "unexpected shape"),
}


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        yield


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, kb_writer: Callable[..., Path]) -> Path:
    root = tmp_path_factory.mktemp("cli-model")
    kb = kb_writer(root / "kb")
    result = runner.invoke(cli.app, ["ingest", str(kb), "--data-dir", str(root / "data")])
    assert result.exit_code == 0, result.output
    return root / "data"


@pytest.mark.parametrize("case", FAILURES, ids=list(FAILURES))
def test_a_model_failure_is_one_red_line(data_dir: Path, case: str) -> None:
    reply, reason = FAILURES[case]
    with FakeOpenAIServer() as fake:
        fake.script_chat(reply, reply)  # the planner's call, then the executor's
        env = {
            "SUPERBIZ_LLM__MODEL": "fake-model",
            "SUPERBIZ_LLM__BASE_URL": fake.base_url,
            "SUPERBIZ_LLM__MAX_RETRIES": "0",
            "SUPERBIZ_LLM__TIMEOUT_S": "0.5",
        }
        result = runner.invoke(
            cli.app,
            ["ask", "支付回调超时怎么办？", "--session", case, "--data-dir", str(data_dir)],
            env=env,
        )

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    [line] = [text for text in lines if text.startswith("error:")]
    assert line == lines[-1]  # the progress lines before it, then one line
    assert line.startswith("error: LLM endpoint") and reason in line


def test_chat_reports_a_failed_turn_and_goes_on(data_dir: Path) -> None:
    with FakeOpenAIServer() as fake:
        failure = error_reply(500, "upstream exploded")
        # the planner (then its repair turn) gets prose and falls back; the executor answers
        fake.script_chat(failure, failure, *["plain answer"] * 3)
        env = {
            "SUPERBIZ_LLM__MODEL": "fake-model",
            "SUPERBIZ_LLM__BASE_URL": fake.base_url,
            "SUPERBIZ_LLM__MAX_RETRIES": "0",
        }
        result = runner.invoke(
            cli.app,
            ["chat", "--session", "chat-1", "--data-dir", str(data_dir)],
            input="支付回调超时怎么办？\n你好\n/quit\n",
            env=env,
        )

    assert result.exit_code == 0, result.output
    [line] = [text for text in result.stderr.splitlines() if text.startswith("error:")]
    assert "upstream exploded" in line and "Traceback" not in result.output
    assert "plain answer" in result.stdout  # the next question was answered
