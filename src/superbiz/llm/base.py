"""The one interface every chat model implements (real clients and test simulators alike)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from superbiz.llm.messages import ChatResponse, Message, ToolSpec

__all__ = ["ChatModel", "ResponseDone", "StreamEvent", "TextDelta"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, to show while the model is still writing."""

    text: str


@dataclass(frozen=True, slots=True)
class ResponseDone:
    """The last event of a stream: the whole turn, tool calls assembled."""

    response: ChatResponse


StreamEvent = TextDelta | ResponseDone


@runtime_checkable
class ChatModel(Protocol):
    """A chat-completions model; tools are offered only when ``tools`` is not empty."""

    name: str

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> ChatResponse: ...

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        """Yield text deltas as they come; the last event is always :class:`ResponseDone`."""
        ...
