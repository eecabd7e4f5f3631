"""The service's health: a query on the database and one on the vector index, answered
within a bounded wait for the stores (busy stores are reported, never waited on for good)."""

from __future__ import annotations

from sqlalchemy import text

from superbiz.agents.store_access import StoreLock
from superbiz.api.responses.status import Health, HealthChecks
from superbiz.exceptions import first_line
from superbiz.knowledge.kb.base import KnowledgeBase

#: how long a health check waits for the stores before calling them busy
HEALTH_WAIT_S = 10.0


def check_health(kb: KnowledgeBase, stores: StoreLock) -> Health:
    """Checks both stores: a query on the database, a query on the vector index."""
    try:
        with stores.held(timeout=HEALTH_WAIT_S):
            return _checked(kb)
    except TimeoutError as exc:
        return Health(status="unavailable", problems=[str(exc)])


def _checked(kb: KnowledgeBase) -> Health:
    """Each store asked once; a failure is named, the other store still checked."""
    checks: dict[str, str] = {}
    problems: list[str] = []
    try:
        with kb.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = "failed"
        problems.append(f"database: {first_line(exc)}")
    try:
        store = kb.store
        if store.dimension is not None:
            store.index_state(["__healthz__"])  # a real query on the collection
            checks["vector_store"] = "ok"
        else:
            checks["vector_store"] = "ok (empty: nothing ingested yet)"
    except Exception as exc:
        checks["vector_store"] = "failed"
        problems.append(f"vector store: {first_line(exc)}")
    checked = HealthChecks.model_validate(checks)
    if problems:
        return Health(status="unavailable", checks=checked, problems=problems)
    return Health(status="ok", checks=checked, documents=len(kb.documents.all()))
