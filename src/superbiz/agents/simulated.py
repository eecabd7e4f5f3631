"""A slow LLM without an LLM: the extractive policy, each model call delayed.

``superbiz eval service --model-latency-ms N`` serves it so that the service is measured
the way a real model makes it behave (a turn spends most of its time waiting for model
calls) while staying deterministic and offline. Its tool calls and answers are exactly
the extractive policy's; it plans from the map like the extractive runtime.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.llm.messages import ChatResponse, Message, ToolSpec


class SlowExtractiveModel(ExtractiveChatModel):
    """``ExtractiveChatModel`` whose every call takes ``latency_ms`` more."""

    def __init__(self, latency_ms: float) -> None:
        if latency_ms < 0:
            raise ValueError("latency_ms must not be negative")
        super().__init__()
        self.latency_s = latency_ms / 1000
        self.name = f"extractive+{latency_ms:g}ms"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        time.sleep(self.latency_s)
        return super().complete(messages, tools)
