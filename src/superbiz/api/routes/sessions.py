"""Sessions: the page's list, a session's messages and recorded tool calls, a cited
passage, rename and delete.

Once the service asks who is calling (README "Sign-in, roles and the audit trail") a
session is its person's: the list shows their own, another person's session is a 404 (an
admin reads it, never changes it: 403), and an admin lists everyone's with ``all=true``.
Without sign-in a session id is all that keeps it private, so the list shows only the
sessions a browser names (``id=``).
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Path, Query
from starlette.exceptions import HTTPException

from superbiz.api._reader import ReaderDep
from superbiz.api._threads import in_thread
from superbiz.api.deps import AuthDep, Authorized, AuthRequired, CurrentUser, SessionsDep
from superbiz.api.errors import INTERNAL, INVALID, NOT_FOUND, UNAUTHORIZED, documented_error
from superbiz.api.responses.sessions import (
    FeedbackView,
    Passage,
    SessionDeleted,
    SessionHistory,
    SessionInvocations,
    SessionList,
    SessionSummaryView,
)
from superbiz.api.schemas import FeedbackRequest, RenameRequest
from superbiz.auth.authenticate import Authenticator
from superbiz.auth.principal import ADMIN_KEY_USER, User
from superbiz.auth.roles import Role
from superbiz.storage.session_ids import session_id_problem

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
        403,
        "`forbidden`: listing every session without `id=` and without sign-in configured; "
        "or `all=true` by someone who is not an admin.",
    ),
)
async def sessions(
    sessions: SessionsDep,
    signed_in: AuthRequired,
    user: CurrentUser,
    reader: ReaderDep,
    id: Annotated[
        list[str] | None,
        Query(max_length=MAX_LISTED, description="The sessions to list (a browser's own)."),
    ] = None,
    all: Annotated[
        bool, Query(description="An admin: every person's sessions, each with its owner.")
    ] = False,
) -> SessionList:
    """Sessions latest first, with their name or first question and time: the signed-in
    person's own (those named by `id=` among them), or an admin's `all=true` view of
    everyone's; without sign-in, those named by `id=`."""
    # an id no session can have (too long, or with NUL, which PostgreSQL refuses) names
    # no session: it is left out, as an unknown id is
    ids = [i for i in id if session_id_problem(i) is None] if id is not None else None
    if not signed_in:
        if id is None:
            raise HTTPException(
                403, "listing every session needs sign-in (service.api-key, a user, or auth.oidc)"
            )
        return await in_thread(sessions.summaries, ids, reader)
    if all:
        if not user.at_least(Role.ADMIN):
            raise HTTPException(403, "only an admin lists every person's sessions")
        return await in_thread(sessions.summaries, ids, reader)
    return await in_thread(
        partial(sessions.summaries, owner=user.name, unowned=user.name == ADMIN_KEY_USER),
        ids,
        reader,
    )


def _gate(auth: Authenticator, user: User, session_id: str, write: bool) -> None:
    auth.sessions.check(user, session_id, write=write)


@router.get("/{session_id}", response_model_exclude_unset=True)
async def session(
    session_id: str, sessions: SessionsDep, reader: ReaderDep, user: CurrentUser, auth: AuthDep
) -> SessionHistory:
    """The session's messages, answers with their citations, plans, trace ids and
    ratings (`feedback`, absent on questions)."""
    await in_thread(_gate, auth, user, session_id, False)
    return await in_thread(sessions.history, session_id, reader)


@router.patch("/{session_id}")
async def rename(
    session_id: str, body: RenameRequest, sessions: SessionsDep, user: CurrentUser, auth: AuthDep
) -> SessionSummaryView:
    """Give the session a name (null or empty: its first question is shown again)."""
    await in_thread(_gate, auth, user, session_id, True)
    return await in_thread(sessions.rename, session_id, body.title or None)


@router.delete("/{session_id}")
async def delete(
    session_id: str, sessions: SessionsDep, user: CurrentUser, auth: AuthDep
) -> SessionDeleted:
    """Forget the session: its messages, recorded lookups and retrieval memory."""
    await in_thread(_gate, auth, user, session_id, True)
    return await in_thread(sessions.delete, session_id)


@router.get("/{session_id}/invocations", response_model_exclude_unset=True)
async def invocations(
    session_id: str, sessions: SessionsDep, reader: ReaderDep, user: CurrentUser, auth: AuthDep
) -> SessionInvocations:
    """Every recorded tool call of the session, executed and blocked, with scores."""
    await in_thread(_gate, auth, user, session_id, False)
    return await in_thread(sessions.invocations, session_id, reader)


@router.post("/{session_id}/turns/{turn}/feedback")
async def feedback(
    session_id: str,
    turn: Annotated[int, Path(ge=1, description="The turn number (`turn` of the answer).")],
    body: FeedbackRequest,
    sessions: SessionsDep,
    user: CurrentUser,
    auth: AuthDep,
) -> FeedbackView:
    """Rate one turn's answer up or down, with an optional comment; rating it again
    replaces the rating. Fed into the knowledge-gaps report and `/metrics`."""
    await in_thread(_gate, auth, user, session_id, True)
    return await in_thread(sessions.rate, session_id, turn, body.rating, body.comment)


@router.get("/{session_id}/turns/{turn}/citations/{ref}", response_model_exclude_unset=True)
async def passage(
    session_id: str,
    sessions: SessionsDep,
    turn: Annotated[int, Path(ge=1)],
    ref: Annotated[int, Path(ge=1)],
    reader: ReaderDep,
    user: CurrentUser,
    auth: AuthDep,
) -> Passage:
    """The passage behind `[ref]` in the answer of `turn`: what the model was shown,
    its heading path, the lookup's level, and links to the whole document."""
    await in_thread(_gate, auth, user, session_id, False)
    return await in_thread(sessions.passage, session_id, turn, ref, reader)
