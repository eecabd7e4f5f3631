"""The conversation as plain immutable values, independent of any SDK.

Agents build and inspect these; only :func:`to_openai` knows the wire format, so the
interop quirks of real servers (llama.cpp, vLLM, Ollama, DashScope) are handled in one place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "AssistantMessage",
    "ChatResponse",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "to_openai",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call requested by the model.

    Models (small local ones above all) sometimes send arguments that are not JSON or not
    a JSON object. That is the model's mistake, not a failure of the client: ``arguments``
    is then ``None`` and ``error`` says why, so the executor can answer it to the model as
    a tool error and let it try again.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""
    error: str | None = None

    @classmethod
    def parse(cls, id: str, name: str, raw_arguments: object) -> ToolCall:
        """Build a call from the arguments as the server sent them; never raises."""
        if not name:
            raw = raw_arguments if isinstance(raw_arguments, str) else ""
            return cls(id, "", None, raw, "the tool call has no function name")
        if isinstance(raw_arguments, Mapping):  # non-conforming servers send an object
            arguments = dict(raw_arguments)
            return cls(id, name, arguments, json.dumps(arguments, ensure_ascii=False))
        if raw_arguments is None:
            return cls(id, name, {}, "")
        if not isinstance(raw_arguments, str):
            raw = json.dumps(raw_arguments, ensure_ascii=False, default=str)
            kind = type(raw_arguments).__name__
            return cls(id, name, None, raw, f"arguments must be a JSON object, got {kind}")
        if not raw_arguments.strip():  # a call without arguments
            return cls(id, name, {}, raw_arguments)
        try:
            value = json.loads(raw_arguments)
        except ValueError as exc:
            return cls(id, name, None, raw_arguments, f"arguments are not valid JSON: {exc}")
        if not isinstance(value, dict):
            kind = _json_kind(value)
            return cls(
                id, name, None, raw_arguments, f"arguments must be a JSON object, got {kind}"
            )
        return cls(id, name, value, raw_arguments)

    @classmethod
    def of(cls, id: str, name: str, arguments: Mapping[str, Any]) -> ToolCall:
        """Build a well-formed call from code (tests, JSON action mode)."""
        args = dict(arguments)
        return cls(id, name, args, json.dumps(args, ensure_ascii=False))

    def wire_arguments(self) -> str:
        """The arguments string to send back in the history.

        A malformed string is replaced by ``{}``: some servers parse the arguments of past
        calls to render their chat template and reject the whole request otherwise; the
        tool message that answers the call carries the error instead.
        """
        if self.arguments is None:
            return "{}"
        if self.raw_arguments.strip():
            return self.raw_arguments
        return json.dumps(self.arguments, ensure_ascii=False)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__


@dataclass(frozen=True, slots=True)
class SystemMessage:
    role: ClassVar[str] = "system"
    content: str


@dataclass(frozen=True, slots=True)
class UserMessage:
    role: ClassVar[str] = "user"
    content: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """What the model said; ``tool_calls`` are the tools it wants run before it goes on."""

    role: ClassVar[str] = "assistant"
    content: str
    tool_calls: tuple[ToolCall, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """The result of one tool call; ``tool_call_id`` must name a call of the previous turn."""

    role: ClassVar[str] = "tool"
    tool_call_id: str
    name: str
    content: str


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call; ``parameters`` is a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """One complete model turn; ``usage`` is None when the server does not report it."""

    message: AssistantMessage
    usage: Usage | None = None
    finish_reason: str | None = None


def _message_to_openai(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": message.content}
    if isinstance(message, AssistantMessage):
        # Always a string, never null: llama.cpp's server rejects null content next to
        # tool_calls with HTTP 422, and every other server accepts "".
        out: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.wire_arguments()},
                }
                for call in message.tool_calls
            ]
        return out
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "name": message.name,
            "content": message.content,
        }
    raise TypeError(f"not a chat message: {message!r}")


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The messages as chat-completions request dicts."""
    return [_message_to_openai(m) for m in messages]
