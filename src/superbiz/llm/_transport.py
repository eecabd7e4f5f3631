"""Transport, deadlines and the retry policy of the OpenAI-compatible client.

Every request ends within its own timeout and within the turn's deadline
(:class:`DeadlineTransport`); what is retried and how long to wait between tries
(``backoff_delay``, ``Retry-After``) is decided here, so it is the same for every server.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping

import httpx2
import openai

from superbiz.llm import deadline

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 30.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""


def backoff_delay(
    attempt: int,
    *,
    base: float = BACKOFF_BASE_S,
    cap: float = BACKOFF_CAP_S,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (0-based).

    Exponential and capped, with "equal jitter" (between half and all of the step) so that
    clients failing together do not retry together, yet never retry at once.
    """
    step = min(cap, base * 2.0 ** max(0, attempt))
    jitter = rng.uniform(0, step / 2) if rng else random.uniform(0, step / 2)
    return step / 2 + jitter


def retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def server_message(exc: openai.APIError) -> str:
    """The server's own explanation, whichever of the usual shapes it came in."""
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            for key in ("message", "detail", "msg"):
                value = error.get(key)
                if isinstance(value, str) and value:
                    return value
        elif isinstance(error, str) and error:
            return error
        detail = body.get("detail")
        if detail:
            return str(detail)
        return str(dict(body))
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def describe_error(exc: BaseException) -> str:
    """One line naming the error and its root cause (e.g. ``Connection refused``)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, openai.APIStatusError):
        text = f"HTTP {exc.status_code}: {server_message(exc)}"
    cause = exc.__cause__ or exc.__context__
    seen = {id(exc)}
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        first = str(cause).strip().split("\n", 1)[0]  # the message stays one line
        if first and first not in text:
            text += f" ({type(cause).__name__}: {first})"
            break
        cause = cause.__cause__ or cause.__context__
    return text


def retry_after_s(exc: BaseException) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    value = exc.response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or seconds < 0:
        return None
    return min(seconds, RETRY_AFTER_CAP_S)


class _DeadlineStream(httpx2.SyncByteStream):
    """A response body that ends with ``ReadTimeout`` once its request's deadline has
    passed, however steadily the server drips bytes (each read has its own timeout)."""

    def __init__(self, inner: httpx2.SyncByteStream, request: httpx2.Request, end: float) -> None:
        self.inner = inner
        self.request = request
        self.end = end

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            if time.monotonic() > self.end:
                raise httpx2.ReadTimeout(
                    "the response did not finish within its deadline", request=self.request
                )
            yield chunk

    def close(self) -> None:
        self.inner.close()


class DeadlineTransport(httpx2.HTTPTransport):
    """Every request ends within ``total_s`` (and within the turn's deadline): its
    connect and read timeouts are cut to what is left, and its body to the end time."""

    def __init__(self, total_s: float, connect_s: float) -> None:
        super().__init__()
        self.total_s = total_s
        self.connect_s = connect_s

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        left = self.total_s
        turn_left = deadline.remaining()
        if turn_left is not None:
            left = min(left, turn_left)
        if left <= 0:
            raise httpx2.ConnectTimeout("the turn's deadline has passed", request=request)
        timeouts = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {
            "connect": min(timeouts.get("connect") or left, self.connect_s, left),
            "read": min(timeouts.get("read") or left, left),
            "write": min(timeouts.get("write") or left, left),
            "pool": min(timeouts.get("pool") or left, left),
        }
        end = time.monotonic() + left
        response = super().handle_request(request)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        response.stream = _DeadlineStream(response.stream, request, end)
        return response


def turn_over() -> bool:
    left = deadline.remaining()
    return left is not None and left <= 0
