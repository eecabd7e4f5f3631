"""The knowledge-gaps report of the questions about what a reader may read (the people
and audit routes of the same admin area call ``superbiz.auth`` directly)."""

from __future__ import annotations

from datetime import datetime

from superbiz.access import Reader
from superbiz.agents.store_access import StoreLock
from superbiz.config import GapConfig
from superbiz.knowledge.coverage.gaps import GapReport, reader_gap_report
from superbiz.knowledge.kb.base import KnowledgeBase


class GapService:
    def __init__(self, kb: KnowledgeBase, stores: StoreLock, settings: GapConfig) -> None:
        self.kb = kb
        self.stores = stores
        self.settings = settings

    def report(self, since: datetime | None, domain: str | None, reader: Reader) -> GapReport:
        """The knowledge-gaps report (``superbiz gaps``), of the questions about what
        ``reader`` may read."""
        with self.stores.held():
            return reader_gap_report(self.kb, self.settings, reader, since=since, domain=domain)
