"""Transport, deadlines and the retry policy of the OpenAI-compatible client.

Every request ends within its own timeout and within the turn's deadline
(:class:`DeadlineTransport`), and within ``CANCEL_POLL_S`` of its turn being stopped, even
while it waits for the server; what is retried and how long to wait between tries
(``backoff_delay``, ``Retry-After``) is decided here, so it is the same for every server.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from functools import partial

import httpx2
import openai

from superbiz.llm import deadline

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 30.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""
CANCEL_POLL_S = 0.1
"""How often a model request that is waiting looks whether its turn was stopped."""


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
    passed, however steadily the server drips bytes (each read has its own timeout), and
    with ``TurnCancelledError`` once its turn is stopped, even while a read waits."""

    def __init__(
        self,
        inner: httpx2.SyncByteStream,
        request: httpx2.Request,
        end: float,
        cancel: threading.Event | None = None,
    ) -> None:
        self.inner = inner
        self.request = request
        self.end = end
        self.pump = _Pump(inner, cancel) if cancel is not None else None

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.pump if self.pump is not None else self.inner:
            if time.monotonic() > self.end:
                raise httpx2.ReadTimeout(
                    "the response did not finish within its deadline", request=self.request
                )
            yield chunk

    def close(self) -> None:
        if self.pump is not None:
            self.pump.close()  # the reading thread closes the body, never this one
        else:
            self.inner.close()


class _Pump:
    """Reads a response body in a thread of its own, so that the turn waiting for the
    next chunk can stop at once when it is cancelled; the abandoned body is closed by the
    reading thread once its read returns."""

    def __init__(self, inner: httpx2.SyncByteStream, cancel: threading.Event) -> None:
        self.inner = inner
        self.cancel = cancel
        self.chunks: queue.Queue[bytes | BaseException | None] = queue.Queue()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def _read(self) -> None:
        try:
            for chunk in self.inner:
                if self.stopped.is_set():
                    break
                self.chunks.put(chunk)
            self.chunks.put(None)
        except BaseException as exc:  # handed to the reading turn
            self.chunks.put(exc)
        finally:
            self.inner.close()

    def __iter__(self) -> Iterator[bytes]:
        if self.thread is None:
            self.thread = threading.Thread(target=self._read, name="llm-body", daemon=True)
            self.thread.start()
        while True:
            try:
                item = self.chunks.get(timeout=CANCEL_POLL_S)
            except queue.Empty:
                deadline.check_cancelled()
                continue
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            deadline.check_cancelled()
            yield item

    def close(self) -> None:
        self.stopped.set()
        if self.thread is None:
            self.inner.close()


def _until_cancelled(
    send: Callable[[], httpx2.Response], cancel: threading.Event
) -> httpx2.Response:
    """``send()`` in a thread of its own while the turn watches ``cancel``: a request
    waiting for a model's answer ends within ``CANCEL_POLL_S`` of a cancel
    (``TurnCancelledError``); its response, when it comes, is closed unread."""
    deadline.check_cancelled()
    done = threading.Event()
    lock = threading.Lock()
    outcome: list[httpx2.Response | BaseException] = []
    abandoned = False

    def run() -> None:
        try:
            result: httpx2.Response | BaseException = send()
        except BaseException as exc:  # handed to the waiting turn
            result = exc
        with lock:
            if abandoned and isinstance(result, httpx2.Response):
                result.close()
            outcome.append(result)
        done.set()

    threading.Thread(target=run, name="llm-request", daemon=True).start()
    while not done.wait(CANCEL_POLL_S):
        if cancel.is_set():
            with lock:
                if not outcome:
                    abandoned = True
                    deadline.check_cancelled()
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


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
        cancel = deadline.cancel_event()
        if cancel is None:
            response = super().handle_request(request)
        else:
            response = _until_cancelled(partial(super().handle_request, request), cancel)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        response.stream = _DeadlineStream(response.stream, request, end, cancel)
        return response


def turn_over() -> bool:
    left = deadline.remaining()
    return left is not None and left <= 0
