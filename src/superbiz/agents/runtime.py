"""Wires one data directory into a working assistant, in one place.

``open_lookup`` opens what a governed lookup needs (knowledge base, session tracker,
governed lookup, invocation recorder): the MCP server, the retrieval benchmark and the
CLI's lookup and trace commands use it. ``open_runtime`` adds the agents on top (chat
store, domain service, planner, executor, supervisor): the CLI's ask and chat, the HTTP
service and the agent benchmark use it. Both return context managers; ``close()``
releases the stores.

``Runtime.ask`` may be called from many threads at once: turns of one session wait for
each other (``SessionLocks``), turns of different sessions overlap while their models
think (``StoreLock``), and a turn that fails leaves nothing recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from types import TracebackType
from typing import Any, Self

from sqlalchemy.exc import SQLAlchemyError

from superbiz._text import asker_language
from superbiz.access import Reader
from superbiz.agents.executor import Executor, OnLookup
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.planner import LLMPlanner, MapPlanner, Planner
from superbiz.agents.store_access import StoreLock
from superbiz.agents.supervisor import OnPlan, SupervisedTurn, Supervisor
from superbiz.agents.tracing import Tracing
from superbiz.agents.turn_order import SessionLocks, session_locks
from superbiz.config import Settings
from superbiz.exceptions import SuperbizError
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.results import Origin, ToolOutcome
from superbiz.governance.tool import LookupTurn
from superbiz.governance.tracker import SessionTracker, make_tracker
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.coverage.map import KnowledgeMap, build_map, map_for
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.cache import Versioned
from superbiz.llm import ChatModel, make_chat_model
from superbiz.storage.chat import ChatRepository
from superbiz.storage.db import relational_store_error
from superbiz.storage.feedback import FeedbackRepository
from superbiz.storage.invocations import InvocationRepository
from superbiz.storage.models import MAX_TURN
from superbiz.telemetry import TracerProvider, open_telemetry

#: each reader's map, by the reader's groups
_ReaderMaps = dict[tuple[bool, frozenset[str]], KnowledgeMap]

#: the session a warm-up lookup runs in (cleared right after)
WARM_UP_SESSION = "superbiz:warm-up"

log = logging.getLogger(__name__)


class LookupRuntime:
    """Governed lookups over one knowledge base: what every entry point needs.

    ``tracer_provider`` receives the spans (tests, a host application); without it
    ``telemetry.*`` decides (see ``superbiz.telemetry``)."""

    def __init__(
        self,
        settings: Settings,
        *,
        kb: KnowledgeBase | None = None,
        tracker: SessionTracker | None = None,
        sessions: SessionLocks | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.settings = settings
        self.kb = kb or KnowledgeBase(settings)
        self.tracker = tracker or make_tracker(settings.advanced.session.backend, self.kb.engine)
        try:  # an exporter started here is stopped by close()
            self.telemetry = open_telemetry(settings.telemetry, tracer_provider)
        except SuperbizError:  # no SDK for the configured endpoint: nothing left open
            self.kb.close()
            raise
        #: the spans of every turn and lookup: installed around the model, the planner
        #: and each governed call, never inside them
        self.tracing = Tracing(self.telemetry.tracer)
        self.lookup = GovernedLookup(self.kb, self.tracker, self.tracing)
        self.invocations = InvocationRepository(self.kb.engine)
        self.chats = ChatRepository(self.kb.engine)
        self.feedback = FeedbackRepository(self.kb.engine)
        #: orders a session's turns (one process by default; replicas need shared locks)
        self.sessions = sessions or session_locks(settings, self.kb.engine)

    def warm_up(self) -> None:
        """One throwaway lookup, so models and indexes are loaded before anything is timed."""
        self.lookup.lookup(WARM_UP_SESSION, "warm up")
        self.tracker.clear_session(WARM_UP_SESSION)

    def clear_session(self, session_id: str) -> None:
        """Forget the session's action memory, its recorded calls and their ratings."""
        self.tracker.clear_session(session_id)
        self.invocations.clear_session(session_id)
        self.feedback.clear_session(session_id)

    def turn_exists(self, session_id: str, turn: int) -> bool:
        """Whether the session has a stored answer or a recorded call under ``turn``; a
        number no turn column holds has none (PostgreSQL refused to compare with it)."""
        if not 0 < turn <= MAX_TURN:
            return False
        return self.chats.turn_exists(session_id, turn) or self.invocations.turn_exists(
            session_id, turn
        )

    def next_turn(self, session_id: str) -> int:
        """The session's next turn number, after both its stored messages and its recorded
        calls: a person's lookups (``user_lookup``, MCP) and chat turns share one count, so
        two turns never record under one number (nor does undoing one forget the other)."""
        return max(self.chats.last_turn(session_id), self.invocations.last_turn(session_id)) + 1

    def user_lookup(
        self,
        session_id: str,
        query: str,
        domain: str | None = None,
        missing_dimension: str | None = None,
        *,
        reader: Reader | None = None,
    ) -> ToolOutcome:
        """A person's lookup outside any chat turn (``superbiz lookup``): a turn of its own,
        governed and recorded like the model's calls (``origin: user``), so ``superbiz
        trace`` shows it with its scores. It waits for a chat turn of the session still
        running, which would otherwise take the same number (and undo it if it failed).
        ``reader``: who looks up (None: an unrestricted reader, the CLI's local user)."""
        arguments = {"query": query, "domain": domain, "missing_dimension": missing_dimension}
        with self.sessions.hold(session_id):
            turn = LookupTurn(
                self.lookup,
                self.settings.governance_config,
                session_id=session_id,
                turn=self.next_turn(session_id),
                language=asker_language(query),
                recorder=self.invocations,
                reader=reader,
            )
            given = {k: v for k, v in arguments.items() if v is not None}
            return self.recorded_call(turn, given, origin="user")

    def recorded_call(
        self,
        turn: LookupTurn,
        arguments: dict[str, Any],
        *,
        origin: Origin = "model",
        call_id: str = "",
        step: int = 0,
    ) -> ToolOutcome:
        """``turn.call`` outside a chat turn, where no undo follows a failure: a lookup
        the vector store or the embedder fails is recorded as a failed call and returned
        with its error (a chat turn lets it fail the turn instead)."""
        try:
            return turn.call(arguments, call_id=call_id, step=step, origin=origin)
        except SuperbizError as exc:
            log.info("lookup failed in session %s: %s", turn.session_id, exc)  # and recorded
            error = f"lookup failed: {exc}"
            return turn.call(arguments, call_id=call_id, step=step, origin=origin, error=error)

    def close(self) -> None:
        """Close the knowledge base (also one passed in: the runtime owns it from then on)
        and send the spans still buffered."""
        self.sessions.close()
        self.kb.close()
        self.telemetry.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class Runtime(LookupRuntime):
    """Everything a turn needs, opened once.

    The knowledge map is built once and rebuilt after ``invalidate_map()`` (call it when
    documents change), so a turn never pays for it. Without a configured LLM (and no
    ``model`` given) the executor plays the extractive policy and the planner plans from
    the map. ``sessions`` orders the turns of a session (one process by default; several
    replicas need locks they all see).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        model: ChatModel | None = None,
        kb: KnowledgeBase | None = None,
        tracker: SessionTracker | None = None,
        sessions: SessionLocks | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        super().__init__(
            settings, kb=kb, tracker=tracker, sessions=sessions, tracer_provider=tracer_provider
        )
        self.store_lock = StoreLock.for_settings(settings)
        self.model = model or make_chat_model(settings.llm) or ExtractiveChatModel()
        # Whatever calls the LLM outside a turn's executor (planner, domain summaries)
        # lets go of the store lock while it waits.
        llm = None if self.extractive else self.store_lock.releasing(self.model)
        self.domains = DomainService(self.kb, llm)
        self.planner = self._planner(llm)
        #: the whole map and each reader's view of it (by its groups), stamped with the
        #: knowledge base's change it was built at
        self._map = Versioned(lambda: (build_map(self.kb, self.domains), _ReaderMaps()))

    @property
    def extractive(self) -> bool:
        """Whether the executor plays a deterministic policy rather than an LLM."""
        return isinstance(self.model, ExtractiveChatModel)

    def _planner(self, llm: ChatModel | None) -> Planner:
        fallback = MapPlanner(self.kb.embedder, self.settings.planner_config, self.kb.map_vectors)
        return LLMPlanner(llm, fallback, self.settings.planner_config) if llm else fallback

    def knowledge_map(self, reader: Reader | None = None) -> KnowledgeMap:
        """The map ``reader`` sees (None: the whole map; ``map_for``), rebuilt when this
        or another process changed documents since (the
        supervisor asks at the start of every turn, so that is where changes are seen).
        A build that fails leaves the map stale, not marked fresh. (Two turns may build it
        at once while one waits for the LLM to summarise a domain: no lock here, as the
        other may hold the store lock the first needs back.)"""
        self.kb.catch_up()
        whole, reader_maps = self._map.get(self.kb.changes)
        view = self.kb.view(reader)
        if not view.restricted:
            return whole
        key = view.reader.key
        seen = reader_maps.get(key)
        if seen is None:
            seen = reader_maps[key] = map_for(whole, view)
        return seen

    def invalidate_map(self) -> None:
        """Documents changed here: the map (and every cache of the knowledge base) is
        built again on next use."""
        self.kb.changed()

    def ask(
        self,
        session_id: str,
        question: str,
        *,
        on_plan: OnPlan | None = None,
        on_lookup: OnLookup | None = None,
        model: ChatModel | None = None,
        reader: Reader | None = None,
    ) -> SupervisedTurn:
        """One turn of ``session_id``, after any turn of it still running, asked by
        ``reader`` (None: an unrestricted reader, the CLI's local user): its plan sees the
        map of what it may read, its lookups search that, and the session's earlier turns
        that used anything else are not its history.

        ``model`` answers this turn instead of the runtime's (e.g. one that streams its
        text to the caller). A turn that fails, or that its caller cancels
        (``TurnCancelledError``, ``superbiz.llm.deadline.cancellable``), is undone: its
        recorded calls and the documents it marked as retrieved are forgotten, so the
        next turn starts where the last answered one ended. A relational store that
        fails raises ``StoreError``.
        """
        tracing = self.tracing
        turn_model = tracing.model(self.store_lock.releasing(model or self.model))
        executor = Executor(
            turn_model,
            self.lookup,
            self.settings.governance_config,
            self.invocations,
            reader=reader,
        )
        restricted = reader is not None and not reader.unrestricted
        supervisor = Supervisor(
            tracing.planner(self.planner, steps=turn_model),
            executor,
            self.chats,
            partial(self.knowledge_map, reader),
            settings=self.settings.chat,
            turn_timeout_s=None if self.extractive else self.settings.llm.turn_timeout_s,
            may_read=partial(self.may_read, reader) if restricted else None,
            trace_id=tracing.trace_id,
        )
        with (
            tracing.turn(session_id) as traced,
            self.sessions.hold(session_id),
            self.store_lock.held(),
            self._store_errors(),
        ):
            before = set(self.tracker.retrieved_docs(session_id))
            turn = self.next_turn(session_id)
            traced.numbered(turn)
            try:
                supervised = supervisor.handle(
                    session_id, question, turn=turn, on_plan=on_plan, on_lookup=on_lookup
                )
            except BaseException:
                self._undo_turn(session_id, turn, before)
                raise
            traced.answered(supervised.result)
            return supervised

    def may_read(self, reader: Reader | None, path: str) -> bool:
        """Whether ``reader`` may read the document at ``path``, as the knowledge base is now."""
        return self.kb.view(reader).may_read(path)

    def _undo_turn(self, session_id: str, turn: int, retrieved_before: set[str]) -> None:
        """Forget what a failed turn recorded (best effort: the store may be what failed)."""
        try:
            self.invocations.discard_turn(session_id, turn)
            marked = self.tracker.retrieved_docs(session_id)
            self.tracker.forget(session_id, [p for p in marked if p not in retrieved_before])
        except Exception:
            log.warning("could not undo the failed turn of session %r", session_id, exc_info=True)

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """A relational store failure as a ``StoreError`` that names the store."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise relational_store_error(self.kb.engine, exc) from exc

    def clear_session(self, session_id: str) -> None:
        """Forget the conversation, its action memory and its recorded calls (after any
        turn of the session still running)."""
        with self.sessions.hold(session_id), self.store_lock.held(), self._store_errors():
            self.chats.clear(session_id)
            super().clear_session(session_id)


def open_lookup(
    settings: Settings,
    *,
    kb: KnowledgeBase | None = None,
    tracker: SessionTracker | None = None,
    tracer_provider: TracerProvider | None = None,
) -> LookupRuntime:
    """Governed lookups only: no chat store, planner or model."""
    return LookupRuntime(settings, kb=kb, tracker=tracker, tracer_provider=tracer_provider)


def open_runtime(
    settings: Settings,
    *,
    model: ChatModel | None = None,
    kb: KnowledgeBase | None = None,
    tracker: SessionTracker | None = None,
    tracer_provider: TracerProvider | None = None,
) -> Runtime:
    """The whole assistant; ``model`` defaults to the configured LLM, else extractive."""
    return Runtime(settings, model=model, kb=kb, tracker=tracker, tracer_provider=tracer_provider)
