"""The person behind a request, however they proved it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from superbiz.auth.roles import Role

#: how a request proved who it is
Via = Literal["local", "admin_key", "api_key", "sign_in", "bearer"]

#: the name the single ``service.api-key`` acts under (in the audit trail, as a session's
#: owner); no person may take it
ADMIN_KEY_USER = "service.api-key"
#: the name of whoever uses a service without any sign-in configured
LOCAL_USER = "local"


@dataclass(frozen=True, slots=True)
class User:
    """Someone the service knows: their name, role and groups, and how this request
    proved it (``via``). ``user_id`` is their row (none for the admin key)."""

    name: str
    role: Role
    groups: frozenset[str] = field(default_factory=frozenset)
    via: Via = "api_key"
    user_id: int | None = None

    @property
    def unrestricted(self) -> bool:
        """Reads every document whatever its access list: the admin key, an admin, and
        the local user of a service without sign-in."""
        return self.role >= Role.ADMIN or self.via in ("admin_key", "local")

    def at_least(self, role: Role) -> bool:
        return self.role >= role


def admin_key_user() -> User:
    return User(ADMIN_KEY_USER, Role.ADMIN, via="admin_key")


def local_user() -> User:
    """Whoever uses a service with no sign-in, no users and no key: everyone, as today."""
    return User(LOCAL_USER, Role.ADMIN, via="local")
