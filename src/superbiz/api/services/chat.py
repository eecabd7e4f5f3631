"""Chat: a turn (JSON or streamed), cancelling a running one, clearing a session.

Turns of different sessions run at the same time: ``Runtime.ask`` orders the turns of
one session (a request in a busy session waits, then 409) and holds the store lock
only while it is not waiting for a model (see ``superbiz.agents.store_access``). Each
streamed turn gets its own ``TokenStreamingModel`` and reports to the listener of the
request that asked, so events never mix.
"""

from __future__ import annotations

import logging
import threading
from functools import partial

import anyio
import anyio.to_thread

from superbiz.access import Reader
from superbiz.agents.planner import Plan
from superbiz.agents.runtime import Runtime
from superbiz.agents.supervisor import SupervisedTurn
from superbiz.api._running_turns import RunningTurns
from superbiz.api.events import Emit, TokenStreamingModel, answer_chunks, tool_result_event
from superbiz.api.metrics import ServiceMetrics
from superbiz.api.responses.chat import (
    ChatAnswer,
    PlanEvent,
    TokenEvent,
    ToolCallEvent,
    TurnEvent,
)
from superbiz.exceptions import TurnCancelledError
from superbiz.governance.results import ToolOutcome
from superbiz.knowledge.sources.links import web_links
from superbiz.llm import deadline
from superbiz.storage.invocations import TOOL_NAME

log = logging.getLogger(__name__)


class ChatService:
    """What the chat routes call: turns run in a pool of their own, so turns waiting for
    a model never take the threads that reads and health checks need."""

    def __init__(self, assistant: Runtime, metrics: ServiceMetrics) -> None:
        self.assistant = assistant
        self.settings = assistant.settings
        self.metrics = metrics
        self.stores = assistant.store_lock
        #: seconds between the keep-alive comments of a quiet stream
        self.keepalive_s = self.settings.service.sse_keepalive_s
        self._turn_threads = anyio.CapacityLimiter(self.settings.service.max_concurrent_turns)
        self._running = RunningTurns()

    async def run_turn(
        self,
        session_id: str,
        question: str,
        reader: Reader,
        emit: Emit | None = None,
        cancel: threading.Event | None = None,
    ) -> SupervisedTurn:
        """``ask`` in a worker thread of the turns' own pool."""
        return await anyio.to_thread.run_sync(
            partial(self.ask, session_id, question, reader, emit, cancel),
            limiter=self._turn_threads,
        )

    def ask(
        self,
        session_id: str,
        question: str,
        reader: Reader,
        emit: Emit | None = None,
        cancel: threading.Event | None = None,
    ) -> SupervisedTurn:
        """One turn of ``reader``'s (it plans, searches and is answered from what it may
        read); with ``emit`` it reports plan, tool calls, results, tokens, answer.

        Setting ``cancel`` (from any thread), or :meth:`cancel_turn`, stops the turn at
        its next model call, lookup or streamed chunk with :class:`TurnCancelledError`;
        it is undone like a failed turn (no messages stored, its recorded lookups
        forgotten) and counted as ``cancelled``."""
        high_mark = self.settings.advanced.governance.high_min_calls
        announced: set[str] = set()
        streamer = (
            TokenStreamingModel(
                self.assistant.model,
                session_id,
                self._announcing(emit, announced),
                self.settings.chat.max_answer_chars,
            )
            if emit
            else None
        )

        def on_plan(plan: Plan) -> None:
            if emit:
                emit(PlanEvent.model_validate({"session_id": session_id, **plan.as_dict()}))

        def on_lookup(outcome: ToolOutcome) -> None:
            self.metrics.observe_lookup(outcome)
            if not emit:
                return
            if outcome.call_id and outcome.call_id not in announced:
                emit(
                    ToolCallEvent(
                        session_id=session_id,
                        step=streamer.step if streamer else 0,
                        call_id=outcome.call_id,
                        name=TOOL_NAME,
                        arguments=outcome.arguments,
                    )
                )
            emit(tool_result_event(session_id, outcome, high_mark))

        cancel = cancel or threading.Event()
        try:
            with self._running.running(session_id, cancel), deadline.cancellable(cancel):
                turn = self.assistant.ask(
                    session_id,
                    question,
                    on_plan=on_plan,
                    on_lookup=on_lookup,
                    model=streamer,
                    reader=reader,
                )
        except TurnCancelledError:
            self.metrics.turns.labels("cancelled").inc()
            log.info("turn of session %r cancelled by its caller", session_id)
            raise
        except Exception:
            self.metrics.turns.labels("error").inc()
            raise
        self.metrics.turns.labels(turn.result.stopped_by).inc()
        if emit:
            answer = turn.result.answer
            streamed = streamer.last_text if streamer else ""
            cut = streamer is not None and streamer.cut  # the answer event has the cut text
            if not cut and streamed.strip() != answer.strip():  # e.g. a plan's direct answer
                for piece in answer_chunks(answer):
                    emit(TokenEvent(session_id=session_id, step=0, text=piece))
            emit(self.turn_view(turn))
        return turn

    def cancel_turn(self, session_id: str) -> int:
        """Stop the session's running turn (``POST /api/chat/cancel``); how many turns
        were running."""
        return self._running.cancel(session_id)

    @staticmethod
    def _announcing(emit: Emit, announced: set[str]) -> Emit:
        """``emit``, noting the tool calls the model announced (``on_lookup`` then does
        not announce them again)."""

        def on_event(event: TurnEvent) -> None:
            if isinstance(event, ToolCallEvent):
                announced.add(event.call_id)
            emit(event)

        return on_event

    def turn_view(self, turn: SupervisedTurn) -> ChatAnswer:
        """The turn's body; a citation of a Git source's document links to it when the
        source has a ``web-url`` pattern."""
        view = ChatAnswer.from_turn(turn, self.settings.advanced.governance.high_min_calls)
        if view.citations and self.settings.sources.model_extra:
            with self.stores.held():
                links = web_links(self.assistant.kb, [c.path for c in view.citations])
            for citation in view.citations:
                citation.url = links.get(citation.path)
        return view

    def clear(self, session_id: str) -> None:
        self.assistant.clear_session(session_id)
