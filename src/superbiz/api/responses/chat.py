"""A turn's wire shape: the JSON answer (``POST /api/chat``, ``superbiz ask --json``) and
the stream's events (``POST /api/chat_stream``), each naming itself (``event_name``); and
the bodies of clearing and cancelling a session's turn."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeAlias

from pydantic import BaseModel, Field

from superbiz.agents.planner import PlanSource
from superbiz.agents.supervisor import SupervisedTurn
from superbiz.governance.results import Origin, ToolOutcome
from superbiz.governance.verdicts import DedupReason, Verdict, WaterLevel
from superbiz.retrieval.relevance import RelevanceLevel

ORIGIN_MEANS = (
    "model: the model's call; plan: a planned lookup the executor ran before the model's "
    "first step; user: a person's lookup (`superbiz lookup`)."
)


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
