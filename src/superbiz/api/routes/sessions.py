"""Sessions: the page's list, a session's messages and recorded tool calls, a cited
passage, rename and delete.

With ``service.api-key`` set they need the key, like the writes (the guard checks it):
a session holds its user's questions and the evidence shown to them. Without a key a
session id is all that keeps it private, so the list shows only the sessions a browser
names (``id=``); listing every session needs the key.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from starlette.exceptions import HTTPException

from superbiz.api.deps import Authorized, AuthRequired, ServiceDep
from superbiz.api.errors import INTERNAL, INVALID, NOT_FOUND, UNAUTHORIZED, documented_error
from superbiz.api.responses import (
    FeedbackView,
    Passage,
    SessionDeleted,
    SessionHistory,
    SessionInvocations,
    SessionList,
    SessionSummaryView,
)
from superbiz.api.schemas import MAX_SESSION_ID, FeedbackRequest, RenameRequest

router = APIRouter(
    prefix="/api/sessions",
    tags=["sessions"],
    dependencies=Authorized,
    responses={**UNAUTHORIZED, **NOT_FOUND, **INVALID, **INTERNAL},
)

#: ids one list request may name (a browser remembers its own sessions)
MAX_LISTED = 200


@router.get(
    "",
    responses=documented_error(
        403, "`forbidden`: listing every session without `id=` needs service.api-key."
    ),
)
async def sessions(
    service: ServiceDep,
    keyed: AuthRequired,
    id: Annotated[
        list[str] | None,
        Query(max_length=MAX_LISTED, description="The sessions to list (a browser's own)."),
    ] = None,
) -> SessionList:
    """Sessions latest first, with their name or first question and time: those named
    by `id=`, or, with the API key, all of them (the key's)."""
    if id is None and not keyed:
        raise HTTPException(
            403,
            "listing every session needs service.api-key; name your own with id=…",
        )
    # an id no store can hold (too long, or with NUL, which PostgreSQL refuses) names no
    # session: it is left out, as an unknown id is
    ids = [i for i in id if 0 < len(i) <= MAX_SESSION_ID and "\x00" not in i] if id else id
    return await service.run(service.sessions, ids)


@router.get("/{session_id}", response_model_exclude_unset=True)
async def session(session_id: str, service: ServiceDep) -> SessionHistory:
    """The session's messages, answers with their citations, plans, trace ids and
    ratings (`feedback`, absent on questions)."""
    return await service.run(service.session, session_id)


@router.patch("/{session_id}")
async def rename(session_id: str, body: RenameRequest, service: ServiceDep) -> SessionSummaryView:
    """Give the session a name (null or empty: its first question is shown again)."""
    return await service.run(service.rename_session, session_id, body.title or None)


@router.delete("/{session_id}")
async def delete(session_id: str, service: ServiceDep) -> SessionDeleted:
    """Forget the session: its messages, recorded lookups and retrieval memory."""
    return await service.run(service.delete_session, session_id)


@router.get("/{session_id}/invocations", response_model_exclude_unset=True)
async def invocations(session_id: str, service: ServiceDep) -> SessionInvocations:
    """Every recorded tool call of the session, executed and blocked, with scores."""
    return await service.run(service.invocations, session_id)


@router.post("/{session_id}/turns/{turn}/feedback")
async def feedback(
    session_id: str,
    turn: Annotated[int, Path(ge=1, description="The turn number (`turn` of the answer).")],
    body: FeedbackRequest,
    service: ServiceDep,
) -> FeedbackView:
    """Rate one turn's answer up or down, with an optional comment; rating it again
    replaces the rating. Fed into the knowledge-gaps report and `/metrics`."""
    return await service.run(service.rate, session_id, turn, body.rating, body.comment)


@router.get("/{session_id}/turns/{turn}/citations/{ref}", response_model_exclude_unset=True)
async def passage(
    session_id: str,
    service: ServiceDep,
    turn: Annotated[int, Path(ge=1)],
    ref: Annotated[int, Path(ge=1)],
) -> Passage:
    """The passage behind `[ref]` in the answer of `turn`: what the model was shown,
    its heading path, the lookup's level, and links to the whole document."""
    return await service.run(service.passage, session_id, turn, ref)
