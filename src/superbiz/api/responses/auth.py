"""Typed bodies of the sign-in, people and audit routes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from superbiz.auth.roles import RoleName


class Me(BaseModel):
    """Who the request comes from, and what the page may offer them."""

    name: str
    role: RoleName
    groups: list[str]
    via: str = Field(description="`sign_in`, `api_key`, `bearer`, `admin_key` or `local`.")
    can: list[str] = Field(
        description="What the page offers this role: ask, upload, delete_documents, "
        "sources, gaps, all_sessions, audit, users."
    )


class SignedOut(BaseModel):
    signed_out: bool
    #: where to send the browser to sign out at the identity provider too (when it can)
    end_session_url: str | None = None


class PersonView(BaseModel):
    name: str
    role: RoleName = Field(description="What they may do (a provider group may raise it).")
    assigned_role: RoleName = Field(description="The role an admin gave them.")
    groups: list[str]
    keys: list[str] = Field(description="The first characters of each of their API keys.")
    signed_in_with_provider: bool
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    last_seen_at: str | None = Field(json_schema_extra={"format": "date-time"})


class PersonList(BaseModel):
    users: list[PersonView]


class NewKey(BaseModel):
    """A person and their new API key: shown this once, stored only as a hash."""

    user: PersonView
    api_key: str


class NewPerson(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    role: RoleName = "reader"
    groups: list[str] = Field(default_factory=list, max_length=100)


class PersonChange(BaseModel):
    role: RoleName | None = None
    groups: list[str] | None = Field(None, max_length=100)


class UserRemoved(BaseModel):
    name: str
    removed: bool


class AuditEventView(BaseModel):
    id: int
    at: str = Field(json_schema_extra={"format": "date-time"})
    actor: str = Field(description="Who: a person, `service.api-key`, `cli:USER`, or `-`.")
    action: str
    target: str | None
    detail: dict[str, Any] | None
    address: str | None


class AuditList(BaseModel):
    events: list[AuditEventView]
