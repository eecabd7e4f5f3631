"""Recorded real-model exchanges (``tests/data/llm-transcripts``, see its README).

Each line holds ``request`` (a chat-completions body as sent), ``status`` and ``response``
(the body as received). The fake OpenAI server replays them
(``server.replay(load_transcript())``); tests also read the replies directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRANSCRIPTS = Path(__file__).parents[1] / "data" / "llm-transcripts"
QWEN_EXAMPLE_KB = "qwen2.5-coder-1.5b-example-kb.jsonl"
#: the live run at bc5e2c6: seven questions, one a follow-up in the first one's session
QWEN_LIVE_TURN3 = "qwen2.5-coder-1.5b-live-turn3.jsonl"


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
    return [Exchange(r["request"], r["response"], int(r["status"])) for r in records]
