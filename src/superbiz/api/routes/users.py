"""People and the audit trail, for admins: list, add (a key shown once), change role or
groups, remove, rotate a key; who did what, when. The same as ``superbiz users`` and
``superbiz audit`` on the command line."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.exceptions import HTTPException

from superbiz.api._threads import in_thread
from superbiz.api.deps import AuthDep, ClientAddress, CurrentUser
from superbiz.api.errors import INTERNAL, INVALID, NOT_FOUND, UNAUTHORIZED, documented_error
from superbiz.api.responses.auth import (
    AuditEventView,
    AuditList,
    NewKey,
    NewPerson,
    PersonChange,
    PersonList,
    PersonView,
    UserRemoved,
)
from superbiz.auth.directory import Person
from superbiz.knowledge.coverage.gaps import parse_since
from superbiz.storage.audit import AuditEvent

FORBIDDEN = documented_error(403, "`forbidden`: only admins manage people and read the trail.")
router = APIRouter(
    prefix="/api",
    tags=["users"],
    responses={**UNAUTHORIZED, **FORBIDDEN, **INVALID, **INTERNAL},
)


def person_view(person: Person) -> PersonView:
    return PersonView(
        name=person.name,
        role=person.role,
        assigned_role=person.assigned_role,
        groups=list(person.groups),
        keys=list(person.keys),
        signed_in_with_provider=person.signed_in_with_provider,
        created_at=person.created_at.isoformat(),
        last_seen_at=person.last_seen_at.isoformat() if person.last_seen_at else None,
    )


def _event_view(event: AuditEvent) -> AuditEventView:
    return AuditEventView(
        id=event.id,
        at=event.at.isoformat(),
        actor=event.actor,
        action=event.action,
        target=event.target,
        detail=event.detail,
        address=event.address,
    )


@router.get("/users")
async def users(auth: AuthDep) -> PersonList:
    """Everyone who may use the service, with their role, groups and key prefixes."""
    people = await in_thread(auth.directory.people)
    return PersonList(users=[person_view(p) for p in people])


@router.post("/users", status_code=201, responses=documented_error(409, "The name is taken."))
async def add_user(
    body: NewPerson, auth: AuthDep, user: CurrentUser, address: ClientAddress
) -> NewKey:
    """Add a person and make their API key (shown in this answer only)."""
    try:
        person, key = await in_thread(
            auth.directory.add, body.name, body.role, body.groups, user.name, address
        )
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return NewKey(user=person_view(person), api_key=key)


@router.patch("/users/{name}", responses=NOT_FOUND)
async def change_user(
    name: str,
    body: PersonChange,
    auth: AuthDep,
    user: CurrentUser,
    address: ClientAddress,
) -> PersonView:
    """Set a person's role and/or groups (each change is audited)."""
    change = partial(auth.directory.change, role=body.role, groups=body.groups, address=address)
    try:
        person = await in_thread(change, name, user.name)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return person_view(person)


@router.delete("/users/{name}", responses=NOT_FOUND)
async def remove_user(
    name: str, auth: AuthDep, user: CurrentUser, address: ClientAddress
) -> UserRemoved:
    """Remove a person: their keys and sign-ins stop at once; their sessions stay (an
    admin reads them); signing in again is refused until they are added back."""
    await in_thread(auth.directory.remove, name, user.name, address)
    return UserRemoved(name=name, removed=True)


@router.post("/users/{name}/rotate", responses=NOT_FOUND)
async def rotate_key(name: str, auth: AuthDep, user: CurrentUser, address: ClientAddress) -> NewKey:
    """A new API key for the person (shown once); their earlier keys stop at once."""
    key = await in_thread(auth.directory.rotate, name, user.name, address)
    person = await in_thread(auth.directory.person, name)
    return NewKey(user=person_view(person), api_key=key)


@router.get("/audit")
async def audit_trail(
    auth: AuthDep,
    since: Annotated[
        str | None, Query(description="A duration back from now (30m, 24h, 7d) or an ISO date.")
    ] = None,
    actor: Annotated[str | None, Query(description="Only this person's events.")] = None,
    action: Annotated[str | None, Query(description="Only this action (e.g. `denied`).")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> AuditList:
    """Who did what, when: sign-ins, uploads, deletes, changes to people, refused
    requests; latest first."""
    try:
        start = parse_since(since, datetime.now(UTC)) if since else None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    events = await in_thread(
        lambda: auth.audit.read(since=start, actor=actor, action=action, limit=limit)
    )
    return AuditList(events=[_event_view(e) for e in events])
