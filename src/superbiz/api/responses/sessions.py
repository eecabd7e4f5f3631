"""A session as the page reads it back: its list entry, messages, recorded tool calls, a
cited passage, a rating; rename and delete."""

from __future__ import annotations

import operator
from dataclasses import fields
from enum import StrEnum
from functools import reduce
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any, Literal, get_args, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from superbiz.api.responses.chat import ORIGIN_MEANS, AnswerCitation, AnswerPlan
from superbiz.governance.results import Origin, RetrievalDetails
from superbiz.governance.verdicts import DedupReason, Verdict, WaterLevel
from superbiz.retrieval.relevance import RelevanceLevel

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class FeedbackView(BaseModel):
    """A person's rating of one turn's answer."""

    session_id: str
    turn: int
    rating: Literal["up", "down"]
    comment: str | None
    updated_at: str = Field(json_schema_extra={"format": "date-time"})


class SessionMessage(BaseModel):
    turn: int
    role: Literal["user", "assistant"]
    content: str
    citations: list[AnswerCitation] = Field(description="What the answer quotes, in order.")
    related: list[AnswerCitation] = Field(
        default=[], description="Documents listed after the answer, not quoted."
    )
    plan: AnswerPlan | None = Field(description="The plan of an answer; null for a question.")
    feedback: FeedbackView | None = Field(
        default=None, description="An answer's rating, when it has one."
    )
    trace_id: str | None = Field(
        default=None, description="An answer's OpenTelemetry trace id, when one was recorded."
    )


class SessionHistory(BaseModel):
    session_id: str
    messages: list[SessionMessage]


class SessionSummaryView(BaseModel):
    """A session in a list: its name, else its first question, and when it was used."""

    session_id: str
    title: str | None = Field(description="The name given on the page; null: none given.")
    first_question: str
    turns: int
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    updated_at: str = Field(json_schema_extra={"format": "date-time"})
    owner: str | None = Field(
        None, description="Whose it is; null: started before sign-in was configured."
    )


class SessionList(BaseModel):
    sessions: list[SessionSummaryView]


class SessionDeleted(BaseModel):
    session_id: str
    deleted: bool


class Passage(BaseModel):
    """What the model was shown of a cited document in one turn, and where it sits."""

    session_id: str
    turn: int
    ref: int
    title: str
    path: str
    domain: str
    heading_path: list[str] = Field(
        description="The headings above the passage in the document, outermost first."
    )
    excerpt: str = Field(description="The text the model was shown, as stored with the answer.")
    relevance_level: RelevanceLevel | None = Field(
        description="The level of the lookup that showed the document; null when unknown."
    )
    url: str | None = Field(
        default=None, description="The document where it lives (a Git source's `web-url`)."
    )
    document_url: str = Field(description="This service's route to the whole document.")


def _recorded_type(hint: Any) -> Any:
    """A field's type as a record holds it: optional (an older record may lack it), and
    a string enum as its plain string (an older record may hold a value since gone)."""
    kinds = get_args(hint) if isinstance(hint, UnionType) else (hint,)
    plain = [str if isinstance(k, type) and issubclass(k, StrEnum) else k for k in kinds]
    return reduce(operator.or_, [*plain, NoneType])


def _recorded(name: str, details: type[DataclassInstance], doc: str) -> type[BaseModel]:
    """The model of a stored ``details`` dataclass: its fields, in its order, each
    optional; keys it no longer has are kept as extras."""
    hints = get_type_hints(details)
    optional: dict[str, Any] = {
        f.name: (_recorded_type(hints[f.name]), None) for f in fields(details)
    }
    return create_model(
        name,
        __config__=ConfigDict(extra="allow"),
        __doc__=doc,
        __module__=__name__,
        **optional,
    )


if TYPE_CHECKING:  # built from ``RetrievalDetails``: a type checker sees a model only
    RetrievalRecord = BaseModel
else:
    RetrievalRecord = _recorded(
        "RetrievalRecord",
        RetrievalDetails,
        "The scores behind a lookup, as recorded. Records keep the keys they were written\n"
        "with, so an older one may lack later fields.",
    )


class RecordedInvocation(BaseModel):
    """One recorded tool call, executed or blocked (a row of ``tool_invocation``)."""

    session_id: str
    turn: int
    step: int
    tool_name: str
    arguments: dict[str, Any]
    domain: str | None
    relevance_level: RelevanceLevel | None
    dedup_reason: DedupReason | None
    retrieval_details: RetrievalRecord | None
    executed: bool
    verdict: Verdict | Literal["error"] = Field(description="`error`: a malformed call.")
    water_level: WaterLevel
    latency_ms: float
    error: str | None
    origin: Origin = Field(description=ORIGIN_MEANS)
    id: int | None
    created_at: str = Field(json_schema_extra={"format": "date-time"})


class SessionInvocations(BaseModel):
    session_id: str
    invocations: list[RecordedInvocation]
