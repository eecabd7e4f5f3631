"""A session's stored messages and its recorded tool calls.

With ``service.api-key`` set they need the key, like the writes (the guard checks it):
a session holds its user's questions and the evidence shown to them.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from superbiz.api.deps import Authorized, ServiceDep
from superbiz.api.errors import INTERNAL, INVALID, NOT_FOUND, UNAUTHORIZED
from superbiz.api.responses import FeedbackView, SessionHistory, SessionInvocations
from superbiz.api.schemas import FeedbackRequest

router = APIRouter(
    prefix="/api/sessions",
    tags=["sessions"],
    dependencies=Authorized,
    responses={**UNAUTHORIZED, **NOT_FOUND, **INVALID, **INTERNAL},
)


@router.get("/{session_id}", response_model_exclude_unset=True)
async def session(session_id: str, service: ServiceDep) -> SessionHistory:
    """The session's messages, answers with their citations, plans, trace ids and
    ratings (`feedback`, absent on questions)."""
    return await service.run(service.session, session_id)


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
