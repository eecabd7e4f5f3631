"""Test doubles for your prompts and agents: a ``ChatModel`` that plays a script.

``ScriptedChatModel`` returns pre-written replies in order and records what it was given
at every step (messages and offered tools), so a test checks what your prompt and the
governor put in front of the model, and how the loop reacts to each reply, without an
LLM. Like pydantic-ai's ``TestModel`` / ``FunctionModel``, it ships with the package.

Testing your own executor prompt against your own knowledge base (pytest; ``KB`` here is
the example knowledge base that ships in ``superbiz/examples/corpus``)::

    from pathlib import Path

    from superbiz.agents.executor import Executor
    from superbiz.agents.runtime import open_lookup
    from superbiz.config import load_settings
    from superbiz.knowledge.ingest.ingestor import Ingestor
    from superbiz.testing import ScriptedChatModel, answer, lookup

    KB = Path("kb")  # your Markdown folder
    REDIS = "infrastructure/redis-pool-and-eviction.md"

    def test_redis_questions_cite_the_runbook(tmp_path: Path) -> None:
        settings = load_settings(data_dir=tmp_path)  # a store of the test's own
        model = ScriptedChatModel(
            lookup("Redis 连接池耗尽"),
            answer("When redis_pool_active_connections stays at max-total, the pool is "
                   "exhausted: look for JedisExhaustedException in the logs [1]."),
        )
        with open_lookup(settings) as runtime:
            Ingestor(runtime.kb).ingest([KB])
            executor = Executor(model, runtime.lookup, settings.governance_config)
            turn = executor.run("test-session", "Why do Redis calls time out?", turn=1)
        first, second = model.steps
        assert "cite" in first.system_texts[0]  # your prompt opened the conversation
        assert first.tool_names == ("lookup_knowledge",)
        assert second.tool_results  # the governed result came back to the model
        assert turn.answer.startswith("When redis_pool") and turn.grounded  # kept as written
        assert turn.citations[0].path == REDIS  # [1]: the runbook the lookup found first

``turn.citations`` are the documents the answer cites, in the order it cites them,
numbered as the model could cite them; ``turn.related`` the others that bear on the
question; ``turn.shown`` every document the turn showed the model; ``turn.answer`` keeps the
model's text when it is grounded.

An answer must cite documents that bear on the question and draw on them, as a real one
must: one that does not gets a repair turn (script a second answer), then the extractive
answer replaces it.

A reply is a ``ChatResponse``, an ``AssistantMessage``, a plain string (a final answer) or
a callable ``(messages, tools) -> reply`` for replies that depend on what the model sees.
``lookup``/``calls``/``call``/``malformed`` build tool-calling replies, ``answer`` a final
one. When the script runs out the model raises ``ScriptError`` (an ``AssertionError``)
instead of inventing a reply.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any

from superbiz.llm.base import ResponseDone, StreamEvent, TextDelta
from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
)
from superbiz.storage.invocations import TOOL_NAME

__all__ = [
    "ScriptError",
    "ScriptedChatModel",
    "Step",
    "answer",
    "call",
    "calls",
    "lookup",
    "malformed",
]

Reply = ChatResponse | AssistantMessage | str
ReplyFn = Callable[[Sequence[Message], Sequence[ToolSpec]], Reply]

_ids = count(1)


class ScriptError(AssertionError):
    """The executor asked for more steps than the test scripted."""


@dataclass(frozen=True)
class Step:
    """What the model was given at one step."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)

    @property
    def system_texts(self) -> list[str]:
        return [m.content for m in self.messages if isinstance(m, SystemMessage)]

    @property
    def tool_results(self) -> list[ToolMessage]:
        return [m for m in self.messages if isinstance(m, ToolMessage)]

    def tool_result(self, call_id: str) -> dict[str, Any]:
        """The JSON the executor answered the call ``call_id`` with."""
        for message in self.tool_results:
            if message.tool_call_id == call_id:
                data = json.loads(message.content)
                assert isinstance(data, dict)
                return data
        raise KeyError(f"no tool message answers {call_id!r}")


class ScriptedChatModel:
    """Returns the scripted replies in order and records the messages and tools of each step."""

    def __init__(self, *replies: Reply | ReplyFn, name: str = "scripted") -> None:
        self.name = name
        self._script: deque[Reply | ReplyFn] = deque(replies)
        self.steps: list[Step] = []

    def add(self, *replies: Reply | ReplyFn) -> None:
        self._script.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._script)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        self.steps.append(Step(tuple(messages), tuple(tools)))
        if not self._script:
            raise ScriptError(f"no reply scripted for step {len(self.steps)}")
        reply = self._script.popleft()
        if callable(reply):
            reply = reply(messages, tools)
        return _as_response(reply)

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        response = self.complete(messages, tools)
        if response.message.content:
            yield TextDelta(response.message.content)
        yield ResponseDone(response)


def _as_response(reply: Reply) -> ChatResponse:
    if isinstance(reply, ChatResponse):
        return reply
    if isinstance(reply, AssistantMessage):
        finish = "tool_calls" if reply.tool_calls else "stop"
        return ChatResponse(reply, None, finish)
    if isinstance(reply, str):
        return ChatResponse(AssistantMessage(reply), None, "stop")
    raise TypeError(f"not a scripted reply: {reply!r}")


# -- reply builders ---------------------------------------------------------------------


def answer(text: str, *, usage: Usage | None = None) -> ChatResponse:
    """A final answer (no tool calls)."""
    return ChatResponse(AssistantMessage(text), usage, "stop")


def call(
    query: str | None = None,
    *,
    domain: str | None = None,
    missing_dimension: str | None = None,
    id: str | None = None,
    name: str = TOOL_NAME,
    **extra: Any,
) -> ToolCall:
    """A well-formed ``lookup_knowledge`` call (``None`` arguments are left out)."""
    arguments: dict[str, Any] = {}
    if query is not None:
        arguments["query"] = query
    if domain is not None:
        arguments["domain"] = domain
    if missing_dimension is not None:
        arguments["missing_dimension"] = missing_dimension
    arguments.update(extra)
    return ToolCall.of(id or f"call_{next(_ids)}", name, arguments)


def malformed(raw_arguments: str = '{"query": "disk full', *, id: str | None = None) -> ToolCall:
    """A call whose arguments are not valid JSON, parsed as a real client would."""
    return ToolCall.parse(id or f"call_{next(_ids)}", TOOL_NAME, raw_arguments)


def calls(*tool_calls: ToolCall, content: str = "", usage: Usage | None = None) -> ChatResponse:
    """An assistant turn asking for ``tool_calls``."""
    return ChatResponse(AssistantMessage(content, tool_calls), usage, "tool_calls")


def lookup(
    query: str,
    *,
    domain: str | None = None,
    missing_dimension: str | None = None,
    id: str | None = None,
    usage: Usage | None = None,
) -> ChatResponse:
    """An assistant turn with one ``lookup_knowledge`` call."""
    return calls(
        call(query, domain=domain, missing_dimension=missing_dimension, id=id), usage=usage
    )
