"""Request bodies: ours (``session_id``, ``question``) and the original system's
(``Id``, ``Question``), so its clients keep working unchanged."""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field

from superbiz._text import MAX_QUESTION_CHARS
from superbiz.storage.session_ids import SESSION_ID_MAX, SESSION_ID_PATTERN


def _id_text(value: Any) -> Any:
    """The original clients may send a numeric ``Id``; anything else stays as sent."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


SessionId = Annotated[
    str,
    BeforeValidator(_id_text),
    Field(
        strict=True,
        min_length=1,
        max_length=SESSION_ID_MAX,
        pattern=SESSION_ID_PATTERN,
        description="Session id (also accepted as `Id`); a new one when left out.",
    ),
]


def new_session_id() -> str:
    """An id nobody can guess (128 random bits): without an API key it is all that
    keeps a session's messages private."""
    return f"web-{secrets.token_urlsafe(16)}"


class ChatRequest(BaseModel):
    model_config = ConfigDict(
        str_strip_whitespace=True,
        extra="ignore",
        json_schema_extra={
            "examples": [
                {"session_id": "s1", "question": "支付回调超时怎么办？"},
                {"Id": "s1", "Question": "Pod keeps restarting with exit code 137"},
            ]
        },
    )

    session_id: SessionId = Field(
        default_factory=new_session_id,
        validation_alias=AliasChoices("session_id", "Id", "id", "sessionId"),
    )
    question: str = Field(
        strict=True,
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        pattern=r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$",  # no NUL or other controls
        validation_alias=AliasChoices("question", "Question"),
        description="The question, in Chinese or English (also accepted as `Question`).",
    )


class ClearRequest(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True, extra="ignore")

    session_id: SessionId = Field(validation_alias=AliasChoices("session_id", "Id", "id"))


#: the longest comment a rating takes (a sentence or two on what was wrong)
MAX_COMMENT_CHARS = 2000


class FeedbackRequest(BaseModel):
    """A person's rating of one answer; rating the turn again replaces it."""

    model_config = ConfigDict(
        str_strip_whitespace=True,
        extra="forbid",
        json_schema_extra={"examples": [{"rating": "down", "comment": "cites the old runbook"}]},
    )

    rating: Literal["up", "down"] = Field(description="`up` or `down`.")
    comment: str | None = Field(
        default=None,
        max_length=MAX_COMMENT_CHARS,
        pattern=r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$",
        description=f"Optional, at most {MAX_COMMENT_CHARS} characters.",
    )


class RenameRequest(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True, extra="forbid")

    title: str | None = Field(
        strict=True,
        max_length=200,
        pattern=r"^[^\x00-\x1f\x7f]*$",
        description="The session's new name; null or empty: show its first question again.",
    )
