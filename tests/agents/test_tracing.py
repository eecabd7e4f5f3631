"""The runtime's tracing is wrappers and hooks (``superbiz.agents.tracing``): the model
wrapper forwards what its model declares and numbers each plan's steps as the executor
does; every governed call, a malformed one too, goes through the lookup's observer,
which names the trace its record keeps. The whole turn's spans: test_telemetry.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.planner import Plan, PlanRequest
from superbiz.agents.tracing import Tracing
from superbiz.config import GovernanceConfig
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.observer import GovernedCall
from superbiz.governance.results import ToolOutcome
from superbiz.governance.tool import LookupTurn
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.llm.base import quotes_documents
from superbiz.llm.messages import AssistantMessage, ChatResponse, Message, ToolSpec, UserMessage


def _tracing() -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider.get_tracer("test")), exporter


class _Answering:
    name = "answering"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        return ChatResponse(AssistantMessage("ok"), finish_reason="stop")

    def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
        raise NotImplementedError


class _Planning:
    def plan(self, request: PlanRequest) -> Plan:
        return Plan(need_retrieval=False, direct_answer="hi")


def test_the_model_wrapper_forwards_what_its_model_declares() -> None:
    tracing, _ = _tracing()
    assert quotes_documents(tracing.model(ExtractiveChatModel()))
    traced = tracing.model(_Answering())
    assert traced.name == "answering" and not quotes_documents(traced)


def test_each_plan_numbers_its_runs_steps_from_one() -> None:
    """As the executor numbers them: a re-plan's run starts again at step 1."""
    tracing, exporter = _tracing()
    model = tracing.model(_Answering())
    planner = tracing.planner(_Planning(), steps=model)
    request = PlanRequest("q", cast(Any, None))
    planner.plan(request)
    model.complete([UserMessage("q")], [])
    model.complete([UserMessage("q")], [])
    planner.plan(request)
    model.complete([UserMessage("q")], [])
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [
        "plan",
        "chat answering",
        "chat answering",
        "plan",
        "chat answering",
    ]
    steps = [(s.attributes or {}).get("superbiz.step") for s in spans if s.name != "plan"]
    assert steps == [1, 2, 1]


class _NoDocuments:
    """An evidence source a malformed call never reaches (it is refused before a lookup)."""

    class _View:
        restricted = False

    def view(self, reader: Any) -> Any:
        return self._View()


class _Recording:
    def __init__(self) -> None:
        self.calls: list[GovernedCall] = []

    def around(self, call: GovernedCall, run: Callable[[], ToolOutcome]) -> ToolOutcome:
        self.calls.append(call)
        return run()

    def trace_id(self) -> str | None:
        return "0" * 32


def test_every_governed_call_goes_through_the_lookups_observer() -> None:
    observer = _Recording()
    lookup = GovernedLookup(cast(Any, _NoDocuments()), InMemorySessionTracker(), observer)
    recorded: list[Any] = []
    recorder = cast(Any, type("Recorder", (), {"add": lambda self, row: recorded.append(row)})())
    turn = LookupTurn(
        lookup, GovernanceConfig(), session_id="s", turn=3, language="en", recorder=recorder
    )
    outcome = turn.call({"query": "x"}, call_id="c1", step=2, tool_name="other_tool")
    assert outcome.malformed and not outcome.executed
    assert observer.calls == [GovernedCall("s", 3, 2, "other_tool", "c1", "model")]
    assert [row.trace_id for row in recorded] == ["0" * 32]  # the record names its trace
