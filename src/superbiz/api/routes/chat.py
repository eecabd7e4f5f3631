"""Chat: a JSON answer, the same turn as server-sent events, and clearing a session.

A streamed turn runs as a task of its own that feeds the request's queue. If the client
goes away (the page's Stop closes the stream), the turn is cancelled: it stops at its next
model call, lookup or streamed chunk, stores no answer and is undone like a failed turn,
so the session's next turn starts at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from functools import partial

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse

from superbiz.access import Reader
from superbiz.api._reader import ReaderDep
from superbiz.api._threads import in_thread
from superbiz.api.deps import AuthDep, Authorized, Background, ChatDep, CurrentUser
from superbiz.api.errors import INTERNAL, INVALID, TURN_ERRORS, UNAUTHORIZED, error_status
from superbiz.api.events import sse_events, thread_emitter
from superbiz.api.responses.chat import (
    TURN_EVENTS,
    Cancelled,
    ChatAnswer,
    Cleared,
    DoneEvent,
    ErrorEvent,
    TurnEvent,
)
from superbiz.api.schemas import ChatRequest, ClearRequest
from superbiz.api.services.chat import ChatService
from superbiz.auth.authenticate import Authenticator
from superbiz.auth.principal import User
from superbiz.exceptions import SuperbizError

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api", tags=["chat"], dependencies=Authorized, responses=INTERNAL)

#: the header naming a JSON answer's OpenTelemetry trace (a stream's `answer` event
#: carries it as `trace_id`: its headers are sent before the turn starts)
TRACE_HEADER = "X-Trace-Id"


class EventStream(StreamingResponse):
    """Server-sent events; as the route's response class it puts the stream's
    documentation under ``text/event-stream``."""

    media_type = "text/event-stream"


def _event_items() -> dict[str, object]:
    """The stream's events for ``/docs`` (OpenAPI 3.2 ``itemSchema``): each has its
    name in ``event:`` and one JSON object, of that event's model, in ``data:``."""
    return {
        "oneOf": [
            {
                "type": "object",
                "title": model.event_name,
                "properties": {
                    "event": {"const": model.event_name},
                    "id": {"type": "string", "description": "1, 2, 3, … within the stream"},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": {"$ref": f"#/components/schemas/{model.__name__}"},
                    },
                },
                "required": ["event", "id", "data"],
            }
            for model in TURN_EVENTS
        ]
    }


@router.post(
    "/chat",
    responses=TURN_ERRORS,
    response_model_exclude_unset=True,
    summary="Answer a question: answer, citations, plan and the turn's lookups",
)
async def chat(
    body: ChatRequest,
    chat: ChatDep,
    reader: ReaderDep,
    response: Response,
    user: CurrentUser,
    auth: AuthDep,
) -> ChatAnswer:
    await in_thread(_own, auth, user, body.session_id)
    turn = await chat.run_turn(body.session_id, body.question, reader)
    if turn.result.trace_id:
        response.headers[TRACE_HEADER] = turn.result.trace_id
    return chat.turn_view(turn)


@router.post(
    "/chat_stream",
    response_class=EventStream,
    responses={
        200: {
            "description": "Events `plan`, `tool_call`, `tool_result`, `token`, "
            "`answer`, `error`, then `done`; each `data:` is one JSON object.",
            "content": {"text/event-stream": {"itemSchema": _event_items()}},
        },
        **TURN_ERRORS,
    },
    summary="Answer a question as server-sent events",
)
async def chat_stream(
    body: ChatRequest,
    chat: ChatDep,
    reader: ReaderDep,
    background: Background,
    user: CurrentUser,
    auth: AuthDep,
) -> StreamingResponse:
    await in_thread(_own, auth, user, body.session_id)
    return EventStream(
        _stream_turn(chat, background, body.session_id, body.question, reader),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/chat/clear", responses={**UNAUTHORIZED, **INVALID})
async def clear(body: ClearRequest, chat: ChatDep, user: CurrentUser, auth: AuthDep) -> Cleared:
    """Forget a session: its messages, action memory and recorded calls."""
    await in_thread(
        partial(auth.sessions.check, write=True, missing_ok=True), user, body.session_id
    )
    await in_thread(chat.clear, body.session_id)
    return Cleared(session_id=body.session_id, cleared=True)


@router.post("/chat/cancel", responses={**UNAUTHORIZED, **INVALID})
async def cancel(body: ClearRequest, chat: ChatDep, user: CurrentUser, auth: AuthDep) -> Cancelled:
    """Stop the session's running turn, for a client that keeps its stream open: the
    turn ends at its next model call, lookup or streamed chunk, stores no answer, and
    its stream sends `error` (`turn_cancelled`) then `done` (`/api/chat`: a 409)."""
    await in_thread(
        partial(auth.sessions.check, write=True, missing_ok=True), user, body.session_id
    )
    running = chat.cancel_turn(body.session_id)
    return Cancelled(session_id=body.session_id, cancelled=running > 0)


def _own(auth: Authenticator, user: User, session_id: str) -> None:
    """A turn writes its session: the asker's own (a new one becomes theirs); someone
    else's is a 404, an admin's look at someone else's a 403."""
    auth.sessions.check(user, session_id, write=True, claim=True)


async def _stream_turn(
    chat: ChatService,
    background: set[asyncio.Task[None]],
    session_id: str,
    question: str,
    reader: Reader,
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
    emit = thread_emitter(loop, queue)
    started = time.perf_counter()
    cancel = threading.Event()

    async def produce() -> None:
        try:
            await chat.run_turn(session_id, question, reader, emit, cancel)
        except SuperbizError as exc:
            status, kind = error_status(exc)
            queue.put_nowait(
                ErrorEvent(session_id=session_id, status=status, error=kind, message=str(exc))
            )
        except Exception:
            log.exception("streamed turn failed")
            queue.put_nowait(
                ErrorEvent(
                    session_id=session_id,
                    status=500,
                    error="internal_error",
                    message="internal error; see the server log",
                )
            )
        finally:
            elapsed = round((time.perf_counter() - started) * 1000, 1)
            queue.put_nowait(DoneEvent(session_id=session_id, elapsed_ms=elapsed))
            queue.put_nowait(None)

    task = loop.create_task(produce())
    background.add(task)
    task.add_done_callback(background.discard)
    try:
        async for chunk in sse_events(queue, chat.keepalive_s):
            yield chunk
    finally:  # the client went away (or the turn ended): stop what is left of the turn
        cancel.set()
