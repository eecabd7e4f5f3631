"""What a streamed chat turn sends, and how it reaches the client.

A turn runs in a worker thread; its callbacks turn what happens into typed events
and hand them to the event loop of the request that asked, so two sessions
streaming at once each get only their own events. The event names:

``plan``, ``tool_call`` (the model asked for a lookup), ``tool_result`` (what the
governance made of it: level, hint, domains, dedup reason, verdict, water level),
``token`` (answer text as the model writes it), ``answer`` (the whole turn), ``error``
and ``done`` (always last); their payloads are the models of ``superbiz.api.responses``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from superbiz.api.responses.chat import (
    LookupSummary,
    PrimaryDocument,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from superbiz.governance.results import ToolOutcome
from superbiz.governance.tool import raw_record
from superbiz.llm.base import ChatModel, ResponseDone, StreamEvent, TextDelta, quotes_documents
from superbiz.llm.messages import ChatResponse, Message, ToolSpec

#: characters per ``token`` event when an answer did not come from a streaming model step
ANSWER_CHUNK = 24

#: an SSE comment: clients ignore it, proxies see traffic
KEEP_ALIVE = b": keep-alive\n\n"

Emit = Callable[[TurnEvent], None]


def sse(event: TurnEvent, event_id: int | None = None) -> bytes:
    """One server-sent event; the JSON payload is one line (newlines stay escaped).

    >>> from superbiz.api.responses.chat import DoneEvent
    >>> sse(DoneEvent(session_id="s1", elapsed_ms=2.5), 3)
    b'event: done\\nid: 3\\ndata: {"session_id":"s1","elapsed_ms":2.5}\\n\\n'
    """
    lines = [f"event: {event.event_name}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + event.model_dump_json(exclude_unset=True))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


async def sse_events(
    queue: asyncio.Queue[TurnEvent | None], keepalive_s: float
) -> AsyncIterator[bytes]:
    """The queue's events as SSE until ``None``, numbered from 1, with a
    ``: keep-alive`` comment whenever ``keepalive_s`` pass without one (a model step can
    take a minute; a proxy's idle timeout must not cut the stream meanwhile)."""
    number = 0
    while True:
        try:
            event = await asyncio.wait_for(queue.get(), keepalive_s)
        except TimeoutError:
            yield KEEP_ALIVE
            continue
        if event is None:
            return
        number += 1
        yield sse(event, number)


def thread_emitter(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[TurnEvent | None]) -> Emit:
    """An ``Emit`` a worker thread may call: each event is queued on ``loop``, in order."""

    def emit(event: TurnEvent) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, event)

    return emit


def tool_result_event(session_id: str, outcome: ToolOutcome, high_mark: int) -> ToolResultEvent:
    """A lookup as the trace panel shows it; ``calls`` of ``high_mark`` is the gauge
    (the governor's calls this turn: executed and blocked, errors excluded)."""
    result = outcome.result
    constraint = outcome.constraint
    primary = result.primary if result else None
    return ToolResultEvent.model_validate(
        {
            **LookupSummary.from_outcome(outcome).model_dump(),
            "session_id": session_id,
            "call_id": outcome.call_id,
            "query": str(outcome.arguments.get("query", "")),
            "completeness_hint": result.completeness_hint if result else None,
            "retrieved_domains": list(result.retrieved_domains_this_session) if result else [],
            "message": result.message if result else None,
            "primary": (
                PrimaryDocument(title=primary.title, path=primary.path, domain=primary.domain)
                if primary
                else None
            ),
            "closed_domains": list(constraint.closed_domains),
            "supplement_domains": list(constraint.supplement_domains),
            "calls": constraint.calls,
            "high_mark": high_mark,
        }
    )


def answer_chunks(text: str, size: int = ANSWER_CHUNK) -> Iterator[str]:
    """``text`` in pieces of ``size`` characters.

    >>> list(answer_chunks("abcde", 2))
    ['ab', 'cd', 'e']
    """
    for start in range(0, len(text), size):
        yield text[start : start + size]


class TokenStreamingModel:
    """The executor's model for one streamed turn: its text is sent as it is written.

    The executor calls ``complete``; this answers it through the inner model's
    ``stream`` (the same response), sending each text delta as a ``token`` and each
    tool call as a ``tool_call`` before the executor runs it. One is made per turn, so
    concurrent turns never share a listener or a step count.

    A step streams at most ``max_chars`` characters (``chat.max-answer-chars``, the cap
    on the stored answer); the rest is still read, so the step completes, but not sent.
    """

    def __init__(
        self, inner: ChatModel, session_id: str, listener: Emit, max_chars: int | None = None
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.quotes_documents = quotes_documents(inner)
        self.session_id = session_id
        self.listener = listener
        self.max_chars = max_chars
        self.step = 0
        #: text the latest step wrote (the answer, when that step answered)
        self.last_text = ""
        #: whether the latest step wrote more than ``max_chars`` (the rest was not sent)
        self.cut = False

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        listener = self.listener
        self.step += 1
        pieces: list[str] = []
        left = self.max_chars
        response: ChatResponse | None = None
        for event in self.inner.stream(messages, tools):
            if isinstance(event, TextDelta):
                if event.text:
                    pieces.append(event.text)
                    text = event.text if left is None else event.text[: max(0, left)]
                    if text:
                        listener(TokenEvent(session_id=self.session_id, step=self.step, text=text))
                    if left is not None:
                        left -= len(event.text)
            elif isinstance(event, ResponseDone):
                response = event.response
        if response is None:  # a stream must end with ResponseDone; ask plainly instead
            response = self.inner.complete(messages, tools)
        self.last_text = "".join(pieces)
        self.cut = left is not None and left < 0
        for call in response.message.tool_calls:
            listener(
                ToolCallEvent(
                    session_id=self.session_id,
                    step=self.step,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments
                    if call.arguments is not None
                    else raw_record(call.raw_arguments),
                )
            )
        return response

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        return self.inner.stream(messages, tools)
