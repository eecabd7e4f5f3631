"""The one interface every chat model implements (real clients and test simulators alike)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from superbiz.llm.messages import ChatResponse, Message, ToolSpec

__all__ = ["ChatModel", "ResponseDone", "StreamEvent", "TextDelta", "quotes_documents"]


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


def quotes_documents(model: object) -> bool:
    """Whether ``model`` answers by quoting the documents it was shown rather than by
    writing (the extractive policy, the benchmarks' behaviour profiles): such an answer is
    checked for citations but never put to the evidence test or repaired.

    A model declares it with ``quotes_documents = True``; a wrapper (store lock, metering,
    streaming) forwards its inner model's, so production and benchmarks take one path.
    Models that say nothing write their answers.
    """
    return getattr(model, "quotes_documents", False) is True
