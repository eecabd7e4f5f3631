"""The cancel events of the turns this process is running, by session.

``POST /api/chat/cancel`` stops a session's running turn (a client that keeps its stream
open, or one asking with ``/api/chat``) by setting the event the turn checks at its next
model call, lookup or streamed chunk (``superbiz.llm.deadline``). Only this process's
turns: with several replicas, the one serving the stream also holds its event.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class RunningTurns:
    """Each running turn's cancel event under its session id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, list[threading.Event]] = {}

    @contextmanager
    def running(self, session_id: str, event: threading.Event) -> Iterator[None]:
        """``event`` stops the session's turn while the block runs."""
        with self._lock:
            self._events.setdefault(session_id, []).append(event)
        try:
            yield
        finally:
            with self._lock:
                events = self._events.get(session_id, [])
                if event in events:
                    events.remove(event)
                if not events:
                    self._events.pop(session_id, None)

    def cancel(self, session_id: str) -> int:
        """Stop every turn of the session running now (one, and any queued behind it);
        how many were asked to stop."""
        with self._lock:
            events = list(self._events.get(session_id, []))
        for event in events:
            event.set()
        return len(events)
