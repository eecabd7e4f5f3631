"""The OpenTelemetry spans of a turn, as wrappers and hooks the runtime installs where
it assembles the agent: turn → plan → each lookup → each model call.

The ReAct loop, the supervisor and the governed tool hold no tracing line: the model
the executor calls is a ``TracedModel`` (as pydantic-ai's ``InstrumentedModel`` wraps
a model), the planner a ``TracedPlanner``, and every governed call of the runtime's
lookup goes through ``Tracing.around`` (the lookup's ``CallObserver``). The turn's own
span is ``Tracing.turn``. Span names and attributes are ``superbiz.telemetry``'s
(``gen_ai.*`` semantic conventions); no question or answer text is put in a span.

With telemetry off the tracer is OpenTelemetry's no-op one: each wrapper opens a
non-recording span and ``set_attributes`` returns at once, as the inline spans did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.trace import Span, SpanKind, Tracer

from superbiz.agents.planner import Plan, Planner, PlanRequest
from superbiz.agents.turn_result import TurnResult
from superbiz.governance.observer import GovernedCall
from superbiz.governance.results import ToolOutcome
from superbiz.llm.base import ChatModel, StreamEvent, quotes_documents
from superbiz.llm.messages import ChatResponse, Message, ToolSpec
from superbiz.storage.invocations import TOOL_NAME
from superbiz.telemetry import (
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_FINISH_REASONS,
    GEN_AI_INPUT_TOKENS,
    GEN_AI_OPERATION,
    GEN_AI_OUTPUT_TOKENS,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    set_attributes,
    trace_id,
)


class Tracing:
    """Everything a runtime traces, from one tracer: it wraps the turn's model and the
    planner, opens the turn's span, and observes the lookup's governed calls."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def model(self, model: ChatModel) -> TracedModel:
        """``model``, each call in a ``chat`` span (one wrapper a turn: it numbers the
        steps of the turn's model calls)."""
        return TracedModel(model, self.tracer)

    def planner(self, planner: Planner, steps: TracedModel | None = None) -> Planner:
        """``planner``, each plan in a ``plan`` span (a re-plan is a second one). Each
        plan starts the numbering of ``steps``' calls again, as the executor numbers the
        steps of each plan's run from 1."""
        return TracedPlanner(planner, self.tracer, steps)

    @contextmanager
    def turn(self, session_id: str) -> Iterator[TurnSpan]:
        """The turn's span, the parent of everything the turn does."""
        with self.tracer.start_as_current_span("invoke_agent superbiz") as span:
            yield TurnSpan(span, session_id)

    def around(self, call: GovernedCall, run: Callable[[], ToolOutcome]) -> ToolOutcome:
        """A governed call in an ``execute_tool`` span: its outcome as attributes, the
        governor's decision as an event (``CallObserver``)."""
        with self.tracer.start_as_current_span(f"execute_tool {TOOL_NAME}") as span:
            set_attributes(
                span,
                {
                    GEN_AI_OPERATION: "execute_tool",
                    GEN_AI_TOOL_NAME: call.tool_name,
                    GEN_AI_TOOL_CALL_ID: call.call_id or None,
                    GEN_AI_CONVERSATION_ID: call.session_id,
                    "superbiz.turn": call.turn,
                    "superbiz.step": call.step,
                    "superbiz.lookup.origin": call.origin,
                },
            )
            outcome = run()
            _annotate_lookup(span, outcome)
            return outcome

    def trace_id(self) -> str | None:
        """The trace now running, for the records that name it (32 hex digits; None
        when none is recording)."""
        return trace_id()


class TurnSpan:
    """The turn's span, told its number once the session is held and its result at the end."""

    def __init__(self, span: Span, session_id: str) -> None:
        self.span = span
        self.session_id = session_id

    def numbered(self, turn: int) -> None:
        set_attributes(
            self.span,
            {
                GEN_AI_OPERATION: "invoke_agent",
                GEN_AI_AGENT_NAME: "superbiz",
                GEN_AI_CONVERSATION_ID: self.session_id,
                "superbiz.turn": turn,
            },
        )

    def answered(self, result: TurnResult) -> None:
        set_attributes(
            self.span,
            {
                "superbiz.turn.stopped_by": result.stopped_by,
                "superbiz.turn.answer_source": result.recorded_source,
                "superbiz.turn.lookups": len(result.lookups),
                "superbiz.turn.steps": result.steps,
                "superbiz.turn.citations": [c.path for c in result.citations],
                GEN_AI_INPUT_TOKENS: result.prompt_tokens or None,
                GEN_AI_OUTPUT_TOKENS: result.completion_tokens or None,
            },
        )


class TracedModel:
    """A chat model whose every ``complete`` is a ``chat {name}`` span with the ``gen_ai``
    attributes (model, tokens, finish reason). It forwards what its model declares (name,
    ``quotes_documents``), so the executor treats it as the model itself."""

    def __init__(self, inner: ChatModel, tracer: Tracer) -> None:
        self.inner = inner
        self.tracer = tracer
        self.name = inner.name
        self.quotes_documents = quotes_documents(inner)
        #: model calls of this plan's run so far: the next one's ``superbiz.step``
        self.calls = 0

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        self.calls += 1
        name = self.name
        with self.tracer.start_as_current_span(f"chat {name}", kind=SpanKind.CLIENT) as span:
            set_attributes(
                span,
                {
                    GEN_AI_OPERATION: "chat",
                    GEN_AI_REQUEST_MODEL: name,
                    "superbiz.step": self.calls,
                    "superbiz.tools_offered": bool(tools),
                },
            )
            response = self.inner.complete(messages, tools)
            usage = response.usage
            set_attributes(
                span,
                {
                    GEN_AI_FINISH_REASONS: [response.finish_reason or "unknown"],
                    GEN_AI_INPUT_TOKENS: usage.prompt_tokens if usage else None,
                    GEN_AI_OUTPUT_TOKENS: usage.completion_tokens if usage else None,
                    "superbiz.tool_calls": len(response.message.tool_calls),
                },
            )
        return response

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        """The inner model's stream, untraced: the executor only calls ``complete`` (a
        streaming model sits inside this wrapper and streams within its call)."""
        return self.inner.stream(messages, tools)


class TracedPlanner:
    """A planner whose every plan is a ``plan`` span: whether it re-plans, and what it decided."""

    def __init__(self, inner: Planner, tracer: Tracer, steps: TracedModel | None = None) -> None:
        self.inner = inner
        self.tracer = tracer
        self.steps = steps

    def plan(self, request: PlanRequest) -> Plan:
        with self.tracer.start_as_current_span("plan") as span:
            set_attributes(
                span,
                {
                    "superbiz.plan.replan": bool(request.missing or request.exclude),
                    "superbiz.plan.tried_domains": sorted(request.exclude) or None,
                },
            )
            plan = self.inner.plan(request)
            set_attributes(
                span,
                {
                    "superbiz.plan.source": plan.source,
                    "superbiz.plan.need_retrieval": plan.need_retrieval,
                    "superbiz.plan.domains": [entry.domain for entry in plan.domains],
                    "superbiz.plan.direct_answer": bool(plan.direct_answer),
                },
            )
        if self.steps is not None:
            self.steps.calls = 0
        return plan


def _annotate_lookup(span: Span, outcome: ToolOutcome) -> None:
    """The lookup's outcome on its span; the governor's decision as an event."""
    set_attributes(
        span,
        {
            "superbiz.lookup.executed": outcome.executed,
            "superbiz.lookup.domain": outcome.domain,
            "superbiz.lookup.relevance_level": outcome.level.value if outcome.level else None,
            "superbiz.lookup.dedup_reason": outcome.dedup_reason,
            "superbiz.lookup.water_level": outcome.water_level.value,
            "superbiz.lookup.documents": outcome.shown,
            "superbiz.lookup.latency_ms": round(outcome.latency_ms, 3),
            "superbiz.lookup.error": outcome.error,
            "superbiz.lookup.verdict": "error" if outcome.error else outcome.verdict.value,
        },
    )
    if span.is_recording():
        constraint = outcome.constraint
        span.add_event(
            "governance.decision",
            {
                "superbiz.verdict": constraint.verdict.value,
                "superbiz.water_level": constraint.water_level.value,
                "superbiz.budget_left": constraint.budget_left,
                "superbiz.tools_allowed": constraint.tools_allowed,
            },
        )
