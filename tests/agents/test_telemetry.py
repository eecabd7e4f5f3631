"""OpenTelemetry spans of a turn (turn → plan → each lookup → each model call), checked
with the SDK's in-memory exporter and against a real OTLP/HTTP receiver started here
(an HTTP server decoding the protobuf export request); SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from superbiz._net import free_port
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.config import Settings, TelemetrySettings
from superbiz.evaluation.hostile import silent_collector
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.messages import ChatResponse, Message, ToolSpec, Usage

QUESTION = "How do I raise the API rate limit after 429 Too Many Requests?"
TURN = "invoke_agent superbiz"
LOOKUP = "execute_tool lookup_knowledge"


class CountingModel(ExtractiveChatModel):
    """The extractive policy, reporting token usage and a finish reason like a server."""

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        response = super().complete(messages, tools)
        finish = "tool_calls" if response.message.tool_calls else "stop"
        return replace(response, usage=Usage(120, 30), finish_reason=finish)


def make_runtime(
    tmp_path: Path, database_url: str, embedder: Any, kb_folder: Path, **options: Any
) -> Runtime:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=database_url, **options.pop("settings", {})
    )
    kb = KnowledgeBase(settings, embedder=embedder)
    runtime = open_runtime(settings, kb=kb, model=CountingModel(), **options)
    Ingestor(kb, domains=runtime.domains).ingest([kb_folder])
    return runtime


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(
    tmp_path: Path,
    database_url: str,
    use_embedder: Any,
    small_kb: Path,
    exporter: InMemorySpanExporter,
) -> Iterator[Runtime]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = make_runtime(tmp_path, database_url, use_embedder, small_kb, tracer_provider=provider)
    exporter.clear()  # ingest made no spans, but the warm-up of a lookup would
    yield runtime
    runtime.close()


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_a_turn_is_one_trace_of_plan_lookups_and_model_calls(
    traced: Runtime, exporter: InMemorySpanExporter
) -> None:
    result = traced.ask("traced", QUESTION).result
    spans = exporter.get_finished_spans()

    (turn,) = by_name(spans, TURN)
    assert turn.parent is None
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.conversation.id"] == "traced"
    assert turn.attributes["superbiz.turn"] == result.turn
    assert turn.attributes["superbiz.turn.citations"] == ("api/rate-limit.md",)
    trace = turn.context.trace_id
    assert all(s.context.trace_id == trace for s in spans)
    children = [s for s in spans if s is not turn]
    assert children and all(s.parent and s.parent.span_id == turn.context.span_id for s in children)

    (plan,) = by_name(spans, "plan")
    assert plan.attributes and plan.attributes["superbiz.plan.domains"] == ("api",)

    (lookup,) = by_name(spans, LOOKUP)
    attributes = lookup.attributes or {}
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "lookup_knowledge"
    assert attributes["superbiz.lookup.domain"] == "api"
    assert attributes["superbiz.lookup.relevance_level"] == "PRECISE"
    assert attributes["superbiz.lookup.verdict"] == result.lookups[0].verdict.value
    assert attributes["superbiz.lookup.water_level"] == "low"
    assert attributes["superbiz.lookup.documents"] == ("api/rate-limit.md",)
    assert "superbiz.lookup.dedup_reason" not in attributes  # nothing was withheld
    assert float(attributes["superbiz.lookup.latency_ms"]) > 0  # type: ignore[arg-type]
    (decision,) = lookup.events
    assert decision.name == "governance.decision"
    assert decision.attributes and decision.attributes["superbiz.verdict"] == "answer"

    calls = by_name(spans, "chat extractive")
    assert len(calls) == result.steps >= 1
    for call in calls:
        assert call.attributes and call.attributes["gen_ai.request.model"] == "extractive"
        assert call.attributes["gen_ai.usage.input_tokens"] == 120
        assert call.attributes["gen_ai.usage.output_tokens"] == 30
        assert call.attributes["gen_ai.response.finish_reasons"] in (("stop",), ("tool_calls",))
    # no question or answer text in any span
    texts = [str(v) for s in spans for v in (s.attributes or {}).values()]
    assert not any(QUESTION in t or "429" in t for t in texts)

    # the turn's record names the trace: the answer, every recorded call, the result
    hex_id = f"{trace:032x}"
    assert result.trace_id == hex_id
    answer = [m for m in traced.chats.messages("traced") if m.role == "assistant"]
    assert [m.trace_id for m in answer] == [hex_id]
    assert {r.trace_id for r in traced.invocations.for_session("traced")} == {hex_id}


def test_the_json_answer_names_its_trace(traced: Runtime, exporter: InMemorySpanExporter) -> None:
    client = TestClient(create_app(traced.settings, assistant=traced, warm_up=False))
    response = client.post("/api/chat", json={"session_id": "http", "question": QUESTION})
    (turn,) = by_name(exporter.get_finished_spans(), TURN)
    assert response.headers["x-trace-id"] == f"{turn.context.trace_id:032x}"
    assert response.json()["trace_id"] == response.headers["x-trace-id"]
    history = client.get("/api/sessions/http").json()["messages"]
    assert history[1]["trace_id"] == response.headers["x-trace-id"]
    # the stream's answer event carries it too
    stream = client.post("/api/chat_stream", json={"session_id": "sse", "question": QUESTION})
    assert '"trace_id":"' in stream.text


def test_without_an_endpoint_nothing_is_recorded_or_sent(
    tmp_path: Path, use_embedder: Any, small_kb: Path
) -> None:
    runtime = make_runtime(tmp_path, None, use_embedder, small_kb)  # type: ignore[arg-type]
    try:
        result = runtime.ask("quiet", QUESTION).result
        assert result.trace_id is None
        assert {r.trace_id for r in runtime.invocations.for_session("quiet")} == {None}
    finally:
        runtime.close()


# -- a real OTLP/HTTP receiver --------------------------------------------------------------


class Receiver:
    """An OTLP/HTTP trace receiver: decodes each protobuf export request it is sent."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.requests.append(request)
                received.paths.append(self.path)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[str, str, dict[str, Any], Any]]:
        """(service name, span name, attributes, span) of everything received."""
        found = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: _value(a.value) for a in span.attributes}
                        found.append((resource["service.name"], span.name, attributes, span))
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def test_spans_reach_an_otlp_http_receiver(
    tmp_path: Path, database_url: str, use_embedder: Any, small_kb: Path, receiver: Receiver
) -> None:
    telemetry = TelemetrySettings(otlp_endpoint=receiver.endpoint, service_name="kb-prod")
    runtime = make_runtime(
        tmp_path, database_url, use_embedder, small_kb, settings={"telemetry": telemetry}
    )
    try:
        result = runtime.ask("exported", QUESTION).result
    finally:
        runtime.close()  # flushes the batch
    assert set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans()
    names = [name for _, name, _, _ in spans]
    assert names.count(TURN) == 1 and names.count("plan") == 1 and names.count(LOOKUP) == 1
    assert "chat extractive" in names
    assert {service for service, *_ in spans} == {"kb-prod"}
    assert {span.trace_id.hex() for *_, span in spans} == {result.trace_id}
    lookup = next(attrs for _, name, attrs, _ in spans if name == LOOKUP)
    assert lookup["superbiz.lookup.relevance_level"] == "PRECISE"
    assert lookup["superbiz.lookup.documents"] == ("api/rate-limit.md",)
    call = next(attrs for _, name, attrs, _ in spans if name == "chat extractive")
    assert call["gen_ai.usage.input_tokens"] == 120


def test_an_endpoint_without_the_sdk_installed_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from superbiz.exceptions import ConfigError
    from superbiz.telemetry import open_telemetry

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ConfigError, match=r"pip install 'superbiz\[telemetry\]'"):
        open_telemetry(TelemetrySettings(otlp_endpoint="http://127.0.0.1:4318"))


@pytest.mark.parametrize("endpoint", ["collector:4318", "grpc://collector:4317"])
def test_an_endpoint_that_is_no_http_url_is_refused(endpoint: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="must be an http:// or https:// URL"):
        TelemetrySettings(otlp_endpoint=endpoint)


# -- a collector that cannot be reached, or never answers (issue 33) -----------------------


@contextmanager
def _refusing_collector() -> Iterator[str]:
    """A port nothing listens on: every connection is refused."""
    yield f"http://127.0.0.1:{free_port()}"


@pytest.mark.parametrize(
    ("collector", "cause"),
    [(_refusing_collector, "Connection refused"), (silent_collector, "no answer within")],
)
def test_a_collector_that_is_down_or_silent_costs_one_bounded_flush_and_one_line(
    tmp_path: Path,
    database_url: str,
    use_embedder: Any,
    small_kb: Path,
    collector: Callable[[], AbstractContextManager[str]],
    cause: str,
) -> None:
    """With ``http://127.0.0.1:9`` the CLI took 5–19 s longer and printed the exporter's
    WARNING/ERROR lines; a collector that accepted and never answered, 27 s; ``serve``
    took 7–11 s to stop. Closing now flushes for at most ``telemetry.flush-timeout-s``
    and the only line is superbiz's own (the exporter's records never reach a handler)."""
    terminal = _RootRecords()  # what reaches the root logger's handlers: the terminal
    root = logging.getLogger()
    root.addHandler(terminal)
    with collector() as endpoint:
        telemetry = TelemetrySettings(otlp_endpoint=endpoint, flush_timeout_s=0.5)
        runtime = make_runtime(
            tmp_path, database_url, use_embedder, small_kb, settings={"telemetry": telemetry}
        )
        try:
            assert runtime.ask("down", QUESTION).result.answer
        finally:
            closing = threading.Thread(target=runtime.close)
            closing.start()
            closing.join(timeout=5)  # the SDK's default alone is a 10 s timeout, then retries
        assert not closing.is_alive(), "closing waited on the collector"
    root.removeHandler(terminal)
    shown = [r for r in terminal.records if r.levelno >= logging.WARNING]
    assert [r.name for r in shown] == ["superbiz._otlp_export"], [r.msg for r in shown]
    assert f"traces not sent to {endpoint}/v1/traces ({cause}" in shown[0].getMessage()
    assert not [r for r in terminal.records if r.name.startswith("opentelemetry")]


class _RootRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
