"""What the routes call, one piece per route group, each over the one assistant the app
serves: ``ChatService`` (a turn, cancel, clear), ``SessionService`` (sessions and
feedback), ``DocumentService`` (documents, sources, the knowledge map), ``GapService``
(the gaps report) and ``StatusService`` (info, health, metrics, warm-up, close).

``create_app`` builds them once (``Services``); each router depends only on its own
piece through one dependency (``superbiz.api.deps``). Their methods block: a route
calls them in a worker thread (``superbiz.api._threads.in_thread``; a turn in the turns'
own pool, ``ChatService.run_turn``), and each takes the locks it needs.
"""

from __future__ import annotations

from superbiz.agents.runtime import Runtime
from superbiz.api.metrics import ServiceMetrics
from superbiz.api.services.chat import ChatService
from superbiz.api.services.documents import DocumentService
from superbiz.api.services.gaps import GapService
from superbiz.api.services.sessions import SessionService
from superbiz.api.services.status import StatusService


class Services:
    """The route groups' pieces over ``assistant``, sharing its two locks: the stores
    (one thread at a time, ``superbiz.agents.store_access``) and the knowledge base's
    write lock (one document change at a time, across processes)."""

    def __init__(self, assistant: Runtime, *, owns_assistant: bool = False) -> None:
        self.settings = assistant.settings
        self.metrics = ServiceMetrics()
        self.stores = assistant.store_lock
        self._writes = assistant.kb.write_lock
        self.chat = ChatService(assistant, self.metrics)
        self.sessions = SessionService(assistant, self.metrics)
        self.documents = DocumentService(assistant, self._writes)
        self.gaps = GapService(assistant.kb, self.stores, self.settings.gap_config)
        self.status = StatusService(assistant, self.metrics, owns_assistant=owns_assistant)

    def close(self) -> None:
        """Close the assistant when the app opened it (``StatusService.close``)."""
        self.status.close()
