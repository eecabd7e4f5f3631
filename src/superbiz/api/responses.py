"""Response bodies and stream events: the HTTP contract, as ``/docs`` shows it.

These models are the wire format, kept apart from the agents' and governance's own
types so those can change without changing what clients read. A field with a default
is one that may be absent: routes serialise with ``exclude_unset``, so a body carries
exactly the keys it was built with. Each stream event names itself (``event_name``);
its model is the JSON of the event's ``data:`` line.
"""

from __future__ import annotations

import operator
from dataclasses import fields
from enum import StrEnum
from functools import reduce
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, get_args, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from superbiz.agents.planner import PlanSource
from superbiz.agents.supervisor import SupervisedTurn
from superbiz.governance.decision import DedupReason, Verdict, WaterLevel
from superbiz.governance.lookup import RetrievalDetails
from superbiz.governance.tool import Origin, ToolOutcome
from superbiz.knowledge.report import SkippedFile
from superbiz.retrieval.relevance import RelevanceLevel

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# -- errors -----------------------------------------------------------------------------


ORIGIN_MEANS = (
    "model: the model's call; plan: a planned lookup the executor ran before the model's "
    "first step; user: a person's lookup (`superbiz lookup`)."
)


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


# -- chat -------------------------------------------------------------------------------


class PlanDomain(BaseModel):
    domain: str
    sub_question: str


class AnswerPlan(BaseModel):
    """The Planner's decision: which domains to consult, or a direct answer."""

    need_retrieval: bool
    domains: list[PlanDomain]
    direct_answer: str | None
    source: PlanSource
    note: str | None


class AnswerCitation(BaseModel):
    """A document the answer cites as ``[ref]``."""

    ref: int
    title: str
    path: str
    domain: str
    url: str | None = Field(
        default=None,
        description="A link to the document where it lives, for a document of a Git source "
        "with a `sources.<name>.web-url` pattern.",
    )
    page: int | None = Field(None, description="For a PDF: the page the cited passage starts on.")
    location: str | None = Field(None, description="For a PDF: `path#page=N`.")


class LookupSummary(BaseModel):
    """One governed ``lookup_knowledge`` call: what ran, its level and the verdict."""

    arguments: dict[str, Any] = Field(description="The arguments the model sent, as sent.")
    domain: str | None
    executed: bool = Field(description="False: blocked by the governance, nothing searched.")
    relevance_level: RelevanceLevel | None
    dedup_reason: DedupReason | None
    verdict: Verdict
    water_level: WaterLevel
    budget_left: int
    documents: list[str] = Field(description="Paths of the documents shown to the model.")
    latency_ms: float
    error: str | None
    origin: Origin = Field(description=ORIGIN_MEANS)

    @staticmethod
    def from_outcome(outcome: ToolOutcome) -> LookupSummary:
        """One lookup as the API and the CLI report it (the ``tool_result`` event adds
        to it, so this builds the summary itself, not ``cls``)."""
        return LookupSummary(
            arguments=outcome.arguments,
            domain=outcome.domain,
            executed=outcome.executed,
            relevance_level=outcome.level,
            dedup_reason=outcome.dedup_reason,
            verdict=outcome.verdict,
            water_level=outcome.water_level,
            budget_left=outcome.constraint.budget_left,
            documents=outcome.shown,
            latency_ms=round(outcome.latency_ms, 2),
            error=outcome.error,
            origin=outcome.origin,
        )


class TokenUsage(BaseModel):
    """Tokens the turn's model calls cost, as the endpoint reported them (0 when it does not)."""

    prompt_tokens: int
    completion_tokens: int


class ChatAnswer(BaseModel):
    """A turn: the answer, its citations, the plan(s) and every lookup it made."""

    event_name: ClassVar[str] = "answer"

    session_id: str
    turn: int
    question: str
    answer: str
    extractive: bool = Field(description="The answer is quoted from the documents.")
    grounded: bool = Field(
        description="The answer cites documents that bear on the question and draws on them "
        "(a quote of a document about something else grounds nothing)."
    )
    invalid_citations: int = Field(
        description="[n] markers removed from the model's text: they named no document."
    )
    answer_source: Literal["model", "repaired", "extractive", "no_evidence"] = Field(
        description="model; repaired (after one repair turn); extractive (quoted instead of "
        "an ungrounded answer, or no LLM); no_evidence (no document shown answers the "
        "question: only related documents were found, listed in `related`, or none)."
    )
    copied: Literal["turn", "documents"] | None = Field(
        default=None,
        description="The model's answer was no answer: it copied an earlier answer of the "
        "session (turn) or pasted the documents wholesale (documents); it was repaired or "
        "replaced, as answer_source says.",
    )
    truncated: bool = Field(
        default=False,
        description="The model's answer stopped at its output token limit (finish_reason "
        "length); the answer ends with a note saying so.",
    )
    citations: list[AnswerCitation] = Field(
        description="What the answer quotes (a model's answer: cites), in the order it quotes "
        "them: the passages that answer, best first."
    )
    related: list[AnswerCitation] = Field(
        description="Documents that bear on the question but are not quoted: listed after "
        "the answer (title and link). Shown documents that bear on neither are dropped."
    )
    lookups: list[LookupSummary]
    steps: int = Field(description="Model calls of the turn.")
    stopped_by: Literal["answer", "step_cap", "malformed_calls"] = Field(
        description="answer; step_cap (governance.max-steps); malformed_calls (the tool "
        "was withdrawn after 3 steps in a row whose calls could not run)."
    )
    usage: TokenUsage
    plan: AnswerPlan
    replan: AnswerPlan | None = Field(
        default=None, description="Present when the Supervisor planned a second time."
    )
    reused_evidence: list[str] = Field(description="Cited paths retrieved in earlier turns.")
    model: str
    high_mark: int = Field(
        description="Lookup calls per turn at which the water level is high (a planned turn "
        "is high too once 3 lookups found documents: `advanced.governance.high-min-found`)."
    )
    trace_id: str | None = Field(
        default=None,
        description="The turn's OpenTelemetry trace id (32 hex digits; also the JSON "
        "answer's `X-Trace-Id` header); null when no trace was recording.",
    )

    #: what the service adds to a turn; ``superbiz ask --json`` prints the rest
    SERVICE_FIELDS: ClassVar[frozenset[str]] = frozenset({"model", "high_mark"})

    @classmethod
    def from_turn(cls, turn: SupervisedTurn, high_mark: int) -> ChatAnswer:
        """The one place a turn becomes its wire shape: the HTTP body (JSON answer and
        ``answer`` event) and, less ``SERVICE_FIELDS``, ``superbiz ask --json``."""
        result = turn.result
        answer = cls(
            session_id=result.session_id,
            turn=result.turn,
            question=result.question,
            answer=result.answer,
            extractive=result.extractive,
            grounded=result.grounded,
            invalid_citations=result.invalid_citations,
            answer_source=result.answer_source,
            copied=result.copied,
            truncated=result.truncated,
            citations=[AnswerCitation.model_validate(c.as_dict()) for c in result.citations],
            related=[AnswerCitation.model_validate(c.as_dict()) for c in result.related],
            lookups=[LookupSummary.from_outcome(o) for o in result.lookups],
            steps=result.steps,
            stopped_by=result.stopped_by,
            usage=TokenUsage(
                prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens
            ),
            plan=AnswerPlan.model_validate(turn.plan.as_dict()),
            reused_evidence=result.reused,
            model=result.model,
            high_mark=high_mark,
            trace_id=result.trace_id,
        )
        if turn.replan is not None:  # set only when there is one: the body has no null
            answer.replan = AnswerPlan.model_validate(turn.replan.as_dict())
        return answer


class Cleared(BaseModel):
    session_id: str
    cleared: bool


class Cancelled(BaseModel):
    session_id: str
    cancelled: bool = Field(
        description="A turn of the session was running here and was asked to stop."
    )


# -- sessions ---------------------------------------------------------------------------


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


# -- documents --------------------------------------------------------------------------


class DocumentView(BaseModel):
    """A stored document; its id is its path."""

    id: str
    path: str
    title: str
    domain: str
    size_bytes: int
    chunk_count: int
    covers: list[str]
    when_to_retrieve: str | None
    tags: list[str]
    origin: dict[str, str] = Field(
        description="Where `covers` and `when_to_retrieve` came from: frontmatter, llm, derived."
    )
    uploaded: bool = Field(description="True when the file lives in the uploads folder.")


class DocumentList(BaseModel):
    documents: list[DocumentView]
    count: int


class IngestSummary(BaseModel):
    """What the ingest of the uploads folder did (as ``superbiz ingest`` reports it)."""

    added: list[str]
    updated: list[str]
    unchanged: list[str]
    repaired: list[str]
    removed: list[str]
    skipped: list[SkippedFile]
    metadata_failures: list[SkippedFile]
    #: unknown frontmatter keys and the like: stored, but worth fixing
    metadata_warnings: list[SkippedFile]
    domains_changed: list[str]


class Uploaded(BaseModel):
    status: Literal["added", "updated", "repaired", "unchanged"]
    document: DocumentView
    report: IngestSummary


class Deleted(BaseModel):
    deleted: str = Field(description="The document's path.")
    domain: str
    file_removed: bool = Field(description="True when an uploaded file was deleted too.")
    note: str | None = Field(
        default=None,
        description="For a knowledge-base file's document: it is out of the index until the "
        "next `superbiz ingest`, which brings it back.",
    )


# -- knowledge map ----------------------------------------------------------------------


class MapDocumentView(BaseModel):
    title: str
    covers: list[str] | None = Field(default=None, description="Absent when none are known.")
    path: str


class MapDomainView(BaseModel):
    domain_id: str
    description: str
    when_to_retrieve: str
    document_count: int
    documents: list[MapDocumentView] | None = Field(
        default=None, description="Absent for a domain without documents."
    )
    more_documents: int | None = Field(
        default=None, description="Documents left out to keep the map within its budget."
    )


class KnowledgeMapView(BaseModel):
    """The knowledge map the Planner sees."""

    available_knowledge_domains: list[MapDomainView]
    note: str | None = Field(default=None, description="Present when the map was shortened.")


# -- service ----------------------------------------------------------------------------


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


# -- stream events ----------------------------------------------------------------------


class PlanEvent(AnswerPlan):
    event_name: ClassVar[str] = "plan"

    session_id: str


class ToolCallEvent(BaseModel):
    """The model asked for a lookup (sent before the governance decides)."""

    event_name: ClassVar[str] = "tool_call"

    session_id: str
    step: int
    call_id: str
    name: str
    arguments: dict[str, Any]


class PrimaryDocument(BaseModel):
    title: str
    path: str
    domain: str


class ToolResultEvent(LookupSummary):
    """A lookup as the trace panel shows it; ``calls`` of ``high_mark`` is the gauge."""

    event_name: ClassVar[str] = "tool_result"

    session_id: str
    call_id: str
    query: str
    completeness_hint: str | None
    retrieved_domains: list[str]
    message: str | None
    primary: PrimaryDocument | None
    closed_domains: list[str]
    supplement_domains: list[str]
    calls: int
    high_mark: int


class TokenEvent(BaseModel):
    """Answer text as it is written; ``step`` 0 for an answer that was not streamed."""

    event_name: ClassVar[str] = "token"

    session_id: str
    step: int
    text: str


class ErrorEvent(BaseModel):
    """The turn failed; ``status`` is what ``/api/chat`` would have answered."""

    event_name: ClassVar[str] = "error"

    session_id: str
    status: int
    error: str
    message: str


class DoneEvent(BaseModel):
    """Always the last event."""

    event_name: ClassVar[str] = "done"

    session_id: str
    elapsed_ms: float


TurnEvent: TypeAlias = (
    PlanEvent | ToolCallEvent | ToolResultEvent | TokenEvent | ChatAnswer | ErrorEvent | DoneEvent
)
#: in the order a turn sends them
TURN_EVENTS: tuple[type[TurnEvent], ...] = (
    PlanEvent,
    ToolCallEvent,
    ToolResultEvent,
    TokenEvent,
    ChatAnswer,
    ErrorEvent,
    DoneEvent,
)
