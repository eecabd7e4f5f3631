"""The service's own state: info for the page, readiness and liveness."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ServiceInfo(BaseModel):
    model: str
    extractive: bool = Field(description="True when answers are extractive (no LLM).")
    high_mark: int
    low_max_calls: int
    indicator: str = Field(description="What the water level counts: calls, tokens or domains.")
    governance: bool
    max_upload_bytes: int
    extensions: list[str]
    auth_required: bool = Field(description="True when requests must say who they are.")
    sign_in: str = Field(
        "none",
        description="`oidc`: the page signs in at `/auth/login`; `key`: API keys only; "
        "`none`: nobody is asked.",
    )


class HealthChecks(BaseModel):
    database: str = Field(description="`ok` or `failed`.")
    vector_store: str = Field(description="`ok`, `ok (empty: …)` or `failed`.")


class Health(BaseModel):
    """200 with ``status: ok``, or 503 with ``status: unavailable`` and the problems."""

    status: Literal["ok", "unavailable"]
    checks: HealthChecks | None = Field(
        default=None, description="Absent when the stores stayed busy."
    )
    problems: list[str] | None = Field(default=None, description="Only when unavailable.")
    documents: int | None = Field(default=None, description="Only when healthy.")


class Liveness(BaseModel):
    """``/livez``: the process answers; nothing else is checked."""

    status: Literal["alive"]
