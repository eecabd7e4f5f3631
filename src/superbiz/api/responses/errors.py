"""Every 4xx/5xx answer's body (``superbiz.api.errors`` builds and documents them)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class FieldError(BaseModel):
    """One invalid field of a request."""

    loc: list[str] = Field(description="Where: `body`, then the field path.")
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: a kind, a readable message, and field errors on a 422."""

    error: str = Field(description="The kind, e.g. `invalid_request`, `llm_unavailable`.")
    message: str
    errors: list[FieldError] | None = Field(default=None, description="Only on a 422.")
