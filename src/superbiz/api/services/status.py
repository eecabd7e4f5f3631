"""The service's own state: info for the page, health, metrics, warm-up and closing."""

from __future__ import annotations

import logging

from superbiz.agents.runtime import Runtime
from superbiz.api.health_checks import check_health
from superbiz.api.metrics import ServiceMetrics
from superbiz.api.responses.status import Health, ServiceInfo

log = logging.getLogger(__name__)


class StatusService:
    def __init__(
        self, assistant: Runtime, metrics: ServiceMetrics, *, owns_assistant: bool
    ) -> None:
        self.assistant = assistant
        self.settings = assistant.settings
        self.metrics = metrics
        self.stores = assistant.store_lock
        #: close the assistant with the app (one it opened itself, not one it was handed)
        self.owns_assistant = owns_assistant

    def info(self, *, auth_required: bool, sign_in: str = "none") -> ServiceInfo:
        governance = self.settings.governance_config
        return ServiceInfo(
            model=self.assistant.model.name,
            extractive=self.assistant.extractive,
            high_mark=governance.high_min_calls,
            low_max_calls=governance.low_max_calls,
            indicator=governance.indicator,
            governance=governance.enabled,
            max_upload_bytes=self.settings.ingest.max_file_bytes,
            extensions=list(self.settings.ingest.extensions),
            auth_required=auth_required,
            sign_in=sign_in,
        )

    def health(self) -> Health:
        """Checks both stores: a query on the database, a query on the vector index."""
        return check_health(self.assistant.kb, self.stores)

    def warm_up(self) -> None:
        """Load the embedder and build the map now, so the first question pays nothing."""
        try:
            with self.stores.held():
                self._warm_up()
        except Exception:  # the request that needs it reports the problem
            log.warning("warm-up failed", exc_info=True)

    def _warm_up(self) -> None:
        kb = self.assistant.kb
        kb.embedder.embed(["warm up"])
        self.assistant.knowledge_map()
        if kb.documents.all():
            _ = kb.searcher

    def close(self) -> None:
        if self.owns_assistant:
            with self.stores.held():
                self.assistant.close()
