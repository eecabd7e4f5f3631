"""Wires one data directory into a working assistant: stores, map, planner, executor."""

from __future__ import annotations

from superbiz.agents.executor import Executor, OnLookup
from superbiz.agents.planner import LLMPlanner, MapPlanner, Planner
from superbiz.agents.supervisor import OnPlan, SupervisedTurn, Supervisor
from superbiz.config import Settings
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import SessionTracker, make_tracker
from superbiz.knowledge.base import KnowledgeBase
from superbiz.knowledge.domains import DomainService
from superbiz.knowledge.map import KnowledgeMap, build_map
from superbiz.llm import ChatModel, make_chat_model
from superbiz.llm.extractive import ExtractiveChatModel
from superbiz.storage.chat import ChatRepository
from superbiz.storage.invocations import InvocationRepository


class Assistant:
    """Everything a turn needs, opened once; ``close()`` releases the stores.

    The knowledge map is built once and rebuilt after ``invalidate_map()`` (call it when
    documents change), so a turn never pays for it.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        model: ChatModel | None = None,
        kb: KnowledgeBase | None = None,
        tracker: SessionTracker | None = None,
    ) -> None:
        self.settings = settings
        self.kb = kb or KnowledgeBase(settings)
        self.tracker = tracker or make_tracker(settings.session.backend, self.kb.engine)
        self.lookup = GovernedLookup(self.kb, self.tracker)
        self.invocations = InvocationRepository(self.kb.engine)
        self.chats = ChatRepository(self.kb.engine)
        self.model = model or make_chat_model(settings.llm)
        llm = None if isinstance(self.model, ExtractiveChatModel) else self.model
        self.domains = DomainService(self.kb, llm)
        self.executor = Executor(self.model, self.lookup, settings.governance, self.invocations)
        self.planner = self._planner(llm)
        self.supervisor = Supervisor(self.planner, self.executor, self.chats, self.knowledge_map)
        self._map: KnowledgeMap | None = None

    def _planner(self, llm: ChatModel | None) -> Planner:
        fallback = MapPlanner(self.kb.embedder, self.settings.planner)
        return LLMPlanner(llm, fallback, self.settings.planner) if llm else fallback

    def knowledge_map(self) -> KnowledgeMap:
        if self._map is None:
            self._map = build_map(self.kb, self.domains)
        return self._map

    def invalidate_map(self) -> None:
        self._map = None
        self.kb.invalidate()

    def ask(
        self,
        session_id: str,
        question: str,
        *,
        on_plan: OnPlan | None = None,
        on_lookup: OnLookup | None = None,
    ) -> SupervisedTurn:
        return self.supervisor.handle(session_id, question, on_plan=on_plan, on_lookup=on_lookup)

    def clear_session(self, session_id: str) -> None:
        """Forget the conversation, its action memory and its recorded calls."""
        self.chats.clear(session_id)
        self.tracker.clear_session(session_id)
        self.invocations.clear_session(session_id)

    def close(self) -> None:
        self.kb.close()
