"""Wires one data directory into a working assistant: stores, lookup, model, executor."""

from __future__ import annotations

from superbiz.agents.executor import Executor, OnLookup, TurnResult
from superbiz.config import Settings
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import SessionTracker, make_tracker
from superbiz.knowledge.base import KnowledgeBase
from superbiz.llm import ChatModel, make_chat_model
from superbiz.storage.invocations import InvocationRepository


class Assistant:
    """Everything a turn needs, opened once; ``close()`` releases the stores."""

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
        self.model = model or make_chat_model(settings.llm)
        self.executor = Executor(self.model, self.lookup, settings.governance, self.invocations)

    def ask(self, session_id: str, question: str, on_lookup: OnLookup | None = None) -> TurnResult:
        return self.executor.run(session_id, question, on_lookup=on_lookup)

    def clear_session(self, session_id: str) -> None:
        self.tracker.clear_session(session_id)
        self.invocations.clear_session(session_id)

    def close(self) -> None:
        self.kb.close()
