"""Recorded real-model exchanges (``tests/data/llm-transcripts``, see its README).

Each line holds ``request`` (a chat-completions body as sent), ``status`` and ``response``
(the body as received). The fake OpenAI server replays them
(``server.replay(load_transcript())``); tests also read the replies directly.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fakes.openai_server import FakeOpenAIServer
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.config import LLMSettings
from superbiz.knowledge.kb.base import KnowledgeBase

TRANSCRIPTS = Path(__file__).parents[1] / "data" / "llm-transcripts"
QWEN_EXAMPLE_KB = "qwen2.5-coder-1.5b-example-kb.jsonl"
#: the live run at bc5e2c6: seven questions, one a follow-up in the first one's session
QWEN_LIVE_TURN3 = "qwen2.5-coder-1.5b-live-turn3.jsonl"
#: the live run at 48746d0: nine questions, one a follow-up in the first one's session
QWEN_LIVE_TURN4 = "qwen2.5-coder-1.5b-live-turn4.jsonl"


@dataclass(frozen=True)
class Exchange:
    """One recorded call: what was sent and what the model answered."""

    request: dict[str, Any]
    response: dict[str, Any]
    status: int = 200

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.request["messages"])

    @property
    def reply(self) -> str:
        return str(self.response["choices"][0]["message"].get("content") or "")

    @property
    def question(self) -> str:
        """The user's message of this call."""
        return next(m["content"] for m in self.messages if m["role"] == "user")

    @property
    def is_planner(self) -> bool:
        return "tools" not in self.request and "Planner" in self.messages[0]["content"]

    @property
    def is_repair(self) -> bool:
        """The call answers a repair turn (the last message is not the user's)."""
        return self.messages[-1]["role"] != "user"


def load_transcript(name: str = QWEN_EXAMPLE_KB) -> list[Exchange]:
    """Every recorded call of the transcript, in the order it was made."""
    lines = (TRANSCRIPTS / name).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [Exchange(r["request"], _body(r["response"]), int(r["status"])) for r in records]


def _body(response: Any) -> Any:
    """The response body: the newer recorder keeps it as the text received."""
    if isinstance(response, str):
        try:
            return json.loads(response)
        except json.JSONDecodeError:
            return response
    return response


#: The live run's questions with the example KB's documents that answer them (none for
#: the off-KB one and the one no runbook covers); the follow-up asked on its own.
LIVE_TURN3_QUESTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "live-1",
        "用户付了钱但订单一直显示未支付，回调没收到怎么办？",
        ("payment/payment-failure-troubleshooting.md",),
    ),
    ("live-1b", "那 max-active 应该调到多少？", ("infrastructure/redis-pool-and-eviction.md",)),
    (
        "live-2",
        "HikariCP 报 Connection is not available, request timed out after 3000ms 怎么排查？",
        ("database/mysql-hikaricp-tuning.md",),
    ),
    (
        "live-3",
        "API gateway returns 429 Too Many Requests for one partner, what do we change?",
        ("api/rate-limit-429.md",),
    ),
    ("live-4", "What is the capital of Australia?", ()),
    ("live-5", "退款一直卡在处理中，要怎么处理？", ("payment/refund-guide.md",)),
    ("live-6", "How do I roll back a bad deployment of pay-callback?", ()),
)


def write_transcript_dataset(root: Path) -> Path:
    """An ``eval agent`` dataset under ``root``: the example corpus and the live run's
    questions (``LIVE_TURN3_QUESTIONS``), so a replay answers every model call."""
    corpus = Path(str(resources.files("superbiz") / "examples" / "corpus"))
    shutil.copytree(corpus, root / "corpus", dirs_exist_ok=True)
    lines = [
        json.dumps({"id": i, "query": q, "gold": list(gold)}, ensure_ascii=False)
        for i, q, gold in LIVE_TURN3_QUESTIONS
    ]
    (root / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@contextmanager
def replaying(kb: KnowledgeBase, name: str) -> Iterator[tuple[Runtime, FakeOpenAIServer]]:
    """A runtime over ``kb`` whose model is the fake OpenAI server replaying the
    transcript ``name``, and that server (to read what was asked of it)."""
    with FakeOpenAIServer() as server:
        server.replay(load_transcript(name))
        llm = LLMSettings(base_url=server.base_url, model="qwen2.5-coder-1.5b", max_retries=0)
        settings = kb.settings.model_copy(update={"llm": llm})
        yield open_runtime(settings, kb=kb), server
