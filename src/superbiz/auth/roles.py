"""Roles and what each may call: pure data and rules, no I/O.

A reader asks, rates answers and sees their own sessions; an editor also uploads, deletes
and manages sources; an admin also reads the gaps report, every session (read-only), the
audit trail, and manages people. ``ROUTE_ROLES`` names the least role of every route of
the HTTP service; a route missing from it is refused to all but admins (and a test checks
that every route is listed).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Literal

RoleName = Literal["reader", "editor", "admin"]
ROLE_NAMES: tuple[RoleName, ...] = ("reader", "editor", "admin")


class Role(IntEnum):
    """Ordered: every role may do what the ones below it may."""

    READER = 1
    EDITOR = 2
    ADMIN = 3

    @property
    def label(self) -> RoleName:
        return ROLE_NAMES[self.value - 1]

    @classmethod
    def named(cls, name: str) -> Role:
        """``reader`` → ``Role.READER``; anything else is a ``ValueError`` naming the roles."""
        if name not in ROLE_NAMES:
            raise ValueError(f"unknown role {name!r}: one of {', '.join(ROLE_NAMES)}")
        return cls(ROLE_NAMES.index(name) + 1)


#: routes anyone may call, signed in or not: the page and its files (it shows the
#: sign-in), the API docs, sign-in itself, what the page reads first, the probes
#: (``/metrics`` is not among them: it shows the service's operations, issue 33)
OPEN: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/"),
        ("GET", "/static"),
        ("GET", "/docs"),
        ("GET", "/docs/oauth2-redirect"),
        ("GET", "/redoc"),
        ("GET", "/openapi.json"),
        ("GET", "/auth/login"),
        ("GET", "/auth/callback"),
        ("POST", "/auth/logout"),
        ("GET", "/api/info"),
        ("GET", "/livez"),
        ("GET", "/healthz"),
    }
)

#: the least role of every other route, by method and path template
ROUTE_ROLES: dict[tuple[str, str], Role] = {
    ("GET", "/api/me"): Role.READER,
    ("GET", "/metrics"): Role.READER,
    ("POST", "/api/chat"): Role.READER,
    ("POST", "/api/chat_stream"): Role.READER,
    ("POST", "/api/chat/clear"): Role.READER,
    ("POST", "/api/chat/cancel"): Role.READER,
    ("GET", "/api/sessions"): Role.READER,
    ("GET", "/api/sessions/{session_id}"): Role.READER,
    ("PATCH", "/api/sessions/{session_id}"): Role.READER,
    ("DELETE", "/api/sessions/{session_id}"): Role.READER,
    ("GET", "/api/sessions/{session_id}/invocations"): Role.READER,
    ("POST", "/api/sessions/{session_id}/turns/{turn}/feedback"): Role.READER,
    ("GET", "/api/sessions/{session_id}/turns/{turn}/citations/{ref}"): Role.READER,
    ("GET", "/api/documents"): Role.READER,
    ("GET", "/api/documents/{document_id:path}"): Role.READER,
    ("GET", "/api/knowledge/map"): Role.READER,
    ("POST", "/api/documents"): Role.EDITOR,
    ("DELETE", "/api/documents/{document_id:path}"): Role.EDITOR,
    ("GET", "/api/sources"): Role.EDITOR,
    ("GET", "/api/gaps"): Role.ADMIN,
    ("GET", "/api/audit"): Role.ADMIN,
    ("GET", "/api/users"): Role.ADMIN,
    ("POST", "/api/users"): Role.ADMIN,
    ("PATCH", "/api/users/{name}"): Role.ADMIN,
    ("DELETE", "/api/users/{name}"): Role.ADMIN,
    ("POST", "/api/users/{name}/rotate"): Role.ADMIN,
}

#: what the page may offer each role (it hides the rest; the routes refuse it anyway)
CAPABILITIES: dict[str, Role] = {
    "ask": Role.READER,
    "upload": Role.EDITOR,
    "delete_documents": Role.EDITOR,
    "sources": Role.EDITOR,
    "gaps": Role.ADMIN,
    "all_sessions": Role.ADMIN,
    "audit": Role.ADMIN,
    "users": Role.ADMIN,
}


def route_role(method: str, template: str) -> Role | None:
    """The least role ``method template`` needs; ``None``: open to anyone. A route not
    listed needs an admin (refused by default rather than opened by mistake).

    >>> route_role("GET", "/api/gaps").label, route_role("HEAD", "/livez")
    ('admin', None)
    >>> route_role("PUT", "/api/new-thing").label
    'admin'
    """
    method = "GET" if method == "HEAD" else method
    if (method, template) in OPEN:
        return None
    return ROUTE_ROLES.get((method, template), Role.ADMIN)


def effective_role(
    stored: str, groups: Sequence[str], admin_groups: Sequence[str], editor_groups: Sequence[str]
) -> Role:
    """A person's role: the one an admin gave them (or the default they got), raised by
    the provider groups ``auth.oidc.admin-groups`` / ``editor-groups``. Computed on every
    request from the groups of the last sign-in, so leaving a role group at the provider
    takes the role away at the next sign-in.

    >>> effective_role("reader", ["ops", "kb-admins"], ["kb-admins"], ["ops"]).label
    'admin'
    >>> effective_role("editor", ["ops"], ["kb-admins"], []).label
    'editor'
    """
    role = Role.named(stored)
    if set(groups) & set(admin_groups):
        return Role.ADMIN
    if set(groups) & set(editor_groups):
        return max(role, Role.EDITOR)
    return role


def capabilities(role: Role) -> list[str]:
    """What the page offers ``role``.

    >>> capabilities(Role.EDITOR)
    ['ask', 'upload', 'delete_documents', 'sources']
    """
    return [name for name, least in CAPABILITIES.items() if role >= least]
