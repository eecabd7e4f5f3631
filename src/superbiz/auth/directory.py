"""The people who may use the service: adding, changing and removing them, their keys,
their sign-ins with the identity provider, each change written to the audit trail.

What a person may do is their *effective* role (``roles.effective_role``): the role an
admin gave them, raised by the provider groups named in ``auth.oidc.admin-groups`` and
``editor-groups``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from superbiz._text import CONTROL_CHARACTERS
from superbiz.auth import audit
from superbiz.auth.audit import AuditLog
from superbiz.auth.keys import key_hash, new_key, shown
from superbiz.auth.oidc import Identity
from superbiz.auth.principal import ADMIN_KEY_USER, LOCAL_USER, User, Via
from superbiz.auth.roles import Role, RoleName, effective_role
from superbiz.config import AuthSettings
from superbiz.exceptions import ConflictError, SignInError
from superbiz.storage.models import USER_NAME_MAX
from superbiz.storage.users import UserRecord, UserRepository

#: a group's name at most
GROUP_MAX = 128


def valid_name(name: str) -> str:
    """``name`` stripped, or a ``ValueError`` saying what is wrong with it: 1–128
    characters, no control characters or slashes (it is part of ``/api/users/NAME``),
    not a name the service acts under itself.

    >>> valid_name(" alice@example.com ")
    'alice@example.com'
    """
    name = name.strip()
    if not name or len(name) > USER_NAME_MAX:
        raise ValueError(f"a user name has 1 to {USER_NAME_MAX} characters")
    if CONTROL_CHARACTERS.search(name) or "/" in name:
        raise ValueError("a user name has no control characters or slashes")
    if name in (ADMIN_KEY_USER, LOCAL_USER):
        raise ValueError(f"{name!r} is the name the service itself acts under; pick another")
    return name


def valid_groups(groups: Sequence[str]) -> list[str]:
    """Groups deduplicated in order, each 1–128 characters without control characters."""
    cleaned: list[str] = []
    for group in groups:
        group = group.strip()
        if not group or len(group) > GROUP_MAX or CONTROL_CHARACTERS.search(group):
            raise ValueError(f"a group name has 1 to {GROUP_MAX} characters, no control characters")
        if group not in cleaned:
            cleaned.append(group)
    return cleaned


@dataclass(frozen=True, slots=True)
class Person:
    """A person as ``superbiz users list`` and ``GET /api/users`` show them."""

    name: str
    role: RoleName
    #: the role an admin set (``role`` may be higher through a provider group)
    assigned_role: RoleName
    groups: tuple[str, ...]
    keys: tuple[str, ...]
    signed_in_with_provider: bool
    created_at: datetime
    last_seen_at: datetime | None


class UserDirectory:
    def __init__(self, engine: Engine, settings: AuthSettings, log: AuditLog | None = None):
        self.settings = settings
        self.users = UserRepository(engine)
        self.audit = log or AuditLog(engine)

    # -- who someone is, on a request ------------------------------------------------------
    def role_of(self, record: UserRecord) -> Role:
        oidc = self.settings.oidc
        return effective_role(record.role, record.groups, oidc.admin_groups, oidc.editor_groups)

    def user(self, record: UserRecord, via: Via) -> User:
        return User(record.name, self.role_of(record), frozenset(record.groups), via, record.id)

    def by_key(self, key: str) -> User | None:
        record = self.users.by_key(key_hash(key))
        return self.user(record, "api_key") if record else None

    def signed_in(self, identity: Identity, via: Via, address: str | None = None) -> User:
        """Record a sign-in with the identity provider (a browser's, or the first use of a
        bearer token) and who it makes the person; refused sign-ins are audited."""
        try:
            name = valid_name(identity.name)
            groups = valid_groups(identity.groups) if identity.groups is not None else None
            after, before = self.users.signed_in(
                name, identity.subject, groups, self.settings.default_role
            )
        except (ValueError, PermissionError, ConflictError) as exc:
            self.audit.record(
                identity.name or identity.subject,
                audit.SIGN_IN_REFUSED,
                None,
                {"reason": str(exc), "via": via},
                address,
            )
            code = (
                "removed"
                if isinstance(exc, PermissionError)
                else "taken"
                if isinstance(exc, ConflictError)
                else "invalid"
            )
            raise SignInError(str(exc), code) from exc
        user = self.user(after, via)
        detail: dict[str, object] = {"via": via, "role": user.role.label, "groups": after.groups}
        if before is None:
            detail["new"] = True
        elif self.role_of(before) != user.role:
            detail["role_before"] = self.role_of(before).label
        self.audit.record(name, audit.SIGN_IN, None, detail, address)
        return user

    def refresh_from_bearer(self, identity: Identity, address: str | None = None) -> User:
        """A bearer token's person: recorded like a sign-in the first time (and when the
        provider's groups changed), read from the store otherwise."""
        record = self.users.get(identity.name.strip())
        groups = tuple(identity.groups) if identity.groups is not None else None
        fresh = (
            record is not None
            and not record.removed
            and record.subject == identity.subject
            and (groups is None or tuple(valid_groups(groups)) == record.groups)
        )
        if fresh and record is not None:
            return self.user(record, "bearer")
        return self.signed_in(identity, "bearer", address)

    # -- managing people (the CLI and the admins' API) -------------------------------------
    def add(
        self, name: str, role: str, groups: Sequence[str], actor: str, address: str | None = None
    ) -> tuple[Person, str]:
        """A new person with a new key (printed once, stored hashed)."""
        name, groups, role = valid_name(name), valid_groups(groups), Role.named(role).label
        key = new_key()
        self.users.add(name, role, groups, key_hash(key), shown(key))
        self.audit.record(actor, audit.USER_ADDED, name, {"role": role, "groups": groups}, address)
        return self.person(name), key

    def change(
        self,
        name: str,
        actor: str,
        *,
        role: str | None = None,
        groups: Sequence[str] | None = None,
        address: str | None = None,
    ) -> Person:
        """Set a person's role and/or groups; each change audited with before and after."""
        role = Role.named(role).label if role is not None else None
        cleaned = valid_groups(groups) if groups is not None else None
        before, after = self.users.change(name, role=role, groups=cleaned)
        if before.role != after.role:
            self.audit.record(
                actor, audit.ROLE_CHANGED, name, {"from": before.role, "to": after.role}, address
            )
        if before.groups != after.groups:
            self.audit.record(
                actor,
                audit.GROUPS_CHANGED,
                name,
                {"from": list(before.groups), "to": list(after.groups)},
                address,
            )
        return self.person(name)

    def remove(self, name: str, actor: str, address: str | None = None) -> None:
        """Keys and sign-ins end at once; signing in again is refused until added back."""
        removed = self.users.remove(name)
        self.audit.record(actor, audit.USER_REMOVED, name, {"role": removed.role}, address)

    def rotate(self, name: str, actor: str, address: str | None = None) -> str:
        """A new key for ``name``; every earlier key of theirs stops working at once."""
        key = new_key()
        self.users.replace_keys(name, key_hash(key), shown(key))
        self.audit.record(actor, audit.KEY_ROTATED, name, {"key": shown(key)}, address)
        return key

    def people(self) -> list[Person]:
        records = self.users.all()
        keys: dict[int, list[str]] = {}
        for key in self.users.keys([r.id for r in records]):
            keys.setdefault(key.user_id, []).append(key.prefix)
        return [self._person(r, keys.get(r.id, [])) for r in records]

    def person(self, name: str) -> Person:
        return next(p for p in self.people() if p.name == name)

    def _person(self, record: UserRecord, keys: Sequence[str]) -> Person:
        return Person(
            name=record.name,
            role=self.role_of(record).label,
            assigned_role=Role.named(record.role).label,
            groups=record.groups,
            keys=tuple(keys),
            signed_in_with_provider=record.subject is not None,
            created_at=record.created_at,
            last_seen_at=record.last_seen_at,
        )
