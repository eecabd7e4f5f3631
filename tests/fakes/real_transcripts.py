"""Recorded real-model exchanges (``/work/shared/llm-transcripts``), read at test time.

Each line holds ``request`` (a chat-completions body as sent) and ``response`` (the body
as received). Tests that need them skip, saying why, when the recordings are absent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TRANSCRIPTS = Path("/work/shared/llm-transcripts")
QWEN_EXAMPLE_KB = "qwen2.5-coder-1.5b-example-kb.jsonl"


@dataclass(frozen=True)
class Exchange:
    """One recorded call: what was sent and what the model answered."""

    request: dict[str, Any]
    response: dict[str, Any]

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
    path = TRANSCRIPTS / name
    if not path.is_file():
        pytest.skip(f"real-model transcript {path} is absent")
    with path.open(encoding="utf-8") as lines:
        return [
            Exchange(record["request"], record["response"])
            for record in map(json.loads, lines)
            if record.get("status") == 200
        ]
