"""OpenTelemetry traces of a turn: turn → plan → each lookup → each model call.

A turn is one trace, so a slow or odd turn can be read in any tracing UI: where its time
went (planning, each governed lookup, each model call) and what the governance decided.
Model calls carry the ``gen_ai.*`` semantic-convention attributes (model, tokens, finish
reason); lookups carry their domain, level, verdict, water level, dedup reason and
documents, with the governor's decision as an event. Question and answer texts are never
put in a span. The spans are opened by wrappers and hooks the runtime installs
(``superbiz.agents.tracing``), never inside the loop or the governance code.

Only the OpenTelemetry *API* is imported here (a dependency of FastAPI and the MCP SDK,
so it costs nothing extra). Without ``telemetry.otlp-endpoint`` the spans go to the
process's global tracer provider: a no-op unless the host application configured one,
so nothing leaves the process. With it, an SDK provider exports over OTLP/HTTP (the
``telemetry`` extra: ``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-http``,
imported only then, in ``superbiz._otlp_export``): every export request and the flush at
exit end within ``telemetry.flush-timeout-s``, and a collector that cannot be reached is
one warning line, never the exporter's own log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer
from opentelemetry.trace import TracerProvider as TracerProvider  # the runtime's parameter

from superbiz.exceptions import ConfigError

if TYPE_CHECKING:
    from superbiz._otlp_export import BoundedProvider
    from superbiz.config import TelemetrySettings

TRACER_NAME = "superbiz"
#: the path an OTLP/HTTP receiver takes traces on (added to an endpoint without a path)
TRACES_PATH = "/v1/traces"

# gen_ai semantic conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/)
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"


class Exporting(Protocol):
    """An exporting provider this runtime started: both calls are bounded."""

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Telemetry:
    """The tracer every part of a runtime uses, and the exporting provider it owns (if
    any): flushing and closing it take at most ``telemetry.flush-timeout-s``."""

    def __init__(self, tracer: Tracer, owned: Exporting | None = None) -> None:
        self.tracer = tracer
        self._owned = owned

    def flush(self) -> None:
        """Send the spans still buffered (an exporting provider batches them)."""
        if self._owned is not None:
            self._owned.flush()

    def close(self) -> None:
        """Flush and stop the exporter this runtime started (not a host's provider)."""
        if self._owned is not None:
            self._owned.close()
        self._owned = None


def open_telemetry(
    settings: TelemetrySettings, provider: TracerProvider | None = None
) -> Telemetry:
    """The runtime's telemetry: ``provider``'s tracer when given (tests, a host
    application), an OTLP/HTTP exporter when ``telemetry.otlp-endpoint`` is set, else
    the global provider's tracer (a no-op unless the process configured one)."""
    if provider is not None:
        return Telemetry(provider.get_tracer(TRACER_NAME))
    if settings.otlp_endpoint:
        owned = _otlp_provider(settings)
        return Telemetry(owned.provider.get_tracer(TRACER_NAME), owned)
    return Telemetry(default_tracer())


def default_tracer() -> Tracer:
    """The global provider's tracer: a no-op unless the host process configured one."""
    return trace.get_tracer(TRACER_NAME)


def traces_url(endpoint: str) -> str:
    """The URL spans are posted to: ``endpoint``, with ``/v1/traces`` when it has no path.

    >>> traces_url("http://collector:4318"), traces_url("https://x.io/otlp/v1/traces")
    ('http://collector:4318/v1/traces', 'https://x.io/otlp/v1/traces')
    """
    if urlsplit(endpoint).path.strip("/"):
        return endpoint
    return endpoint.rstrip("/") + TRACES_PATH


def _otlp_provider(settings: TelemetrySettings) -> BoundedProvider:
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401

        from superbiz._otlp_export import BoundedProvider
    except ImportError as exc:
        raise ConfigError(
            "telemetry.otlp-endpoint is set but the OpenTelemetry SDK is not installed: "
            "pip install 'superbiz[telemetry]'"
        ) from exc
    assert settings.otlp_endpoint is not None
    return BoundedProvider(
        traces_url(settings.otlp_endpoint),
        dict(settings.otlp_headers),
        settings.service_name,
        settings.flush_timeout_s,
    )


def trace_id(span: Span | None = None) -> str | None:
    """The trace id of ``span`` (the current one by default) as 32 hex digits, or
    ``None`` when no trace is recording (the no-op tracer's spans have none)."""
    context = (span or trace.get_current_span()).get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else None


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    """Set the attributes that have a value (OpenTelemetry refuses ``None``); lists
    become tuples of one type, as the specification wants."""
    if not span.is_recording():
        return
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, Sequence) and not isinstance(value, str):
            value = tuple(str(item) for item in value)
        span.set_attribute(key, value)
