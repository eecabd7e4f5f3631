"""The turn's deadline, which every model call inside the turn respects.

A turn makes several model calls (plan, steps, a forced answer), each with retries; a
per-call timeout alone lets them add up. ``turn_deadline`` sets one end time for the
thread that runs the turn; :func:`remaining` tells a call how much of it is left, and
:func:`check` ends the turn once it has passed.

The same points also end a turn its caller stopped: ``cancellable`` carries the turn's
cancel event (set when a stream's client goes away), which :func:`check` and
:func:`check_cancelled` (called between the chunks of a streamed reply) honour, and which
a model request waiting for its server watches (``superbiz.llm._transport``): a cancel
reaches a call that is waiting within ``CANCEL_POLL_S``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from superbiz.exceptions import LLMTimeoutError, TurnCancelledError

_END: ContextVar[tuple[float, float] | None] = ContextVar("superbiz_turn_deadline", default=None)
_CANCEL: ContextVar[threading.Event | None] = ContextVar("superbiz_turn_cancel", default=None)


@contextmanager
def turn_deadline(seconds: float) -> Iterator[None]:
    """Model calls made inside the block end by ``seconds`` from now (an outer,
    earlier deadline still wins)."""
    outer = _END.get()
    end = time.monotonic() + seconds
    token = _END.set(outer if outer is not None and outer[0] <= end else (end, seconds))
    try:
        yield
    finally:
        _END.reset(token)


@contextmanager
def cancellable(event: threading.Event | None) -> Iterator[None]:
    """Model calls and lookups made inside the block stop once ``event`` is set (from
    any thread); ``None`` changes nothing."""
    token = _CANCEL.set(event if event is not None else _CANCEL.get())
    try:
        yield
    finally:
        _CANCEL.reset(token)


def cancel_event() -> threading.Event | None:
    """The event that stops the current turn, or ``None`` outside a cancellable turn."""
    return _CANCEL.get()


def pause(seconds: float) -> None:
    """Sleep ``seconds``, or until the current turn is stopped (a retry's backoff must
    not outlast a cancel)."""
    event = _CANCEL.get()
    if event is None:
        time.sleep(seconds)
    else:
        event.wait(seconds)


def check_cancelled() -> None:
    """Raise :class:`TurnCancelledError` once the turn's caller has stopped it."""
    event = _CANCEL.get()
    if event is not None and event.is_set():
        raise TurnCancelledError("the turn was stopped by its caller")


def remaining() -> float | None:
    """Seconds left of the current turn, or ``None`` outside a turn."""
    current = _END.get()
    return None if current is None else current[0] - time.monotonic()


def check() -> None:
    """Raise :class:`TurnCancelledError` once the turn was stopped, and
    :class:`LLMTimeoutError` once its deadline has passed."""
    check_cancelled()
    current = _END.get()
    if current is not None and time.monotonic() >= current[0]:
        raise LLMTimeoutError(
            f"the turn ran past its deadline of {current[1]:g} s (llm.turn-timeout-s)"
        )
