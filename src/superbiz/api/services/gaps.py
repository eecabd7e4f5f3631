"""The knowledge-gaps report of the questions about what a reader may read (the people
and audit routes of the same admin area call ``superbiz.auth`` directly)."""

from __future__ import annotations

from datetime import datetime

from superbiz.access import Reader
from superbiz.agents.store_access import StoreLock
from superbiz.config import GapConfig
from superbiz.knowledge.access_rules import reader_limits
from superbiz.knowledge.base import KnowledgeBase
from superbiz.knowledge.documents import normalize_domain
from superbiz.knowledge.gaps import GapReport, gap_report


class GapService:
    def __init__(self, kb: KnowledgeBase, stores: StoreLock, settings: GapConfig) -> None:
        self.kb = kb
        self.stores = stores
        self.settings = settings

    def report(self, since: datetime | None, domain: str | None, reader: Reader) -> GapReport:
        """The knowledge-gaps report (``superbiz gaps``), of the questions about what
        ``reader`` may read."""
        kb = self.kb
        with self.stores.held():
            return gap_report(
                kb.engine,
                kb.embedder,
                kb.documents,
                self.settings,
                since=since,
                domain=normalize_domain(domain) if domain else None,
                limits=reader_limits(kb, reader),
            )
