"""Prometheus metrics of one app: what the governance did, and how long things took.

Each app has its own registry, so two apps in one process (tests, the benchmark) never
share counters and ``/metrics`` shows only this app's numbers.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from superbiz.governance.results import ToolOutcome

#: lookups take milliseconds; requests up to seconds (a turn with an LLM)
LOOKUP_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


#: HTTP methods with a label of their own; labels come from fixed sets, never from the
#: client, so unauthenticated traffic cannot grow ``/metrics``
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.lookups = Counter(
            "superbiz_lookups",
            "lookup_knowledge calls by outcome (executed, blocked, error) and dedup reason",
            ["outcome", "dedup_reason"],
            registry=self.registry,
        )
        self.levels = Counter(
            "superbiz_lookup_relevance",
            "Relevance levels returned to the model (NONE: executed, nothing found)",
            ["level"],
            registry=self.registry,
        )
        self.verdicts = Counter(
            "superbiz_lookup_verdicts",
            "What the governance said after each lookup call (continue, supplement, answer, "
            "stop; error: a call that could not run)",
            ["verdict"],
            registry=self.registry,
        )
        self.feedback = Counter(
            "superbiz_feedback",
            "Answer ratings received (a changed rating counts again)",
            ["rating"],
            registry=self.registry,
        )
        self.lookup_latency = Histogram(
            "superbiz_lookup_latency_seconds",
            "Time of one governed lookup call, admission to record",
            buckets=LOOKUP_BUCKETS,
            registry=self.registry,
        )
        self.turns = Counter(
            "superbiz_turns",
            "Chat turns by how they ended (answer, step_cap, malformed_calls, error, cancelled)",
            ["stopped_by"],
            registry=self.registry,
        )
        self.request_latency = Histogram(
            "superbiz_http_request_duration_seconds",
            "HTTP request time until the last byte of the response (whole SSE stream)",
            ["method", "route", "status"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )

    def observe_lookup(self, outcome: ToolOutcome) -> None:
        if outcome.error is not None:
            kind = "error"
        elif outcome.executed:
            kind = "executed"
        else:
            kind = "blocked"
        self.lookups.labels(kind, outcome.dedup_reason or "none").inc()
        if outcome.error is None:
            level = outcome.level.value if outcome.level else "NONE"
            self.levels.labels(level).inc()
        self.verdicts.labels("error" if outcome.error else outcome.verdict.value).inc()
        self.lookup_latency.observe(outcome.latency_ms / 1000)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class RequestTimer:
    """ASGI middleware: request latency by route template (not raw path, which would
    make one series per session id; any unmatched path is ``unmatched``), measured to
    the end of the body."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            self.metrics.request_latency.labels(
                _method(scope), _route(scope), str(status["code"])
            ).observe(time.perf_counter() - started)


def _method(scope: Scope) -> str:
    """The method label: one of ``METHODS``, else ``other`` (any client can invent one)."""
    method = str(scope.get("method", ""))
    return method if method in METHODS else "other"


def _route(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    if path:
        return str(path)
    return "static" if str(scope.get("path", "")).startswith("/static") else "unmatched"
