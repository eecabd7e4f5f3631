"""Assembling a streamed chat completion: chunks into text pieces and one turn, and the
gate that holds back text that may turn out to be a tool call written as text."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2

from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    ToolCall,
    Usage,
)
from superbiz.llm.text_tools import (
    TOOL_CALL_TAG,
)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Turns chat.completion.chunk objects into text pieces and, at the end, one turn."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        #: a chunk carried the first choice (a stream of none is an empty reply)
        self.chose = False

    def feed(self, chunk: Any) -> str:
        usage = read_usage(getattr(chunk, "usage", None))
        if usage is not None:
            self.usage = usage
        piece = ""
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            self.chose = True
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                piece += delta.content
            for fragment in delta.tool_calls or ():
                self._add_fragment(fragment)
        if piece:
            self.text.append(piece)
        return piece

    def _add_fragment(self, fragment: Any) -> None:
        index = fragment.index
        frag_id = fragment.id or ""
        if index is None:  # some servers omit it: a new id opens a new call
            known = {c.id for c in self.calls.values()}
            if not self.calls or (frag_id and frag_id not in known):
                index = len(self.calls)
            else:
                index = max(self.calls)
        call = self.calls.setdefault(index, _PartialCall())
        if frag_id and not call.id:
            call.id = frag_id
        function = getattr(fragment, "function", None)
        if function is None:
            return
        name = function.name or ""
        # The protocol sends the name once; tolerate servers that repeat it whole.
        if name and name != call.name:
            call.name += name
        if function.arguments:
            call.arguments.append(function.arguments)

    def check_complete(self, request: httpx2.Request | None) -> None:
        """Raise when the stream ended before the model finished: every server we target
        sends a ``finish_reason`` in its last choice chunk, so a stream without one was
        closed early (a proxy, a crashed worker) and its text is not the whole answer.
        Raised as the transport error it is, so it is retried or reported like one."""
        if self.chose and self.finish_reason is None:
            raise httpx2.RemoteProtocolError(
                "the stream ended without a finish reason (the answer is incomplete)",
                request=request,
            )

    def response(
        self, read: Callable[[str, tuple[ToolCall, ...]], AssistantMessage]
    ) -> ChatResponse:
        calls = tuple(
            ToolCall.parse(p.id or new_call_id(), p.name, "".join(p.arguments))
            for _, p in sorted(self.calls.items())
        )
        return ChatResponse(read("".join(self.text), calls), self.usage, self.finish_reason)


class TextGate:
    """Holds back streamed text that may turn out to be a tool call written as text.

    Text is shown as it comes, except: everything from a ``<tool_call>`` tag on (and a
    tail that could be the start of one), and a reply whose first characters open a JSON
    object, a list, a code fence or a template's marker (``<|tool_call|>``), which is
    shown only once it is known not to be a call.
    With ``hold_all`` (the JSON action protocol) nothing is shown before the end.
    """

    def __init__(self, *, hold_all: bool) -> None:
        self._text = ""
        self._shown = 0
        self._held = hold_all

    def feed(self, piece: str) -> str:
        self._text += piece
        if self._held:
            return ""
        if self._shown == 0:
            start = self._text.lstrip()
            if start.startswith(("{", "[", "`", "<|", TOOL_CALL_TAG)):
                self._held = True
                return ""
            if not start or TOOL_CALL_TAG.startswith(start):
                return ""  # not yet known
        tag = self._text.find(TOOL_CALL_TAG, self._shown)
        if tag >= 0:
            self._held = True
            return self._release(tag)
        end = len(self._text)
        for size in range(min(len(TOOL_CALL_TAG) - 1, end - self._shown), 0, -1):
            if TOOL_CALL_TAG.startswith(self._text[end - size :]):
                end -= size
                break
        return self._release(end)

    def _release(self, end: int) -> str:
        piece = self._text[self._shown : end]
        self._shown = max(self._shown, end)
        return piece

    def rest(self, content: str) -> str:
        """What remains to show of the final ``content`` once the turn is read."""
        shown = self._text[: self._shown]
        return content[len(shown) :] if content.startswith(shown) else ""


def new_call_id() -> str:
    """An id for a tool call the server sent without one, so the reply can name it."""
    return f"call_{uuid.uuid4().hex[:24]}"


def read_usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if prompt is None and completion is None:
        return None
    return Usage(int(prompt or 0), int(completion or 0))
