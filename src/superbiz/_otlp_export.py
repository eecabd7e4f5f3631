"""OTLP/HTTP export that never costs a user more than one bounded flush and never
speaks on the terminal but through superbiz's own one-line warning.

The SDK's exporter retries with backoff (up to its 10 s timeout per batch, and older
releases longer) and logs each attempt; the batch processor's shutdown waits for all of
it. An unreachable collector (``http://127.0.0.1:9``) delayed ``superbiz ask`` by 5–19 s and
printed the exporter's WARNING and ERROR lines; one that accepted and never answered,
27 s. Here every export request ends within the flush bound, a failure is one warning
per outage (``superbiz._otlp_export``'s logger, which the CLI prints as one line), the
exporter's own log records are kept from the terminal, and closing flushes for at most
the bound and then drops what is left. Imported only when ``telemetry.otlp-endpoint``
is set (the ``telemetry`` extra).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

#: the OpenTelemetry loggers whose records would reach the terminal: the exporters' and
#: the SDK's (the batch processor logs a failed export, a full queue, a late shutdown)
_LIBRARY_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk")


#: an OS error inside the exporter's message: ``[Errno 111] Connection refused``
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\"')\]]+)")


def reason(message: str) -> str:
    """The cause an exporter's message names, in a few words.

    >>> reason("Transient error (...: [Errno 111] Connection refused')) ... retrying")
    'Connection refused'
    >>> reason("Read timed out. (read timeout=1.0)")
    'no answer within the flush timeout'
    """
    found = _ERRNO.search(message)
    if found:
        return found.group(1).strip()
    if "timed out" in message.lower() or "timeout" in message.lower():
        return "no answer within the flush timeout"
    return message[:200]


class _Problems(logging.Handler):
    """Keeps the warnings the OpenTelemetry libraries log during an export (why it
    failed) instead of letting them reach the terminal; each is logged again at DEBUG."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().strip().split("\n", 1)[0]
        self.messages = [*self.messages[-9:], text]
        log.debug("%s: %s", record.name, text)

    def cause(self) -> str:
        """The OS error one of them names, else the first one's gist."""
        for message in self.messages:
            if _ERRNO.search(message):
                return reason(message)
        return reason(self.messages[0]) if self.messages else "the export failed"


_problems = _Problems()


def _keep_library_logs_off_the_terminal() -> None:
    for name in _LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if _problems not in logger.handlers:
            logger.addHandler(_problems)
        logger.propagate = False


class _NotingSession(requests.Session):
    """The exporter's HTTP session, noting why a request failed (the exporter's own
    messages do not always say: a refused connection ends as "max retries")."""

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            return super().request(*args, **kwargs)
        except requests.RequestException as exc:
            _problems.messages.append(f"{type(exc).__name__}: {exc}")
            raise


class BoundedExporter(SpanExporter):
    """``OTLPSpanExporter`` whose requests end within ``timeout_s``, which says once
    when the collector stops taking spans (and once when it takes them again), and which
    drops every batch once closed."""

    def __init__(self, url: str, headers: dict[str, str], timeout_s: float) -> None:
        self.url = url
        self._inner = OTLPSpanExporter(
            endpoint=url, headers=headers, timeout=timeout_s, session=_NotingSession()
        )
        self._closed = threading.Event()
        self._failing = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed.is_set():
            return SpanExportResult.FAILURE
        _problems.messages = []
        try:
            result = self._inner.export(spans)
        except Exception as exc:  # never into the batch processor's own logging
            _problems.messages.append(f"{type(exc).__name__}: {exc}")
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            if self._failing:
                log.info("traces reach %s again", self.url)
            self._failing = False
        elif not self._failing and not self._closed.is_set():
            self._failing = True
            why = _problems.cause()
            log.warning(
                "traces not sent to %s (%s); spans are dropped until it answers", self.url, why
            )
        return result

    def close(self) -> None:
        """Drop every later batch and stop a retry in progress (once)."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._inner.shutdown()  # type: ignore[no-untyped-call]
        except Exception:  # pragma: no cover - the SDK's own shutdown failing
            log.debug("OTLP exporter shutdown failed", exc_info=True)

    def shutdown(self) -> None:
        self.close()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class BoundedProvider:
    """An SDK tracer provider exporting through ``BoundedExporter``; ``close`` takes at
    most ``timeout_s`` (one flush) whatever the collector does."""

    def __init__(
        self, url: str, headers: dict[str, str], service_name: str, timeout_s: float
    ) -> None:
        _keep_library_logs_off_the_terminal()
        self.timeout_s = timeout_s
        self.exporter = BoundedExporter(url, headers, timeout_s)
        # no atexit shutdown: ``close`` bounds it, and an exit would wait unbounded
        self.provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: service_name}), shutdown_on_exit=False
        )
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))

    def flush(self) -> None:
        self.provider.force_flush(timeout_millis=int(self.timeout_s * 1000))

    def close(self) -> None:
        """Send what is buffered, for at most the bound; then drop the rest and stop."""
        started = time.monotonic()
        self.flush()
        self.exporter.close()
        stopping = threading.Thread(
            target=self.provider.shutdown, name="otlp-shutdown", daemon=True
        )
        stopping.start()
        stopping.join(max(0.05, self.timeout_s - (time.monotonic() - started)))
