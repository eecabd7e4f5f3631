"""Sessions belong to their person. A session's first turn claims it; its owner reads and
writes it, an admin reads it (never writes), anyone else is told it does not exist (404,
not 403: nobody can probe which session ids are taken). A session stored before sign-in
was configured belongs to the admin key (``service.api-key``), the one person who used
the service then."""

from __future__ import annotations

from enum import Enum

from superbiz.auth.principal import ADMIN_KEY_USER, User
from superbiz.auth.roles import Role
from superbiz.exceptions import ForbiddenError, NotFoundError
from superbiz.storage.session_owners import SessionOwners


class Access(Enum):
    ALLOWED = "allowed"
    READ_ONLY = "read_only"
    HIDDEN = "hidden"


def session_access(user: User, owner: str, *, write: bool) -> Access:
    """What ``user`` may do with a session of ``owner``.

    >>> from superbiz.auth.principal import User
    >>> session_access(User("bob", Role.READER), "alice", write=False).value
    'hidden'
    >>> session_access(User("root", Role.ADMIN), "alice", write=False).value
    'allowed'
    >>> session_access(User("root", Role.ADMIN), "alice", write=True).value
    'read_only'
    """
    if user.via == "local" or owner == user.name:
        return Access.ALLOWED
    if user.role >= Role.ADMIN:
        return Access.READ_ONLY if write else Access.ALLOWED
    return Access.HIDDEN


class SessionGate:
    """Checks a request's session against its owner before a route touches it."""

    def __init__(self, owners: SessionOwners) -> None:
        self.owners = owners

    def owner(self, session_id: str) -> str | None:
        """Who owns ``session_id``: its claim, else the admin key when something of it is
        stored (a session from before sign-in), else nobody (a new session)."""
        owner = self.owners.owner(session_id)
        if owner is None and self.owners.recorded(session_id):
            return ADMIN_KEY_USER
        return owner

    def check(
        self,
        user: User,
        session_id: str,
        *,
        write: bool,
        claim: bool = False,
        missing_ok: bool = False,
    ) -> None:
        """Let ``user`` at ``session_id`` or raise: ``NotFoundError`` (someone else's, or
        none), ``ForbiddenError`` (an admin writing to someone else's). ``claim``: a new
        session becomes ``user``'s (a chat turn); ``missing_ok``: a new session passes
        unclaimed (clearing or cancelling nothing)."""
        if user.via == "local":
            return
        owner = self.owner(session_id)
        if owner is None:
            if claim:
                owner = self.owners.claim(session_id, user.name)
            elif missing_ok:
                return
            else:
                raise NotFoundError(f"no session {session_id!r}")
        access = session_access(user, owner, write=write)
        if access is Access.HIDDEN:
            raise NotFoundError(f"no session {session_id!r}")
        if access is Access.READ_ONLY:
            raise ForbiddenError(
                f"session {session_id!r} is {owner}'s: admins read other people's sessions, "
                "they do not change them"
            )
